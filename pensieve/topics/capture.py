"""Turn a finished project into a topic file, so the workspace's next article can find it.

No model call: the title and summary come from the project's topic_brief.md (its `# `
title and `## Angle`), the key facts and source URLs from research_notes.md (its bullet
points per section, and the URLs it names or cites). Capturing the same project again
updates its topic file; a different topic that happens to have the same slug is never
replaced.

A topic file is read by later projects as a channel the agent did not write (fetch_url
may fetch its URLs, fetch.url_policy), while the notes are the agent's own words: so the
only URLs a captured topic keeps are those of the project's archived sources. Any other
URL (one a page told the model to write, carrying the brief out in its query) is cut to
its host.
"""

from __future__ import annotations

import asyncio
import os
import re
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from pensieve.article.citations import CANONICAL_GROUP, normalize_citations
from pensieve.article.words import shorten
from pensieve.citations.references import source_title, source_url
from pensieve.errors import PensieveError, UsageError
from pensieve.project.source_archive import normalize_url
from pensieve.project.workspace import Project, atomic_write_text, read_file_nofollow
from pensieve.stages import Artifact
from pensieve.topics.chunking import HEADING
from pensieve.topics.library import (
    MAX_TOPIC_BYTES,
    TopicFormatError,
    parse_topic,
    render_topic,
    topic_path,
    topic_slug,
)
from pensieve.untrusted import sanitize
from pensieve.web.url_policy import replace_urls, urls_in_text

if TYPE_CHECKING:
    from pensieve.citations.cited_sources import CitedSource
    from pensieve.config import Settings
    from pensieve.project.events import EventSink

BRIEF = Artifact.TOPIC_BRIEF
NOTES = Artifact.RESEARCH_NOTES
MAX_FACTS = 60
MAX_FACT_CHARS = 600
MAX_SOURCES = 50
MAX_SUMMARY_CHARS = 500
# Sections of the research notes that are not findings.
_NOT_FACTS = {"sources", "open questions", "references"}
_TITLE_PREFIXES = re.compile(r"^(topic brief|research notes)\s*[:\-–—]\s*", re.IGNORECASE)
_BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(.*\S)\s*$")


@dataclass(frozen=True)
class Captured:
    slug: str
    path: Path
    updated_existing: bool


def _read(project: Project, name: str) -> str:
    path = project.file(name)
    if not path.is_file():
        raise UsageError(
            f"project {project.id} has no {name} yet; run it (`pensieve run {project.id}`) before capturing it"
        )
    return sanitize(path.read_text(encoding="utf-8", errors="replace"), collapse_whitespace=False)


def _sections(text: str) -> tuple[str, list[tuple[str, list[str]]]]:
    """The `# ` title, and (heading, lines) for every other section."""
    title = ""
    sections: list[tuple[str, list[str]]] = [("", [])]
    for line in text.splitlines():
        heading = HEADING.match(line)
        if heading and len(heading.group(1)) == 1 and not title:
            title = heading.group(2)
        elif heading:
            sections.append((heading.group(2), []))
        else:
            sections[-1][1].append(line)
    return title, sections


def _first_paragraph(lines: list[str]) -> str:
    paragraph: list[str] = []
    for line in lines:
        if line.strip():
            paragraph.append(line.strip())
        elif paragraph:
            break
    return " ".join(paragraph)


_MAX_LINK_TITLE = 120


def _link(source: CitedSource) -> str:
    url = source_url(source)
    title = sanitize(source_title(source))
    if not title or title == "(untitled)":
        title = re.sub(r"^https?://(?:www\.)?", "", url).split("/", 1)[0] or "source"
    title = shorten(title, _MAX_LINK_TITLE).replace("[", "(").replace("]", ")")
    # Markdown link targets end at ")" or whitespace: escape them.
    target = url.replace(" ", "%20").replace("(", "%28").replace(")", "%29").replace("<", "%3C").replace(">", "%3E")
    return f"[{title}]({target})"


def cite_by_title(text: str, sources: dict[str, CitedSource]) -> str:
    """`[S3]` becomes `([Title](https://...))`: source ids belong to one project, a topic
    file outlives it. Ids not in the archive are dropped, so no bare `[S3]` is left."""

    def replace(match: re.Match[str]) -> str:
        links = [_link(sources[sid]) for sid in match.group(2).split(", ") if sid in sources]
        if not links:
            return ""
        space = match.group(1) or (" " if match.start() and not text[match.start() - 1].isspace() else "")
        return f"{space}({'; '.join(links)})"

    text = normalize_citations(text)
    return CANONICAL_GROUP.sub(replace, text)


def _without_citations(text: str) -> str:
    return CANONICAL_GROUP.sub("", normalize_citations(text))


def brief_title_and_summary(brief: str, fallback_title: str) -> tuple[str, str]:
    title, sections = _sections(brief)
    title = _TITLE_PREFIXES.sub("", title).strip() or fallback_title
    angle = next((lines for heading, lines in sections if heading.strip().lower().startswith("angle")), None)
    summary = _first_paragraph(angle) if angle else ""
    if not summary:
        summary = next((p for _, lines in sections if (p := _first_paragraph(lines))), "")
    return shorten(title, 200), shorten(summary, MAX_SUMMARY_CHARS)


def notes_facts(notes: str) -> list[tuple[str, list[str]]]:
    """Bullet points per findings section, at most MAX_FACTS in all."""
    _, sections = _sections(notes)
    facts: list[tuple[str, list[str]]] = []
    total = 0
    for heading, lines in sections:
        if heading.strip().lower() in _NOT_FACTS:
            continue
        bullets = [shorten(m.group(1), MAX_FACT_CHARS) for line in lines if (m := _BULLET.match(line))]
        bullets = bullets[: MAX_FACTS - total]
        if bullets:
            facts.append((heading, bullets))
            total += len(bullets)
    return facts


