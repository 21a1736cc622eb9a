"""list_projects: the other articles of this workspace, for cross-article consistency."""

from __future__ import annotations

from typing import Any

from pensieve.tools.registry import ToolContext, tool
from pensieve.untrusted import sanitize

PROJECT_STATES = frozenset({"pending", "running", "paused", "complete", "error"})


def project_summaries(ctx: ToolContext) -> list[dict[str, Any]]:
    from pensieve.project_list import summarize_projects

    return [
        {"id": row.id, "brief": sanitize(row.brief)[:2000], "status": row.status}
        for row in summarize_projects(ctx.project.workspace)
        if row.has_brief and row.status in PROJECT_STATES
    ]


@tool(default_limit=5)
async def list_projects(ctx: ToolContext) -> list[dict[str, Any]]:
    """List every project (article) in the current workspace with its id, brief and pipeline status.

    Use read-only: other projects' files cannot be read, but their briefs show what the
    workspace has already covered.
    """
    return project_summaries(ctx)
