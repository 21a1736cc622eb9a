"""Hostile input, round two (issue 15): the web, the model and the disk, one family at a time.

Each test fails without its fix: stacked encodings, tool errors from input, planted links,
a kill before the citation check, a deleted artifact, deep nesting, a full disk, bad
arguments and config values, concurrent `new`, model output taken as given, resource
bounds and the outbound URL policy."""

from __future__ import annotations

import gzip
import json
import resource
import subprocess
import sys
import threading
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from pensieve.config import Settings, load_settings
from pensieve.project.events import Event, EventKind, EventLog, read_events
from pensieve.project.status import load_status, save_status
from pensieve.project.workspace import Workspace
from pensieve.run.context import compact
from pensieve.run.dispatch import ToolBox
from pensieve.run.pipeline import Runner
from pensieve.run.preflight import RunOptions
from pensieve.stages import BY_NAME, STAGES
from pensieve.tools import catalog
from pensieve.tools.registry import ToolContext, ToolError
from pensieve.tools.web import fetch_url, known_urls
from pensieve.untrusted import sanitize
from pensieve.web.decoding import BoundedDecoder, DecodingError
from pensieve.web.extract import decode
from tests.conftest import MODEL_KEY, Home
from tests.fakes.cli_process import child_env
from tests.fakes.model_server import call, calls, default_artifact, text
from tests.fakes.web_site import FakeSite
from tests.web_fixtures import tool_context

# --------------------------------------------------------------------------------------
# 1. Decompression: every layer bounded, any stacking and order.

GIB = 1 << 30


def _gzip(data: bytes) -> bytes:
    return gzip.compress(data, 9)


def _deflate(data: bytes) -> bytes:
    return zlib.compress(data, 9)


def _raw_deflate(data: bytes) -> bytes:
    obj = zlib.compressobj(9, zlib.DEFLATED, -15)
    return obj.compress(data) + obj.flush()


BOMB_BASE = b"A" * (256 << 20)  # 256 MB of one byte: about 250 KB gzipped once
STACKS = {
    "gzip,gzip": ["gzip", "gzip"],
    "gzip,deflate": ["gzip", "deflate"],
    "gzip,deflate,gzip": ["gzip", "deflate", "gzip"],
    "gzip": ["gzip"],
}


def _encode(data: bytes, encodings: list[str]) -> bytes:
    for name in encodings:  # in the order the server applied them
        data = _gzip(data) if name == "gzip" else _deflate(data)
    return data


@pytest.fixture(scope="module")
def bombs() -> dict[str, bytes]:
    inner = _gzip(BOMB_BASE)  # the costly step, shared
    return {case: _encode(inner, encodings[1:]) for case, encodings in STACKS.items()}


@pytest.mark.parametrize("case", list(STACKS))
def test_every_layer_of_stacked_encodings_is_bounded(bombs: dict[str, bytes], case: str) -> None:
    decoder = BoundedDecoder(STACKS[case], 1_000_000)
    out = b"".join(decoder.feed(bombs[case]))
    assert len(out) == 1_000_000 and decoder.truncated
    assert max(decoder._produced) <= 1_000_000  # no layer went past the cap


def test_decoding_round_trips_and_refuses_what_it_cannot_bound() -> None:
    page = b"<html><title>t</title>" + b"word " * 1000 + b"</html>"
    for encodings in (["gzip"], ["deflate"], ["gzip", "deflate"], ["deflate", "gzip", "gzip"], ["identity"]):
        decoder = BoundedDecoder(encodings, 1_000_000)
        data = _encode(page, [e for e in encodings if e != "identity"])
        # fed in small pieces, as the network delivers it
        out = b"".join(b"".join(decoder.feed(data[i : i + 7])) for i in range(0, len(data), 7))
        assert out == page and not decoder.truncated
    raw = BoundedDecoder(["deflate"], 10_000)
    assert b"".join(raw.feed(_raw_deflate(page)))[:6] == b"<html>"
    with pytest.raises(DecodingError, match="stacked"):
        BoundedDecoder(["gzip"] * 5, 1000)
    with pytest.raises(DecodingError, match="not accepted"):
        BoundedDecoder(["zstd"], 1000)
    with pytest.raises(DecodingError, match="corrupt gzip"):
        list(BoundedDecoder(["gzip"], 1000).feed(b"not gzip at all"))


