"""Local models: a server of one's own needs no key, replies are capped, the context fits the
model's window, Ollama gets num_ctx, archived pages are read in parts, and re-reading an
elided result is not a loop."""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from pensieve.config import AgentSettings, Settings
from pensieve.model import llm
from pensieve.model.client import StageModelClient
from pensieve.project.events import EventLog
from pensieve.project.listing import new_project
from pensieve.project.status import load_status
from pensieve.project.workspace import Workspace
from pensieve.run.context import compact
from pensieve.run.dispatch import REPEAT_WARN, ToolBox
from pensieve.run.preflight import RunOptions, preflight_warnings
from pensieve.stages import BY_NAME
from pensieve.tools.files import read_project_file
from pensieve.tools.registry import ToolContext
from tests.conftest import Home
from tests.fakes import artifacts
from tests.fakes.http import QuietHandler, close, serve
from tests.fakes.model_server import call, write


@pytest.fixture(autouse=True)
def _litellm_warning_filter() -> None:
    """litellm hides pydantic's `ReadOnly` warning (its types build their schemas lazily) with
    a filter it sets once, when imported; pytest resets the filters after each test, so a test
    that imported litellm without a model call would make a later test's first call fail."""
    warnings.filterwarnings("ignore", message=".*`ReadOnly` qualifier.*")


# --- (a) a server of one's own needs no API key ---------------------------------------------


@pytest.mark.parametrize(
    "api_base",
    [
        "http://127.0.0.1:8080/v1",
        "http://localhost:11434",
        "http://[::1]:8000/v1",
        "http://10.1.2.3/v1",
        "http://192.168.1.20:1234/v1",
        "https://172.16.0.9/v1",
        "http://100.101.102.103:8080/v1",  # Tailscale
        "http://[fd12::1]/v1",
        "http://gpu-box:8000/v1",
        "http://studio.local:1234/v1",
        "http://host.docker.internal:11434",
        "127.0.0.1:8080/v1",
    ],
)
def test_loopback_and_private_servers_are_self_hosted(api_base: str) -> None:
    assert llm.is_self_hosted(api_base)


@pytest.mark.parametrize(
    "api_base",
    [
        None,
        "",
        "https://api.example.com/v1",
        "https://api.openai.com/v1",
        "http://8.8.8.8/v1",
        "http://[2606:4700::1]/",
    ],
)
def test_public_or_missing_servers_are_not(api_base: str | None) -> None:
    assert not llm.is_self_hosted(api_base)


def test_key_problem_is_silent_for_a_server_of_ones_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OLLAMA_API_BASE", raising=False)
    assert llm.key_problem("openai/qwen", "http://127.0.0.1:8093/v1") is None
    assert llm.key_problem("ollama_chat/llama3.1", None) is None  # litellm's default: localhost
    problem = llm.key_problem("openai/qwen", "https://api.example.com/v1")
    assert problem is not None and "OPENAI_API_KEY" in problem


def test_a_full_run_against_a_loopback_server_needs_no_key(home: Home) -> None:
    home.monkeypatch.delenv("OPENAI_API_KEY")
    pid = home.new()
    result = home.run("run", pid)
    assert result.exit_code == 0, result.stderr
    assert load_status(home.project_dir(pid) / "status.json").status == "complete"
    assert {r.authorization for r in home.model.requests} == {f"Bearer {llm.PLACEHOLDER_API_KEY}"}


def test_a_key_in_the_environment_is_still_sent_to_a_server_of_ones_own(home: Home) -> None:
    pid = home.new()
    assert home.run("run", pid, "--until", "refiner").exit_code == 0
    assert all(llm.PLACEHOLDER_API_KEY not in r.authorization for r in home.model.requests)


def test_a_public_api_base_still_needs_the_key(home: Home) -> None:
    home.monkeypatch.delenv("OPENAI_API_KEY")
    home.configure(llm={"api_base": "https://api.example.com/v1"})
    pid = home.new()
    result = home.run("run", pid)
    assert result.exit_code == 2
    assert "OPENAI_API_KEY" in result.stderr
    assert home.model.requests == []


# --- (b) replies are capped by default ------------------------------------------------------


def test_replies_are_capped_by_default(home: Home) -> None:
    assert Settings().llm.max_output_tokens == 4096
    pid = home.new()
    assert home.run("run", pid, "--until", "refiner").exit_code == 0
    assert {r.body.get("max_tokens") for r in home.model.requests} == {4096}


# --- (c) the context is sized from the model's window ---------------------------------------


