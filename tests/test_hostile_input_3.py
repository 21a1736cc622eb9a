"""Hostile input, round three (issue 15 audit): decoding bounded on every HTTP path (search,
scholarly APIs, the model), topic capture not laundering agent-written URLs, configured
secrets scrubbed whatever their names, and the batch budget and briefs validated."""

from __future__ import annotations

import json
import subprocess
import sys
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from pensieve.errors import UsageError
from pensieve.project.events import EventKind, read_events
from pensieve.project.listing import validate_brief
from pensieve.redact import remember_secret_names, secret_values
from pensieve.tools.registry import ToolError
from pensieve.tools.web import fetch_url
from pensieve.web import ratelimit
from pensieve.web.decoding import accepted_encodings
from tests.conftest import Home
from tests.fakes.cli_process import child_env
from tests.fakes.http import QuietHandler, close, serve
from tests.fakes.model_server import call, encoded, error, text
from tests.fakes.scholarly_server import FakeScholarly
from tests.fakes.web_site import FakeSite
from tests.test_batch import SURROGATE_REFUSED
from tests.test_mcp_tools import configure as mcp_configure
from tests.test_mcp_tools import stdio_server, tool_results
from tests.test_scholarly_search import ACADEMIC, configure, search_error
from tests.web_fixtures import tool_context

# --------------------------------------------------------------------------------------
# 1. Stacked content encodings are decoded with a bound on every path, not only fetch_url.

MB = 1 << 20
RSS_BOUND_MB = 600  # a run up to the researcher peaks under 400 MB here