class _Bomb(BaseHTTPRequestHandler):
    bodies: ClassVar[dict[str, tuple[bytes, str]]] = {}

    def do_GET(self) -> None:
        if self.path == "/robots.txt":
            self.send_response(404)
            self.end_headers()
            return
        body, encoding = self.bodies.get(self.path, (b"", ""))
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=base64" if self.path == "/b64" else "text/html")
        if encoding:
            self.send_header("Content-Encoding", encoding)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def bomb_site(bombs: dict[str, bytes]) -> Iterator[str]:
    _Bomb.bodies = {
        "/gzgz": (bombs["gzip,gzip"], "gzip, gzip"),
        "/mixed": (bombs["gzip,deflate"], "gzip, deflate"),
        "/b64": (
            b"<html><head><meta charset='uu'></head><body><p>" + b"Decoded fine. " * 40 + b"</p></body></html>",
            "",
        ),
    }
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Bomb)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("path", ["/gzgz", "/mixed"])
async def test_a_stacked_bomb_is_cut_at_max_bytes_within_the_deadline(
    web_home: Home, bomb_site: str, path: str
) -> None:
    web_home.configure(fetch={"max_bytes": 200_000, "timeout_s": 5})
    pid = web_home.new()
    url = bomb_site + path
    async with tool_context(web_home, pid) as ctx:
        known_urls(ctx).add_trusted([url])
        result = await fetch_url.function(ctx, url=url)
    assert "larger than 200,000 bytes (fetch.max_bytes)" in result
    raw = next((web_home.project_dir(pid) / "sources" / "raw").iterdir())
    assert raw.stat().st_size == 200_000


# --------------------------------------------------------------------------------------
# 2. Failures in a tool's own work are tool errors, not crashes.


def test_a_bytes_to_bytes_charset_is_skipped() -> None:
    for charset in ("base64", "uu", "zlib_codec", "hex", "rot13"):
        assert decode(b"caf\xc3\xa9", charset) in {"café", "pnsé"}  # rot13 is a text codec


async def test_a_page_declaring_a_bytes_codec_is_read(web_home: Home, bomb_site: str) -> None:
    pid = web_home.new()
    url = bomb_site + "/b64"
    async with tool_context(web_home, pid) as ctx:
        known_urls(ctx).add_trusted([url])
        result = await fetch_url.function(ctx, url=url, mode="raw")
    assert "Decoded fine." in result


@pytest.fixture
def box(tmp_path: Path) -> tuple[ToolBox, Path]:
    workspace = Workspace(tmp_path / "home", "default")
    directory = workspace.projects_dir / "alpha"
    directory.mkdir(parents=True)
    (directory / "brief.md").write_text("brief")
    (directory / "status.json").write_text("{}")
    project = workspace.project("alpha")
    ctx = ToolContext(
        project=project,
        stage=BY_NAME["refiner"],
        settings=Settings(),
        events=EventLog(project.events_path),
        environ={},
    )
    tools = [catalog()["read_project_file"], catalog()["write_project_file"]]
    return ToolBox(ctx, tools, {}), directory


HOSTILE_PATHS = {
    "name-too-long": "scratch/" + "n" * 256 + ".md",
    "deep-path": "scratch/" + "d/" * 2000 + "x.md",
    "path-too-long": "scratch/" + "/".join(["a" * 200] * 6),
}


@pytest.mark.parametrize("name", list(HOSTILE_PATHS.values()), ids=list(HOSTILE_PATHS))
@pytest.mark.parametrize("tool", ["read_project_file", "write_project_file"])
async def test_names_the_file_system_refuses_are_tool_errors(box: tuple[ToolBox, Path], tool: str, name: str) -> None:
    toolbox, _directory = box
    arguments = {"filename": name, **({"content": "x"} if tool == "write_project_file" else {})}
    outcome = await toolbox.call(tool, json.dumps(arguments))
    assert outcome.is_error and outcome.text.startswith("Error:")


