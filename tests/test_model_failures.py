"""Model calls that fail well: retries observed server-side, auth errors, timeouts, the run
deadline. Every count below is of requests the fake model received, so a retry layer in
litellm or the OpenAI client would show up as extra requests."""

from __future__ import annotations

import itertools
import json

import pytest

from pensieve.project.events import read_events
from tests.conftest import Home
from tests.fakes.model_server import Recorded, drop, error, hang


def statuses(home: Home, stage: str) -> list[int]:
    return [r.status for r in home.model.requests if r.stage == stage]


def gaps(records: list[Recorded]) -> list[float]:
    """Server-side time from the end of each reply to the arrival of the next request."""
    return [later.started - earlier.finished for earlier, later in itertools.pairwise(records)]


def stage_error(home: Home, pid: str, stage: str) -> str:
    status = json.loads((home.project_dir(pid) / "status.json").read_text())
    return str(status["stages"][stage]["error"])


def test_429_without_retry_after_backs_off_exponentially(home: Home) -> None:
    home.configure(llm={"retries": 3, "retry_base_s": 0.2, "retry_max_wait_s": 5})
    home.model.script("refiner", error(429), error(429), error(429))
    pid = home.new()
    result = home.run("run", pid, "--until", "refiner")
    assert result.exit_code == 0, result.stderr
    records = [r for r in home.model.requests if r.stage == "refiner"]
    assert [r.status for r in records] == [429, 429, 429, 200, 200]
    observed = gaps(records)[:3]
    # base 0.2 s doubling, jitter +-25%: at least 0.15, 0.3, 0.6 s.
    for gap, backoff in zip(observed, (0.2, 0.4, 0.8), strict=True):
        assert gap >= backoff * 0.75 - 0.01, observed
    waits = [e["wait_s"] for e in read_events(home.project_dir(pid) / "events.jsonl") if e["kind"] == "retry"]
    assert len(waits) == 3 and waits[0] < waits[1] < waits[2], waits
    print(f"\n429 without Retry-After, server-side gaps: {[round(g, 3) for g in observed]} (planned {waits})")


def test_429_retry_after_is_honoured_up_to_the_cap(home: Home) -> None:
    home.configure(llm={"retries": 3, "retry_base_s": 0.05, "retry_max_wait_s": 1.5})
    home.model.script(
        "refiner",
        error(429, headers={"retry-after": "1"}),
        error(429, headers={"retry-after": "30"}),  # longer than the cap: waits 1.5 s, not 30
    )
    pid = home.new()
    result = home.run("run", pid, "--until", "refiner")
    assert result.exit_code == 0, result.stderr
    records = [r for r in home.model.requests if r.stage == "refiner"]
    assert [r.status for r in records] == [429, 429, 200, 200]
    first, second = gaps(records)[:2]
    assert first >= 1.0  # Retry-After: 1 honoured (the backoff alone would be ~0.05 s)
    assert second >= 1.5  # capped at llm.retry_max_wait_s...
    assert second < 15  # ...instead of the 30 s the server asked for
    print(f"\n429 with Retry-After 1 then 30 (cap 1.5 s), server-side gaps: {first:.3f}, {second:.3f}")


@pytest.mark.parametrize("status", [500, 502, 503])
def test_server_errors_are_retried(home: Home, status: int) -> None:
    home.model.script("refiner", error(status), error(status))
    pid = home.new()
    result = home.run("run", pid, "--until", "refiner")
    assert result.exit_code == 0, result.stderr
    assert statuses(home, "refiner") == [status, status, 200, 200]


def test_connection_errors_are_retried(home: Home) -> None:
    home.model.script("refiner", drop(), drop())
    pid = home.new()
    result = home.run("run", pid, "--until", "refiner")
    assert result.exit_code == 0, result.stderr
    assert statuses(home, "refiner") == [0, 0, 200, 200]
    kinds = [e["error_kind"] for e in read_events(home.project_dir(pid) / "events.jsonl") if e["kind"] == "retry"]
    assert kinds == ["connection", "connection"]


def test_a_reply_slower_than_the_timeout_is_a_retried_timeout(home: Home) -> None:
    home.configure(llm={"timeout_s": 0.5, "retries": 1})
    home.model.script("refiner", hang(3.0))
    pid = home.new()
    result = home.run("run", pid, "--until", "refiner")
    assert result.exit_code == 0, result.stderr
    records = [r for r in home.model.requests if r.stage == "refiner"]
    assert len(records) == 3  # the hung call, its retry, the closing call
    assert records[1].started - records[0].started < 2.5  # gave up before the 3 s reply
    kinds = [e["error_kind"] for e in read_events(home.project_dir(pid) / "events.jsonl") if e["kind"] == "retry"]
    assert kinds == ["timeout"]


