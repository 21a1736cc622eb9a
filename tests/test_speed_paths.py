"""The speed-ups of issue 16 keep behaviour: litellm imported in the background (and a
broken installation reported in one line), `list` checking the configuration cheaply, the
faster JSON writer and sanitizer."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import Home
from tests.fakes.cli_process import REPO_ROOT, child_env


@pytest.mark.slow
def test_background_import_loads_litellm_and_its_first_call_modules(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from pensieve.model import llm\n"
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
def test_a_call_offering_tools_does_not_import_litellms_mcp_gateway(tmp_path: Path) -> None:
    # litellm checks every call that offers tools for its proxy's MCP tools, importing the
    # mcp SDK and its gateway on the first one (0.3-0.6 s the first request waited for).
    from tests.fakes.model_server import FakeModel, text

    model = FakeModel().start()
    model.script("refiner", text("a reply"))
    tool = {"type": "function", "function": {"name": "text_stats", "parameters": {"type": "object"}}}
    code = (
        "import asyncio, sys\n"
        "from pensieve.model import llm\n"
        "reply = asyncio.run(llm.complete(model='openai/fake', api_base=sys.argv[1],\n"
        "    messages=[{'role': 'system', 'content': 'one stage (`refiner`)'}, {'role': 'user', 'content': 'hi'}],\n"
        f"    tools=[{tool!r}]))\n"
        "assert reply.text == 'a reply', reply\n"
        "gateway = ('litellm.responses.mcp.chat_completions_handler',\n"
        "    'litellm.responses.mcp.litellm_proxy_mcp_handler')\n"
        "print([m for m in gateway if m in sys.modules], 'mcp' in sys.modules)\n"
    )
    try:
        done = subprocess.run(
            [sys.executable, "-c", code, model.base_url],
            capture_output=True,
            text=True,
            env=child_env(tmp_path, {"OPENAI_API_KEY": "sk-test-not-a-key"}),
            timeout=120,
        )
    finally:
        model.stop()
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[] False"
    body = model.requests[0].body
    assert body["tools"][0]["function"]["name"] == "text_stats"
    assert not any(key.startswith("_") for key in body)  # litellm's own flag is not sent on


@pytest.mark.slow
def test_a_process_that_exits_while_litellm_is_importing_exits_cleanly(tmp_path: Path) -> None:
    # The hang CI met (`pensieve run` answered by a 401 never exited): the interpreter froze
    # the import thread mid-import, and litellm's HTTP handler imports in its __del__ during
    # finalization, so the exit waited for the import lock forever. This object does what
    # that __del__ does; the process exits at once, with the import under way.
    code = (
        "from pensieve.model import llm\n"
        "class ImportsWhenCollected:\n"
        "    def __del__(self):\n"
        "        import http.cookies\n"
        "keep = ImportsWhenCollected()\n"
        "llm.start_import()\n"
    )
    for _ in range(3):
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=child_env(tmp_path), timeout=120
        )
        assert done.returncode == 0, done.stderr


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


def test_list_asks_every_time_whether_a_running_project_is_alive(home: Home, tmp_path: Path) -> None:
    pid = home.new()
    status_path = home.project_dir(pid) / "status.json"
    status = json.loads(status_path.read_text())
    status["status"] = "running"
    status_path.write_text(json.dumps(status))
    lock = home.project_dir(pid) / ".run.lock"
    # A run as it holds its project: the flock taken, its pid written in the file.
    holds = (
        "import fcntl, os, sys, time; f = open(sys.argv[1], 'w'); fcntl.flock(f, fcntl.LOCK_EX); "
        "f.write(str(os.getpid())); f.flush(); time.sleep(60)"
    )
    sleeper = subprocess.Popen([sys.executable, "-c", holds, str(lock)])
    try:
        deadline = time.monotonic() + 30
        while not lock.is_file() or lock.read_text() != str(sleeper.pid):
            assert time.monotonic() < deadline, "the holder never took the lock"
            time.sleep(0.02)
        assert _listed(home)[pid]["status"] == "running"
        assert _listed(home)[pid]["status"] == "running"  # asked again: still alive
    finally:
        sleeper.kill()
        sleeper.wait()
    assert _listed(home)[pid]["status"] == "paused"  # same files, the process is gone


def test_sanitize_drops_exactly_the_control_characters_it_always_dropped() -> None:
    import unicodedata

    from pensieve.untrusted import INVISIBLE, sanitize

    every = "".join(chr(c) for c in range(sys.maxunicode + 1) if not 0xD800 <= c <= 0xDFFF)
    reference = INVISIBLE.sub("", every).replace("\r\n", "\n").replace("\r", "\n")
    reference = "".join(ch for ch in reference if ch in "\n\t" or unicodedata.category(ch) != "Cc").strip()
    assert sanitize(every, collapse_whitespace=False) == reference


def test_list_checks_the_configuration_and_remembers_only_a_valid_one(home: Home) -> None:
    import os

    from pensieve.cli.config_check import config_check_record

    pid = home.new()
    record = config_check_record(home.path, dict(os.environ))
    record.unlink(missing_ok=True)
    assert pid in _listed(home) and record.is_file()
    assert pid in _listed(home)  # checked again from the record
    home.configure(llm={"modle": "typo"})  # the file changed: validated again, and refused
    result = home.run("list", "--json")
    assert result.exit_code == 2 and "llm.modle: unknown key" in result.stderr and result.stdout == ""
    config = home.config()
    del config["llm"]["modle"]
    home.config_path.write_text(__import__("yaml").safe_dump(config))
    assert pid in _listed(home)
    home.monkeypatch.setenv("PENSIEVE_SEARCH_PROVIDER", "altavista")  # an override counts too
    result = home.run("list", "--json")
    assert result.exit_code == 2 and "search.provider" in result.stderr


def test_print_json_writes_rows_exactly_as_json_dumps_would() -> None:
    from pensieve.json_text import _flat_rows_json

    rows = [
        {"id": "a", "brief": 'quote " back\\slash \u00e9 \u2028 \x00 tab\t', "n": 3, "none": None, "yes": True},
        {"id": "b", "brief": "", "n": -1, "none": None, "yes": False, "share": 0.1 + 0.2},
        {"id": "c", "share": 1.0, "tiny": 1e-300, "big": 1e300, "zero": -0.0},
    ]
    assert _flat_rows_json(rows) == json.dumps(rows, indent=2, ensure_ascii=False)
    others: list[object] = [[], [{}], [{"a": [1]}], [{"a": float("nan")}], [{"a": float("inf")}], {"a": 1}]
    for other in others:
        assert _flat_rows_json(other) is None  # written by json.dumps itself
