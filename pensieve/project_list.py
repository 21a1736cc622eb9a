"""The workspace's projects: creating one, and the rows of `list`, `status` and list_projects.

Nothing here waits for a run lock: a project being run is read as it stands.

A row comes from the project's validated status.json and its brief. Validating thousands of
status files is most of what `list` costs, so the rows are kept in the workspace's
`.list-cache.json`, each under its files' identity (inode, size, modification time in ns):
a row is reused only while both files are the very files it was read from (every write
is an atomic replace, so a new inode). Whether a `running` project's process is alive is
never cached: it is asked every time.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from pensieve.errors import CorruptState, UsageError
from pensieve.workspace import (
    BRIEF_FILE,
    LOCK_FILE,
    MAX_BRIEF_BYTES,
    STATUS_FILE,
    Project,
    Workspace,
    atomic_write_text,
    create_project,
    valid_name,
)

if TYPE_CHECKING:
    from pensieve.status import Status

LIST_CACHE = ".list-cache.json"
_CACHE_VERSION = 1


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
    from pensieve.status import Status

    text = validate_brief(brief)
    return create_project(workspace, text, project_id, lambda pid: Status.new(pid, workspace.name).to_json())


def lock_holder(project: Project) -> int | None:
    """The pid in the project's lock file if that process is alive (no locking, no waiting)."""
    return _live_pid_in(os.path.join(project.dir, LOCK_FILE))


def _live_pid_in(lock_path: str) -> int | None:
    try:
        with open(lock_path, "rb") as handle:
            raw = handle.read().decode("ascii", errors="replace").strip()
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


def effective_status(project: Project, status: Status | str) -> str:
    """A project left `running` by a process that died is shown as `paused` (resumable)."""
    state = status if isinstance(status, str) else status.status
    if state == "running" and lock_holder(project) is None:
        return "paused"
    return state


@dataclass(frozen=True)
class ProjectRow:
    id: str
    status: str
    current_stage: str | None
    updated_at: str | None
    brief: str
    has_brief: bool
    problems: int = 0  # citation problems found by the last check

    @property
    def brief_line(self) -> str:
        return next((line.strip() for line in self.brief.splitlines() if line.strip()), "")


_ROW_FIELDS = tuple(field.name for field in fields(ProjectRow))


def summarize(project: Project) -> ProjectRow | None:
    if not project.status_path.is_file():
        return None
    return _with_live_status(_read_row(project), os.path.join(project.dir, LOCK_FILE))


def _read_row(project: Project) -> ProjectRow:
    """The row as the files say, before asking whether a `running` project's process lives."""
    from pensieve.status import load_status

    has_brief = (project.dir / BRIEF_FILE).is_file()
    brief = project.read_brief()
    try:
        status = load_status(project.status_path, keep_copy=False)
    except CorruptState:
        return ProjectRow(project.id, "unreadable", None, None, brief, has_brief)
    current = status.current_stage or status.first_unfinished()
    return ProjectRow(project.id, status.status, current, status.updated_at, brief, has_brief, len(status.problems))


def _with_live_status(row: ProjectRow, lock_path: str) -> ProjectRow:
    """A row left `running` by a process that died reads `paused` (see effective_status)."""
    if row.status != "running" or _live_pid_in(lock_path) is not None:
        return row
    return ProjectRow(row.id, "paused", row.current_stage, row.updated_at, row.brief, row.has_brief, row.problems)


def _identity(path: str) -> list[int] | None:
    """What tells this file from any other (None if it is not a regular file)."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(found.st_mode):
        return None
    return [found.st_ino, found.st_size, found.st_mtime_ns, found.st_ctime_ns]


def _load_cache(workspace: Workspace) -> dict[str, Any]:
    try:
        data = json.loads((workspace.root / LIST_CACHE).read_bytes())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("version") != _CACHE_VERSION or not isinstance(data.get("rows"), dict):
        return {}
    rows: dict[str, Any] = data["rows"]
    return rows


def _cached_row(entry: object, key: list[list[int] | None]) -> ProjectRow | None:
    if not isinstance(entry, dict) or entry.get("key") != key:
        return None
    try:
        return ProjectRow(**entry["row"])
    except (TypeError, KeyError):
        return None


def summarize_projects(workspace: Workspace) -> list[ProjectRow]:
    """Every project's row, sorted by id; rows of unchanged files come from the cache."""
    projects_dir = str(workspace.projects_dir)
    try:
        names = sorted(
            entry.name
            for entry in os.scandir(projects_dir)
            if not entry.name.startswith(".") and valid_name(entry.name) and entry.is_dir()
        )
    except (FileNotFoundError, NotADirectoryError):
        return []
    cached = _load_cache(workspace)
    fresh: dict[str, Any] = {}
    changed = False
    rows = []
    for name in names:
        base = os.path.join(projects_dir, name)
        status_id = _identity(os.path.join(base, STATUS_FILE))
        if status_id is None:
            continue
        key = [status_id, _identity(os.path.join(base, BRIEF_FILE))]
        entry = cached.get(name)
        row = _cached_row(entry, key)
        if row is None:
            row = _read_row(workspace.project(name))
            # An unreadable file is cached too: reading the same bytes again says the same.
            entry = {"key": key, "row": {field: getattr(row, field) for field in _ROW_FIELDS}}
            changed = True
        fresh[name] = entry
        rows.append(_with_live_status(row, os.path.join(base, LOCK_FILE)))
    if changed or len(fresh) != len(cached):
        with contextlib.suppress(OSError):  # a read-only workspace is listed all the same
            text = json.dumps({"version": _CACHE_VERSION, "rows": fresh}, ensure_ascii=False, separators=(",", ":"))
            atomic_write_text(workspace.root / LIST_CACHE, text)
    return rows