def test_context_chars_fit_the_window() -> None:
    assert llm.context_chars(240_000, None, 4096) == 240_000  # unknown window: as configured
    assert llm.context_chars(240_000, 128_000, 4096) == 240_000  # a big window: the setting wins
    assert llm.context_chars(240_000, 16_384, 4096) == int((16_384 - 4096) * 3.5)
    assert llm.context_chars(240_000, 8192, None) == int((8192 - 2048) * 3.5)  # no cap: keep a quarter
    assert llm.context_chars(240_000, 4096, 4096) == llm.MIN_CONTEXT_CHARS  # the floor
    assert llm.context_chars(12_000, 16_384, 4096) == 12_000
    # No ceiling set: the budget follows the window (a declared 128k-token window is used,
    # not capped at the 240,000 characters that only stand in for an unknown window).
    assert llm.context_chars(None, 128_000, 4096) == int((128_000 - 4096) * 3.5)
    assert llm.context_chars(None, None, 4096) == llm.DEFAULT_CONTEXT_CHARS == 240_000


def _client(settings: Settings, model: str, tmp_path: Path) -> StageModelClient:
    return StageModelClient("refiner", model, settings, EventLog(tmp_path / "events.jsonl"), print, lambda: None)


def test_the_client_sizes_the_context_from_litellm_or_the_setting(tmp_path: Path) -> None:
    settings = Settings()
    known = _client(settings, "openai/gpt-4o-mini", tmp_path)  # litellm: 128k tokens
    # Compared as tuples: `x.context_window is None` would narrow the property for mypy,
    # which cannot see that changing the setting below changes it.
    assert (known.context_window, known.context_chars) == (128_000, int((128_000 - 4096) * 3.5))
    unknown = _client(settings, "openai/my-local-qwen", tmp_path)
    assert (unknown.context_window, unknown.context_chars) == (None, 240_000)
    settings.llm.context_window = 16_384
    assert unknown.context_window == 16_384 and unknown.context_chars == int((16_384 - 4096) * 3.5)
    # The user's setting wins over litellm's table (a server of one's own under a known name).
    assert known.context_window == 16_384
    # A stage on another model is not sized by llm.context_window (that is the main model's);
    # agents.<stage>.context_window sizes it.
    settings.agents = {"refiner": AgentSettings(model="openai/my-local-qwen")}
    assert known.context_window == 128_000
    settings.agents = {"refiner": AgentSettings(model="openai/my-local-qwen", context_window=8_192)}
    assert known.context_window == 8_192
    assert llm.context_window("ollama/llama3.1", None, None) == 8192  # litellm's table
    assert llm.context_window("ollama_chat/llama3.1", None, None) == 8192  # listed as ollama/...


