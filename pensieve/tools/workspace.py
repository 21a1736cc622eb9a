"""list_projects: the other articles of this workspace, for cross-article consistency.

Each row is the spec's `{id, brief, status}`; a complete project also has the `title` and
a `summary` (the opening of its `final.md`, as `pensieve.article.summary` reads it), so the
Consistency Checker has the earlier articles' claims in front of it, not just what their
briefs asked for. Everything in a row was written by a user or a model: it is sanitised and
capped like any untrusted text.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pensieve.article.summary import document_title, opening_paragraph
from pensieve.project.status_view import PROJECT_STATES
from pensieve.project.workspace import read_file_nofollow
from pensieve.stages import Artifact
from pensieve.tools.registry import ToolContext, tool
from pensieve.untrusted import sanitize

FINAL_FILE = Artifact.FINAL
_HEAD_BYTES = 64_000  # the title and opening paragraph are near the top of the file


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
