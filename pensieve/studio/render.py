"""Markdown from models and web pages, rendered as data: no raw HTML, only http(s),
mailto and relative links, citations turned into links that reveal their passage.

The article renderer of the HTML export (pensieve.publish.render) is used for the Read
page where it exists; this module is the studio's own for every other artifact.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from markdown_it import MarkdownIt

    from pensieve.workspace import Project

_SAFE_SCHEMES = {"http", "https", "mailto"}


def safe_url(url: str) -> bool:
    """http(s)/mailto or a relative link; never javascript:, data:, vbscript: or the like."""
    cleaned = re.sub(r"[\x00-\x20\x7f]", "", html.unescape(url)).lower()
    scheme = urlsplit(cleaned).scheme if ":" in cleaned.split("/", 1)[0] else ""
    return scheme in _SAFE_SCHEMES if scheme else not cleaned.startswith("//") and "\\" not in cleaned


@lru_cache(maxsize=1)
def _markdown() -> MarkdownIt:
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable(["table", "strikethrough"])
    md.disable("image")  # no outside images (the CSP would block them anyway)
    md.validateLink = safe_url  # type: ignore[method-assign]

    def link_open(tokens: Any, idx: int, options: Any, env: Any) -> str:
        token = tokens[idx]
        href = token.attrGet("href") or ""
        if href and not href.startswith("#"):
            token.attrSet("rel", "noopener noreferrer nofollow")
        renderer: Any = md.renderer
        return str(renderer.renderToken(tokens, idx, options, env))

    md.add_render_rule("link_open", link_open)
    return md


def render_markdown(text: str) -> str:
    """Safe HTML for any artifact."""
    return str(_markdown().render(text))


_CITE = re.compile(r"\[((?:S?\d+)(?:\s*[,;]\s*S?\d+)*)\]")
_TAG = re.compile(r"(<[^>]*>)")
_SID = re.compile(r"^S\d{1,6}$")
_REF_LINE = re.compile(r"^\s*(?:(\d+)\.|-\s*\[(S\d+)\])\s+(.*?)\s+-\s+(\S+)\s*$")


@dataclass
class Article:
    title: str
    body_html: str
    references_html: str
    warnings: list[str] = field(default_factory=list)
    css: str = ""


def render_article(project: Project, name: str = "final.md") -> Article:
    """The Read page: the article with citation links, passages, and the reference list."""
    from pensieve.source_archive import list_sources, normalize_url
    from pensieve.studio.projects import evidence_for, read_artifact

    text = read_artifact(project, name)["text"]
    body, _, refs_text = text.partition("\n## References")
    sources = list_sources(project.dir)
    by_url: dict[str, str] = {}
    for source in sources:
        for url in (source.url, source.final_url, *source.also):
            by_url.setdefault(normalize_url(url), source.id)
    number_to_source: dict[str, str] = {}
    for line in refs_text.splitlines():
        match = _REF_LINE.match(line)
        if match:
            key = match.group(1) or match.group(2)
            sid = by_url.get(normalize_url(match.group(4))) or (match.group(2) or "")
            if sid:
                number_to_source[key] = sid
    warnings: list[str] = []
    entry, current = evidence_for(project, name)
    queue: list[tuple[dict[str, Any], dict[str, Any]]] = []
    if entry and not current:
        warnings.append(f"evidence is stale for {name}: the file changed since it was checked (pensieve evidence)")
    elif not entry:
        warnings.append(f"no claim-level evidence for {name} yet (pensieve evidence {project.id})")
    else:
        for sentence in entry.get("sentences") or []:
            for cite in sentence.get("citations") or [] if isinstance(sentence, dict) else []:
                if isinstance(cite, dict):
                    queue.append((sentence, cite))
    title = next((ln[2:].strip() for ln in body.splitlines() if ln.startswith("# ")), project.id)
    rendered = render_markdown(body)
    counter = 0
    cursor = 0

    def passage_for(sid: str) -> tuple[str, str]:
        nonlocal cursor
        for i in range(cursor, len(queue)):
            if queue[i][1].get("source") == sid:
                cursor = i + 1
                return _passage_html(queue[i][0], queue[i][1])
        for sentence, cite in queue:  # out of order: the best-known passage for the source
            if cite.get("source") == sid:
                return _passage_html(sentence, cite)
        return "unknown", ""

    def decorate(match: re.Match[str]) -> str:
        nonlocal counter
        parts = re.split(r"\s*[,;]\s*", match.group(1))
        links = []
        for part in parts:
            sid = part if part.startswith("S") else number_to_source.get(part, "")
            label = part
            if not _SID.match(sid):
                links.append(html.escape(label))
                continue
            counter += 1
            verdict, passage = passage_for(sid) if queue else ("unknown", "")
            links.append(
                f'<a class="cite" href="#ref-{sid}" data-source="{sid}" data-verdict="{verdict}" '
                f'data-passage="p-{counter}">{html.escape(label)}</a>'
                f'<span class="passage verdict-{verdict}" id="p-{counter}" hidden>{passage}</span>'
            )
        return "[" + ", ".join(links) + "]"

    pieces = _TAG.split(rendered)
    inside_code = 0
    for i, piece in enumerate(pieces):
        if piece.startswith("<"):
            if re.match(r"<(code|pre|a)\b", piece):
                inside_code += 1
            elif re.match(r"</(code|pre|a)>", piece):
                inside_code = max(0, inside_code - 1)
            continue
        if not inside_code:
            pieces[i] = _CITE.sub(decorate, piece)
    cited = set(number_to_source.values())
    return Article(title, "".join(pieces), _references(project.id, sources, cited, number_to_source), warnings)


def _passage_html(sentence: dict[str, Any], cite: dict[str, Any]) -> tuple[str, str]:
    verdict = str(cite.get("verdict") or "unknown")
    if verdict not in ("supported", "weak", "unsupported"):
        verdict = "unknown"
    passage = cite.get("passage") if isinstance(cite.get("passage"), dict) else None
    parts = [f'<strong class="verdict">{html.escape(verdict)}</strong>']
    score = cite.get("score")
    if isinstance(score, int | float):
        parts.append(f' <span class="score">score {score:.2f}</span>')
    if passage and passage.get("text"):
        parts.append(f'<q class="passage-text">{html.escape(str(passage["text"]))}</q>')
    else:
        parts.append('<em class="no-passage">no supporting passage found in the source</em>')
    findings = [str(f) for f in sentence.get("findings") or [] if f]
    missing = [str(m) for m in cite.get("missing") or [] if m]
    if missing:
        findings.append("not in the passage: " + ", ".join(missing))
    judge = cite.get("judge")
    if isinstance(judge, dict) and judge.get("reason"):
        findings.append(f"judge: {judge.get('answer', '')}: {judge.get('reason')}")
    if findings:
        parts.append("<span class='findings'>" + html.escape("; ".join(findings)) + "</span>")
    return verdict, "".join(parts)


def _references(project_id: str, sources: list[Any], cited: set[str], numbers: dict[str, str]) -> str:
    order = {sid: n for n, sid in numbers.items()}
    shown = [s for s in sources if s.id in cited] or sources
    shown.sort(key=lambda s: (int(order[s.id]) if s.id in order and order[s.id].isdigit() else 10**6, s.number))
    items = []
    for s in shown:
        if not _SID.match(s.id):
            continue
        live = (
            f'<a href="{html.escape(s.final_url)}" rel="noopener noreferrer nofollow">{html.escape(s.final_url)}</a>'
            if safe_url(s.final_url) and urlsplit(s.final_url).scheme in ("http", "https")
            else html.escape(s.final_url)
        )
        label = order.get(s.id, s.id)
        items.append(
            f'<li id="ref-{s.id}"><span class="ref-label">{html.escape(label)}.</span> '
            f'<span class="ref-title">{html.escape(s.title or "(untitled)")}</span> '
            f'<span class="ref-meta">fetched {html.escape(s.fetched_at[:10])}</span> '
            f"{live} "
            f'<a class="archived" href="/projects/{project_id}/sources/{s.id}">archived copy</a></li>'
        )
    return '<ol class="references">' + "".join(items) + "</ol>" if items else ""