async def test_deeply_nested_arguments_are_a_tool_error(box: tuple[ToolBox, Path]) -> None:
    toolbox, _directory = box
    outcome = await toolbox.call("read_project_file", '{"filename": ' + "[" * 100_000 + "]" * 100_000 + "}")
    assert outcome.is_error and "nested too deeply" in outcome.text


async def test_an_os_error_in_a_tool_is_read_by_the_agent(box: tuple[ToolBox, Path]) -> None:
    toolbox, directory = box
    (directory / "scratch").write_text("a file where a directory should be")
    outcome = await toolbox.call("write_project_file", '{"filename": "scratch/notes.md", "content": "x"}')
    assert outcome.is_error and outcome.text.startswith("Error:")


# --------------------------------------------------------------------------------------
# 3. Symbolic links planted in a project.


def _plant(home: Home, pid: str, name: str, target: Path, directory: bool = False) -> Path:
    link = home.project_dir(pid) / name
    if link.is_dir() and not link.is_symlink():
        link.rmdir()
    elif link.exists() or link.is_symlink():
        link.unlink()
    link.symlink_to(target, target_is_directory=directory)
    return link


LINKED = ["status.json", ".run.lock", "events.jsonl", "brief.md", "sources", ".staging", "history", "rejected",
          "topic_brief.md", "scratch"]  # fmt: skip


