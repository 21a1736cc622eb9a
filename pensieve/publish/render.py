"""The article as HTML: one renderer for the exported page and the studio's Read page.

    art = render_article(project_dir, "final.md", bundle_links=False)
    art.title, art.body_html, art.references_html, art.css, art.warnings

markdown-it-py parses the body with raw HTML disabled (a `<script>` in an artifact is
text), links are kept only for http(s) and relative targets, images become links (nothing
is fetched at view time), and every string from a model or a web page is escaped. The
fragments carry no inline script and no event handler: a citation's supporting passage
is revealed by CSS (hover or focus on the citation; a click or a tap targets the passage,
which `:target` shows, since a phone has no hover) and, in the reference list, by a
`<details>` element.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.token import Token

from pensieve.article.citations import SOURCE_ID
from pensieve.publish.document import (
    DEFAULT_ARTIFACT,
    PLACEHOLDER,
    Article,
    Citation,
    CitedEvidence,
    CiteItem,
    Reference,
    load_article,
)
from pensieve.publish.links import safe_link

# In a bundle, each cited source's archived text sits at sources/<id>.txt.
BUNDLE_SOURCE_DIR = "sources"
_SCHEME = re.compile(r"^([a-z][a-z0-9+.-]*):", re.I)
_VERDICT_WORDS = {
    "supported": "supported",
    "weak": "weakly supported",
    "unsupported": "unsupported",
    "unchecked": "not checked",
}


@dataclass(frozen=True)
class RenderedArticle:
    title: str  # plain text
    body_html: str  # an <article> fragment (the title is not in it)
    references_html: str  # <ol class="references">, or "" when nothing is cited
    css: str  # screen and print, no external resource
    warnings: list[str] = field(default_factory=list)
    evidence_status: str = "absent"  # current | stale | absent | unreadable


def escape(text: str) -> str:
    return html.escape(text, quote=True)


def bundle_source_path(source_id: str) -> str:
    return f"{BUNDLE_SOURCE_DIR}/{source_id}.txt"


def markdown_parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable(["table", "strikethrough"])
    md.validateLink = lambda url: safe_link(url) is not None  # type: ignore[method-assign]
    return md


def parse(article: Article) -> list[Token]:
    return markdown_parser().parse(article.markdown)


def render_article(project_dir: Path, name: str = DEFAULT_ARTIFACT, *, bundle_links: bool = False) -> RenderedArticle:
    """Read an artifact of the project and render it; raises UsageError when it is missing."""
    return render_loaded(load_article(project_dir, name), bundle_links=bundle_links)


def html_renderer() -> MarkdownIt:
    """The parser with the rendering rules for citations, images and links; render with
    env={"article": article}."""
    md = markdown_parser()
    md.add_render_rule("text", _render_text)
    md.add_render_rule("softbreak", _render_softbreak)
    md.add_render_rule("image", _render_image)
    md.add_render_rule("link_open", _render_link_open)
    md.add_render_rule("heading_open", _render_heading_open)
    return md


def render_loaded(article: Article, *, bundle_links: bool = False) -> RenderedArticle:
    env: dict[str, Any] = {"article": article}
    body = html_renderer().render(article.markdown, env)
    return RenderedArticle(
        title=article.title,
        body_html=f'<article class="pensieve-article">\n{body}</article>\n',
        references_html=references_html(article, bundle_links=bundle_links),
        css=CSS,
        warnings=list(article.warnings),
        evidence_status=article.evidence.status,
    )


# -- inline rules -----------------------------------------------------------------------


def _inside_link(tokens: Sequence[Token], idx: int) -> bool:
    depth = 0
    for token in tokens[:idx]:
        if token.type == "link_open":
            depth += 1
        elif token.type == "link_close":
            depth -= 1
    return depth > 0


# A citation (one or more placeholders) with the space before it and the punctuation after
# it (escaped text: quotes are entities by then).
_CITE_RUN = re.compile(
    rf"[ \t]*(?P<cites>(?:{PLACEHOLDER.pattern})(?:[ \t]*(?:{PLACEHOLDER.pattern}))*)"
    r"(?P<after>(?:[.,;:!?)\]}\u2019\u201d\u00bb\u2026]|&quot;|&#x27;)*)"
)


def _render_text(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: dict[str, Any]) -> str:
    article: Article = env["article"]
    in_link = _inside_link(tokens, idx)

    def cite_run(match: re.Match[str]) -> str:
        space = "&nbsp;" if match.group(0)[:1] in " \t" else ""
        citations = [article.citations[int(n)] for n in PLACEHOLDER.findall(match["cites"])]
        if in_link:  # no link inside a link: the numbers as text
            items = [(escape(" ".join(article.cite_text(c) for c in citations)), "")]
        else:
            items = [item for citation in citations for item in citation_items(citation)]
        # A citation never wraps away from the word it follows (a no-break space), nor
        # leaves its full stop alone on the next line (its last item and the punctuation
        # in one unbreakable span); a long group may still wrap between its items. The
        # punctuation goes before the last passage, which an opened passage then follows
        # (`a.cite + .passage` skips the text between them).
        *first, (link, passage) = items
        return f'{space}{"".join(map("".join, first))}<span class="cite-run">{link}{match["after"]}{passage}</span>'

    return _CITE_RUN.sub(cite_run, escape(tokens[idx].content))


def _render_softbreak(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: dict[str, Any]) -> str:
    """A line break of the markdown source just before a citation is a no-break space, so
    the citation stays on the line of the word before it."""
    following = tokens[idx + 1] if idx + 1 < len(tokens) else None
    if following is not None and following.type == "text" and PLACEHOLDER.match(following.content.lstrip()):
        return "&nbsp;"
    return "\n"


def _render_image(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: dict[str, Any]) -> str:
    """An image is never fetched: it becomes a link to it, labelled with its description."""
    token = tokens[idx]
    alt = self.renderInlineAsText(token.children or [], options, env)
    alt = PLACEHOLDER.sub("", alt).strip() or "image"
    label = f"[image: {escape(alt)}]"
    src = safe_link(str(token.attrGet("src") or ""), in_document=False)
    if src is None or _inside_link(tokens, idx):
        return f'<span class="image-ref">{label}</span>'
    return f'<a class="image-ref" href="{escape(src)}" rel="nofollow noopener noreferrer">{label}</a>'


def _render_heading_open(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: dict[str, Any]) -> str:
    """Headings get an id (`sec-` and a slug of their text, unique in the page) to link to."""
    token = tokens[idx]
    content = tokens[idx + 1].content if idx + 1 < len(tokens) else ""
    slug = re.sub(r"[^a-z0-9]+", "-", PLACEHOLDER.sub("", content).casefold()).strip("-")[:60] or "section"
    used: set[str] = env.setdefault("heading_ids", set())
    anchor, n = f"sec-{slug}", 2
    while anchor in used:
        anchor, n = f"sec-{slug}-{n}", n + 1
    used.add(anchor)
    return f'<{token.tag} id="{escape(anchor)}">'


def _render_link_open(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: dict[str, Any]) -> str:
    token = tokens[idx]
    href = safe_link(str(token.attrGet("href") or "")) or "#"
    title = token.attrGet("title")
    extra = f' title="{escape(str(title))}"' if title else ""
    rel = ' rel="nofollow noopener noreferrer"' if _SCHEME.match(href) else ""
    return f'<a href="{escape(href)}"{extra}{rel}>'


# -- citations ----------------------------------------------------------------------------


def citation_html(citation: Citation) -> str:
    return "".join(link + passage for link, passage in citation_items(citation))


def citation_items(citation: Citation) -> list[tuple[str, str]]:
    """Each source of the citation group as HTML: (its link, its passage or "")."""
    items, used = [], set()
    for position, item in enumerate(citation.items):
        passage_id = f"ev-{citation.index}-{item.source_id}"
        if passage_id in used:  # `[S1, S1]`: ids stay unique in the page
            passage_id += f"-{position}"
        used.add(passage_id)
        items.append(_item_html(item, passage_id))
    return items


def _item_html(item: CiteItem, passage_id: str) -> tuple[str, str]:
    if item.source_id is None or item.number is None:
        link = f'<span class="cite cite-unresolved" title="not in the source archive">[{escape(item.label)}?]</span>'
        return link, ""
    verdict = item.verdict
    flag = ""
    if verdict in ("weak", "unsupported"):
        flag = f'<span class="flag flag-{verdict}"> {escape(_VERDICT_WORDS[verdict])}</span>'
    # With evidence, a click or a tap opens the passage (`:target`: no hover on a phone),
    # which links on to the reference; without, the citation goes to the reference.
    target = f"#ref-{item.source_id}" if item.evidence is None else f"#{passage_id}"
    link = (
        f'<a class="cite verdict-{verdict}" href="{escape(target)}" '
        f'data-source="{escape(item.source_id)}" data-verdict="{verdict}" '
        f'aria-label="reference {item.number}, {_VERDICT_WORDS[verdict]}">[{item.number}]{flag}</a>'
    )
    if item.evidence is None:
        return link, ""
    return link, _passage_html(item.source_id, item.number, item.evidence, passage_id)


def _findings_about(source_id: str, evidence: CitedEvidence) -> list[str]:
    """The sentence's findings that concern this source (or name no source at all)."""
    return [f for f in evidence.findings if source_id in SOURCE_ID.findall(f) or not SOURCE_ID.search(f)]


