"""The studio's HTTP surface: every route, its JSON shapes, and the refusals (token, Host,
Origin, body size, traversal, stale edits)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from tests.conftest import MODEL_KEY, Home
from tests.studio_support import (
    BASE,
    HOSTILE,
    TOKEN,
    add_source,
    client,
    make_project,
    sentence,
    write_evidence,
)

ROUTES = [
    ("GET", "/"),
    ("GET", "/new"),
    ("GET", "/topics"),
    ("GET", "/queue"),
    ("GET", "/projects/p1"),
    ("GET", "/projects/p1/files/outline.md"),
    ("GET", "/projects/p1/read"),
    ("GET", "/projects/p1/diff"),
    ("GET", "/projects/p1/sources"),
    ("GET", "/projects/p1/sources/S1"),
    ("GET", "/projects/p1/sources/S1/raw"),
    ("GET", "/projects/p1/export/html"),
    ("GET", "/projects/p1/export/bundle"),
    ("GET", "/static/studio.js"),
    ("GET", "/api/projects"),
    ("POST", "/api/projects"),
    ("GET", "/api/projects/p1"),
    ("GET", "/api/projects/p1/view"),
    ("GET", "/api/projects/p1/files/outline.md"),
    ("PUT", "/api/projects/p1/files/outline.md"),
    ("POST", "/api/projects/p1/run"),
    ("POST", "/api/projects/p1/stop"),
    ("GET", "/api/projects/p1/events"),
    ("GET", "/api/projects/p1/versions"),
    ("GET", "/api/projects/p1/diff?a=draft_v1.md&b=draft_v2.md"),
    ("GET", "/api/projects/p1/sources"),
    ("GET", "/api/projects/p1/estimate"),
    ("GET", "/api/topics"),
    ("GET", "/api/queue"),
]


@pytest.fixture
def p1(home: Home) -> Path:
    project = make_project("p1")
    add_source(project, "S1", "Vector search explained", "https://example.org/a", "HNSW builds graphs.", b"<p>x</p>")
    return project


@pytest.mark.parametrize(("method", "path"), ROUTES)
def test_every_route_wants_the_token(p1: Path, method: str, path: str) -> None:
    for token in (None, "wrong-token", TOKEN + "x"):
        response = client(token).request(method, path, json={"brief": "x"} if method != "GET" else None)
        assert response.status_code == 401, (method, path, token)
        assert response.json() == {"error": "unauthorized"}
        assert "set-cookie" not in response.headers
        assert "access-control-allow-origin" not in response.headers


def test_first_visit_moves_the_token_into_a_strict_httponly_cookie(p1: Path) -> None:
    anonymous = client(None)
    response = anonymous.get(f"/projects/p1?token={TOKEN}&x=1")
    assert response.status_code == 303
    assert response.headers["location"] == "/projects/p1?x=1"  # the token leaves the address bar
    cookie = response.headers["set-cookie"]
    assert f"={TOKEN}" in cookie and "HttpOnly" in cookie and "SameSite=Strict" in cookie
    # The client keeps the cookie: the next requests need no token in the URL.
    assert anonymous.get("/projects/p1").status_code == 200
    assert anonymous.get("/api/projects").status_code == 200
    assert client(None).get(f"/api/projects?token={TOKEN}").status_code == 200  # scripts may use the query


def test_host_must_be_the_studio_or_localhost(p1: Path) -> None:
    c = client()
    for host in ("evil.example", "127.0.0.1.evil.example", "127.0.0.1:9999", "localhost:1", "", "[::1]:80"):
        response = c.get("/api/projects", headers={"Host": host})
        assert response.status_code == 403, host
        assert "Host" in response.json()["error"]
    for host in ("127.0.0.1:8765", "localhost:8765", "localhost", "LOCALHOST:8765", "[::1]:8765"):
        assert c.get("/api/projects", headers={"Host": host}).status_code == 200, host


def test_state_changes_from_another_origin_are_refused_and_no_cors(p1: Path) -> None:
    c = client()
    for origin in ("http://evil.example", "null", "http://127.0.0.1:9999", "https://127.0.0.1.evil.example:8765"):
        response = c.post("/api/projects", json={"brief": "CSRF"}, headers={"Origin": origin})
        assert response.status_code == 403, origin
    response = c.post("/api/projects", json={"brief": "from a page"}, headers={"Sec-Fetch-Site": "cross-site"})
    assert response.status_code == 403
    ok = c.post("/api/projects", json={"brief": "Same origin works"}, headers={"Origin": BASE})
    assert ok.status_code == 201
    # A CORS preflight gets nothing that would let another site in.
    pre = c.options("/api/projects", headers={"Origin": "http://evil.example", "Access-Control-Request-Method": "PUT"})
    assert not any(h.startswith("access-control-") for h in pre.headers)
    # A GET from another origin is answered without CORS headers (the browser keeps it from the page).
    got = c.get("/api/projects", headers={"Origin": "http://evil.example"})
    assert "access-control-allow-origin" not in got.headers


def test_every_page_has_a_fresh_nonce_csp_and_no_outside_origin(p1: Path) -> None:
    c = client()
    nonces = set()
    for path in ("/", "/new", "/projects/p1", "/projects/p1/read", "/topics"):
        response = c.get(path)
        assert response.status_code == 200, path
        csp = response.headers["content-security-policy"]
        nonce = re.search(r"'nonce-([^']+)'", csp)
        assert nonce is not None
        nonces.add(nonce.group(1))
        assert "default-src 'none'" in csp and "unsafe-inline" not in csp and "http" not in csp
        assert "frame-ancestors 'none'" in csp
        assert f'nonce="{nonce.group(1)}"' in response.text
        assert re.search(r"<script(?![^>]*nonce=)", response.text) is None  # every script carries the nonce
        assert re.search(r"src=\"(https?:)?//", response.text) is None  # nothing loaded from outside
        assert response.headers["x-content-type-options"] == "nosniff"
    assert len(nonces) == 5


def test_bodies_are_capped(p1: Path) -> None:
    c = client()
    big = "x" * 2_100_000
    response = c.put("/api/projects/p1/files/outline.md", json={"text": big, "base_sha256": ""})
    assert response.status_code == 413
    assert (p1 / "outline.md").read_text() != big


def test_projects_list_is_the_list_command(home: Home, p1: Path) -> None:
    make_project("p2", upto="outliner", brief="Why B-trees still matter")
    listed = home.run("list", "--json")
    assert listed.exit_code == 0
    assert client().get("/api/projects").json() == json.loads(listed.stdout)
    detail = client().get("/api/projects?detail=1").json()
    assert [r["id"] for r in detail] == ["p1", "p2"]
    assert detail[1]["stages_done"] == 3 and detail[1]["cost_usd"] == pytest.approx(0.0003)


def test_create_a_project(home: Home) -> None:
    c = client()
    created = c.post("/api/projects", json={"brief": "Why B-trees still matter", "id": "btrees"})
    assert created.status_code == 201
    listed = json.loads(home.run("list", "--json").stdout)
    assert created.json() == listed[0]
    assert (home.project_dir("btrees") / "brief.md").read_text() == "Why B-trees still matter\n"
    again = c.post("/api/projects", json={"brief": "Another", "id": "btrees"})
    assert again.status_code == 409 and "already exists" in again.json()["error"]
    for body, needle in (
        ({"brief": "ok", "id": "../escape"}, "invalid project id"),
        ({"brief": "ok", "id": "a/b"}, "invalid project id"),
        ({"brief": "   "}, "brief is empty"),
        ({"id": "x"}, "brief"),
        ({"brief": "ok", "target_words": "many"}, "target_words"),
        ({"brief": "ok", "model": "openai/evil-model"}, "configured models"),
        ({"brief": "x" * 100_001}, "limit"),
        # A project keeps no model: one chosen without a run would be silently dropped.
        ({"brief": "ok", "id": "m1", "model": "openai/gpt-4o-mini"}, "start the run now"),
        ({"brief": "ok", "id": "m1", "model": "openai/gpt-4o-mini", "start": False}, "start the run now"),
    ):
        response = c.post("/api/projects", json=body)
        assert response.status_code == 400, body
        assert needle in response.json()["error"], response.json()
    assert not home.project_dir("m1").exists()
    assert c.post("/api/projects", content=b"not json", headers={"Content-Type": "application/json"}).status_code == 400
    assert c.post("/api/projects", json=["a list"]).status_code == 400
    # The form's options go into the brief, which the refiner reads.
    made = c.post("/api/projects", json={"brief": "Raft", "target_words": 900, "audience": "students"}).json()
    assert (home.project_dir(made["id"]) / "brief.md").read_text() == (
        "Raft\n\nTarget length: about 900 words.\nAudience: students.\n"
    )
    assert not (home.path / "workspaces" / "escape").exists()


def test_text_that_no_file_can_hold_is_refused_with_400(home: Home, p1: Path) -> None:
    """A "\\ud800" escape in JSON makes a lone surrogate; refused as the CLI refuses one."""
    c = client()
    headers = {"Content-Type": "application/json"}
    for body, needle in (
        (b'{"brief": "abc \\ud800 def"}', '"brief" is not valid text'),
        (b'{"brief": "Raft", "audience": "students \\udfff"}', '"audience" is not valid text'),
    ):
        response = c.post("/api/projects", content=body, headers=headers)
        assert response.status_code == 400, response.text
        assert needle in response.json()["error"]
    assert [p.name for p in (home.path / "workspaces" / "default" / "projects").iterdir()] == ["p1"]
    before = c.get("/api/projects/p1/files/outline.md").json()
    put = c.put(
        "/api/projects/p1/files/outline.md",
        content=b'{"text": "edited \\ud83d", "base_sha256": "%s"}' % before["sha256"].encode(),
        headers=headers,
    )
    assert put.status_code == 400 and '"text" is not valid text' in put.json()["error"]
    assert (p1 / "outline.md").read_text() == before["text"]
    # What every command line and batch file shares: the brief check itself.
    from pensieve.errors import UsageError
    from pensieve.project.listing import validate_brief

    with pytest.raises(UsageError, match="lone surrogate"):
        validate_brief("abc \ud800 def")


def test_an_unexpected_error_is_a_json_500_logged_without_the_token(
    home: Home, p1: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Whatever goes wrong unexpectedly answers {"error": "internal error"}: no traceback,
    no text of the exception in the answer; one log line, with neither token nor key."""
    from pensieve.studio import projects

    def broken(*args: object) -> None:
        raise RuntimeError(f"disk on fire near {TOKEN} and {MODEL_KEY}")

    monkeypatch.setattr(projects, "list_json", broken)
    monkeypatch.setattr(projects, "list_detail", broken)
    c = client()  # raises in the test if the error escaped the app
    with caplog.at_level("ERROR", logger="pensieve.studio"):
        answer = c.get("/api/projects?token=" + TOKEN)
        page = c.get("/", headers={"accept": "text/html"})
    assert answer.status_code == 500 and answer.json() == {"error": "internal error"}
    assert page.status_code == 500 and "internal error" in page.text
    for text in (answer.text, page.text):
        assert "Traceback" not in text and "disk on fire" not in text and TOKEN not in text
    assert "internal error answering GET /api/projects: RuntimeError: disk on fire" in caplog.text
    assert TOKEN not in caplog.text and MODEL_KEY not in caplog.text
    assert c.get("/api/projects/p1").status_code == 200  # the studio goes on


