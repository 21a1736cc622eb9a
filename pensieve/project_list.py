"""The workspace's projects: creating one, and the rows of `list`, `status` and list_projects.

Nothing here waits for a run lock: a project being run is read as it stands.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from pensieve.errors import CorruptState, UsageError
from pensieve.status import Status, load_status
from pensieve.workspace import (
    BRIEF_FILE,
    LOCK_FILE,
    MAX_BRIEF_BYTES,
    STATUS_FILE,
    Project,
    Workspace,
    create_project,
    read_file_nofollow,
)


def validate_brief(brief: str) -> str:
    if not brief.strip():
        raise UsageError("the brief is empty; say what the article should be about")
    size = len(brief.encode("utf-8"))
    if size > MAX_BRIEF_BYTES:
        raise UsageError(
            f"the brief is {size:,} bytes; the limit is {MAX_BRIEF_BYTES:,}. "
            "Put background material in a topic file instead"
        )
    return brief.strip() + "\n"


def new_project(workspace: Workspace, brief: str, project_id: str | None = None) -> Project:
    text = validate_brief(brief)
    return create_project(workspace, text, project_id, lambda pid: Status.new(pid, workspace.name).to_json())


def lock_holder(project: Project) -> int | None:
    """The pid in the project's lock file if that process is alive (no locking, no waiting)."""
    return _live_pid_in(os.path.join(project.dir, LOCK_FILE))


def _live_pid_in(lock_path: str) -> int | None:
    try:
        raw = read_file_nofollow(lock_path, 64).decode("ascii", errors="replace").strip()
    except OSError:
        return None
    if not raw.isdigit():
        return None
    pid = int(raw)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        return pid
    return pid


def effective_status(project: Project, status: Status) -> str:
    """A project left `running` by a process that died is shown as `paused` (resumable)."""
    if status.status == "running" and lock_holder(project) is None:
        return "paused"
    return status.status


@dataclass(frozen=True)
class ProjectRow:
    id: str
    status: str
    current_stage: str | None
    updated_at: str | None
    brief: str
    has_brief: bool
    problems: int = 0  # citation problems found by the last check
    # Share of the article's cited sentences its sources support, read from evidence.json
    # (never recomputed here); None: no evidence yet, no cited sentence, or stale.
    supported_share: float | None = None

    @property
    def brief_line(self) -> str:
        return next((line.strip() for line in self.brief.splitlines() if line.strip()), "")

    def to_json(self) -> dict[str, object]:
        """The object `pensieve list --json` prints (and the studio's /api/projects)."""
        return {
            "id": self.id,
            "brief": self.brief.strip(),
            "status": self.status,
            "current_stage": self.current_stage,
            "updated_at": self.updated_at,
            "problems": self.problems,
            "supported_share": self.supported_share,
        }


def summarize(project: Project) -> ProjectRow | None:
    found = summarize_with_status(project)
    return found[0] if found is not None else None


def summarize_with_status(project: Project) -> tuple[ProjectRow, Status | None] | None:
    """The project's row and the status it was read from (None when unreadable)."""
    return _summarize(project.id, str(project.dir))


def _summarize(project_id: str, directory: str) -> tuple[ProjectRow, Status | None] | None:
    # Plain strings, not Paths: over 10,000 projects pathlib's joins cost more than reading.
    status_path = os.path.join(directory, STATUS_FILE)
    brief_path = os.path.join(directory, BRIEF_FILE)
    if any(os.path.islink(path) for path in (directory, brief_path, status_path)):
        # Planted links are never followed (a sibling's brief would show as this one's).
        return ProjectRow(project_id, "unreadable", None, None, "(contains a symbolic link)", False), None
    has_brief = os.path.isfile(brief_path)
    if not os.path.isfile(status_path):
        return None
    try:
        with open(brief_path, encoding="utf-8", errors="replace") as handle:
            brief = handle.read()
    except OSError:
        brief = ""
    try:
        status = load_status(Path(status_path), keep_copy=False)
    except CorruptState:
        return ProjectRow(project_id, "unreadable", None, None, brief, has_brief), None
    current = status.current_stage or status.first_unfinished()
    state = status.status
    if state == "running" and _live_pid_in(os.path.join(directory, LOCK_FILE)) is None:
        state = "paused"  # see effective_status
    row = ProjectRow(
        project_id,
        state,
        current,
        status.updated_at,
        brief,
        has_brief,
        problems=len(status.problems),
        supported_share=_supported_share(directory),
    )
    return row, status


def _supported_share(directory: str) -> float | None:
    from pensieve.evidence.store import EVIDENCE_FILE, latest_summary

    if not os.path.isfile(os.path.join(directory, EVIDENCE_FILE)):
        return None  # the usual case at scale: nothing to read
    summary = latest_summary(Path(directory))
    return summary.supported_share if summary is not None and summary.current else None


def summarize_projects(workspace: Workspace) -> list[ProjectRow]:
    base = str(workspace.projects_dir)
    found = [_summarize(project.id, os.path.join(base, project.id)) for project in workspace.projects()]
    return [row for row, _status in (f for f in found if f is not None)]