def _passage_html(source_id: str, number: int, evidence: CitedEvidence, passage_id: str) -> str:
    verdict = evidence.verdict
    head = f"{source_id}: {_VERDICT_WORDS[verdict]}"
    if evidence.score is not None:
        head += f" (score {evidence.score:.2f})"
    parts = [f'<span class="passage-head">{escape(head)}</span>']
    if evidence.passage:
        parts.append(f'<span class="passage-text">\u201c{escape(evidence.passage)}\u201d</span>')
    else:
        parts.append('<span class="passage-text">No supporting passage was found in this source.</span>')
    notes = [*_findings_about(source_id, evidence), *([f"judge: {evidence.judge}"] if evidence.judge else [])]
    if evidence.missing and not evidence.findings:
        notes.append("not in the passage: " + ", ".join(evidence.missing))
    for note in notes:
        parts.append(f'<span class="passage-note">{escape(note)}</span>')
    # The reference list stays one step away from an opened passage.
    parts.append(f'<a class="passage-ref" href="#ref-{escape(source_id)}">\u2192 reference {number}</a>')
    return f'<span class="passage passage-{verdict}" id="{escape(passage_id)}" role="note">{"".join(parts)}</span>'


# -- references -----------------------------------------------------------------------------


def references_html(article: Article, *, bundle_links: bool = False) -> str:
    if not article.references:
        return ""
    items = [_reference_html(ref, bundle_links=bundle_links) for ref in article.references]
    return '<ol class="references">\n' + "\n".join(items) + "\n</ol>\n"