def _gzip(chunks: Iterable[bytes]) -> bytes:
    # Level 1: the bomb is built in about a second and is still only ~5 KB twice gzipped.
    compressor = zlib.compressobj(1, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    return b"".join([*(compressor.compress(c) for c in chunks), compressor.flush()])


def _gzip_gzip_bomb(megabytes: int) -> bytes:
    """For `Content-Encoding: gzip, gzip`: that many MB of JSON-looking text gzipped twice."""
    inner = _gzip([b'{"id": "', *(b"A" * MB for _ in range(megabytes))])
    bomb = _gzip([inner])
    assert len(bomb) < 10_000
    return bomb


@pytest.fixture(scope="module")
def model_bomb() -> bytes:
    return _gzip_gzip_bomb(150)  # undecoded by litellm's httpx, a run peaked at 1 GB


@pytest.fixture(scope="module")
def search_bomb() -> bytes:
    return _gzip_gzip_bomb(300)  # the same for a search at 300 MB: it is parsed less


# Linux keeps a process's peak RSS across fork and exec: a `pensieve` child of the test
# process would report the test process's own peak (hundreds of MB once a test in the
# same worker loaded the embedding model). A small launcher, started fresh, starts the
# command and reports the peak of that grandchild alone.
_LAUNCHER = (
    "import os, subprocess, sys\n"
    "out, err, *command = sys.argv[1:]\n"
    "with open(out, 'wb') as stdout, open(err, 'wb') as stderr:\n"
    "    child = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr)\n"
    "_pid, status, usage = os.wait4(child.pid, 0)\n"
    "print(os.waitstatus_to_exitcode(status), usage.ru_maxrss // 1024)\n"
)


def _run_measured(home: Home, args: list[str], tmp: Path) -> tuple[int, int, str]:
    """(exit status, peak RSS in MB, stderr) of `pensieve ARGS` in a process of its own."""
    out, err = tmp / "out.txt", tmp / "err.txt"
    command = [sys.executable, "-m", "pensieve", *args]
    launched = subprocess.run(
        [sys.executable, "-c", _LAUNCHER, str(out), str(err), *command],
        env=child_env(home.path),
        cwd=home.path,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    code, rss_mb = (int(word) for word in launched.stdout.split())
    return code, rss_mb, err.read_text()


def test_a_model_answer_of_stacked_encodings_is_cut_and_fails_cleanly(
    home: Home, model_bomb: bytes, tmp_path: Path
) -> None:
    home.model.script("refiner", *[encoded(model_bomb, "gzip, gzip")] * 3)
    pid = home.new()
    code, rss_mb, stderr = _run_measured(home, ["run", pid, "--quiet"], tmp_path)
    assert rss_mb < RSS_BOUND_MB, f"peak RSS {rss_mb} MB"
    assert code == 1, stderr
    assert "Traceback" not in stderr
    assert "larger than" in stderr and "MB" in stderr, stderr
    # Not retried: an answer over the cap will be over it again.
    assert len([r for r in home.model.requests if r.stage == "refiner"]) == 1


@pytest.fixture
def bombing_scholarly(search_bomb: bytes) -> Iterator[FakeScholarly]:
    fake = FakeScholarly(bomb=search_bomb, modes=dict.fromkeys(["searxng", *ACADEMIC], "bomb")).start()
    yield fake
    fake.stop()
    ratelimit._PACERS.clear()


@pytest.mark.parametrize("provider", ["searxng", *ACADEMIC])
async def test_a_search_answer_of_stacked_encodings_is_that_providers_error(
    home: Home, bombing_scholarly: FakeScholarly, provider: str
) -> None:
    pid = configure(home, bombing_scholarly, [provider])
    message = await search_error(home, pid)
    assert message == f"{provider} sent an answer larger than 8 MB; it was not read"
    assert bombing_scholarly.of(provider)[0].headers["accept-encoding"] == accepted_encodings()


def test_a_search_bomb_leaves_the_run_standing_and_its_memory_bounded(
    home: Home, bombing_scholarly: FakeScholarly, tmp_path: Path
) -> None:
    pid = configure(home, bombing_scholarly, ["searxng"])
    home.model.script("researcher", call("web_search", {"query": "vector index"}))
    code, rss_mb, stderr = _run_measured(home, ["run", pid, "--quiet", "--until", "researcher"], tmp_path)
    assert rss_mb < RSS_BOUND_MB, f"peak RSS {rss_mb} MB"
    # The researcher read the error and went on (its notes then cite nothing fetched).
    assert code in (0, 1) and "Traceback" not in stderr, stderr
    searches = [e for e in read_events(home.project_dir(pid) / "events.jsonl") if e["kind"] == EventKind.WEB_SEARCH]
    assert searches[0]["error"] == "searxng: searxng sent an answer larger than 8 MB; it was not read"


class _BombingMcp(QuietHandler):
    """Answers every MCP request (initialize first) with the bomb, as JSON."""

    bomb: ClassVar[bytes] = b""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Encoding", "gzip, gzip")
        self.send_header("Content-Length", str(len(self.bomb)))
        self.end_headers()
        self.wfile.write(self.bomb)


def test_an_mcp_answer_of_stacked_encodings_is_cut_and_the_server_reported(
    home: Home, search_bomb: bytes, tmp_path: Path
) -> None:
    _BombingMcp.bomb = search_bomb
    server = serve(_BombingMcp)
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/mcp"
        home.configure(mcp={"servers": {"bomb": {"url": url}}}, agents={"researcher": {"tools": {"allow": ["mcp.*"]}}})
        code, rss_mb, stderr = _run_measured(home, ["tools", "--stage", "researcher", "--json"], tmp_path)
    finally:
        close(server)
    assert rss_mb < RSS_BOUND_MB, f"peak RSS {rss_mb} MB"
    assert code == 0 and "Traceback" not in stderr, stderr
    servers = json.loads((tmp_path / "out.txt").read_text())["servers"]
    assert not servers["bomb"]["ok"] and "larger than 64 MB" in servers["bomb"]["error"]


# --------------------------------------------------------------------------------------
# 2. Topic capture does not launder agent-written URLs into the next project's known URLs.


def test_a_url_the_researcher_wrote_is_not_fetched_by_the_next_project(web_home: Home, site: FakeSite) -> None:
    web_home.configure(topics={"capture": True}, contracts={"enabled": False})
    collect = site.url("/collect?data=The+secret+first+brief")
    notes = (
        "# Research notes: HNSW\n\n## Findings\n- HNSW builds a layered graph [S1].\n"
        f"- More at {collect}\n\n## Sources\n- [S1] {site.url('/article')}\n- {collect}\n"
    )
    first = web_home.new("The secret first brief")
    web_home.model.script(
        "researcher",
        call("fetch_url", {"url": site.url("/article")}),
        call("write_project_file", {"filename": "research_notes.md", "content": notes}),
        text("done"),
    )
    assert web_home.run("run", first).exit_code == 0
    topics = web_home.path / "workspaces" / "default" / "topics"
    (captured,) = [p for p in topics.glob("*.md") if f"project: {first}" in p.read_text()]
    assert "/collect" not in captured.read_text() and site.url("/article") in captured.read_text()

    second = web_home.new("Another article")
    web_home.model.script("researcher", call("fetch_url", {"url": collect}), text("done"))
    web_home.run("run", second, "--until", "researcher")
    (answer,) = [r for r in tool_results(web_home, "researcher") if "collect" in r]
    assert "is not a known URL" in answer
    assert not [p for p in site.paths() if p.startswith("/collect")]


async def test_a_topic_files_url_with_an_opaque_query_is_refused(web_home: Home, site: FakeSite) -> None:
    # Topic files can be edited by hand or handed over: checked like a page's links.
    smuggled = site.url("/second?q=" + "QmFzZTY0IGVuY29kZWQgYnJpZWYgdGV4dCBoZXJl" * 2)
    topics = web_home.path / "workspaces" / "default" / "topics"
    (topics / "handed-over.md").write_text(f"---\ntitle: Handed over\nsources: [{smuggled}]\n---\nbody\n")
    pid = web_home.new()
    async with tool_context(web_home, pid) as ctx:
        with pytest.raises(ToolError, match="opaque token"):
            await fetch_url.function(ctx, url=smuggled)
        assert "Source S1" in await fetch_url.function(ctx, url=site.url("/article"))  # a plain one is fetched
    assert not [p for p in site.paths() if p.startswith("/second")]


# --------------------------------------------------------------------------------------
# 3. The values of the variables the configuration uses as secrets are scrubbed, whatever
#    their names.

PAT = "ghp-canary-pat-5e0c3f9a17"  # GITHUB_PAT, passed to an MCP server (mcp.servers.*.env)
HEADER_TOKEN = "wiki-canary-hdr-8b21d4"  # WIKI_TOKEN2, an MCP server's header (headers_env)
QUEUE_PASSWORD = "queue-canary-pw-3f6a"  # in PENSIEVE_QUEUE_URL
SECRETS = (PAT, HEADER_TOKEN, QUEUE_PASSWORD)


def test_configured_secrets_are_scrubbed_from_everything_written(home: Home, tmp_path: Path) -> None:
    for name, value in (("GITHUB_PAT", PAT), ("WIKI_TOKEN2", HEADER_TOKEN)):
        home.monkeypatch.setenv(name, value)
    home.monkeypatch.setenv("PENSIEVE_QUEUE_URL", f"postgresql://writer:{QUEUE_PASSWORD}@127.0.0.1:9/queue")
    wiki = stdio_server(tmp_path / "wiki.pids")
    servers = {
        "wiki": {**wiki, "env": [*wiki["env"], "GITHUB_PAT"]},
        "docs": {"url": "http://127.0.0.1:9/mcp", "headers_env": {"Authorization": "WIKI_TOKEN2"}},
    }
    mcp_configure(home, servers, allow=["mcp.wiki.hostile"])
    home.configure(contracts={"enabled": False})
    every = " ".join(SECRETS)
    pid = home.new()
    home.model.script(
        "researcher",
        # A model steered into sending the keys out, a server echoing them (archived in sources/),
        # a note repeating them (an artifact) and a tool call naming them (events.jsonl).
        call("mcp_wiki_hostile", {"topic": every}),
        call("write_project_file", {"filename": "research_notes.md", "content": f"# Notes\n\nKeys: {every}\n"}),
        call("read_project_file", {"filename": f"{PAT}.md"}),
        text("done"),
    )
    # A provider's error echoing them ends the run: its reason is kept in status.json.
    home.model.script("outliner", error(400, body=json.dumps({"error": {"message": f"rejected: {every}"}})))
    result = home.run("run", pid, "--quiet")
    assert result.exit_code == 1
    project = home.project_dir(pid)
    assert "[REDACTED]" in (project / "sources" / "S1.md").read_text()
    assert "[REDACTED]" in (project / "research_notes.md").read_text()
    assert "[REDACTED]" in (project / "status.json").read_text()
    leaks = [
        f"{path}: {secret}"
        for path in home.path.rglob("*")
        if path.is_file()
        for secret in SECRETS
        if secret.encode() in path.read_bytes()
    ]
    leaks += [f"output: {s}" for s in SECRETS if s in result.stdout + result.stderr]
    assert not leaks, leaks


def test_ordinary_variables_given_to_a_server_are_not_secrets() -> None:
    remember_secret_names(["PATH", "LANG", "PENSIEVE_TEST_SERVER_SECRET"])
    environ = {"PATH": "/usr/local/bin:/usr/bin", "LANG": "C.UTF-8", "PENSIEVE_TEST_SERVER_SECRET": "s3cr3t-value"}
    environ["PENSIEVE_QUEUE_URL"] = "postgresql://u:p%40ssw0rd@db/q"
    assert secret_values(environ) == ["s3cr3t-value", "p%40ssw0rd", "p@ssw0rd"]


# --------------------------------------------------------------------------------------
# 4, 5. The batch budget must be a number; a brief read from a file must be text.


def _nothing_created(home: Home) -> bool:
    workspace = home.path / "workspaces" / "default"
    projects = workspace / "projects"
    return (not projects.exists() or not any(projects.iterdir())) and not (workspace / "queue.sqlite").exists()


@pytest.mark.parametrize("budget", ["nan", "inf", "-inf", "0"])
def test_a_batch_budget_that_is_not_a_positive_number_is_refused(home: Home, budget: str) -> None:
    path = home.path / "b.yaml"
    path.write_text("- brief: one\n")
    result = home.run("batch", str(path), "--max-cost-usd", budget)
    assert result.exit_code == 2
    assert result.stderr.strip() == "error: --max-cost-usd must be a number more than 0"
    assert _nothing_created(home) and home.model.requests == []


def test_a_brief_that_is_not_text_is_refused_by_new(home: Home) -> None:
    # Bytes that are a UTF-8-encoded surrogate (invalid UTF-8) from a file or stdin ...
    path = home.path / "brief.md"
    path.write_bytes(b"caf\xed\xb3\xbf au lait")
    for args, given in ((["new", "--file", str(path)], None), (["new", "-"], b"caf\xed\xb3\xbf")):
        result = home.run(*args, input=given)
        assert result.exit_code == 2 and "is not UTF-8 text" in result.stderr and "Traceback" not in result.stderr
    # ... and a lone surrogate reaching the projects' own code (the studio sends JSON).
    with pytest.raises(UsageError, match=SURROGATE_REFUSED):
        validate_brief("caf\udcff")
    assert _nothing_created(home)