def test_status_is_the_status_command(home: Home, p1: Path) -> None:
    shown = home.run("status", "p1", "--json")
    assert client().get("/api/projects/p1").json() == json.loads(shown.stdout)
    assert client().get("/api/projects/nope").status_code == 404
    view = client().get("/api/projects/p1/view").json()
    assert view["state"] == "complete" and view["running_pid"] is None and view["stale"] == {}


def test_status_json_carries_the_evidence_and_missing_artifacts_as_the_command_does(home: Home, p1: Path) -> None:
    write_evidence(
        p1, "final.md", [sentence(0, "HNSW builds a layered graph [1].", "S1", "weak", "HNSW builds graphs.")]
    )
    (p1 / "outline.md").unlink()  # its stage is shown pending, as the next run will see it
    shown = home.run("status", "p1", "--json")
    answered = client().get("/api/projects/p1").json()
    assert answered == json.loads(shown.stdout)
    assert answered["evidence"] == {
        "artifact": "final.md",
        "current": True,
        "summary": {"cited_sentences": 1, "supported": 0, "weak": 1, "unsupported": 0, "supported_share": 0.0},
    }
    assert answered["stages"]["outliner"]["status"] == "pending"


def test_a_damaged_evidence_file_never_breaks_a_page(p1: Path) -> None:
    from tests.publish_fixtures import damaged_evidence

    write_evidence(p1, "final.md", [sentence(0, "HNSW builds a layered graph [1].", "S1", "supported", "HNSW builds.")])
    entry = json.loads((p1 / "evidence.json").read_text())["artifacts"]["final.md"]
    c = client()
    for damage, text in damaged_evidence(entry, "final.md").items():
        (p1 / "evidence.json").write_text(text)
        assert c.get("/api/projects/p1").json()["evidence"] is None, damage
        assert c.get("/api/projects?detail=1").json()[0]["supported_share"] is None, damage
        for path in ("/", "/projects/p1", "/projects/p1/read", "/projects/p1/sources", "/projects/p1/sources/S1"):
            assert c.get(path).status_code == 200, (damage, path)
        assert c.get("/api/projects/p1/sources").json()[0]["id"] == "S1", damage