def _reference_html(ref: Reference, *, bundle_links: bool) -> str:
    parts = ref.parts
    rel = 'rel="nofollow noopener noreferrer"'
    title = escape(parts.title)
    if parts.link:
        title = f'<a href="{escape(parts.link)}" {rel}>{title}</a>'
    pieces = []
    if parts.label:
        pieces.append(f'<span class="ref-label">{escape(parts.dated_label)}.</span>')
    pieces.append(f'<cite class="ref-title">{title}</cite>.')
    for kind, value in parts.middle():
        if kind == "fetched":
            value = f'Fetched <time datetime="{escape(parts.fetched_at)}">{escape(value)}</time>'
        else:
            value = escape(value)
        pieces.append(f'<span class="ref-{kind}">{value}.</span>')
    if parts.doi:
        pieces.append(f'<span class="ref-doi">doi:{escape(parts.doi)}</span>')
    url_text = escape(parts.url)
    if parts.link:
        pieces.append(f'<a class="ref-url" href="{escape(parts.link)}" {rel}>{url_text}</a>')
    elif parts.url:
        pieces.append(f'<span class="ref-url">{url_text}</span>')
    if bundle_links and ref.archived_file is not None:
        pieces.append(f'<a class="ref-archived" href="{escape(bundle_source_path(ref.source_id))}">archived copy</a>')
    body = " ".join(pieces)
    if ref.passages:
        body += _passages_html(ref)
    return f'<li id="ref-{escape(ref.source_id)}" value="{ref.number}">{body}</li>'


