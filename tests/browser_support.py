"""The browser of the browser tests (test_studio_browser, test_export_browser): the system
Chromium driven by Playwright (Playwright cannot download its own browser here).

Where Chromium or Playwright is missing the tests are skipped, saying why. CI sets
PENSIEVE_REQUIRE_BROWSER=1: there a missing browser fails them instead, since a green run
with no browser test in it would prove nothing about the pages.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = os.environ.get("PENSIEVE_CHROMIUM", "/usr/lib/chromium/chromium")
REQUIRE_ENV = "PENSIEVE_REQUIRE_BROWSER"


def browser_missing(chromium: str = CHROMIUM) -> str | None:
    """Why the browser tests cannot run here, or None."""
    if not Path(chromium).is_file():
        return f"Chromium is not installed at {chromium} (apt-get install chromium, or set PENSIEVE_CHROMIUM)"
    if importlib.util.find_spec("playwright") is None:
        return "Playwright for Python is not installed"
    return None


def require_browser(chromium: str = CHROMIUM) -> None:
    """Skip (or, under PENSIEVE_REQUIRE_BROWSER=1, fail) the calling test when the browser is missing."""
    reason = browser_missing(chromium)
    if reason is None:
        return
    if os.environ.get(REQUIRE_ENV, "") not in ("", "0"):
        pytest.fail(f"{reason}; {REQUIRE_ENV} is set, so the browser tests must run", pytrace=False)
    pytest.skip(reason)


@contextlib.contextmanager
def chromium_browser() -> Iterator[Any]:
    """A headless Chromium for a module's tests (see require_browser)."""
    require_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield browser
        finally:
            browser.close()
