"""list_projects: the other articles of this workspace, for cross-article consistency.

Each row is the spec's `{id, brief, status}`; a complete project also has the `title` and
a `summary` (the opening of its `final.md`), so the Consistency Checker has the earlier
articles' claims in front of it, not just what their briefs asked for. Everything in a row
was written by a user or a model: it is sanitised and capped like any untrusted text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pensieve.citations.text import shorten
from pensieve.project.status_view import PROJECT_STATES
from pensieve.project.workspace import read_file_nofollow
from pensieve.stages import Artifact
from pensieve.tools.registry import ToolContext, tool
from pensieve.untrusted import sanitize

FINAL_FILE = Artifact.FINAL
TITLE_CHARS = 200
SUMMARY_CHARS = 300
_HEAD_BYTES = 64_000  # the title and opening paragraph are near the top of the file

_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
# Emphasis and code marks; an underscore only at a word's edge (`_x_`), never inside a name:
# "try_trait_v2" stayed "trytraitv2" in every stage's task (seen by hand).
_EMPHASIS = re.compile(r"[*`]+|(?<!\w)_+|_+(?!\w)")
# [1], [1, 2], [1-3], [S3], [S1; S2]: reader-facing citation marks, noise in a summary.
_CITATION = re.compile(r"\s*\[(?:S?\d+(?:\s*[,;\u2013-]\s*S?\d+)*)\]", re.I)


def _one_line(text: str, limit: int) -> str:
    return shorten(sanitize(text), limit)


def document_title(text: str, *, first_line: bool = False) -> str:
    """The `# Title` of a markdown text; with first_line, else its first non-blank line ("" if none)."""
    fallback = ""
    for line in text.splitlines():
        match = _HEADING.match(line)
        if match and len(match.group(1)) == 1:
            return _one_line(_EMPHASIS.sub("", match.group(2)), TITLE_CHARS)
        if not fallback and line.strip() and not line.lstrip().startswith("<!--"):
            fallback = _EMPHASIS.sub("", match.group(2) if match else line)
    return _one_line(fallback, TITLE_CHARS) if first_line else ""


_PARAGRAPH_BREAK = re.compile(r"\n\s*\n")


def _paragraphs(text: str) -> Iterator[str]:
    """The text's blocks between blank lines, found one at a time: the first prose paragraph
    is near the top, and splitting a whole article for it cost list_projects a tenth of a
    second over 10,000 projects."""
    start = 0
    for match in _PARAGRAPH_BREAK.finditer(text):
        yield text[start : match.start()]
        start = match.end()
    yield text[start:]


def opening_paragraph(text: str, limit: int = SUMMARY_CHARS) -> str:
    """The first prose paragraph of an article (headings, tables, code and comments skipped)."""
    for block in _paragraphs(text):
        block = block.strip()
        if not block or block.startswith(("#", "|", "```", "~~~", "<!--", "---", "***")):
            continue
        return _one_line(_CITATION.sub("", _EMPHASIS.sub("", block)), limit)
    return ""


def _head(path: Path) -> str:
    try:
        # Not through a link: another project's final.md may have been planted as one.
        return read_file_nofollow(path, _HEAD_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return ""


def project_summaries(ctx: ToolContext) -> list[dict[str, Any]]:
    from pensieve.project.listing import summarize_projects

    rows: list[dict[str, Any]] = []
    for row in summarize_projects(ctx.project.workspace):
        if not row.has_brief or row.status not in PROJECT_STATES:
            continue
        item: dict[str, Any] = {"id": row.id, "brief": sanitize(row.brief)[:2000], "status": row.status}
        if row.status == "complete":
            final = _head(ctx.project.workspace.projects_dir / row.id / FINAL_FILE)
            item["title"] = document_title(final) or document_title(row.brief, first_line=True)
            item["summary"] = opening_paragraph(final)
        rows.append(item)
    return rows


def earlier_articles(ctx: ToolContext, rows: list[dict[str, Any]] | None = None) -> dict[str, str]:
    """id -> title of the workspace's other complete projects: what list_projects shows the
    Consistency Checker it can compare against (the consistency report's contract input)."""
    return {
        str(item["id"]): str(item["title"])
        for item in (project_summaries(ctx) if rows is None else rows)
        if item["status"] == "complete" and item["id"] != ctx.project.id
    }


def shown_articles(ctx: ToolContext, snapshot: dict[str, str]) -> dict[str, str]:
    """The earlier articles the report is judged against: those list_projects showed the
    model during the stage (projects complete or gone in between included), else the ones
    complete when the stage started."""
    return dict(ctx.shown_projects) if ctx.shown_projects is not None else snapshot


@tool(canonical="workspace.list_projects", default_limit=3)
async def list_projects(ctx: ToolContext) -> list[dict[str, Any]]:
    """List every project (article) in the current workspace with its id, brief and pipeline status.

    A complete project also has its title and a summary (the opening of its article).
    Use read-only: other projects' files cannot be read, but these rows show what the
    workspace has already covered and said.
    """
    rows = project_summaries(ctx)
    # A project may complete while the stage runs: remember every answer the model got.
    ctx.shown_projects = {**(ctx.shown_projects or {}), **earlier_articles(ctx, rows)}
    return rows