def _passages_html(ref: Reference) -> str:
    weakest = min((p.evidence.verdict for p in ref.passages), key=_verdict_rank)
    count = len(ref.passages)
    summary = f"{count} cited passage{'s' if count != 1 else ''}"
    if weakest != "supported":
        summary += f" (some {_VERDICT_WORDS[weakest]})"
    rows = []
    for passage in ref.passages:
        evidence = passage.evidence
        verdict = evidence.verdict
        quote = (
            f"\u201c{escape(evidence.passage)}\u201d"
            if evidence.passage
            else "No supporting passage was found in this source."
        )
        notes = "".join(
            f'<span class="passage-note">{escape(f)}</span>' for f in _findings_about(ref.source_id, evidence)
        )
        rows.append(
            f'<li class="verdict-{verdict}"><span class="flag flag-{verdict}">[{passage.number}] '
            f"{escape(_VERDICT_WORDS[verdict])}</span> "
            f'<span class="claim">{escape(evidence.sentence)}</span>'
            f'<span class="passage-text">{quote}</span>{notes}</li>'
        )
    return f'<details class="ref-passages"><summary>{escape(summary)}</summary><ul>{"".join(rows)}</ul></details>'


def _verdict_rank(verdict: str) -> int:
    return {"unsupported": 0, "weak": 1, "supported": 2}.get(verdict, 0)