def test_traversal_and_reserved_files_are_refused(home: Home, p1: Path) -> None:
    (home.path / "secret.md").write_text("TOP SECRET")
    c = client()
    for path in (
        "/api/projects/p1/files/status.json",
        "/api/projects/p1/files/.run.lock",
        "/api/projects/p1/files/events.jsonl",
        "/api/projects/p1/files/%2e%2e",
        "/api/projects/p1/files/..%2F..%2F..%2F..%2Fsecret.md",
        "/api/projects/p1/files/..%252F..%252Fsecret.md",
        "/api/projects/..%2F..%2F..%2F..%2F/files/secret.md",
        "/api/projects/p1/files/%2Fetc%2Fpasswd",
        "/api/projects/p1/diff?a=history/../../../../secret.md&b=final.md",
        "/api/projects/p1/diff?a=history%2F..%2F..%2Fstatus.json&b=final.md",
        "/api/projects/p1/diff?a=/etc/passwd&b=final.md",
        "/projects/p1/sources/..%2F..%2Fstatus.json",
        "/projects/p1/sources/S1%2F..%2F..%2Fstatus.json/raw",
        "/static/..%2F..%2F..%2Fworkspace.py",
        "/static/%2e%2e/app.py",
    ):
        response = c.get(path)
        assert response.status_code in (400, 404), (path, response.status_code)
        assert "TOP SECRET" not in response.text and '"schema_version"' not in response.text
    bad = c.put("/api/projects/p1/files/status.json", json={"text": "{}", "base_sha256": ""})
    assert bad.status_code == 400 and "not a stage artifact" in bad.json()["error"]
    # A symlink planted in the project is not followed, for reading or writing: the project
    # is refused as `pensieve status` refuses it.
    os.remove(p1 / "outline.md")
    (p1 / "outline.md").symlink_to(home.path / "secret.md")
    got = c.get("/api/projects/p1/files/outline.md")
    assert got.status_code == 409 and "TOP SECRET" not in got.text
    assert "contains a symbolic link (outline.md)" in got.json()["error"]
    put = c.put("/api/projects/p1/files/outline.md", json={"text": "x", "base_sha256": ""})
    assert put.status_code == 409
    assert (home.path / "secret.md").read_text() == "TOP SECRET"
    os.remove(p1 / "outline.md")
    # A log linked out of the workspace: neither the feed nor any page of the project reads it.
    (home.path / "secret.md").write_text('{"kind": "note", "message": "TOP SECRET"}\n' * 3)
    (p1 / "events.jsonl").symlink_to(home.path / "secret.md")
    assert home.run("status", "p1").exit_code != 0  # the CLI's verdict, which the studio shares
    for path in ("/api/projects/p1/events?since=0", "/api/projects/p1", "/api/projects/p1/view", "/projects/p1"):
        refused = c.get(path, headers={"accept": "text/html"} if path == "/projects/p1" else {})
        assert refused.status_code == 409, (path, refused.status_code)
        assert "TOP SECRET" not in refused.text and "symbolic link (events.jsonl)" in refused.text, path
        assert not refused.headers["content-type"].startswith("text/event-stream"), path
    assert c.get("/api/projects/p1/events?since=0").json() == {
        "error": "project p1 contains a symbolic link (events.jsonl); Pensieve does not follow links in a project. "
        "Replace the link by a copy of the file it points to, or remove it"
    }
    # So is a project directory that is a link to somewhere else.
    (home.path / "workspaces" / "default" / "projects" / "linked").symlink_to(p1)
    assert c.get("/api/projects/linked").status_code == 404


