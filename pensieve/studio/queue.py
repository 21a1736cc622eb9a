"""The studio's queue view (`/queue`, `GET /api/queue`): what `pensieve queue --json` shows.

Read in this process by the CLI's own reader (`batch_queue.read_queue`: the workers table
and a DBOS client, which never migrates the database nor runs a workflow) and shaped by the
CLI's own `batch_queue.queue_json`. Nothing is started, enqueued or changed. DBOS and
SQLAlchemy are imported on the first request of the view, never when the studio starts.
"""

from __future__ import annotations

import time
from typing import Any

from pensieve.project.workspace import Workspace


def queue_view(workspace: Workspace) -> dict[str, Any]:
    """{"workspace", "queue": the object of `pensieve queue --json`, or None when the workspace
    has no queue database yet, "worker_timeout_s"}."""
    from pensieve.batch.queue import queue_json, queue_url, read_queue, sqlite_path
    from pensieve.config import load_settings

    settings = load_settings()
    url = queue_url(settings, workspace)
    path = sqlite_path(url)
    view: dict[str, Any] = {
        "workspace": workspace.name,
        "queue": None,
        "worker_timeout_s": settings.queue.worker_timeout_s,
    }
    if path is not None and not path.is_file():
        return view  # no `pensieve batch` or `pensieve worker` ever ran here
    entries, workers = read_queue(workspace, url)
    view["queue"] = queue_json(entries, workers)
    return view


def worker_rows(view: dict[str, Any], now: float | None = None) -> list[dict[str, Any]]:
    """The view's workers for the page: each with the age of its heartbeat and whether that
    age is past queue.worker_timeout_s (a worker the others will soon treat as dead)."""
    now = time.time() if now is None else now
    rows = []
    for w in (view["queue"] or {}).get("workers", []):
        age = max(0.0, now - float(w["heartbeat_at"]))
        rows.append({**w, "age_s": age, "late": age > float(view["worker_timeout_s"])})
    return rows
