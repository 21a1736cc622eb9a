"""Where things live on disk, and the only ways Pensieve writes there.

Every write is atomic (temporary file in the same directory, fsync, rename, directory
fsync), so a crash leaves each file either complete or as it was. Temporary files start
with `.tmp-` and every reader ignores them.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import shutil
import tempfile
import time
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from pensieve.errors import ProjectBusy, UsageError

TMP_PREFIX = ".tmp-"
STATUS_FILE = "status.json"
EVENTS_FILE = "events.jsonl"
LOCK_FILE = ".run.lock"
BRIEF_FILE = "brief.md"
STAGING_DIR = ".staging"
HISTORY_DIR = "history"
# An artifact that failed its contract, kept for the user to read (never deleted).
REJECTED_DIR = "rejected"
SCRATCH_DIR = "scratch"
# Files no agent may read or write through the file tools.
RESERVED = frozenset({STATUS_FILE, EVENTS_FILE, LOCK_FILE})
RESERVED_DIRS = frozenset({STAGING_DIR, HISTORY_DIR})

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,79}$")
MAX_BRIEF_BYTES = 100_000


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def _replacing(path: Path) -> Iterator[tuple[BinaryIO, str]]:
    """Write `path` through a temporary file in its directory: afterwards it is either
    complete or as it was. Yields the open temporary file and its name."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=TMP_PREFIX, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle, tmp
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    with _replacing(path) as (handle, _tmp):
        handle.write(data)


def atomic_write_text(path: Path, text: str) -> None:
    # "replace": a lone surrogate (possible in JSON from a model) must not make a write fail.
    atomic_write_bytes(path, text.encode("utf-8", errors="replace"))


def atomic_copy(src: Path, dst: Path) -> None:
    """Copy src to dst atomically (dst is complete or absent), keeping src's times."""
    with _replacing(dst) as (handle, tmp), src.open("rb") as source:
        shutil.copyfileobj(source, handle)
        handle.flush()
        shutil.copystat(src, tmp)


def remove_stale_temporaries(root: Path) -> list[Path]:
    """Delete `.tmp-` files and directories a killed writer left under root.

    Only call this while holding the project's run lock (no live writer then)."""
    removed = []
    for path in sorted(root.rglob(f"{TMP_PREFIX}*"), key=lambda p: len(p.parts), reverse=True):
        with contextlib.suppress(OSError):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
            removed.append(path)
    return removed


def atomic_move(src: Path, dst: Path) -> None:
    """Rename within one file system and make the rename durable."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    os.replace(src, dst)
    fsync_dir(dst.parent)
    if src.parent != dst.parent:
        fsync_dir(src.parent)


@contextlib.contextmanager
def exclusive_lock(path: Path, busy: Callable[[str], Exception], timeout_s: float = 0.0) -> Iterator[int]:
    """Hold an exclusive flock on `path` (created if missing); yields its open descriptor.

    The kernel releases a flock when its holder dies, so a lock left by a dead process is
    simply taken. While another process holds it, the lock is tried again every 50 ms for
    up to `timeout_s` (0: once); then `busy(<the lock file's first bytes>)` is raised.
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                    raise
                if time.monotonic() >= deadline:
                    raise busy(os.pread(fd, 32, 0).decode("ascii", "replace").strip()) from None
                time.sleep(0.05)
        try:
            yield fd
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def slugify(text: str, max_len: int = 48) -> str:
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    words = re.findall(r"[a-z0-9]+", ascii_text.lower())
    slug = ""
    for word in words:
        candidate = f"{slug}-{word}" if slug else word
        if len(candidate) > max_len:
            break
        slug = candidate
    return slug or "article"


def check_name(kind: str, name: str) -> str:
    """Validate a workspace or project id so it can never escape its parent directory."""
    if not _NAME_RE.match(name) or name in {".", ".."}:
        raise UsageError(
            f"invalid {kind} {name!r}: use 1-80 letters, digits, '.', '_' or '-', starting with a letter or digit"
        )
    return name


