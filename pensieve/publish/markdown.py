"""Publishable markdown: the article with a generated reference list and full URLs, and
optionally YAML front matter (title, date, sources) for static site generators.

A static site generator may pass raw HTML through, so what came from a model or a page
is neutralised: tags in the prose become text (`&lt;`), links other than http(s) and
relative ones lose their target, and reference titles are backslash-escaped.
"""

from __future__ import annotations

import re

from pensieve.citations.text import code_spans
from pensieve.front_matter import render_front_matter
from pensieve.publish.document import Article
from pensieve.publish.references import ReferenceParts

# `<` opening a tag, a comment or a declaration; autolinks (<https://...>) are left alone.
_TAG_OPEN = re.compile(r"<(?=[A-Za-z/!?])(?!https?://)")
# The scheme of a link target ([text](scheme:...) or a definition `[x]: scheme:...`).
_LINK_SCHEME = re.compile(r"(\]\(\s*<?|^[ \t]{0,3}\[[^\]\n]+\]:[ \t]*<?)([A-Za-z][A-Za-z0-9+.\-\t]*):", re.M)
_IMAGE = re.compile(r"!\[([^\]\n]*)\]\(")
_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>()#!|~{}])")


def md_escape(text: str) -> str:
    """Plain text made literal in CommonMark (every special ASCII punctuation escaped)."""
    return _MD_SPECIAL.sub(r"\\\1", text)


def _neutralise(prose: str) -> str:
    prose = _TAG_OPEN.sub("&lt;", prose)
    # An image would be fetched by whoever renders the page: it becomes a link.
    prose = _IMAGE.sub(lambda m: f"[image: {m.group(1)}](", prose)

    def scheme(match: re.Match[str]) -> str:
        name = match.group(2).replace("\t", "").lower()
        return match.group(0) if name in ("http", "https") else match.group(1) + "#"

    return _LINK_SCHEME.sub(scheme, prose)


def neutralise_markdown(text: str) -> str:
    """Markdown made safe to hand to a renderer that passes HTML through (code kept as is)."""
    out: list[str] = []
    position = 0
    for start, end in code_spans(text):
        out.append(_neutralise(text[position:start]))
        out.append(text[start:end])
        position = end
    out.append(_neutralise(text[position:]))
    return "".join(out)


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


def markdown_export(article: Article, *, exported_at: str, front_matter: bool = False) -> str:
    body = neutralise_markdown(article.plain(article.markdown, marked=True)).strip()
    if article.references:
        lines = [reference_markdown(ref.number, ref.parts) for ref in article.references]
        body += "\n\n## References\n\n" + "\n".join(lines)
    if not front_matter:
        return f"# {md_escape(article.title)}\n\n{body}\n"
    values = {
        "title": article.title,
        "date": exported_at[:10],
        "sources": len(article.references),
        "generator": "pensieve",
        "source_file": article.name,
        "evidence": article.evidence.status,
    }
    return render_front_matter(values, body, width=1000)
