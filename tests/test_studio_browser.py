"""The studio in a real browser (the system Chromium driven by Playwright): create, run and
watch live, read with passages, edit and re-run, stop and resume; hostile content from
artifacts, sources, topics and briefs executes nothing. Screenshots at 390 and 1280 px."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser_support import chromium_browser
from tests.conftest import Home
from tests.fakes.web_site import FakeSite
from tests.studio_support import HOSTILE, TOKEN, make_project, real_server

SHOTS = Path(os.environ.get("PENSIEVE_STUDIO_SHOTS", "")) if os.environ.get("PENSIEVE_STUDIO_SHOTS") else None

pytestmark = pytest.mark.slow

# Set by any payload that runs; every payload in the fixtures writes window.__pwned.
FLAG = "() => window.__pwned === undefined && !window.__dialog"
VIOLATIONS: list[str] = []


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium_browser() as chromium:
        yield chromium


def _page(browser: Any, base: str, width: int = 1280) -> Any:
    VIOLATIONS.clear()
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    page.on("dialog", lambda d: (page.evaluate("() => { window.__dialog = true }"), d.dismiss()))
    # The studio's own pages must work under its CSP: a violation means something was blocked.
    page.on("console", lambda m: VIOLATIONS.append(m.text) if "Content Security Policy" in m.text else None)
    page.goto(f"{base}/?token={TOKEN}")
    assert page.url == f"{base}/", "the token should leave the address bar"
    return page


def _shot(page: Any, name: str, full_page: bool = True) -> None:
    if SHOTS is not None:
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=full_page)


def _stage_status(page: Any, stage: str) -> str:
    return str(page.locator(f'li[data-stage="{stage}"] [data-field="status"]').inner_text())


def _row_ids(page: Any) -> list[str]:
    return list(page.locator("#projects tbody tr").evaluate_all("rows => rows.map(r => r.dataset.id)"))


def _row_is(project_id: str, state: str) -> str:
    """A script true once the projects page shows `state` for the project's row."""
    return f"() => document.querySelector('tr[data-id=\"{project_id}\"] .badge')?.textContent === '{state}'"