@pytest.mark.parametrize("name", LINKED)
def test_a_project_with_a_planted_link_is_refused_and_nothing_outside_changes(
    home: Home, tmp_path: Path, name: str
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "victim.txt"
    victim.write_text("precious")
    pid = home.new()
    if name == "status.json":  # a sibling's status, read as if it were this project's
        target = home.project_dir(home.new("Another brief", "--id", "sibling")) / "status.json"
    else:
        target = outside if name in {"sources", ".staging", "history", "rejected", "scratch"} else victim
    _plant(home, pid, name, target, directory=target.is_dir())
    before = {p.name: p.read_bytes() for p in outside.iterdir()}
    for command in (["run", pid], ["status", pid], ["sources", pid], ["check", pid]):
        result = home.run(*command)
        assert result.exit_code == 2, (command, result.stderr)
        assert "symbolic link" in result.stderr and "Traceback" not in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
    assert {p.name: p.read_bytes() for p in outside.iterdir()} == before
    assert home.model.requests == []


def test_list_does_not_read_a_linked_brief(home: Home) -> None:
    sibling = home.new("The sibling's secret brief", "--id", "sibling")
    pid = home.new("Mine", "--id", "mine")
    _plant(home, pid, "brief.md", home.project_dir(sibling) / "brief.md")
    result = home.run("list", "--json")
    rows = {r["id"]: r for r in json.loads(result.stdout)}
    assert "secret" not in rows["mine"]["brief"] and rows["mine"]["status"] == "unreadable"


def test_low_level_writes_refuse_links(tmp_path: Path) -> None:
    from pensieve.project.workspace import atomic_write_text, exclusive_lock, read_file_nofollow

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f").write_text("keep")
    (tmp_path / "lock").symlink_to(outside / "f")
    with pytest.raises(OSError), exclusive_lock(tmp_path / "lock", RuntimeError):
        pass
    (tmp_path / "dir").symlink_to(outside, target_is_directory=True)
    with pytest.raises(OSError):
        atomic_write_text(tmp_path / "dir" / "new.md", "x")
    with pytest.raises(OSError):
        read_file_nofollow(tmp_path / "lock")
    log = tmp_path / "events.jsonl"
    log.symlink_to(outside / "f")
    with pytest.raises(OSError):
        EventLog(log)(Event(EventKind.NOTE, None, {}))
    assert (outside / "f").read_text() == "keep" and list(outside.iterdir()) == [outside / "f"]


def test_no_write_or_delete_goes_through_a_linked_directory_deeper_in_a_project(tmp_path: Path) -> None:
    from pensieve.project.workspace import atomic_write_text
    from pensieve.run.commit import clear_staging

    outside = tmp_path / "outside"
    (outside / "refiner").mkdir(parents=True)
    (outside / "refiner" / "keep.md").write_text("keep")
    workspace = Workspace(tmp_path / "home", "default")
    project = workspace.project("p")
    project.dir.mkdir(parents=True)
    (project.dir / "status.json").write_text("{}")
    (project.dir / ".staging").symlink_to(outside, target_is_directory=True)
    (project.dir / "sources").mkdir()
    (project.dir / "sources" / "raw").symlink_to(outside, target_is_directory=True)
    for target in (".staging/refiner/topic_brief.md", ".staging/new/deeper/x.md", "sources/raw/S1.html"):
        with pytest.raises(OSError):
            atomic_write_text(project.dir / target, "x")
    with pytest.raises(OSError):
        clear_staging(project, BY_NAME["refiner"])
    assert sorted(p.name for p in outside.rglob("*")) == ["keep.md", "refiner"]


def test_a_linked_topic_file_is_skipped_with_a_warning(home: Home, tmp_path: Path) -> None:
    topics = home.path / "workspaces" / "default" / "topics"
    topics.mkdir(parents=True)
    secret = tmp_path / "secret.md"
    secret.write_text("---\ntitle: Someone else's notes\n---\nprivate\n")
    (topics / "linked.md").symlink_to(secret)
    result = home.run("topics", "list", "--json")
    assert result.exit_code == 0 and json.loads(result.stdout) == []
    assert "symbolic link" in result.stderr


# --------------------------------------------------------------------------------------
# 4 and 5. Recovery finishes the citation check; a missing artifact runs again.


def _complete(home: Home) -> str:
    pid = home.new()
    assert home.run("run", pid).exit_code == 0
    return pid


def test_a_kill_between_commit_and_citation_check_is_finished_by_recovery(home: Home) -> None:
    pid = _complete(home)
    project = Workspace(home.path, "default").project(pid)
    status = load_status(project.status_path)
    # As a kill right after the polisher's commit leaves it: committed, check not run.
    status.stages["polisher"].check_pending = True
    status.problems, status.check = [], None
    save_status(project.status_path, status)
    final = project.file("final.md")
    final.write_text(final.read_text() + "\nA claim citing a source nobody fetched [S9].\n")
    status = load_status(project.status_path)
    status.stages["polisher"].inputs = {}
    save_status(project.status_path, status)
    home.model.script("polisher", call("write_project_file", {"filename": "final.md", "content": final.read_text()}))
    result = home.run("run", pid)
    assert result.exit_code == 0, result.stderr
    after = load_status(project.status_path)
    assert after.check is not None and not after.stages["polisher"].check_pending
    assert after.problems, "the citation check recovery finished recorded nothing"
    # the polisher was sent back once, with the check's list
    assert any(r.stage == "polisher" for r in home.model.requests[-3:])


def test_a_deleted_artifact_makes_its_stage_pending_again(home: Home) -> None:
    pid = _complete(home)
    (home.project_dir(pid) / "outline.md").unlink()
    shown = home.run("status", pid)
    assert "outline.md is missing, so outliner is pending again" in shown.stderr
    assert "changed since" not in shown.stderr
    asked = len(home.model.requests)
    result = home.run("run", pid)
    assert result.exit_code == 0, result.stderr
    assert (home.project_dir(pid) / "outline.md").is_file()
    assert next(r.stage for r in home.model.requests[asked:]) == "outliner"


# --------------------------------------------------------------------------------------
# 6. Deep nesting.

DEEP = "[" * 5000 + "]" * 5000


def test_a_deeply_nested_status_is_reported_with_repair(home: Home) -> None:
    pid = home.new()
    path = home.project_dir(pid) / "status.json"
    path.write_text('{"a": ' + DEEP + "}")
    result = home.run("status", pid)
    assert result.exit_code == 2 and "nested too deeply" in result.stderr and "pensieve repair" in result.stderr
    assert path.read_text().startswith('{"a": [[[')  # kept


@pytest.mark.parametrize("depth", [40, 5000])
def test_a_deeply_nested_topic_is_skipped_with_a_warning(home: Home, depth: int) -> None:
    topics = home.path / "workspaces" / "default" / "topics"
    topics.mkdir(parents=True)
    (topics / "bad.md").write_text(f"---\ntitle: Bad\nx: {'[' * depth}{']' * depth}\n---\nbody\n")
    (topics / "good.md").write_text("---\ntitle: Good\n---\nbody\n")
    result = home.run("topics", "list", "--json")
    assert result.exit_code == 0, result.stderr
    assert "nested" in result.stderr and "skipped" in result.stderr
    assert [t["slug"] for t in json.loads(result.stdout)] == ["good"]


def test_a_deeply_nested_config_is_a_one_line_error(home: Home) -> None:
    home.config_path.write_text("llm: " + DEEP + "\n")
    for command in (["list"], ["new", "x"]):
        result = home.run(*command)
        assert result.exit_code == 2 and "nested too deeply" in result.stderr and "Traceback" not in result.stderr


# --------------------------------------------------------------------------------------
# 7. A full disk: one line, nothing half-written.


def test_a_full_disk_is_a_one_line_error_and_leaves_status_intact(home: Home) -> None:
    pid = home.new()
    status = home.project_dir(pid) / "status.json"
    before = status.read_bytes()

    def small_files() -> None:  # writes past 1,000 bytes fail with EFBIG, as on a full disk
        resource.setrlimit(resource.RLIMIT_FSIZE, (1000, 1000))

    process = subprocess.run(
        [sys.executable, "-m", "pensieve", "run", pid, "-q"],
        env=child_env(home.path, {"OPENAI_API_KEY": MODEL_KEY}),
        cwd=home.path,
        capture_output=True,
        text=True,
        preexec_fn=small_files,
        timeout=120,
    )
    assert process.returncode in (1, 2), process.stderr
    assert "Traceback" not in process.stderr
    error = [line for line in process.stderr.splitlines() if line.startswith("error:")]
    assert len(error) == 1 and "File too large" in error[0] and "status.json" in error[0], process.stderr
    assert status.read_bytes() == before
    assert not [p for p in home.project_dir(pid).rglob(".tmp-*")]


# --------------------------------------------------------------------------------------
# 8. Input validation.


def test_names_with_a_trailing_newline_are_refused(home: Home) -> None:
    pid = home.new()
    for args in (["status", pid + "\n"], ["new", "x", "--id", "abc\n"], ["list", "-w", "default\n"]):
        result = home.run(*args)
        assert result.exit_code == 2 and "invalid" in result.stderr, (args, result.stderr)


def test_invalid_utf8_arguments_are_one_line_errors(home: Home) -> None:
    bad = b"caf\xff".decode("utf-8", "surrogateescape")
    for args in (["new", bad], ["topics", "add", bad, "--body", "b"], ["topics", "add", "T", "--body", bad]):
        result = home.run(*args)
        assert result.exit_code == 2 and "not valid UTF-8" in result.stderr, (args, result.stderr)
    process = subprocess.run(
        [sys.executable, "-m", "pensieve", "new", b"caf\xff".decode("latin-1")],
        env={**child_env(home.path), "LC_ALL": "C.UTF-8"},
        cwd=home.path,
        capture_output=True,
    )
    assert process.returncode in (0, 2) and b"Traceback" not in process.stderr


@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf"])
def test_non_finite_config_values_are_refused_by_every_command(home: Home, value: str) -> None:
    pid = home.new()
    home.configure(llm={"temperature": 0.5})
    home.config_path.write_text(home.config_path.read_text().replace("temperature: 0.5", f"temperature: {value}"))
    for args in (["list"], ["status", pid], ["show", pid], ["sources", pid], ["repair", pid], ["topics", "list"]):
        result = home.run(*args)
        assert result.exit_code == 2 and "llm.temperature" in result.stderr, (args, result.stderr)


def test_every_command_checks_the_configuration(home: Home) -> None:
    pid = home.new()
    for content, expect in (("lmm:\n  x: 1\n", "lmm: unknown key"), ("limits:\n  shell: 3\n", "unknown tool")):
        home.config_path.write_text(content)
        for args in (["list"], ["status", pid], ["show", pid], ["sources", pid], ["topics", "list"]):
            result = home.run(*args)
            assert result.exit_code == 2 and expect in result.stderr, (args, result.stderr)


def test_list_checks_the_config_without_loading_the_tools(home: Home) -> None:
    home.configure(llm={"temperature": 0.2})
    code = "import sys; from pensieve.cli.main import app; app(['list'], standalone_mode=False); print(sorted(m for m in ('httpx', 'litellm', 'torch') if m in sys.modules))"  # noqa: E501
    out = subprocess.run(
        [sys.executable, "-c", code], env=child_env(home.path), cwd=home.path, capture_output=True, text=True
    )
    assert out.stdout.strip().endswith("[]"), out.stdout + out.stderr


# --------------------------------------------------------------------------------------
# 9. Concurrent `pensieve new`.


@pytest.mark.slow
def test_concurrent_new_with_one_id_and_one_brief(home: Home) -> None:
    env = child_env(home.path)

    def many(args: list[str]) -> list[subprocess.CompletedProcess[str]]:
        started = [
            subprocess.Popen(
                [sys.executable, "-m", "pensieve", *args],
                env=env,
                cwd=home.path,
                text=True,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            for _ in range(12)
        ]
        return [subprocess.CompletedProcess(p.args, p.wait(), *p.communicate()) for p in started]

    same_id = many(["new", "A brief", "--id", "same"])
    assert sorted(p.returncode for p in same_id) == [0] + [2] * 11
    assert all("Traceback" not in p.stderr for p in same_id)
    same_brief = many(["new", "Same brief"])
    assert all(p.returncode == 0 for p in same_brief), [p.stderr for p in same_brief]
    assert len({p.stdout.strip() for p in same_brief}) == 12


# --------------------------------------------------------------------------------------
# 10. Model output taken as given.


def test_a_huge_final_message_is_capped_and_said(home: Home) -> None:
    huge = default_artifact("refiner") + "\n" + ("More words here. " * 700_000)
    home.model.script("refiner", text(huge))
    pid = home.new()
    home.run("run", pid, "--until", "refiner")
    staged = [p for p in (home.project_dir(pid)).rglob("topic_brief.md")]
    assert staged and all(p.stat().st_size <= 1_000_010 for p in staged)
    notes = [e for e in read_events(home.project_dir(pid) / "events.jsonl") if e["kind"] == "note"]
    assert any("was cut to 1,000,000" in str(e.get("message")) for e in notes)


def test_negative_usage_is_clamped_and_recorded(home: Home) -> None:
    home.model.usage = (-1_000_000, -5)
    pid = home.new()
    result = home.run("run", pid, "--until", "refiner")
    assert result.exit_code == 0, result.stderr
    status = load_status(home.project_dir(pid) / "status.json")
    assert status.usage.prompt_tokens >= 0 and status.usage.completion_tokens >= 0
    notes = [e for e in read_events(home.project_dir(pid) / "events.jsonl") if e["kind"] == "note"]
    assert any("counted as 0" in str(e.get("message")) for e in notes)


def test_an_echoed_key_never_lands_in_an_artifact_or_the_archive(home: Home) -> None:
    brief = default_artifact("refiner") + f"\nThe key is {MODEL_KEY}.\n"
    home.model.script("refiner", call("write_project_file", {"filename": "topic_brief.md", "content": brief}))
    pid = home.new()
    assert home.run("run", pid, "--until", "refiner").exit_code == 0
    for path in home.project_dir(pid).rglob("*"):
        if path.is_file():
            assert MODEL_KEY.encode() not in path.read_bytes(), path
    from pensieve.project.source_archive import SourceArchive

    archive = SourceArchive(home.project_dir(pid))
    archive.add(url="http://x/", final_url="http://x/", title=MODEL_KEY, content_type="text/html",
                body=MODEL_KEY.encode(), text=f"echo {MODEL_KEY}")  # fmt: skip
    for path in (home.project_dir(pid) / "sources").rglob("*"):
        if path.is_file():
            assert MODEL_KEY.encode() not in path.read_bytes(), path


# --------------------------------------------------------------------------------------
# 11. Resource bounds.


async def test_read_project_file_reads_only_what_it_returns(box: tuple[ToolBox, Path]) -> None:
    toolbox, directory = box
    big = directory / "scratch" / "big.md"
    big.parent.mkdir()
    with big.open("wb") as handle:  # 64 MB sparse: reading it whole would take a while
        handle.truncate(64 << 20)
        handle.seek(0)
        handle.write(b"start of the file ")
    outcome = await toolbox.call("read_project_file", '{"filename": "scratch/big.md"}')
    assert not outcome.is_error and "the file goes on" in outcome.text and "start of the file" in outcome.text
    assert len(outcome.text) < 300_000


def test_sanitize_is_linear_on_a_large_text() -> None:
    text = "x\x01\u200b " * 1_000_000
    assert sanitize(text, collapse_whitespace=False) == ("x " * 1_000_000).strip()


def test_a_compaction_stub_is_never_longer_than_what_it_replaces() -> None:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "s" * 20_000}]
    for i in range(30):
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": "text_stats", "arguments": "{}"}}]})  # fmt: skip
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": f"short {i}"})
    before = [len(str(m.get("content") or "")) for m in messages]
    compact(messages, 10_000)
    after = [len(str(m.get("content") or "")) for m in messages]
    assert all(a <= b for a, b in zip(after, before, strict=True))