def test_edit_keeps_history_marks_later_stages_stale_and_refuses_stale_bases(home: Home, p1: Path) -> None:
    c = client()
    before = c.get("/api/projects/p1/files/outline.md").json()
    assert before["name"] == "outline.md" and before["text"] == (p1 / "outline.md").read_text()
    edited = before["text"].replace("## ", "## Edited: ", 1)
    saved = c.put("/api/projects/p1/files/outline.md", json={"text": edited, "base_sha256": before["sha256"]})
    assert saved.status_code == 200, saved.text
    assert saved.json()["changed"] is True
    assert list(saved.json()["stale"]) == ["drafter"]
    assert saved.json()["stale_downstream"] == [
        "drafter",
        "content_reviewer",
        "fact_checker",
        "style_reviewer",
        "reviser",
        "polisher",
        "consistency_checker",
    ]
    assert (p1 / "outline.md").read_text() == edited
    kept = list((p1 / "history").glob("outline.*.md"))
    assert len(kept) == 1 and kept[0].read_text() == before["text"]
    assert not list(p1.glob(".tmp-*"))
    # The same stale detection as the CLI's `status`.
    assert "changed since drafter ran" in home.run("status", "p1").stderr
    assert c.get("/api/projects/p1/view").json()["stale"] == {"drafter": ["outline.md"]}
    # An edit based on the older version is refused, with both versions, and changes nothing.
    stale = c.put("/api/projects/p1/files/outline.md", json={"text": "mine", "base_sha256": before["sha256"]})
    assert stale.status_code == 409
    body = stale.json()
    assert "changed on disk" in body["error"]
    assert body["current"]["text"] == edited and body["yours"]["text"] == "mine"
    assert (p1 / "outline.md").read_text() == edited
    for bad in ({"text": 3, "base_sha256": ""}, {"text": "x", "base_sha256": "nothex"}, {"text": "x"}):
        assert c.put("/api/projects/p1/files/outline.md", json=bad).status_code == 400
    # Versions and a word-level diff between the current file and the kept one.
    versions = c.get("/api/projects/p1/versions?artifact=outline.md").json()
    assert [v["version"] for v in versions] == ["outline.md", f"history/{kept[0].name}"]
    diff = c.get(f"/api/projects/p1/diff?a=history/{kept[0].name}&b=outline.md").json()
    assert [text.strip() for op, text in diff["diff"] if op != "="] == ["Edited:"]
    assert "".join(t for op, t in diff["diff"] if op != "+") == before["text"]
    assert "".join(t for op, t in diff["diff"] if op != "-") == edited


