"""The exported page in a real browser (headless Chromium from the system packages): hostile
content never runs, nothing is fetched, the layout fits a phone and a desktop, and a
citation reveals its passage without any script.

Slow (a browser start per module, ~2-4 s); skipped, saying why, where Chromium or
Playwright is missing (failed instead under PENSIEVE_REQUIRE_BROWSER=1, as in CI; see
tests/browser_support.py). Screenshots are kept under the test's tmp directory.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pensieve.publish.bundle import bundle_files, write_bundle
from pensieve.publish.document import load_article
from pensieve.publish.html import html_page
from tests.browser_support import chromium_browser
from tests.publish_fixtures import write_evidence, write_final

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium_browser() as chromium:
        yield chromium


@pytest.fixture(scope="module")
def page_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("browser")
    project = root / "proj"
    project.mkdir()
    write_final(project, hostile=True)
    write_evidence(project, verdicts={"S3": "unsupported", "S2": "weak"})
    bundle = root / "bundle"
    write_bundle(bundle_files(load_article(project), exported_at="2026-11-23T18:00:00Z"), bundle)
    (root / "page.html").write_text(html_page(load_article(project), exported_at="2026-11-23T18:00:00Z"))
    return bundle / "index.html"


@pytest.mark.parametrize("width", [390, 1280])
def test_page_renders_safely_at_phone_and_desktop_width(browser: Any, page_file: Path, width: int) -> None:
    page = browser.new_page(viewport={"width": width, "height": 900})
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(page_file.as_uri())
    page.wait_for_load_state("load")
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.evaluate("document.querySelectorAll('script, iframe, img').length") == 0
    # Only the page itself was loaded: no font, image, stylesheet or script.
    assert requests == [page_file.as_uri()]
    assert not errors
    # Nothing wider than the screen (code blocks and tables scroll inside themselves).
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    page.screenshot(path=str(page_file.parent.parent / f"screenshot-{width}.png"), full_page=True)

    passage = page.locator("a.cite[data-source='S3'] + .passage").first
    assert not passage.is_visible()
    page.locator("a.cite[data-source='S3']").first.focus()
    assert passage.is_visible() and "No supporting passage" in passage.inner_text()
    assert "unsupported" in page.locator("a.cite[data-source='S3']").first.inner_text()

    # The reference list: the passages open with <details>, the archived copy is bundled.
    details = page.locator("#ref-S1 details")
    details.locator("summary").click()
    assert "HNSW builds a layered graph" in details.inner_text()
    assert (page_file.parent / str(page.locator("#ref-S1 a.ref-archived").get_attribute("href"))).is_file()

    # Clicking a JavaScript link written in the article does nothing.
    page.get_by_text("click me").first.click()
    assert page.evaluate("typeof window.__pwned") == "undefined"
    page.close()


def test_print_layout_hides_interactive_parts(browser: Any, page_file: Path) -> None:
    page = browser.new_page(viewport={"width": 800, "height": 900})
    page.goto(page_file.as_uri())
    page.emulate_media(media="print")
    page.locator("a.cite[data-source='S3']").first.focus()
    assert not page.locator("a.cite[data-source='S3'] + .passage").first.is_visible()
    assert not page.locator("#ref-S1 details").is_visible()
    assert page.locator("#ref-S1 .ref-url").is_visible()
    pdf = page.pdf(format="A4")
    assert pdf.startswith(b"%PDF") and len(pdf) > 5000
    page.close()
