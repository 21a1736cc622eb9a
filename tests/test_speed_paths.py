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


def _listed(home: Home) -> dict[str, dict[str, object]]:
    result = home.run("list", "--json")
    assert result.exit_code == 0, result.stderr
    return {row["id"]: row for row in json.loads(result.stdout)}


def test_list_cache_follows_every_change_of_the_files(home: Home) -> None:
    first, second = home.new("How B-trees keep databases fast"), home.new("Why the sky is blue")
    before = _listed(home)
    cache = home.path / "workspaces" / "default" / ".list-cache.json"
    assert cache.is_file() and set(json.loads(cache.read_text())["rows"]) == {first, second}
    assert _listed(home) == before  # from the cache: the same rows

    # status.json rewritten (atomically, as Pensieve writes it): the new state is shown.
    status_path = home.project_dir(first) / "status.json"
    status = json.loads(status_path.read_text())
    status["status"], status["problems"] = "error", ["a", "b"]
    replacement = status_path.with_name("status.tmp")
    replacement.write_text(json.dumps(status))
    replacement.replace(status_path)
    assert (_listed(home)[first]["status"], _listed(home)[first]["problems"]) == ("error", 2)

    # Edited in place with the same size: still noticed.
    brief = home.project_dir(second) / "brief.md"
    brief.write_text(brief.read_text().replace("blue", "BLUE"))
    assert "BLUE" in str(_listed(home)[second]["brief"])

    # Unreadable, then repaired by hand.
    good = status_path.read_text()
    status_path.write_text("{broken")
    assert _listed(home)[first]["status"] == "unreadable"
    status_path.write_text(good)
    assert _listed(home)[first]["status"] == "error"

    # A project removed, another added.
    import shutil

    shutil.rmtree(home.project_dir(second))
    third = home.new("How tides work")
    assert set(_listed(home)) == {first, third}
    assert set(json.loads(cache.read_text())["rows"]) == {first, third}


def test_list_asks_every_time_whether_a_running_project_is_alive(home: Home, tmp_path: Path) -> None:
    pid = home.new()
    status_path = home.project_dir(pid) / "status.json"
    status = json.loads(status_path.read_text())
    status["status"] = "running"
    status_path.write_text(json.dumps(status))
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (home.project_dir(pid) / ".run.lock").write_text(str(sleeper.pid))
        assert _listed(home)[pid]["status"] == "running"
        assert _listed(home)[pid]["status"] == "running"  # cached row, live process
    finally:
        sleeper.kill()
        sleeper.wait()
    assert _listed(home)[pid]["status"] == "paused"  # same files, the process is gone


def test_a_damaged_or_unwritable_list_cache_changes_nothing(home: Home) -> None:
    pid = home.new()
    cache = home.path / "workspaces" / "default" / ".list-cache.json"
    cache.write_text("not json at all")  # ignored, then rewritten
    assert _listed(home)[pid]["status"] == "pending"
    assert pid in json.loads(cache.read_text())["rows"]
    cache.unlink()
    cache.mkdir()  # cannot be written (as a read-only workspace): listed all the same
    assert _listed(home)[pid]["status"] == "pending"


def test_sanitize_drops_exactly_the_control_characters_it_always_dropped() -> None:
    import unicodedata

    from pensieve.untrusted import INVISIBLE, sanitize

    every = "".join(chr(c) for c in range(sys.maxunicode + 1) if not 0xD800 <= c <= 0xDFFF)
    reference = INVISIBLE.sub("", every).replace("\r\n", "\n").replace("\r", "\n")
    reference = "".join(ch for ch in reference if ch in "\n\t" or unicodedata.category(ch) != "Cc").strip()
    assert sanitize(every, collapse_whitespace=False) == reference
