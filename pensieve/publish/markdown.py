"""Publishable markdown: the article with a generated reference list and full URLs, and
optionally YAML front matter (title, date, sources) for static site generators.

A static site generator may pass raw HTML through, so what came from a model or a page
is neutralised: tags in the prose become text (`&lt;`), images become links, links other
than http(s) and in-document (`#...`) ones lose their target, and reference titles are
backslash-escaped. What a link resolves to is decided by a CommonMark parser
(`markdown_links`), which checks the result whatever form a target was written in.
"""

from __future__ import annotations

import json
import re
import secrets

from pensieve.article.blocks import in_prose
from pensieve.front_matter import render_front_matter
from pensieve.publish.document import Article
from pensieve.publish.markdown_links import make_links_safe, rewrite_targets
from pensieve.publish.references import ReferenceParts

# `<` opening a tag, a comment or a declaration; autolinks (<https://...>) are left alone.
_TAG_OPEN = re.compile(r"<(?=[A-Za-z/!?])(?!https?://)")
_IMAGE = re.compile(r"!\[([^\]\n]*)\]\(")
# Any other image opening (reference-style `![alt][ref]`, `![ref]`): the `!` made literal,
# so what follows is at most a link.
_OTHER_IMAGE = re.compile(r"(?<!\\)!\[")
_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>()#!|~{}])")


def md_escape(text: str) -> str:
    """Plain text made literal in CommonMark (every special ASCII punctuation escaped)."""
    return _MD_SPECIAL.sub(r"\\\1", text)


def _neutralise(prose: str) -> str:
    # Targets first, so that a `<...>` target is read whole before tags become text.
    prose = rewrite_targets(prose)
    prose = _TAG_OPEN.sub("&lt;", prose)
    # An image would be fetched by whoever renders the page: it becomes a link.
    prose = _IMAGE.sub(lambda m: f"[image: {m.group(1)}](", prose)
    return _OTHER_IMAGE.sub(r"\\![", prose)


def neutralise_markdown(text: str) -> str:
    """Markdown made safe to hand to a renderer that passes HTML through (code kept as is),
    checked by the parser: no link but http(s) and in-document ones, no image, no HTML."""
    return make_links_safe(_neutralise_prose(text))


def _neutralise_prose(text: str) -> str:
    """The rewriting part of `neutralise_markdown`, before the parser's check."""
    return in_prose(text, _neutralise)


def reference_markdown(number: int, parts: ReferenceParts) -> str:
    pieces = []
    if parts.label:
        label = parts.label + (f" ({parts.year})" if parts.year and parts.year not in parts.label else "")
        pieces.append(md_escape(label.rstrip(".")) + ".")
    pieces.append(f"*{md_escape(parts.title.rstrip('.'))}*.")
    if parts.venue:
        pieces.append(md_escape(parts.venue.rstrip(".")) + ".")
    if parts.pages:
        pieces.append(md_escape(parts.pages) + ".")
    if parts.site and parts.site != parts.label:
        pieces.append(md_escape(parts.site) + ".")
    if parts.fetched:
        pieces.append(f"Fetched {parts.fetched}.")
    if parts.doi:
        pieces.append(f"doi:{md_escape(parts.doi)}")
    if parts.link and not re.search(r"[\s<>]", parts.link):
        pieces.append(f"<{parts.link}>")
    elif parts.url:
        pieces.append(md_escape(parts.url))
    return f"{number}. " + " ".join(pieces)


# Characters that start a link, an image or a tag, as YAML escapes inside a double-quoted
# string: the value reads the same, the raw text holds nothing a Markdown viewer links.
_YAML_ESCAPES = str.maketrans({"[": "\\u005b", "]": "\\u005d", "<": "\\u003c"})


def _front_matter(values: dict[str, str | int], body: str) -> str:
    """Front matter whose strings stay inert for a viewer that reads it as Markdown (one that
    does not know front matter sees `title: [x](javascript:...)` as a heading with a link)."""
    quoted: dict[str, str] = {}
    for key, value in values.items():
        if isinstance(value, str) and any(c in value for c in "[]<"):
            marker = f"pensieve-quoted-{secrets.token_hex(12)}"
            # JSON is YAML: ASCII-only, so no line separator or control character remains raw.
            quoted[marker] = json.dumps(value, ensure_ascii=True).translate(_YAML_ESCAPES)
            values = {**values, key: marker}
    text = render_front_matter(values, body, width=1000)
    for marker, literal in quoted.items():
        text = text.replace(marker, literal, 1)
    return text


def markdown_export(article: Article, *, exported_at: str, front_matter: bool = False) -> str:
    body = _neutralise_prose(article.plain(article.markdown, marked=True)).strip()
    if article.references:
        lines = [reference_markdown(ref.number, ref.parts) for ref in article.references]
        body += "\n\n## References\n\n" + "\n".join(lines)
    # The whole page checked by the parser, the reference list's links included.
    body = make_links_safe(body)
    if not front_matter:
        return f"# {md_escape(article.title)}\n\n{body}\n"
    values: dict[str, str | int] = {
        "title": article.title,
        "date": exported_at[:10],
        "sources": len(article.references),
        "generator": "pensieve",
        "source_file": article.name,
        "evidence": article.evidence.status,
    }
    return _front_matter(values, body)