def test_timeouts_that_persist_fail_the_stage_after_the_configured_retries(home: Home) -> None:
    home.configure(llm={"timeout_s": 0.3, "retries": 2})
    home.model.script("refiner", hang(1.0), hang(1.0), hang(1.0), hang(1.0))
    pid = home.new()
    result = home.run("run", pid)
    assert result.exit_code == 1
    assert len(statuses(home, "refiner")) == 3  # 1 + llm.retries, never more
    assert "after 3 attempts" in stage_error(home, pid, "refiner")
    # A server of one's own (the fake is on loopback): parallel stages may be what slows it.
    assert "set llm.max_concurrent_calls to 1" in stage_error(home, pid, "refiner")


def test_a_hosted_timeout_names_only_the_timeout() -> None:
    from pensieve.model.llm import LLMError, describe

    timeout = LLMError("timeout", "Request timed out")
    hosted = describe(timeout, "openai/gpt-4o-mini", None)
    assert hosted.endswith(": raise llm.timeout_s or check the server") and "max_concurrent_calls" not in hosted
    local = describe(timeout, "openai/qwen", "http://127.0.0.1:8093/v1")
    assert "llm.max_concurrent_calls to 1" in local and local.startswith("http://127.0.0.1:8093/v1 (openai/qwen)")


@pytest.mark.parametrize("retries", [0, 2])
def test_exhausted_retries_are_not_multiplied_by_lower_layers(home: Home, retries: int) -> None:
    home.configure(llm={"retries": retries})
    home.model.script("refiner", *[error(429)] * 10)
    pid = home.new()
    result = home.run("run", pid)
    assert result.exit_code == 1
    assert statuses(home, "refiner") == [429] * (retries + 1)
    assert home.model.count("researcher") == 0
    status = json.loads((home.project_dir(pid) / "status.json").read_text())
    assert status["status"] == "error"
    assert status["stages"]["refiner"]["status"] == "error"


@pytest.mark.parametrize("status", [400, 404, 422])
def test_client_errors_are_not_retried(home: Home, status: int) -> None:
    home.model.script("refiner", error(status))
    pid = home.new()
    result = home.run("run", pid)
    assert result.exit_code == 1
    assert statuses(home, "refiner") == [status]
    assert "refiner" in result.stderr


@pytest.mark.parametrize("status", [401, 403])
def test_auth_errors_fail_at_once_naming_the_key_variable(home: Home, status: int) -> None:
    home.model.script("refiner", error(status), error(status))
    pid = home.new()
    result = home.run("run", pid)
    assert result.exit_code == 1
    assert statuses(home, "refiner") == [status]
    assert "OPENAI_API_KEY" in stage_error(home, pid, "refiner")
    assert "OPENAI_API_KEY" in result.stderr


def test_retry_settings_are_validated(home: Home) -> None:
    home.configure(llm={"retries": -1})
    pid_before = sorted(p.name for p in (home.path / "workspaces").glob("*/projects/*"))
    result = home.run("run", "anything")
    assert result.exit_code == 2
    assert "llm.retries" in result.stderr
    assert sorted(p.name for p in (home.path / "workspaces").glob("*/projects/*")) == pid_before


def test_the_whole_run_deadline_stops_the_stage_in_flight(home: Home) -> None:
    home.configure(run={"deadline_s": 1.5})
    home.model.delay_s["researcher"] = 10.0
    pid = home.new()
    result = home.run("run", pid)
    assert result.exit_code == 1
    assert "run.deadline_s" in stage_error(home, pid, "researcher")
    status = json.loads((home.project_dir(pid) / "status.json").read_text())
    assert status["stages"]["refiner"]["status"] == "complete"
    assert status["stages"]["outliner"]["status"] == "pending"
    # Nothing lost: without the deadline the next run continues from the researcher.
    home.configure(run={"deadline_s": None})
    home.model.delay_s.clear()
    refiner_calls = home.model.count("refiner")
    assert home.run("run", pid).exit_code == 0
    assert home.model.count("refiner") == refiner_calls


def test_an_empty_response_is_retried(home: Home) -> None:
    empty = {"raw": {"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": []}}
    home.model.script("refiner", empty)
    pid = home.new()
    result = home.run("run", pid, "--until", "refiner")
    assert result.exit_code == 0, result.stderr
    assert "the model provider returned an empty response (no choices)); retrying" in result.stderr
    assert len(home.model.for_stage("refiner")) == 3  # the empty one, then write and done


def test_tool_arguments_sent_as_an_object_are_read_as_json() -> None:
    from pensieve.model.llm import _arguments

    # Ollama's chat API sends arguments as an object, not a JSON string.
    assert _arguments({"filename": "brief.md"}) == '{"filename": "brief.md"}'
    assert _arguments('{"a": 1}') == '{"a": 1}'
    assert _arguments(None) == ""
