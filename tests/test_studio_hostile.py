"""Hostile input against the studio (issue 26): every page rendered with artifacts, topics,
sources and evidence holding ordinary links, code, tables and hostile markup; the live
feeds' bounds; the run lock read one way everywhere; cookies of other localhost apps; the
first-visit redirect; malformed archives and bodies; the token's form."""

from __future__ import annotations

import contextlib
import json
import re
from pathlib import Path

import pytest

from pensieve.stages import STAGES
from tests.conftest import Home
from tests.publish_fixtures import DRAFT, HOSTILE_BODY, write_final
from tests.publish_fixtures import write_evidence as publish_evidence
from tests.studio_support import HOSTILE, client, make_project, workspace

TABLE = """
| Index | Recall | Memory |
|-------|--------|--------|
| HNSW  | 0.98   | high   |
| IVF   | 0.92   | `low`  |
"""

# What a model or a web page may put in any artifact: ordinary links (inline, reference,
# autolink, in-document), code, a table, and markup that must stay inert.
RICH = (
    DRAFT
    + TABLE
    + '\nSee [the paper](https://arxiv.org/abs/1603.09320 "HNSW"), <https://example.org/auto>, '
    + "[below](#trade-offs) and [ref][faiss].\n\n[faiss]: https://faiss.ai/\n\n"
    + "Inline `code <b>` and a mail link <mailto:someone@example.org>.\n"
    + HOSTILE_BODY
    + "\n"
    + HOSTILE
    + "\n"
)

TOPIC = (
    """---
title: Vector indexes <script>window.__pwned=7</script>
summary: What HNSW and IVF trade
tags: [ann, indexes]
updated: 2026-11-20
---
HNSW builds a layered graph ([Vector indexes explained](https://www.example.org/vector-indexes)).

## Sources
- [S1] [Vector indexes explained](https://www.example.org/vector-indexes)
- [evil](javascript:window.__pwned=8)
"""
    + TABLE
)


def _inert(text: str, where: str) -> None:
    assert "<script>window" not in text and "<img src=x" not in text and "<iframe" not in text, where
    assert 'href="javascript:' not in text and 'href="data:' not in text and "<div onclick" not in text, where


@pytest.fixture
def rich(home: Home) -> Path:
    """A finished project whose every artifact, source, evidence and topic is rich and hostile."""
    project = make_project("rich")
    for stage in STAGES:
        (project / stage.writes).write_text(f"# {stage.name}\n\n{RICH}", encoding="utf-8")
    write_final(project, hostile=True)
    publish_evidence(project, verdicts={"S3": "weak", "S4": "unsupported"})
    topics = workspace().root / "topics"
    topics.mkdir(parents=True, exist_ok=True)
    (topics / "vector-indexes.md").write_text(TOPIC, encoding="utf-8")
    return project


def test_every_page_renders_links_code_tables_and_keeps_hostile_markup_inert(rich: Path) -> None:
    c = client()
    pages = ["/", "/new", "/topics", "/queue", "/projects/rich", "/projects/rich/read", "/projects/rich/sources"]
    pages += ["/projects/rich/diff", "/projects/rich/diff?a=draft_v1.md&b=draft_v2.md"]
    pages += [f"/projects/rich/sources/S{i}" for i in range(1, 5)]
    for stage in STAGES:
        pages += [f"/projects/rich/files/{stage.writes}", f"/projects/rich/files/{stage.writes}?edit=1"]
    for path in pages:
        response = c.get(path, headers={"accept": "text/html"})
        assert response.status_code == 200, (path, response.text[:300])
        _inert(response.text, path)
    page = c.get("/projects/rich/files/outline.md").text
    # Links are links (with rel on outside ones), code is code, tables are tables.
    assert '<a href="https://arxiv.org/abs/1603.09320" title="HNSW" rel="noopener noreferrer nofollow">' in page
    assert '<a href="https://faiss.ai/" rel="noopener noreferrer nofollow">ref</a>' in page
    assert '<a href="#trade-offs">below</a>' in page
    assert "<table>" in page and "<td>HNSW</td>" in page
    assert "<code>code &lt;b&gt;</code>" in page and '<code class="language-python">' in page
    topics = c.get("/topics").text
    assert '<a href="https://www.example.org/vector-indexes" rel="noopener noreferrer nofollow">' in topics
    assert "<table>" in topics and "&lt;script&gt;window.__pwned=7" in topics
    # The API answers the same files as data.
    assert c.get("/api/projects/rich/files/outline.md").json()["text"].endswith(HOSTILE + "\n")
    assert re.search(r"S4", c.get("/projects/rich/sources").text)
    assert json.loads(c.get("/api/topics").text)["topics"][0]["slug"] == "vector-indexes"