CSS = """
:root {
  --ink: #1d1d1f; --muted: #5f6368; --paper: #fffefb; --rule: #dcd8cf; --accent: #1a5fb4;
  --weak: #8a5a00; --weak-bg: #fff4d6; --bad: #a51d2d; --bad-bg: #fde7e9; --ok: #26704a;
}
* { box-sizing: border-box; }
html { -webkit-text-size-adjust: 100%; }
body {
  margin: 0; background: var(--paper); color: var(--ink);
  font: 1.0625rem/1.65 Georgia, "Times New Roman", Times, serif;
  overflow-wrap: break-word;
}
main { max-width: 44rem; margin: 0 auto; padding: 2.5rem 1.5rem 4rem; }
header.article-head h1 { font-size: 2.1rem; line-height: 1.2; margin: 0 0 .5rem; }
.meta { color: var(--muted); font: .875rem/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 0 1.5rem; }
.notice {
  font: .875rem/1.5 system-ui, -apple-system, "Segoe UI", sans-serif;
  border-left: 4px solid var(--weak); background: var(--weak-bg); padding: .6rem .9rem; margin: 0 0 1.5rem;
}
.notice p { margin: .2rem 0; }
.pensieve-article h1, .pensieve-article h2, .pensieve-article h3, .pensieve-article h4 {
  line-height: 1.25;
  margin: 2rem 0 .75rem;
}
.pensieve-article h2 { font-size: 1.5rem; }
.pensieve-article h3 { font-size: 1.2rem; }
.pensieve-article, .pensieve-article p, .pensieve-article li { position: relative; }
.pensieve-article a, .references a { color: var(--accent); }
.pensieve-article blockquote {
  margin: 1rem 0;
  padding: 0 1rem;
  border-left: 3px solid var(--rule);
  color: var(--muted);
}
.pensieve-article pre {
  overflow-x: auto;
  background: #f4f2ed;
  padding: .75rem 1rem;
  font-size: .875rem;
  line-height: 1.45;
}
.pensieve-article code { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; font-size: .9em; }
.pensieve-article table {
  border-collapse: collapse;
  display: block;
  overflow-x: auto;
  max-width: 100%;
  margin: 1rem 0;
}
.pensieve-article th, .pensieve-article td {
  border: 1px solid var(--rule);
  padding: .35rem .6rem;
  text-align: left;
  vertical-align: top;
}
.pensieve-article img { display: none; }
a.cite {
  text-decoration: none; font: .75em/1 system-ui, -apple-system, "Segoe UI", sans-serif;
  vertical-align: super; padding: 0 .1em; white-space: nowrap;
}
a.cite:hover, a.cite:focus { text-decoration: underline; outline: none; }
.cite-unresolved { color: var(--bad); font: .75em/1 system-ui, sans-serif; vertical-align: super; }
.flag {
  font: 600 .8em/1 system-ui, -apple-system, "Segoe UI", sans-serif;
  border-radius: .25em;
  padding: .05em .3em;
}
.flag-weak { color: var(--weak); background: var(--weak-bg); }
.flag-unsupported { color: var(--bad); background: var(--bad-bg); }
.flag-supported { color: var(--ok); }
a.cite .flag { margin-left: .15em; }
.cite-run { white-space: nowrap; }
.passage {
  display: none; white-space: normal; text-align: left;
  background: #fff; color: var(--ink); border: 1px solid var(--rule); border-left: 4px solid var(--ok);
  padding: .6rem .8rem; font: .875rem/1.5 system-ui, -apple-system, "Segoe UI", sans-serif;
}
a.cite:hover + .passage, a.cite:focus + .passage, .passage:hover {
  display: block; position: absolute; left: 0; right: 0; z-index: 10; margin-top: .25rem;
  box-shadow: 0 6px 24px rgba(0, 0, 0, .15);
}
/* Clicked or tapped (the citation links to it): in the flow under its line, where the
   browser scrolls it into view, covering no text. More specific than the hover rule, so
   that a pointer over it does not lift it out of the flow. */
a.cite + span.passage:target {
  display: block; position: static; margin: .4rem 0 .6rem; box-shadow: none; scroll-margin: 4rem 0 1rem;
}
.passage-ref { display: block; margin-top: .35rem; font-weight: 600; }
.passage-weak { border-left-color: var(--weak) !important; }
.passage-unsupported { border-left-color: var(--bad) !important; }
.passage-head { display: block; font-weight: 600; margin-bottom: .25rem; }
.passage-text { display: block; font-style: italic; }
.passage-note { display: block; color: var(--bad); margin-top: .25rem; }
.references-section { margin-top: 3rem; border-top: 1px solid var(--rule); padding-top: 1rem; }
.references-section h2 { font-size: 1.25rem; }
ol.references { padding-left: 1.75rem; font-size: .9375rem; line-height: 1.5; }
ol.references > li { margin: 0 0 .9rem; padding: .15rem .3rem; scroll-margin-top: 1rem; }
ol.references > li:target { background: #eef4fc; outline: 2px solid #c4d8f2; }
.ref-url { word-break: break-all; font-size: .875em; }
.ref-fetched, .ref-site, .ref-label, .ref-doi { color: var(--muted); }
.ref-label { color: var(--ink); }
.ref-archived { font: .8125rem system-ui, sans-serif; margin-left: .3rem; white-space: nowrap; }
.ref-passages { margin-top: .35rem; font: .8125rem/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; }
.ref-passages summary { cursor: pointer; color: var(--muted); }
.ref-passages ul { list-style: none; padding: 0; margin: .35rem 0 0; }
.ref-passages li { border-left: 3px solid var(--ok); padding: .2rem .6rem; margin: 0 0 .5rem; }
.ref-passages li.verdict-weak { border-left-color: var(--weak); }
.ref-passages li.verdict-unsupported { border-left-color: var(--bad); }
.ref-passages .claim { display: block; }
footer.export-foot { margin-top: 3rem; color: var(--muted); font: .8125rem/1.5 system-ui, sans-serif; }
@media (max-width: 600px) {
  body { font-size: 1rem; }
  main { padding: 1.25rem 1rem 3rem; }
  header.article-head h1 { font-size: 1.6rem; }
  .pensieve-article h2 { font-size: 1.3rem; }
  ol.references { padding-left: 1.4rem; }
}
@media print {
  @page { margin: 2cm 2cm 2.2cm; }
  body { background: #fff; color: #000; font-size: 11pt; line-height: 1.45; }
  main { max-width: none; padding: 0; }
  a, .pensieve-article a, .references a { color: #000; text-decoration: none; }
  a.cite { color: #000; }
  .passage, a.cite:hover + .passage, a.cite:focus + .passage { display: none !important; }
  .pensieve-article a[href^="http"]::after { content: " (" attr(href) ")"; font-size: .85em; word-break: break-all; }
  .ref-archived, .ref-passages summary { display: none; }
  .ref-passages { display: none; }
  .flag { border: 1px solid #000; background: none !important; color: #000 !important; }
  .pensieve-article h1, .pensieve-article h2, .pensieve-article h3 { break-after: avoid; page-break-after: avoid; }
  .pensieve-article p, ol.references > li { orphans: 3; widows: 3; }
  ol.references > li { break-inside: avoid; page-break-inside: avoid; }
  .pensieve-article pre, .pensieve-article table { break-inside: avoid; }
  .notice { border: 1px solid #000; background: none; }
}
""".strip()
