"""The browser tests skip where the browser is missing, except in CI: PENSIEVE_REQUIRE_BROWSER=1
(which .ci/run exports) makes them fail, so CI cannot stay green without running them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.browser_support import REQUIRE_ENV, require_browser
from tests.fakes.cli_process import REPO_ROOT

MISSING = "/nonexistent/chromium"


def test_a_missing_browser_skips_unless_required(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(REQUIRE_ENV, raising=False)
    with pytest.raises(pytest.skip.Exception, match="Chromium is not installed at /nonexistent"):
        require_browser(MISSING)
    monkeypatch.setenv(REQUIRE_ENV, "1")
    with pytest.raises(pytest.fail.Exception, match=f"{REQUIRE_ENV} is set"):
        require_browser(MISSING)


@pytest.mark.slow
def test_every_browser_module_fails_when_ci_requires_a_missing_browser(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO_ROOT),
        "PENSIEVE_CHROMIUM": MISSING,
        REQUIRE_ENV: "1",
        "PENSIEVE_HOME": str(tmp_path),
    }
    modules = ["tests/test_studio_browser.py", "tests/test_export_browser.py"]
    command = [sys.executable, "-m", "pytest", "-n", "0", "-q", "-p", "no:cacheprovider", "-rA", *modules]
    result = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)
    summary = result.stdout.splitlines()[-1]
    assert result.returncode == 1, result.stdout[-3000:]
    assert "skipped" not in summary and "passed" not in summary, summary
    for module in modules:
        assert f"ERROR {module}::" in result.stdout, module
    ci = (REPO_ROOT / ".ci" / "run").read_text()
    assert f"export {REQUIRE_ENV}=1" in ci.split("python -m pytest")[0]