# -- 2. live feeds: bounded memory per feed, off the event loop, capped per project ----------
def _big_log(path: Path, megabytes: int) -> int:
    line = json.dumps({"kind": "note", "message": "x" * 200}) + "\n"
    count = megabytes * (1 << 20) // len(line)
    with path.open("w") as handle:
        for _ in range(count // 1000):
            handle.write(line * 1000)
    return count // 1000 * 1000


def test_a_feed_on_a_long_log_holds_a_chunk_not_the_log(tmp_path: Path) -> None:
    import asyncio
    import tracemalloc

    from pensieve.studio.runs import tail_events

    log = tmp_path / "events.jsonl"
    lines = _big_log(log, 24)

    async def first(since: int | None, wanted: int) -> tuple[int, str]:
        got = None
        async for number, line in tail_events(log, since, poll_s=0.01):
            if number == wanted:
                got = (number, line)
                break
        assert got is not None
        return got

    async def live() -> tuple[int, str]:
        task = asyncio.ensure_future(first(None, lines))
        await asyncio.sleep(0.5)
        with log.open("a") as handle:
            handle.write('{"kind": "note", "message": "new"}\n')
        return await asyncio.wait_for(task, 30)

    for run, expected in ((live, (lines, '{"kind": "note", "message": "new"}')), (None, None)):
        tracemalloc.start()
        try:
            if run is not None:
                assert asyncio.run(run()) == expected
            else:  # a replay from line 0 reads the whole log, a chunk at a time
                number, _ = asyncio.run(first(0, lines - 1))
                assert number == lines - 1
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 6 * (1 << 20), f"a feed of a 24 MB log peaked at {peak / (1 << 20):.1f} MB"


def test_a_line_longer_than_the_limit_is_counted_and_skipped(tmp_path: Path) -> None:
    import asyncio

    from pensieve.studio.runs import MAX_EVENT_LINE, tail_events

    log = tmp_path / "events.jsonl"
    log.write_bytes(b'{"n": 0}\n' + b"y" * (3 * MAX_EVENT_LINE) + b'\n{"n": 2}\n')

    async def read() -> list[tuple[int, str]]:
        seen = []
        async for item in tail_events(log, 0, poll_s=0.01):
            seen.append(item)
            if item[0] == 2:
                break
        return seen

    assert asyncio.run(asyncio.wait_for(read(), 30)) == [(0, '{"n": 0}'), (2, '{"n": 2}')]


def test_live_feeds_are_capped_per_project_and_give_their_place_back(home: Home) -> None:
    import httpx

    from pensieve.studio.runs import MAX_FEEDS_PER_PROJECT
    from tests.studio_support import TOKEN, real_server, wait_for

    make_project("p1", upto="outliner")
    make_project("p2", upto="outliner")
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with real_server() as base, httpx.Client(timeout=30, headers=auth) as http:
        feeds = [contextlib.ExitStack() for _ in range(MAX_FEEDS_PER_PROJECT)]
        for stack in feeds:
            assert stack.enter_context(http.stream("GET", base + "/api/projects/p1/events")).status_code == 200
        refused = http.get(base + "/api/projects/p1/events")
        assert refused.status_code == 429
        assert refused.json()["error"].startswith(f"project p1 already has {MAX_FEEDS_PER_PROJECT} live feeds open")
        # Another project, and every other request, are still served.
        with http.stream("GET", base + "/api/projects/p2/events") as other:
            assert other.status_code == 200
        assert http.get(base + "/api/projects").status_code == 200
        feeds.pop().close()

        def accepted() -> bool:
            with http.stream("GET", base + "/api/projects/p1/events") as again:
                return again.status_code == 200

        wait_for(accepted, 10, "a closed feed's place given back")
        for stack in feeds:
            stack.close()


# -- 3. the run lock decides whether a project runs: never a pid left in the file -------------
def test_a_stale_pid_in_the_lock_neither_shows_a_run_nor_refuses_edits(home: Home) -> None:
    import fcntl
    import os
    import subprocess
    import sys

    from pensieve.project.listing import lock_holder

    project_dir = make_project("copied", upto="outliner")
    project = workspace().project("copied")
    # A live process's pid (this one's) in a lock that nobody holds: a copied project, or a
    # killed run whose pid was reused.
    (project_dir / ".run.lock").write_text(f"{os.getpid()}\n")
    assert lock_holder(project) is None
    c = client()
    assert c.get("/api/projects/copied/view").json()["running_pid"] is None
    assert "running under process" not in c.get("/projects/copied").text
    current = c.get("/api/projects/copied/files/outline.md").json()
    saved = c.put("/api/projects/copied/files/outline.md", json={"text": "# New\n", "base_sha256": current["sha256"]})
    assert saved.status_code == 200, saved.text
    assert json.loads(home.run("list", "--json").stdout)[0]["status"] == "paused"
    # A process that holds the lock is a run, everywhere alike.
    holds = (
        "import fcntl, os, sys, time; f = open(sys.argv[1], 'w'); fcntl.flock(f, fcntl.LOCK_EX); "
        "f.write(str(os.getpid())); f.flush(); time.sleep(60)"
    )
    holder = subprocess.Popen([sys.executable, "-c", holds, str(project_dir / ".run.lock")])
    try:
        from tests.studio_support import wait_for

        wait_for(lambda: lock_holder(project) == holder.pid, 30, "the holder's lock")
        assert c.get("/api/projects/copied/view").json()["running_pid"] == holder.pid
        refused = c.put("/api/projects/copied/files/outline.md", json={"text": "x", "base_sha256": ""})
        assert refused.status_code == 409
    finally:
        holder.kill()
        holder.wait()
    assert lock_holder(project) is None  # the kernel dropped the lock with its holder
    with (project_dir / ".run.lock").open("w") as lock:  # asking leaves the lock with its holder
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        lock.write(f"{os.getpid()}\n")
        lock.flush()
        assert lock_holder(project) == os.getpid() and lock_holder(project) == os.getpid()


def test_a_run_started_while_the_studio_saves_waits_for_the_save(home: Home) -> None:
    import os
    import threading

    from pensieve.project.listing import lock_holder
    from tests.studio_support import wait_for

    make_project("done")  # every stage complete: the run finds nothing to do and ends at once
    project = workspace().project("done")
    saving, release = threading.Event(), threading.Event()

    def save() -> None:  # what the studio's save does: the run lock, held for the write
        with project.run_lock():
            saving.set()
            release.wait(10)

    thread = threading.Thread(target=save, daemon=True)
    thread.start()
    wait_for(lambda: lock_holder(project) == os.getpid(), 10, "the save's lock")
    threading.Timer(0.4, release.set).start()
    response = client().post("/api/projects/done/run", json={})
    thread.join(10)
    assert response.status_code == 202, response.text
    assert "already running" not in response.text


# -- 4. cookies of other localhost apps never hide the studio's own --------------------------
@pytest.mark.parametrize(
    "others",
    ['session={"user": 1}', 'a="b', "theme=dark mode", "x=1; y", "=; ;;", 'q="a\\"b"; z=\x01'],
)
def test_other_apps_cookies_do_not_lock_the_browser_out(home: Home, others: str) -> None:
    from tests.studio_support import PORT, TOKEN

    make_project("p1", upto="outliner")
    anonymous = client(None)
    name = f"pensieve_studio_{PORT}"
    for header in (f"{others}; {name}={TOKEN}", f"{name}={TOKEN}; {others}"):
        response = anonymous.get("/api/projects", headers={"cookie": header})
        assert response.status_code == 200, header
    assert anonymous.get("/api/projects", headers={"cookie": f"{others}; {name}=wrong"}).status_code == 401
    assert anonymous.get("/api/projects", headers={"cookie": f"{name}x={TOKEN}"}).status_code == 401


# -- low: the first-visit redirect stays on the studio; a CRLF cannot split its header --------
def _raw_get(port: int, target: str) -> str:
    """The head of the answer to `GET target` sent byte for byte (no client tidies the path)."""
    import socket

    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n".encode())
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer.decode("latin-1").split("\r\n\r\n", 1)[0]


def test_the_first_visit_redirect_never_leaves_the_studio(home: Home) -> None:
    from tests.studio_support import TOKEN, real_server

    with real_server() as base:
        port = int(base.rsplit(":", 1)[1])
        for path, expected in (
            ("//evil.example/", "/evil.example/"),
            ("/\\evil.example/", "/evil.example/"),
            ("///evil.example/x", "/evil.example/x"),
            ("/%2f%2fevil.example/", "/evil.example/"),
            ("/projects/p1", "/projects/p1"),
            ("/x%0d%0aSet-Cookie:%20evil=1", "/x%0D%0ASet-Cookie:%20evil=1"),
        ):
            head = _raw_get(port, f"{path}?token={TOKEN}&keep=1")
            assert head.startswith("HTTP/1.1 303"), (path, head)
            lines = head.split("\r\n")
            assert f"location: {expected}?keep=1" in lines, (path, head)
            assert not any(line.lower().startswith("set-cookie: evil") for line in lines), head


# -- low: a hand-edited sources index and deeply nested JSON bodies --------------------------
def test_a_damaged_sources_index_never_breaks_the_sources_pages(home: Home) -> None:
    from tests.studio_support import add_source

    project = make_project("damaged", upto="researcher")
    add_source(project, "S1", "Fine", "https://example.org/a", "Text.", b"<p>x</p>")
    add_source(project, "S2", "Also fine", "https://example.org/b", "Text.", b"<p>y</p>")
    index = project / "sources" / "index.json"
    data = json.loads(index.read_text())
    data["sources"][0].update(title=["a", "list"], fetched_at=1700000000, size="big", content_type=None)
    data["sources"][1].update(title={"x": 1}, url=7, final_url=[1], fetched_at=None)
    index.write_text(json.dumps(data))
    c = client()
    for path in ("/projects/damaged/sources", "/projects/damaged/sources/S1", "/api/projects/damaged/sources"):
        assert c.get(path, headers={"accept": "text/html"}).status_code == 200, path
    assert c.get("/api/projects/damaged/sources").json()[0]["fetched_at"] == "1700000000"


def test_a_deeply_nested_json_body_is_a_400(home: Home) -> None:
    make_project("p1", upto="outliner")
    deep = "[" * 300_000 + "]" * 300_000
    c = client()
    for method, path in (("POST", "/api/projects"), ("PUT", "/api/projects/p1/files/outline.md")):
        response = c.request(method, path, content=deep, headers={"content-type": "application/json"})
        assert response.status_code == 400, (path, response.text)
        assert response.json() == {"error": "the body is JSON nested too deeply; send a flat object"}


# -- low: the brief's limit is the CLI's --------------------------------------------------------
def test_a_brief_over_the_cli_limit_is_refused_by_put(home: Home) -> None:
    project = make_project("p1", upto="outliner")
    before = (project / "brief.md").read_text()
    current = client().get("/api/projects/p1/files/brief.md").json()
    response = client().put(
        "/api/projects/p1/files/brief.md", json={"text": "x" * 500_000, "base_sha256": current["sha256"]}
    )
    assert response.status_code == 400
    assert response.json()["error"].startswith("the brief is 500,000 bytes; the limit is 100,000")
    assert (project / "brief.md").read_text() == before
    ok = client().put("/api/projects/p1/files/brief.md", json={"text": "y" * 99_000, "base_sha256": current["sha256"]})
    assert ok.status_code == 200


# -- low: half-sent requests are closed after the header deadline ------------------------------
def test_half_sent_requests_are_closed_after_the_header_deadline(home: Home, monkeypatch: pytest.MonkeyPatch) -> None:
    import socket
    import time

    from pensieve.studio import server
    from tests.studio_support import TOKEN, real_server

    monkeypatch.setattr(server, "HEADER_TIMEOUT_S", 0.5)
    with real_server() as base:
        port = int(base.rsplit(":", 1)[1])
        socks = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(50)]
        for n, sock in enumerate(socks):
            sock.sendall(b"GET /api/projects HTTP/1.1\r\nHost: 127.0.0.1\r\n" if n % 2 else b"GE")
        started = time.monotonic()
        for sock in socks:
            assert sock.recv(100) == b""  # closed by the studio, before the 10 s socket timeout
            sock.close()
        assert time.monotonic() - started < 9
        # A whole request on a kept-alive connection, then silence: closed as well.
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            auth = f"Authorization: Bearer {TOKEN}"
            sock.sendall(f"GET /api/projects HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{auth}\r\n\r\n".encode())
            answer = sock.recv(65536)
            while not answer.endswith(b"\r\n\r\n[]"):  # no project: the body is []
                answer += sock.recv(65536)
            assert answer.startswith(b"HTTP/1.1 200")
            sock.sendall(b"GET /api/pro")
            assert sock.recv(100) == b""


# -- low: a token that cannot guard the studio is refused at start ------------------------------
@pytest.mark.parametrize(
    ("token", "said"),
    [("x", "is 1 characters; use at least 16"), ("a;b=c" + "k" * 16, "';'"), ("jeton-secret-été-42", "'é'")],
)
def test_a_token_that_cannot_guard_the_studio_is_refused(home: Home, token: str, said: str) -> None:
    home.monkeypatch.setenv("PENSIEVE_STUDIO_TOKEN", token)
    result = home.run("studio", "--port", "0")
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: PENSIEVE_STUDIO_TOKEN") and said in lines[0], result.stderr