def test_create_run_watch_read_edit_rerun_stop_and_resume(home: Home, browser: Any) -> None:
    home.monkeypatch.setenv("PENSIEVE_CONFIG", str(home.config_path))
    # Ids in the opposite order of their titles (the briefs) and of their costs.
    make_project("a-zebras", upto="outliner", brief="Zebras and their stripes")
    make_project("z-aardvarks", upto="refiner", brief="Aardvarks and their burrows")
    with real_server() as base:
        page = _page(browser, base)
        # The projects page sorts by a header's column, both ways.
        assert _row_ids(page) == ["a-zebras", "z-aardvarks"]
        page.click('th[data-key="title"]')
        page.wait_for_function("() => document.querySelector('#projects tbody tr').dataset.id === 'z-aardvarks'")
        assert _row_ids(page) == ["z-aardvarks", "a-zebras"]
        assert page.get_attribute('th[data-key="title"]', "aria-sort") == "ascending"
        page.click('th[data-key="title"]')
        page.wait_for_function("() => document.querySelector('#projects tbody tr').dataset.id === 'a-zebras'")
        page.click('th[data-key="cost_usd"]')  # $0.0001 (refiner) before $0.0003 (up to the outliner)
        page.wait_for_function("() => document.querySelector('#projects tbody tr').dataset.id === 'z-aardvarks'")
        assert _row_ids(page) == ["z-aardvarks", "a-zebras"]
        # Create from the form and start at once; the timeline fills in live.
        page.click("text=New article")
        page.fill("#brief", "How vector databases index embeddings")
        page.fill("#pid", "vec")
        page.fill("#words", "1200")
        page.click("button[type=submit]")
        page.wait_for_url(f"{base}/projects/vec")
        page.wait_for_function("() => document.querySelectorAll('#timeline .s-complete').length >= 1", timeout=60_000)
        assert page.locator("#feed li").count() > 0  # the feed shows what the agents do
        page.wait_for_function(
            "() => document.querySelector('li[data-stage=consistency_checker] [data-field=status]')"
            ".textContent === 'complete'",
            timeout=120_000,
        )
        page.wait_for_function(
            "() => document.body.dataset.state === 'complete' && !document.querySelector('#run-btn').disabled",
            timeout=60_000,
        )
        # The feed is live (server-sent events) and may trail the status by a moment: every
        # stage's start must reach it, not necessarily before the status says complete.
        page.wait_for_function(
            "() => [...document.querySelectorAll('#feed li')].filter(li => li.textContent.includes('stage_start'))"
            ".length >= 10",
            timeout=30_000,
        )
        assert page.evaluate(FLAG)
        _shot(page, "project-1280")
        page.set_viewport_size({"width": 1100, "height": 700})
        _shot(page, "readme", full_page=False)
        page.set_viewport_size({"width": 390, "height": 844})
        _shot(page, "project-390")
        page.set_viewport_size({"width": 1280, "height": 900})

        # Edit outline.md: later stages show as stale, and re-running from the outliner clears it.
        page.goto(f"{base}/projects/vec/files/outline.md")
        page.click("#edit-btn")
        text = page.input_value("#editor")
        page.fill("#editor", text.replace("## ", "## Edited ", 1))
        page.click("#save-btn")
        page.wait_for_function("() => document.querySelector('#save-message').textContent.length > 9")
        assert page.inner_text("#save-message").startswith("Saved"), page.inner_text("#save-message")
        page.wait_for_selector("#after-save:not([hidden])")
        assert "drafter" in page.inner_text("#stale-text")
        _shot(page, "edit-1280")
        page.goto(f"{base}/projects/vec")
        page.wait_for_selector('li[data-stage="drafter"].stale')
        assert page.locator('li[data-stage="outliner"].stale').count() == 0
        calls_before = home.model.count("outliner")
        page.click('button[data-action="rerun"][data-stage="outliner"]')
        page.wait_for_function(
            "() => document.querySelector('#run-message').textContent.startsWith('Running')", timeout=60_000
        )
        page.wait_for_function(
            "() => document.body.dataset.state === 'complete' && !document.querySelector('li.stale')",
            timeout=120_000,
        )
        assert home.model.count("outliner") > calls_before  # the outliner ran again

        # Stop a run and resume it.
        home.model.delay_s["researcher"] = 120.0
        page.goto(f"{base}/new")
        page.uncheck("#start")  # a model belongs to a run: without one it cannot be chosen
        assert page.is_disabled("#model") and page.is_visible("#model-note")
        page.check("#start")
        assert page.is_enabled("#model") and not page.is_visible("#model-note")
        page.fill("#brief", "Why B-trees still matter " + HOSTILE)
        page.fill("#pid", "btrees")
        page.click("button[type=submit]")
        page.wait_for_url(f"{base}/projects/btrees")
        page.wait_for_function(
            "() => document.querySelector('li[data-stage=researcher] [data-field=status]').textContent === 'running'",
            timeout=90_000,
        )
        # Reloading the page mid-run picks the live feed up where it is.
        page.reload()
        page.wait_for_function("() => document.querySelectorAll('#feed li').length > 0", timeout=10_000)
        page.wait_for_selector("#feed li.k-stage_start >> text=researcher", timeout=10_000)
        assert page.inner_text("#feed-state") == "live"
        # The projects page, open in another tab, follows the run without being reloaded.
        listing = page.context.new_page()
        listing.goto(f"{base}/")
        listing.evaluate("() => { window.__same_page = true }")
        listing.wait_for_function(_row_is("btrees", "running"))
        page.click("#stop-btn")
        page.wait_for_function(
            "() => document.querySelector('li[data-stage=researcher] [data-field=status]').textContent"
            " === 'interrupted' && document.body.dataset.state === 'paused'",
            timeout=60_000,
        )
        listing.wait_for_function(_row_is("btrees", "paused"), timeout=10_000)
        home.model.delay_s.clear()
        page.click("#run-btn")
        page.wait_for_function("() => document.body.dataset.state === 'complete'", timeout=120_000)
        assert _stage_status(page, "researcher") == "complete"
        listing.wait_for_function(_row_is("btrees", "complete"), timeout=10_000)
        assert listing.evaluate("() => window.__same_page === true")  # updated in place, never reloaded
        assert page.evaluate(FLAG) and listing.evaluate(FLAG)
    assert VIOLATIONS == [], VIOLATIONS


def _fetch_into_archive(home: Home, project_id: str, url: str) -> None:
    """Archive a page through the researcher's own fetch_url (in a thread: Playwright's
    synchronous API owns this one's event loop)."""
    from pensieve.tools.web import fetch_url, known_urls
    from tests.web_fixtures import tool_context

    failures: list[BaseException] = []

    async def fetch() -> None:
        async with tool_context(home, project_id) as ctx:
            known_urls(ctx).add_trusted([url])
            await fetch_url.function(ctx, url=url)

    def run() -> None:
        try:
            asyncio.run(fetch())
        except BaseException as exc:  # reported in the test's thread
            failures.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=60)
    assert not failures, failures


