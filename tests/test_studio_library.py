"""The studio's library: uploads and URLs through the same code as `pensieve library add`,
the documents with their metadata and where each is cited, search, and a project's
sources page showing library documents with their page numbers; in the API and in Chromium."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pensieve.library.sources import archive_document
from pensieve.library.store import Library
from tests.browser_support import chromium_browser
from tests.conftest import Home
from tests.fakes.web_site import FakeSite
from tests.library_files import pdf_bytes, scanned_pdf_bytes
from tests.studio_support import HOSTILE, TOKEN, client, make_project, real_server, sentence, workspace, write_evidence
from tests.test_library import RAFT_PAGES

FLAG = "() => window.__pwned === undefined && !window.__dialog"


def _raft(title: str = "In Search of an Understandable Consensus Algorithm") -> bytes:
    return pdf_bytes(RAFT_PAGES, title=title, author="Diego Ongaro; John Ousterhout", first_label=11)


def _cited_project(doc_id: str) -> Path:
    """A finished project whose final.md cites the library document on its page 12."""
    project = make_project("raft-article")
    library = Library(workspace())
    source, _ = archive_document(project, library, library.get(doc_id))
    text = "A follower that hears nothing for an election timeout starts an election [S1]."
    (project / "final.md").write_text(f"# Raft\n\n{text}\n")
    cited = sentence(0, text, source.id, "supported", "If a follower receives no communication")
    cited["citations"][0]["passage"]["page"] = "12"
    write_evidence(project, "final.md", [cited])
    return project


def test_upload_list_where_cited_and_refusals_through_the_api(home: Home) -> None:
    with client() as http:
        added = http.post(
            "/api/library/upload?name=raft.pdf&tags=raft",
            content=_raft(),
            headers={"Content-Type": "application/octet-stream"},
        )
        assert added.status_code == 201, added.text
        doc_id = added.json()["id"]
        assert added.json()["new"] is True
        again = http.post("/api/library/upload?name=copy.pdf", content=_raft())
        assert again.status_code == 201 and again.json() == {**added.json(), "new": False}
        scanned = http.post("/api/library/upload?name=scan.pdf", content=scanned_pdf_bytes())
        assert scanned.status_code == 400 and "no text layer" in scanned.json()["error"]
        bad_name = http.post("/api/library/upload", content=_raft())
        assert bad_name.status_code == 400 and "name" in bad_name.json()["error"]
        # The upload path takes files larger than the studio's 2 MB cap on other bodies.
        # (A 3 MB file the library reads and refuses: the app answers, not the guard's 413.)
        big = b"\xff" * 3_000_000
        answered = http.post("/api/library/upload?name=big.txt", content=big)
        assert answered.status_code == 400 and "not UTF-8 text" in answered.json()["error"]
        assert http.post("/api/projects", content=big, headers={"Content-Type": "application/json"}).status_code == 413
        _cited_project(doc_id)
        listed = http.get("/api/library").json()["documents"]
        raft = next(d for d in listed if d["id"] == doc_id)
        assert (
            raft["pages"] == 3 and raft["authors"] == ["Diego Ongaro", "John Ousterhout"] and raft["tags"] == ["raft"]
        )
        assert raft["cited_in"] == [{"project": "raft-article", "source": "S1", "sentences": 1, "pages": ["12"]}]
        sources = http.get("/projects/raft-article/sources").text
        assert f'library document <a href="/library#doc-{doc_id}">{doc_id}</a>' in sources
        assert '<span class="page">p. 12</span>' in sources
        no_token = client(token=None)
        assert no_token.post("/api/library/upload?name=x.pdf", content=_raft()).status_code == 401
    assert len(json.loads(home.run("library", "list", "--json").stdout)) == 1


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium_browser() as chromium:
        yield chromium


@pytest.mark.slow
def test_the_library_page_uploads_searches_and_shows_where_documents_are_cited(
    home: Home, browser: Any, tmp_path: Path
) -> None:
    home.monkeypatch.setenv("PENSIEVE_CONFIG", str(home.config_path))
    pdf = tmp_path / "raft.pdf"
    pdf.write_bytes(_raft(title=f"Raft {HOSTILE}"))
    with real_server() as base:
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        page.on("dialog", lambda d: (page.evaluate("() => { window.__dialog = true }"), d.dismiss()))
        violations: list[str] = []
        page.on("console", lambda m: violations.append(m.text) if "Content Security Policy" in m.text else None)
        page.goto(f"{base}/library?token={TOKEN}")
        assert "No documents yet" in page.inner_text("main")
        page.set_input_files("#file", str(pdf))
        page.fill("#tags", "raft")
        page.click("#library-upload button[type=submit]")
        page.wait_for_selector("li.document", timeout=180_000)  # added, indexed, the page reloaded
        card = page.inner_text("li.document")
        assert card.startswith("Raft <script>window.__pwned=1</script>") and "3 pages" in card
        assert "Diego Ongaro, John Ousterhout" in card and "Not used by any project yet." in card
        assert page.evaluate(FLAG)
        page.fill("#q", "what does a follower do when it hears nothing from the leader")
        page.click("#library-search button[type=submit]")
        page.wait_for_selector("#hits li", timeout=180_000)
        hit = page.inner_text("#hits li")
        assert "p. 12" in hit and "election timeout" in hit, hit
        doc_id = Library(workspace()).documents()[0].id
        _cited_project(doc_id)
        page.goto(f"{base}/library")
        assert "raft-article [S1] (1 citing sentence, p. 12)" in page.inner_text("li.document")
        page.click("text=raft-article [S1]")
        page.wait_for_url(f"{base}/projects/raft-article/sources#S1")
        section = page.inner_text("section#S1")
        assert f"library document {doc_id}" in section and "3 pages" in section and "p. 12" in section
        assert page.evaluate(FLAG)
        assert violations == [], violations
        context.close()


@pytest.mark.slow
def test_a_url_is_added_through_the_api_with_the_same_safe_fetch(home: Home, site: FakeSite) -> None:
    """The Library page's "Add a URL": fetched once through the guard and robots.txt of
    `fetch_url`, like `pensieve library add URL`; a refusal is a 400 with the reason."""
    home.configure(fetch={"allow_private_hosts": True, "timeout_s": 3})
    with client() as http:
        added = http.post("/api/library/url", json={"url": site.url("/article")})
        assert added.status_code == 201, added.text
        listed = http.get("/api/library").json()["documents"]
        assert [d["url"] for d in listed] == [site.url("/article")] and listed[0]["id"] == added.json()["id"]
        assert listed[0]["kind"] == "html"
        secret = http.post("/api/library/url", json={"url": site.url("/private/secret")})
        assert secret.status_code == 400 and "robots.txt" in secret.json()["error"]
        for bad in ({"url": "file:///etc/passwd"}, {"url": 7}, {}):
            refused = http.post("/api/library/url", json=bad)
            assert refused.status_code == 400 and '"url" must be an http or https URL' in refused.json()["error"]
        assert len(http.get("/api/library").json()["documents"]) == 1  # nothing half-added
    requested = site.paths()
    assert "/private/secret" not in requested  # robots.txt said no: the page was never asked for