def test_no_edit_while_the_project_runs(p1: Path, home: Home) -> None:
    from pensieve.project.workspace import open_workspace

    project = open_workspace(home.path, "default").project("p1")
    current = client().get("/api/projects/p1/files/outline.md").json()
    with project.run_lock():
        response = client().put(
            "/api/projects/p1/files/outline.md", json={"text": "x", "base_sha256": current["sha256"]}
        )
        assert response.status_code == 409
        assert "running" in response.json()["error"]
        run = client().post("/api/projects/p1/run", json={})
        assert run.status_code == 409 and "already running" in run.json()["error"]
    assert (p1 / "outline.md").read_text() == current["text"]


def test_run_and_stop_refusals(p1: Path) -> None:
    c = client()
    assert c.post("/api/projects/p1/stop").status_code == 409
    for body in ({"until": "nope"}, {"from": "../x"}, {"from": "polisher", "until": "refiner"}, {"model": "x/y"}):
        response = c.post("/api/projects/p1/run", json=body)
        assert response.status_code == 400, body
    assert c.post("/api/projects/missing/run", json={}).status_code == 404
    # Nothing from the browser reaches config, MCP, API bases or keys: no such route exists.
    for path in ("/api/config", "/api/settings", "/api/mcp", "/api/keys", "/api/env"):
        assert c.get(path).status_code == 404
        assert c.post(path, json={"api_base": "http://evil"}).status_code in (404, 405)


