"""The workspace's projects: creating one, and the rows of `list`, `status` and list_projects.

Nothing here waits for a run lock: a project being run is read as it stands.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pensieve.errors import UsageError, has_lone_surrogate
from pensieve.project.status_view import read_status_view
from pensieve.project.workspace import (
    BRIEF_FILE,
    EVIDENCE_FILE,
    LOCK_FILE,
    MAX_BRIEF_BYTES,
    MAX_BRIEF_FILE_BYTES,
    MAX_STATUS_BYTES,
    STATUS_FILE,
    Project,
    Workspace,
    create_project,
    lock_is_held,
    read_file_nofollow,
)
from pensieve.stages import STAGE_NAMES

if TYPE_CHECKING:
    from pensieve.project.status import Status


def validate_brief(brief: str) -> str:
    if has_lone_surrogate(brief):  # from a JSON or YAML escape, or bytes that were not UTF-8
        raise UsageError(
            "the brief is not valid UTF-8 text: it holds a lone surrogate (such as an escaped \\udcff); "
            "write it as plain UTF-8 text"
        )
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
    from pensieve.project.status import Status

    text = validate_brief(brief)
    return create_project(workspace, text, project_id, lambda pid: Status.new(pid, workspace.name).to_json())


def lock_holder(project: Project) -> int | None:
    """The pid written in the project's run lock while a process holds that lock; None when
    none does, whatever pid the file still names (no locking, no waiting)."""
    return _live_pid_in(os.path.join(project.dir, LOCK_FILE))


def _live_pid_in(lock_path: str) -> int | None:
    if not lock_is_held(lock_path):
        return None
    try:
        raw = read_file_nofollow(lock_path, 64).decode("ascii", errors="replace").strip()
    except OSError:
        return None
    # Held with no pid yet (written just after the lock is taken): the holder is unknown.
    return int(raw) if raw.isdigit() else None


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
    # What the studio's projects page adds to a row.
    stages_done: int = 0
    cost_usd: float | None = None
    tokens: int = 0

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
    """The project's row; None when it has no status.json (not a project, or half made)."""
    return _summarize(project.id, str(project.dir), None)


def summarize_projects(workspace: Workspace) -> list[ProjectRow]:
    base = str(workspace.projects_dir)
    found = [_summarize(e.name, os.path.join(base, e.name), e.is_symlink()) for e in workspace.project_entries()]
    return [row for row in found if row is not None]


# A file read by _read: its bytes, absent (or not a regular file), a symbolic link, or
# larger than the bound it was read with.
_ABSENT, _LINK, _TOO_BIG = object(), object(), object()


def _read(path: str, max_size: int) -> bytes | object:
    try:
        return read_file_nofollow(path, max_size=max_size)  # the size from the fstat it makes anyway
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return _LINK
        if exc.errno == errno.EFBIG:
            return _TOO_BIG
        if exc.errno in (errno.ENOENT, errno.EINVAL, errno.ENOTDIR, errno.EISDIR):
            return _ABSENT
        raise


def _summarize(project_id: str, directory: str, is_link: bool | None) -> ProjectRow | None:
    # Plain strings and one open per file (no stat first): over 10,000 projects every
    # system call shows. status.json is read without pydantic (see status_view).
    link = ProjectRow(project_id, "unreadable", None, None, "(contains a symbolic link)", False)
    if is_link if is_link is not None else os.path.islink(directory):
        return link  # planted links are never followed (a sibling's brief would show as this one's)
    try:
        brief_raw = _read(os.path.join(directory, BRIEF_FILE), MAX_BRIEF_FILE_BYTES)
    except OSError:  # there, but not ours to read
        brief_raw = b""
    try:
        status_raw = _read(os.path.join(directory, STATUS_FILE), MAX_STATUS_BYTES)
    except OSError:
        status_raw = None
    if _LINK in (brief_raw, status_raw):
        return link
    if _TOO_BIG in (brief_raw, status_raw):
        too_big = BRIEF_FILE if brief_raw is _TOO_BIG else STATUS_FILE
        return ProjectRow(project_id, "unreadable", None, None, f"({too_big} is too large to read)", False)
    if status_raw is _ABSENT:
        return None
    has_brief = isinstance(brief_raw, bytes)
    brief = brief_raw.decode("utf-8", errors="replace") if isinstance(brief_raw, bytes) else ""
    view = read_status_view(status_raw, STAGE_NAMES) if isinstance(status_raw, bytes) else None
    if view is None:
        return ProjectRow(project_id, "unreadable", None, None, brief, has_brief)
    state = view.status
    if state == "running" and _live_pid_in(os.path.join(directory, LOCK_FILE)) is None:
        state = "paused"  # see effective_status
    return ProjectRow(
        project_id,
        state,
        view.current_stage,
        view.updated_at,
        brief,
        has_brief,
        problems=view.problems,
        supported_share=_supported_share(directory),
        stages_done=view.stages_done,
        cost_usd=view.cost_usd,
        tokens=view.tokens,
    )


def _supported_share(directory: str) -> float | None:
    if not os.path.isfile(os.path.join(directory, EVIDENCE_FILE)):
        return None  # the usual case at scale: nothing to read
    from pensieve.evidence.store import latest_summary

    summary = latest_summary(Path(directory))
    return summary.supported_share if summary is not None and summary.current else None
