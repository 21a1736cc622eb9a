"""Turn a finished project into a topic file, so the workspace's next article can find it.

No model call: the title and summary come from the project's topic_brief.md (its `# `
title and `## Angle`), the key facts and source URLs from research_notes.md (its bullet
points per section and every http(s) URL). Capturing the same project again updates
its topic file; a different topic that happens to have the same slug is never replaced.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

from pensieve.errors import PensieveError, UsageError
from pensieve.topics.chunking import HEADING
from pensieve.topics.library import TopicFormatError, parse_topic, render_topic, topic_path, topic_slug
from pensieve.untrusted import sanitize
from pensieve.workspace import Project, atomic_write_text

if TYPE_CHECKING:
    from pensieve.config import Settings

BRIEF = "topic_brief.md"
NOTES = "research_notes.md"
MAX_FACTS = 60
MAX_FACT_CHARS = 600
MAX_SOURCES = 50
MAX_SUMMARY_CHARS = 500
# Sections of the research notes that are not findings.
_NOT_FACTS = {"sources", "open questions", "references"}
_TITLE_PREFIXES = re.compile(r"^(topic brief|research notes)\s*[:\-–—]\s*", re.IGNORECASE)
_BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(.*\S)\s*$")
_URL = re.compile(r"https?://[^\s<>()\[\]\"'`]+")


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


def _shorten(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit].rsplit(" ", 1)[0] + " …"


def brief_title_and_summary(brief: str, fallback_title: str) -> tuple[str, str]:
    title, sections = _sections(brief)
    title = _TITLE_PREFIXES.sub("", title).strip() or fallback_title
    angle = next((lines for heading, lines in sections if heading.strip().lower().startswith("angle")), None)
    summary = _first_paragraph(angle) if angle else ""
    if not summary:
        summary = next((p for _, lines in sections if (p := _first_paragraph(lines))), "")
    return _shorten(title, 200), _shorten(summary, MAX_SUMMARY_CHARS)


def notes_facts(notes: str) -> list[tuple[str, list[str]]]:
    """Bullet points per findings section, at most MAX_FACTS in all."""
    _, sections = _sections(notes)
    facts: list[tuple[str, list[str]]] = []
    total = 0
    for heading, lines in sections:
        if heading.strip().lower() in _NOT_FACTS:
            continue
        bullets = [_shorten(m.group(1), MAX_FACT_CHARS) for line in lines if (m := _BULLET.match(line))]
        bullets = bullets[: MAX_FACTS - total]
        if bullets:
            facts.append((heading, bullets))
            total += len(bullets)
    return facts


def notes_open_questions(notes: str) -> list[str]:
    _, sections = _sections(notes)
    for heading, lines in sections:
        if heading.strip().lower() == "open questions":
            return [_shorten(m.group(1), MAX_FACT_CHARS) for line in lines if (m := _BULLET.match(line))][:20]
    return []


def source_urls(text: str) -> list[str]:
    seen: dict[str, None] = {}
    for match in _URL.finditer(text):
        url = match.group(0).rstrip(".,;:!?*_")
        seen.setdefault(url, None)
        if len(seen) >= MAX_SOURCES:
            break
    return list(seen)


def _captured_from(path: Path) -> str | None:
    try:
        topic = parse_topic(path.stem, path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, TopicFormatError):
        return None
    value = topic.extra.get("project")
    return value if isinstance(value, str) else None


def _choose_path(project: Project, title: str) -> tuple[str, Path, bool]:
    base = topic_slug(title)
    for n in range(1, 100):
        slug = base if n == 1 else f"{base}-{n}"
        path = topic_path(project.workspace, slug)
        if not path.exists():
            return slug, path, False
        if _captured_from(path) == project.id:
            return slug, path, True
    raise UsageError(f"too many topics named {base!r}; rename some in {project.workspace.topics_dir}")


def capture_project(project: Project, today: date | None = None) -> Captured:
    """Write (or update) the topic file for a project from its brief and research notes."""
    brief = _read(project, BRIEF)
    notes = _read(project, NOTES)
    title, summary = brief_title_and_summary(brief, fallback_title=project.id)
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
    slug, path, existed = _choose_path(project, title)
    text = render_topic(
        title,
        "\n\n".join(parts),
        summary=summary,
        sources=source_urls(notes),
        updated=day,
        extra={"project": project.id},
    )
    atomic_write_text(path, text)
    return Captured(slug, path, existed)


async def capture_on_complete(project: Project, settings: Settings) -> None:
    """The pipeline's completion hook: capture unless `topics.capture: false`.

    A capture that fails is logged, never fatal: the article itself is finished.
    """
    from pensieve.events import EventLog

    if not settings.topics.capture:
        return
    events = EventLog(project.events_path)
    try:
        captured = await asyncio.to_thread(capture_project, project)
    except (PensieveError, OSError) as exc:
        events.emit("topic_capture_failed", None, error=str(exc))
        return
    events.emit("topic_captured", None, slug=captured.slug, path=str(captured.path))