def test_raw_archived_pages_are_never_html(p1: Path) -> None:
    hostile = b"<html><script>window.__pwned=1</script></html>"
    add_source(p1, "S2", "Hostile <script>x</script>", "https://evil.example/", "text " + HOSTILE, hostile)
    raw = client().get("/projects/p1/sources/S2/raw")
    assert raw.status_code == 200
    assert raw.headers["content-type"].startswith("text/plain")
    assert raw.headers["content-disposition"].startswith("attachment")
    assert raw.headers["content-security-policy"].startswith("sandbox")
    assert raw.content == hostile
    page = client().get("/projects/p1/sources/S2")
    assert "<script>window.__pwned" not in page.text and "&lt;script&gt;" in page.text
    assert client().get("/projects/p1/sources/S9").status_code == 404


def test_sources_list_the_sentences_citing_them(p1: Path) -> None:
    write_evidence(
        p1,
        "final.md",
        [sentence(0, "HNSW builds a layered graph [1].", "S1", "supported", "HNSW builds graphs.")],
    )
    listed = client().get("/api/projects/p1/sources").json()
    assert listed[0]["id"] == "S1"
    assert listed[0]["cited_by"][0]["text"] == "HNSW builds a layered graph [1]."
    assert listed[0]["cited_by"][0]["verdict"] == "supported"
    assert listed[0]["cited_by"][0]["stale"] is False
    page = client().get("/projects/p1/sources")
    assert "HNSW builds a layered graph [1]." in page.text
    assert client().get("/api/projects?detail=1").json()[0]["supported_share"] == 1.0


def test_without_evidence_sources_list_the_drafts_citing_sentences(p1: Path) -> None:
    (p1 / "evidence.json").unlink(missing_ok=True)
    (p1 / "draft_v1.md").write_text(
        "# Draft\n\nHNSW builds a layered graph [S1]. Nothing cited here.\n\n"
        "```\nx = y[S1]  # code, not a citation\n```\n\nIt was described in 2016 [S1, S2].\n"
    )
    listed = {s["id"]: s["cited_by"] for s in client().get("/api/projects/p1/sources").json()}
    assert [c["text"] for c in listed["S1"]] == [
        "HNSW builds a layered graph [S1].",
        "It was described in 2016 [S1, S2].",
    ]
    assert set(listed) == {"S1"}  # S2 is not archived: only archived sources are listed
    assert all(c["artifact"] == "draft_v1.md" and c["verdict"] == "" for c in listed["S1"])


def test_pages_render_and_escape_a_hostile_brief_and_artifact(home: Home) -> None:
    project = make_project("hostile", brief="Brief " + HOSTILE)
    (project / "outline.md").write_text("# Outline\n\n" + HOSTILE + "\n\n<div onclick=x>raw</div>\n")
    c = client()
    for path in ("/", "/projects/hostile", "/projects/hostile/files/outline.md", "/projects/hostile/read"):
        text = c.get(path).text
        assert "<script>window" not in text and "<img src=x" not in text and "<iframe" not in text, path
        assert 'href="javascript:' not in text and "<div onclick" not in text, path
    listed = c.get("/api/projects").json()
    assert HOSTILE in listed[0]["brief"]  # JSON carries the text as data


def test_topics_list(home: Home) -> None:
    topics = home.path / "workspaces" / "default" / "topics"
    topics.mkdir(parents=True)
    (topics / "raft.md").write_text("---\ntitle: Raft <script>x</script>\ntags: [consensus]\n---\nLeaders and logs.\n")
    listed = client().get("/api/topics").json()
    assert listed["topics"][0]["slug"] == "raft"
    page = client().get("/topics").text
    assert "Raft &lt;script&gt;x&lt;/script&gt;" in page
    assert client().get("/api/topics?q=" + "x" * 600).status_code == 400


