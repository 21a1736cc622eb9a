"""Markdown from models and web pages, rendered as data: no raw HTML, links only where
pensieve.publish.links allows them (http(s), or a place in the page), citations turned
into links that reveal their passage.

The Read page uses the article renderer of the HTML export (pensieve.publish.render);
this module renders every other artifact, and adds the studio's links to the article's
reference list.
"""

from __future__ import annotations

import html
import re
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from markdown_it import MarkdownIt


@lru_cache(maxsize=1)
def _markdown() -> MarkdownIt:
    from markdown_it import MarkdownIt

    from pensieve.publish.links import safe_link

    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable(["table", "strikethrough"])
    md.disable("image")  # no outside images (the CSP would block them anyway)
    md.validateLink = lambda url: safe_link(url) is not None  # type: ignore[method-assign]

    # markdown-it binds a render rule to its renderer: it is called with the renderer first.
    def link_open(renderer: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
        token = tokens[idx]
        href = token.attrGet("href") or ""
        if href and not href.startswith("#"):
            token.attrSet("rel", "noopener noreferrer nofollow")
        return str(renderer.renderToken(tokens, idx, options, env))

    md.add_render_rule("link_open", link_open)
    return md


def render_markdown(text: str) -> str:
    """Safe HTML for any artifact."""
    return str(_markdown().render(text))


_REF_ITEM = re.compile(r'(<li id="ref-(S\d{1,6})"[^>]*>)(.*?)(?=<details|</li>)', re.S)


def with_archived_links(references_html: str, project_id: str) -> str:
    """Each reference gets a link to Pensieve's archived copy of the source (the studio's page)."""

    def add(match: re.Match[str]) -> str:
        href = f"/projects/{html.escape(project_id)}/sources/{match.group(2)}"
        link = f' <a class="ref-archived" href="{href}">archived copy</a>'
        return match.group(1) + match.group(3) + link

    return _REF_ITEM.sub(add, references_html)