# --------------------------------------------------------------------------------------
# 12. Outbound data: the URL policy.


async def test_fetch_url_refuses_a_url_the_agent_made_up(web_home: Home, site: FakeSite) -> None:
    pid = web_home.new()
    async with tool_context(web_home, pid) as ctx:
        with pytest.raises(ToolError, match="Search first with web_search"):
            await fetch_url.function(ctx, url=site.url("/article") + "?data=my-brief")
    assert site.hits == [] or all("/article" not in h.path for h in site.hits)


async def test_urls_from_the_brief_topics_and_page_links_are_known(web_home: Home, site: FakeSite) -> None:
    pid = web_home.new(f"Write about HNSW; start from {site.url('/article')}.")
    topics = web_home.path / "workspaces" / "default" / "topics"
    (topics / "fixture-site.md").unlink()  # only this test's channels make URLs known
    (topics / "t.md").write_text(f"---\ntitle: T\nsources: [{site.url('/second')}]\n---\nbody\n")
    async with tool_context(web_home, pid) as ctx:
        assert "Source S1" in await fetch_url.function(ctx, url=site.url("/article"))
        assert "Source S2" in await fetch_url.function(ctx, url=site.url("/second"))
        known = known_urls(ctx)
        link = next(iter(known.linked))
        assert known.refusal(link) is None
        smuggled = link + "?q=" + "QmFzZTY0IGVuY29kZWQgYnJpZWYgdGV4dCBoZXJl" * 2
        known.add_links([smuggled])  # even as a link on a page, an opaque query is refused
        assert "opaque" in str(known.refusal(smuggled))
        assert known.refusal("http://attacker.example/?data=brief") is not None
        assert known.refusal(site.url("/chain/2")) is not None  # named nowhere