class _FakeOllama:
    """Just enough of Ollama's API: /api/show (the window) and /api/chat (one reply)."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, Any]]] = []
        fake = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
                fake.requests.append((self.path, body))
                if self.path == "/api/show":
                    reply: dict[str, Any] = {"model_info": {"qwen2.context_length": 131_072}, "template": "tools"}
                else:
                    reply = {
                        "model": body.get("model"),
                        "created_at": "2025-01-01T00:00:00Z",
                        "message": {"role": "assistant", "content": "hello"},
                        "done": True,
                        "done_reason": "stop",
                        "prompt_eval_count": 5,
                        "eval_count": 1,
                    }
                payload = json.dumps(reply).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.server: ThreadingHTTPServer = serve(Handler)

    @property
    def base_url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"


@pytest.fixture
def ollama() -> Iterator[_FakeOllama]:
    fake = _FakeOllama()
    yield fake
    close(fake.server)


async def test_ollama_gets_num_ctx_from_the_window(ollama: _FakeOllama, tmp_path: Path) -> None:
    settings = Settings()
    settings.llm.api_base = ollama.base_url
    client = _client(settings, "ollama_chat/tiny-test-model:0.5b", tmp_path)
    # litellm asks the server (/api/show): 131,072 tokens, capped for Ollama's memory's sake.
    assert client.context_window == llm.OLLAMA_AUTO_WINDOW_CAP
    reply = await client.complete([{"role": "user", "content": "hi"}])
    assert reply.text == "hello"
    chat = [body for path, body in ollama.requests if path == "/api/chat"]
    assert chat[0]["options"]["num_ctx"] == llm.OLLAMA_AUTO_WINDOW_CAP
    assert chat[0]["options"]["num_predict"] == 4096
    settings.llm.context_window = 8192
    await client.complete([{"role": "user", "content": "hi"}])
    chat = [body for path, body in ollama.requests if path == "/api/chat"]
    assert chat[1]["options"]["num_ctx"] == 8192


# --- (d) the preflight hint names ollama_chat/ ----------------------------------------------


def test_ollama_without_chat_is_warned_about(home: Home) -> None:
    settings = Settings()
    assert preflight_warnings(settings, RunOptions(model="ollama_chat/llama3.1")) == []
    (warning,) = preflight_warnings(settings, RunOptions(model="ollama/llama3.1"))
    assert "forces JSON" in warning and "ollama_chat/llama3.1" in warning
    pid = home.new()
    # Refused by preflight after the warning (the stage's inputs are missing): nothing is called.
    result = home.run("run", pid, "--model", "ollama/llama3.1", "--stage", "drafter")
    assert result.exit_code == 2
    assert "use ollama_chat/llama3.1 instead" in result.stderr
    assert home.model.requests == []


def test_no_model_configured_names_ollama_chat(home: Home) -> None:
    home.config_path.write_text("llm: {}\n")
    result = home.run("run", home.new())
    assert result.exit_code == 2 and "ollama_chat/llama3.1" in result.stderr


# --- (e) archived pages are read in parts ----------------------------------------------------


def _ctx(tmp_path: Path, max_chars: int = 1_000) -> ToolContext:
    project = new_project(Workspace(tmp_path, "default"), "A brief about paging", "paging")
    settings = Settings()
    settings.fetch.max_chars = max_chars
    return ToolContext(project, BY_NAME["researcher"], settings, EventLog(project.events_path), {})


async def test_an_archived_page_is_capped_and_can_be_paged_through(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    page = "".join(f"{i:04d}." for i in range(500))  # 2,500 characters, each position readable
    (ctx.project.dir / "sources").mkdir()
    (ctx.project.dir / "sources" / "S1.md").write_text(page)
    first = await read_project_file.function(ctx, filename="sources/S1.md")
    assert "0000." in first and "0199." in first and "0200." not in first
    assert "[... 1,500 more characters: read_project_file(filename='sources/S1.md', offset=1000) reads on]" in first
    second = await read_project_file.function(ctx, filename="sources/S1.md", offset=1000)
    assert second.startswith("sources/S1.md: characters 1,000 to 2,000 of 2,500.")
    assert "0200." in second and "0399." in second and "0400." not in second and "offset=2000" in second
    last = await read_project_file.function(ctx, filename="sources/S1.md", offset=2000)
    assert "0499" in last and "more characters" not in last
    with pytest.raises(Exception, match="past the end"):
        await read_project_file.function(ctx, filename="sources/S1.md", offset=2500)
    with pytest.raises(Exception, match="0 or more"):
        await read_project_file.function(ctx, filename="sources/S1.md", offset=-1)


async def test_other_files_keep_the_larger_cap_and_short_files_are_unchanged(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    (ctx.project.dir / "scratch").mkdir()
    (ctx.project.dir / "scratch" / "long.md").write_text("x" * 5_000)
    whole = await read_project_file.function(ctx, filename="scratch/long.md")
    assert "x" * 5_000 in whole and "more characters" not in whole and not whole.startswith("scratch")


# --- (f) re-reading an elided result is not a loop -------------------------------------------


def test_compact_tells_which_calls_it_elided() -> None:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "s"}, {"role": "user", "content": "task"}]
    for i in range(4):
        arguments = json.dumps({"filename": f"f{i}.md"})
        function = {"name": "read_project_file", "arguments": arguments}
        messages.append({"role": "assistant", "content": None, "tool_calls": [{"id": f"c{i}", "function": function}]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": "x" * 5_000})
    forgotten: list[tuple[str, str]] = []
    assert compact(messages, 12_000, forget=lambda name, args: forgotten.append((name, args))) == 2
    assert forgotten == [("read_project_file", '{"filename": "f0.md"}'), ("read_project_file", '{"filename": "f1.md"}')]


async def test_toolbox_forgets_a_call_whose_result_was_elided(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    box = ToolBox(ctx, [read_project_file], {})
    arguments = json.dumps({"filename": "brief.md"})
    for _ in range(REPEAT_WARN - 1):
        assert not (await box.call("read_project_file", arguments)).is_error
    box.forget("read_project_file", arguments)
    box.forget("read_project_file", "not json")  # never counted: ignored
    assert not (await box.call("read_project_file", arguments)).is_error  # not the third
    assert (await box.call("read_project_file", arguments)).is_error  # now it is


def test_rereading_an_elided_file_is_not_a_loop(home: Home) -> None:
    home.configure(llm={"max_context_chars": 10_000})
    topic = artifacts.DEFAULT_TOPIC
    pid = home.new(topic + "\n\n" + "Vector databases index embeddings for search. " * 180)
    read = call("read_project_file", {"filename": "brief.md"})
    script: list[dict[str, Any]] = []
    for i in range(5):  # each read's result is elided before the next read
        script += [read, write(f"scratch/note{i}.md", f"note {i}")]
    script += [write("topic_brief.md", artifacts.artifact("refiner", topic))]
    home.model.script("refiner", *script)
    result = home.run("run", pid, "--until", "refiner")
    assert result.exit_code == 0, result.stderr
    status = load_status(home.project_dir(pid) / "status.json")
    assert status.stages["refiner"].status == "complete"
    requests = home.model.for_stage("refiner")
    reads = [r.last_tool_results[0] for r in requests if "UNTRUSTED" in "".join(r.last_tool_results)]
    assert len(reads) == 5 and all("Vector databases index embeddings" in text for text in reads)
    assert "[elided to save context" in str(requests[-1].messages)
