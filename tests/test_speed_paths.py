"""The speed-ups of issue 16 keep behaviour: litellm imported in the background (and a
broken installation reported in one line), the cached `list` rows, the cheap config check."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import Home
from tests.fakes.cli_process import REPO_ROOT, child_env


@pytest.mark.slow
def test_background_import_loads_litellm_and_its_first_call_modules(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from pensieve import llm\n"
        "assert 'litellm' not in sys.modules\n"
        "llm.start_import(); llm.start_import()\n"  # once, however often asked
        "thread = llm._import_thread\n"
        "module = llm._import_litellm()\n"  # waits for the background import
        "thread.join()\n"
        "assert module is sys.modules['litellm'] and module.num_retries == 0\n"
        "assert 'openai.resources' in sys.modules\n"
        "print('ok')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=child_env(tmp_path), timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


@pytest.mark.slow
def test_broken_litellm_is_one_clean_line_and_the_project_resumes(home: Home, tmp_path: Path) -> None:
    shadow = tmp_path / "shadow"
    (shadow / "litellm").mkdir(parents=True)
    (shadow / "litellm" / "__init__.py").write_text("raise ImportError('litellm is broken here')\n")
    pid = home.new()
    env = child_env(home.path, {"PENSIEVE_CONFIG": str(home.config_path)})
    env["PYTHONPATH"] = f"{shadow}:{REPO_ROOT}"
    done = subprocess.run(
        [sys.executable, "-m", "pensieve", "run", pid, "--quiet"],
        capture_output=True,
        text=True,
        env=env,
        cwd=home.path,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "Exception in thread" not in done.stderr
    assert "cannot import litellm (ImportError: litellm is broken here)" in done.stderr
    assert home.model.requests == []  # nothing was sent
    status = json.loads((home.project_dir(pid) / "status.json").read_text())
    assert status["status"] == "paused"
    assert "cannot import litellm" in status["stages"]["refiner"]["error"]
    # With litellm back, the same project runs to the end.
    assert home.run("run", pid, "--quiet").exit_code == 0