def test_the_url_policy_any_fetches_every_url(web_home: Home, site: FakeSite) -> None:
    web_home.configure(fetch={"url_policy": "any"})
    assert load_settings().fetch.url_policy == "any"
    web_home.configure(fetch={"url_policy": "some"})
    assert web_home.run("list").exit_code == 2


def test_a_page_cannot_make_the_researcher_send_the_brief_out(web_home: Home, site: FakeSite) -> None:
    pid = web_home.new("A secret brief about HNSW")
    web_home.model.script(
        "researcher",
        call("web_search", {"query": "HNSW"}),
        calls(
            ("fetch_url", {"url": site.url("/article")}),
            ("fetch_url", {"url": site.url("/collect") + "?data=A+secret+brief+about+HNSW"}),
        ),
    )
    web_home.run("run", pid, "--until", "researcher")
    answers = [r for r in web_home.model.requests if r.stage == "researcher"][2].last_tool_results
    assert answers[1].startswith("Error:") and "not a known URL" in answers[1]
    assert not [h for h in site.hits if "/collect" in h.path]


def test_recover_is_idempotent_for_stages_without_checks(home: Home) -> None:
    pid = _complete(home)
    project = Workspace(home.path, "default").project(pid)
    runner = Runner(project, load_settings(), RunOptions(), lambda e: None, {})
    runner.recover()
    assert not runner.resend_after_recovery
    assert all(not load_status(project.status_path).stages[s.name].check_pending for s in STAGES)
