"""One rule for which link targets may be links (pensieve.publish.links), and every place
that renders a link following it: the HTML export's renderer, the studio's pages, the
reference entries (and through them the DOCX), with the same hostile list."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

from pensieve.publish.links import safe_link
from pensieve.publish.references import reference_parts
from pensieve.publish.render import html_renderer
from pensieve.studio.render import render_markdown

HOSTILE = [
    "javascript:alert(1)",
    "JaVaScRiPt:alert(1)",
    "java\tscript:alert(1)",
    "\u200bjavascript:alert(1)",  # a zero-width space before the scheme
    " data:text/html,<b>x</b>",
    "vbscript:msgbox(1)",
    "file:///etc/passwd",
    "mailto:someone@example.org",
    "//evil.example/x",  # protocol-relative: another host
    "/\\evil.example/x",
    "\\\\evil.example\\x",
    "http:evil.example",  # no host
    "https://[::1",  # not a URL at all
    "relative/page.md",  # in the studio: another of its own pages
    "../x?y=1",
    "/projects/other/files/x.md",
]
GOOD = ["https://a.example/x?y=1", "http://b.example", "HTTPS://C.EXAMPLE/Y", "#ref-S1", "#sec-trade-offs"]


@pytest.mark.parametrize("url", HOSTILE)
def test_a_hostile_target_is_never_a_link(url: str) -> None:
    assert safe_link(url) is None
    assert safe_link(url, in_document=False) is None
    markdown = f"[here](<{url}>) and ![pic](<{url}>)"
    exported = html_renderer().render(markdown, {"article": None})
    studio = render_markdown(markdown)
    for rendered in (exported, studio):
        hrefs = re.findall(r'(?:href|src)="([^"]*)"', rendered)
        assert all(href == "#" for href in hrefs), (url, rendered)  # the export's inert "#", or nothing
    # A source archived under such a URL is cited without a link (HTML, DOCX, Markdown alike).
    source = SimpleNamespace(url=url, final_url=url, title="A page", fetched_at="2026-11-20T00:00:00Z")
    assert reference_parts(source).link is None


@pytest.mark.parametrize("url", GOOD)
def test_http_and_in_document_targets_are_links(url: str) -> None:
    assert safe_link(url) == url
    markdown = f"[here]({url})"
    for rendered in (html_renderer().render(markdown, {"article": None}), render_markdown(markdown)):
        assert f'href="{url}"' in rendered, rendered
    outside = safe_link(url, in_document=False)
    assert outside == (None if url.startswith("#") else url)  # a DOCX hyperlink or a reference: outside only
    source = SimpleNamespace(url=url, final_url=url, title="A page", fetched_at="2026-11-20T00:00:00Z")
    assert reference_parts(source).link == outside


def test_blanks_are_dropped_as_a_browser_drops_them() -> None:
    assert safe_link(" https://a.example/x\n") == "https://a.example/x"
    assert safe_link("ht\ttps://a.example/") == "https://a.example/"