@dataclass(frozen=True)
class Workspace:
    home: Path
    name: str

    @property
    def root(self) -> Path:
        return self.home / "workspaces" / self.name

    @property
    def projects_dir(self) -> Path:
        return self.root / "projects"

    @property
    def topics_dir(self) -> Path:
        return self.root / "topics"

    def project(self, project_id: str) -> Project:
        return Project(self, check_name("project id", project_id))

    def existing_project(self, project_id: str) -> Project:
        project = self.project(project_id)
        if not (project.dir / STATUS_FILE).is_file():
            known = [p.id for p in self.projects()]
            hint = f"; projects here: {', '.join(known[:8])}" if known else "; create one with `pensieve new`"
            raise UsageError(f"unknown project {project_id!r} in workspace {self.name!r}{hint}")
        return project

    def projects(self) -> list[Project]:
        if not self.projects_dir.is_dir():
            return []
        found = []
        for entry in sorted(self.projects_dir.iterdir()):
            if entry.is_dir() and not entry.name.startswith(".") and _NAME_RE.match(entry.name):
                found.append(Project(self, entry.name))
        return found

    def unique_id(self, base: str) -> str:
        candidate, n = base, 2
        while (self.projects_dir / candidate).exists():
            candidate = f"{base}-{n}"
            n += 1
        return candidate


@dataclass(frozen=True)
class Project:
    workspace: Workspace
    id: str

    @property
    def dir(self) -> Path:
        return self.workspace.projects_dir / self.id

    @property
    def status_path(self) -> Path:
        return self.dir / STATUS_FILE

    @property
    def events_path(self) -> Path:
        return self.dir / EVENTS_FILE

    @property
    def staging_dir(self) -> Path:
        return self.dir / STAGING_DIR

    @property
    def history_dir(self) -> Path:
        return self.dir / HISTORY_DIR

    @property
    def scratch_dir(self) -> Path:
        return self.dir / SCRATCH_DIR

    @property
    def rejected_dir(self) -> Path:
        return self.dir / REJECTED_DIR

    def file(self, name: str) -> Path:
        return self.dir / name

    def read_brief(self) -> str:
        try:
            return (self.dir / BRIEF_FILE).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    @contextlib.contextmanager
    def run_lock(self) -> Iterator[None]:
        """One `run` per project: a lock taken without waiting (a lock left by a dead
        process is simply taken over). The holder's pid is written for the error message."""

        def busy(holder: str) -> ProjectBusy:
            return ProjectBusy(f"project {self.id} is being run by process {holder or 'unknown'}")

        with exclusive_lock(self.dir / LOCK_FILE, busy) as fd:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
            try:
                yield
            finally:
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, 0)


def open_workspace(home: Path, name: str) -> Workspace:
    return Workspace(home, check_name("workspace", name))


def create_project(
    workspace: Workspace, brief: str, project_id: str | None, make_status: Callable[[str], str]
) -> Project:
    """Make the project directory with brief.md and status.json.

    Both files are written into a temporary directory that is renamed into place, so a
    failure leaves nothing half-created and `list` never sees a project without status.
    """
    if project_id is not None:
        check_name("project id", project_id)
        if (workspace.projects_dir / project_id).exists():
            raise UsageError(
                f"project {project_id!r} already exists in workspace {workspace.name!r}; choose another --id"
            )
        final_id = project_id
    else:
        first_line = next((line for line in brief.splitlines() if line.strip()), brief)
        final_id = workspace.unique_id(slugify(first_line))
    try:
        workspace.projects_dir.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=TMP_PREFIX, dir=workspace.projects_dir))
    except OSError as exc:
        raise UsageError(
            f"cannot write to workspace {workspace.root}: {exc.strerror}; check its permissions or set PENSIEVE_HOME"
        ) from None
    try:
        atomic_write_text(staging / BRIEF_FILE, brief)
        atomic_write_text(staging / STATUS_FILE, make_status(final_id))
        os.rename(staging, workspace.projects_dir / final_id)
        fsync_dir(workspace.projects_dir)
    except BaseException:
        import shutil

        shutil.rmtree(staging, ignore_errors=True)
        raise
    return Project(workspace, final_id)