def test_read_page_shows_citations_passages_references_and_exports(home: Home) -> None:
    from tests.publish_fixtures import write_evidence as publish_evidence
    from tests.publish_fixtures import write_final

    project = make_project("art")
    write_final(project, hostile=True)
    publish_evidence(project, verdicts={"S3": "weak", "S4": "unsupported"})
    page = client().get("/projects/art/read")
    assert page.status_code == 200
    text = page.text
    # A citation opens its passage (the studio's script does it in place), which links to the reference.
    assert 'class="cite verdict-supported" href="#ev-0-S1" data-source="S1"' in text
    assert re.search(r'id="ev-0-S1" role="note">.*?<a class="passage-ref" href="#ref-S1">', text)
    assert 'data-verdict="weak"' in text and 'data-verdict="unsupported"' in text
    assert "HNSW builds a layered graph of neighbours." in text  # the supporting passage
    assert 'href="/projects/art/sources/S1">archived copy</a>' in text
    assert "https://www.example.org/vector-indexes" in text
    assert "<script>window" not in text and "<img src=x" not in text and "<iframe" not in text
    assert 'href="javascript:' not in text and 'href="data:' not in text
    nonce = re.search(r"'nonce-([^']+)'", page.headers["content-security-policy"])
    assert nonce is not None and f'<style nonce="{nonce.group(1)}">' in text
    # Exports download; the HTML one is never rendered as a page of the studio.
    html = client().get("/projects/art/export/html")
    assert html.status_code == 200 and html.headers["content-disposition"].startswith("attachment")
    assert html.headers["content-security-policy"].startswith("sandbox")
    assert client().get("/projects/art/export/docx").content[:2] == b"PK"
    assert json.loads(client().get("/projects/art/export/json").text)
    assert client().get("/projects/art/export/exe").status_code == 400
    # Stale evidence is said, not presented as current.
    (project / "final.md").write_text((project / "final.md").read_text() + "\nMore.\n")
    assert "stale" in client().get("/projects/art/read").text
    assert client().get("/projects/p-none/read").status_code == 404


def test_the_evidence_bundle_downloads_as_the_cli_makes_it_and_verifies(home: Home, tmp_path: Path) -> None:
    import zipfile

    from pensieve.publish.bundle import MANIFEST, verify_bundle
    from tests.publish_fixtures import write_evidence as publish_evidence
    from tests.publish_fixtures import write_final

    project = make_project("art")
    write_final(project, hostile=True)
    publish_evidence(project, verdicts={"S3": "weak"})
    assert 'href="/projects/art/export/bundle"' in client().get("/projects/art/read").text
    response = client().get("/projects/art/export/bundle")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/zip"
    assert response.headers["content-disposition"] == 'attachment; filename="art-bundle.zip"'
    assert response.headers["content-security-policy"].startswith("sandbox")
    saved = tmp_path / "art-bundle.zip"
    saved.write_bytes(response.content)
    report = verify_bundle(saved)
    assert report.ok, report.problems
    with zipfile.ZipFile(saved) as archive:
        names = set(archive.namelist())
        manifest = json.loads(archive.read(MANIFEST))
    assert {"index.html", "final.md", "evidence.json", MANIFEST} <= names
    assert any(n.startswith("sources/") for n in names)
    assert manifest["project"] == "art" and manifest["artifact"] == "final.md"
    # The CLI's bundle of the same project holds the same files, with the same bytes
    # (but for the export time, stamped in index.html and manifest.json).
    cli = home.run("export", "art", "--bundle", "--output", str(tmp_path / "cli.zip"))
    assert cli.exit_code == 0, cli.stderr
    with zipfile.ZipFile(tmp_path / "cli.zip") as a, zipfile.ZipFile(saved) as b:
        assert set(a.namelist()) == names
        for name in names - {"index.html", MANIFEST}:
            assert a.read(name) == b.read(name), name
    assert not (project / "export").exists()  # the studio wrote nothing into the project
    assert client().get("/projects/p-none/export/bundle").status_code == 404


@pytest.mark.slow
def test_topic_search_by_meaning(home: Home) -> None:
    from tests.topic_library import QUERIES, TOPICS, write_library

    write_library(home.path / "workspaces" / "default" / "topics", TOPICS[:6])
    slug = TOPICS[0].slug
    found = client().get("/api/topics", params={"q": QUERIES[slug][0]})
    assert found.status_code == 200, found.text
    assert found.json()["hits"][0]["slug"] == slug
    assert client().get("/api/topics", params={"q": "   "}).status_code == 400