def notes_open_questions(notes: str) -> list[str]:
    _, sections = _sections(notes)
    for heading, lines in sections:
        if heading.strip().lower() == "open questions":
            return [shorten(m.group(1), MAX_FACT_CHARS) for line in lines if (m := _BULLET.match(line))][:20]
    return []


def _key(url: str) -> str:
    try:
        return normalize_url(url).rstrip("/")
    except ValueError:
        return ""


def archived_urls(sources: dict[str, CitedSource]) -> set[str]:
    """Every archived source's URLs (as asked for, after redirects), normalised."""
    keys = {_key(url) for source in sources.values() for url in (source.url, source.final_url, *source.also)}
    return keys - {""}


def source_urls(text: str, sources: dict[str, CitedSource]) -> list[str]:
    """The archived sources the notes name by URL or cite by id, in order of mention."""
    archived = archived_urls(sources)
    seen: dict[str, None] = {}
    for url in urls_in_text(text):
        if _key(url) in archived:
            seen.setdefault(url, None)
    for match in CANONICAL_GROUP.finditer(text):
        for sid in match.group(2).split(", "):
            if sid in sources and source_url(sources[sid]).startswith(("http://", "https://")):
                seen.setdefault(source_url(sources[sid]), None)
    return list(seen)[:MAX_SOURCES]


def only_archived_links(text: str, archived: set[str]) -> str:
    """Every URL in text that is not an archived source's, cut to its host. URLs are found
    as fetch_url's policy reads a topic file (urls_in_text), so none is missed."""

    def keep_or_cut(url: str) -> str:
        if _key(url) in archived:
            return url
        try:
            host = urlsplit(url).hostname or "a site"
        except ValueError:
            host = "a site"
        return f"{host} (link not kept: not a fetched source)"

    return replace_urls(text, keep_or_cut)


def _captured_from(path: Path) -> str | None:
    try:
        text = read_file_nofollow(path, MAX_TOPIC_BYTES + 1).decode("utf-8", errors="replace")
        topic = parse_topic(path.stem, text)
    except (OSError, TopicFormatError):
        return None
    value = topic.extra.get("project")
    return value if isinstance(value, str) else None


def _write_topic(project: Project, title: str, text: str) -> tuple[str, Path, bool]:
    """Write the project's topic file: its own earlier capture is updated, a file of another
    topic never replaced (the next free slug is taken). A new file is created, not replaced,
    so of concurrent captures with one title each gets its own file."""
    base = topic_slug(title)
    n = 1
    while n < 100:
        slug = base if n == 1 else f"{base}-{n}"
        path = topic_path(project.workspace, slug)
        if _captured_from(path) == project.id:
            atomic_write_text(path, text)
            return slug, path, True
        if not os.path.lexists(path):
            try:
                atomic_write_text(path, text, replace=False)
                return slug, path, False
            except FileExistsError:
                continue  # another capture took the slug just now: look at what it wrote
        n += 1
    raise UsageError(f"too many topics named {base!r}; rename some in {project.workspace.topics_dir}")


def _require_complete(project: Project) -> None:
    """Only a finished article feeds topic memory: a failed or unfinished one may hold junk."""
    from pensieve.project.status import load_status

    state = load_status(project.status_path, keep_copy=False).status
    if state != "complete":
        raise UsageError(
            f"project {project.id} is {state}, not complete; only finished projects are captured "
            f"(see `pensieve status {project.id}`, then `pensieve run {project.id}`)"
        )


def capture_project(project: Project, today: date | None = None) -> Captured:
    """Write (or update) the topic file for a complete project from its brief and research notes."""
    from pensieve.citations.cited_sources import load_sources

    _require_complete(project)
    sources = load_sources(project.dir)
    archived = archived_urls(sources)
    brief = only_archived_links(_read(project, BRIEF), archived)
    notes = normalize_citations(only_archived_links(_read(project, NOTES), archived))
    title, summary = brief_title_and_summary(brief, fallback_title=project.id)
    title, summary = _without_citations(title).strip() or project.id, _without_citations(summary).strip()
    day = (today or date.today()).isoformat()
    parts = [f"Captured from project `{project.id}` on {day}."]
    if summary:
        parts.append(f"## Angle\n\n{summary}")
    facts = notes_facts(notes)
    if facts:
        lines = ["## Key facts"]
        for heading, bullets in facts:
            lines.append(f"\n### {heading}\n" if heading else "")
            lines.extend(f"- {bullet}" for bullet in bullets)
        parts.append("\n".join(lines))
    if questions := notes_open_questions(notes):
        parts.append("## Open questions\n\n" + "\n".join(f"- {q}" for q in questions))
    text = render_topic(
        title,
        cite_by_title("\n\n".join(parts), sources),
        summary=summary,
        sources=source_urls(notes, sources),
        updated=day,
        extra={"project": project.id},
    )
    return Captured(*_write_topic(project, title, text))


async def capture_on_complete(project: Project, settings: Settings, events: EventSink | None = None) -> None:
    """The pipeline's completion hook: capture unless `topics.capture: false`.

    A capture that fails is reported on the run's event stream (else events.jsonl), never
    fatal: the article itself is finished.
    """
    from pensieve.project.events import EventKind, EventLog

    if not settings.topics.capture:
        return
    events = events or EventLog(project.events_path)
    try:
        captured = await asyncio.to_thread(capture_project, project)
    except (PensieveError, OSError) as exc:
        events.emit(EventKind.TOPIC_CAPTURE_FAILED, None, error=str(exc))
        return
    events.emit(EventKind.TOPIC_CAPTURED, None, slug=captured.slug, path=str(captured.path))