def test_read_reveals_a_passage_and_hostile_content_runs_nothing(web_home: Home, site: FakeSite, browser: Any) -> None:
    from pensieve.project.source_archive import SourceArchive, list_sources
    from tests.publish_fixtures import write_evidence, write_final

    home = web_home

    project = make_project("hostile", brief="Brief " + HOSTILE)
    (project / "outline.md").write_text("# Outline\n\n" + HOSTILE + "\n\n<div onmouseover=window.__pwned=9>x</div>\n")
    write_final(project, hostile=True)
    write_evidence(project, verdicts={"S3": "weak", "S4": "unsupported"})
    raw = (
        b"<html><body><script>window.__pwned=11</script><img src=x onerror='window.__pwned=12'>"
        b"<iframe src='javascript:window.__pwned=13'></iframe>"
        b"<a href='javascript:window.__pwned=14'>x</a></body></html>"
    )
    SourceArchive(project).add(
        url="https://evil.example/xss",
        final_url="https://evil.example/xss",
        title='<img src=x onerror="window.__pwned=15">',
        content_type="text/html",
        body=raw,
        text="Archived text " + HOSTILE,
    )
    # The fixture site's hostile page, fetched and archived as the researcher does it.
    _fetch_into_archive(home, "hostile", site.url("/hostile"))
    fetched = next(s for s in list_sources(project) if s.url == site.url("/hostile"))
    assert fetched.id == "S6" and "<script>" in (project / fetched.raw_file).read_text()
    topics = home.path / "workspaces" / "default" / "topics"
    topics.mkdir(parents=True, exist_ok=True)
    raft = "Raft elects a leader with randomized election timeouts; the leader replicates its log to followers."
    (topics / "evil.md").write_text(
        f"---\ntitle: 'Evil {HOSTILE}'\nsummary: '{HOSTILE}'\n---\n{raft} {HOSTILE}\n\n{raft}\n"
    )
    with real_server() as base:
        page = _page(browser, base)
        for width in (1280, 390):
            page.set_viewport_size({"width": width, "height": 900})
            page.goto(f"{base}/projects/hostile/read")
            cite = page.locator("a.cite").first
            passage = cite.locator("xpath=following-sibling::span[1]")
            assert not passage.is_visible()
            cite.click()
            assert passage.is_visible()
            assert "HNSW builds a layered graph of neighbours." in passage.inner_text()
            assert page.locator("a.cite[data-verdict=weak]").count() >= 1
            _shot(page, f"read-{width}")
            page.goto(f"{base}/")
            for label in ("Stage", "Cost"):  # at a phone's width too (stacked cells)
                assert page.locator(f'tr[data-id="hostile"] td[data-label="{label}"]').is_visible(), (width, label)
            _shot(page, f"projects-{width}")
        page.set_viewport_size({"width": 1280, "height": 900})
        for path in (
            "/",
            "/projects/hostile",
            "/projects/hostile/files/outline.md",
            "/projects/hostile/files/outline.md?edit=1",
            "/projects/hostile/files/brief.md",
            "/projects/hostile/read",
            "/projects/hostile/sources",
            "/projects/hostile/sources/S5",
            "/projects/hostile/sources/S6",
            "/projects/hostile/diff?a=draft_v1.md&b=final.md",
            "/topics",
        ):
            page.goto(base + path)
            page.mouse.move(200, 300)
            if path.startswith("/projects/hostile/diff"):
                _shot(page, "diff-1280")
            for link in page.locator("a").all()[:60]:
                href = link.get_attribute("href") or ""
                assert not href.strip().lower().startswith(("javascript:", "data:")), (path, href)
            assert page.locator("iframe").count() == 0, path
            assert page.evaluate(FLAG), path
        # The raw page as fetched downloads as text; it is never shown as a page.
        with page.expect_download() as download:
            page.evaluate(
                "() => { const a = document.createElement('a'); a.href = location.origin + "
                "'/projects/hostile/sources/S5/raw'; document.body.append(a); a.click(); }"
            )
        assert download.value.suggested_filename.endswith(".txt")
        assert page.evaluate(FLAG)
        # Topics, read and found by semantic search, are text too.
        page.goto(f"{base}/topics")
        page.click("text=Read the topic")
        assert page.evaluate(FLAG)
        page.fill("#q", "how does Raft elect a leader")
        page.click("#topic-search button[type=submit]")
        page.wait_for_selector("#hits li", timeout=180_000)  # the first search loads the embedding model
        hit = page.inner_text("#hits li")
        assert hit.startswith("Evil <script>window.__pwned=1</script>") and "evil" in hit, hit
        page.mouse.move(200, 300)
        assert page.evaluate(FLAG)
        _shot(page, "topics-1280")
    assert VIOLATIONS == [], VIOLATIONS
