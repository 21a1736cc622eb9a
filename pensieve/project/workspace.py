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
import secrets
import shutil
import stat
import tempfile
import time
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, TypeVar

from pensieve.errors import ErrorKind, ProjectBusy, UsageError
from pensieve.redact import scrub_secret_bytes

TMP_PREFIX = ".tmp-"
_T = TypeVar("_T")
STATUS_FILE = "status.json"
EVENTS_FILE = "events.jsonl"
LOCK_FILE = ".run.lock"
RUN_LOCK_WAIT_S = 2.0  # how long taking a project's run lock waits for a brief holder
BRIEF_FILE = "brief.md"
# Claim-level evidence for the articles (pensieve.evidence.store writes it).
EVIDENCE_FILE = "evidence.json"
STAGING_DIR = ".staging"
HISTORY_DIR = "history"
# An artifact that failed its contract, kept for the user to read (never deleted).
REJECTED_DIR = "rejected"
SCRATCH_DIR = "scratch"
# Files no agent may read or write through the file tools.
RESERVED = frozenset({STATUS_FILE, EVENTS_FILE, LOCK_FILE})
RESERVED_DIRS = frozenset({STAGING_DIR, HISTORY_DIR})

_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,79}")
MAX_BRIEF_BYTES = 100_000
# Bounds on what Pensieve reads of its own files: more than `new` writes as a brief (with
# room for a hand edit), and far more than any status.json. A larger one was planted, and
# reading it whole would cost `list` seconds and gigabytes per project.
MAX_BRIEF_FILE_BYTES = 2 * MAX_BRIEF_BYTES
MAX_STATUS_BYTES = 4_000_000


# A project tree is walked without recursion and within these bounds; a tree beyond them is
# refused, never taken as checked (a planted 2,000-level scratch/d/d/... made Path.rglob
# raise RecursionError, and 200,001 files hid a link past the count).
MAX_TREE_DEPTH = 64
MAX_TREE_ENTRIES = 200_000


def open_regular_nofollow(path: str | Path, max_size: int | None = None) -> int:
    """A descriptor open for reading on a regular file: never through a symbolic link
    (OSError ELOOP: a link planted in a project must not make Pensieve read a file
    elsewhere), never blocking (O_NONBLOCK: a planted FIFO would hang the open), and nothing
    but a regular file (EINVAL: a FIFO, socket or device). A file larger than max_size is
    refused (EFBIG) from its fstat, before a byte is read."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        if max_size is not None and info.st_size > max_size:
            raise OSError(errno.EFBIG, f"larger than {max_size:,} bytes", str(path))
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_nofollow(path: str | Path, max_size: int | None = None) -> BinaryIO:
    """open_regular_nofollow's file as a binary file object (for reading)."""
    return os.fdopen(open_regular_nofollow(path, max_size), "rb")


def read_file_nofollow(path: str | Path, limit: int | None = None, max_size: int | None = None) -> bytes:
    """A file's bytes (at most `limit`), as open_regular_nofollow opens it: no link, no FIFO
    or device, and no file larger than max_size (OSError)."""
    with open_nofollow(path, max_size) as handle:
        return handle.read() if limit is None else handle.read(limit)


_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISLNK, "a symbolic link"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def special_file_kind(path: Path) -> str | None:
    """What stands at `path` when it is there but is not a regular file ("a FIFO", "a
    character device", "a symbolic link", "a directory"); None for a regular file or
    nothing. An atomic write renames over whatever entry is there, a device node included,
    so a caller replacing a file a user named asks this first (a link is not followed)."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return None  # absent, or a parent that is no directory: the write itself reports it
    if stat.S_ISREG(mode):
        return None
    return mode_kind(mode)


def mode_kind(mode: int) -> str:
    """What a file of this mode is, said for one line of a refusal ("a FIFO", "a socket"...)."""
    return next((kind for is_kind, kind in _KINDS if is_kind(mode)), "not a regular file")


def walk_tree(
    root: Path,
    purpose: str,
    prune: Callable[[os.DirEntry[str]], bool] | None = None,
    max_entries: int | None = None,
    max_depth: int | None = None,
) -> Iterator[os.DirEntry[str]]:
    """Every entry under root, links not followed, with an explicit stack (Path.rglob, os.walk
    and shutil.rmtree recurse). A directory `prune` accepts is yielded but not entered.

    A tree with more than max_entries entries, or deeper than max_depth (default
    MAX_TREE_ENTRIES and MAX_TREE_DEPTH), raises UsageError (`purpose` says what the walk
    was for): what was not walked was not checked."""
    max_entries = MAX_TREE_ENTRIES if max_entries is None else max_entries
    max_depth = MAX_TREE_DEPTH if max_depth is None else max_depth
    pending = [(root, 0)]
    seen = 0
    while pending:
        directory, depth = pending.pop()
        try:
            with os.scandir(directory) as found:
                entries = list(found)
        except OSError:
            continue  # unreadable (or gone): Pensieve cannot read or write through it either
        for entry in entries:
            seen += 1
            if seen > max_entries:
                raise UsageError(
                    f"too many files to check {purpose}: more than {max_entries:,} under {root}; "
                    "Pensieve refuses a tree it cannot check whole. Move bulky data out of it"
                )
            if depth + 1 > max_depth:
                shown = "/".join(Path(entry.path).relative_to(root).parts[:3])
                raise UsageError(
                    f"directories nested too deeply to check {purpose}: more than {max_depth} levels under "
                    f"{root} ({shown}/...); Pensieve refuses a tree it cannot check whole. Remove the nesting"
                )
            yield entry
            if entry.is_dir(follow_symlinks=False) and not (prune is not None and prune(entry)):
                pending.append((Path(entry.path), depth + 1))


def find_link(root: Path, max_entries: int | None = None, max_depth: int | None = None) -> Path | None:
    """The first entry at or under root (links not followed) that Pensieve must not touch, if
    any: a symbolic link, or anything neither a regular file nor a directory (a FIFO, socket
    or device).

    Pensieve never makes these, so one in a project was planted: writes through a link would
    land outside the project, and opening a FIFO blocks. A tree too large or too deep to
    check whole raises UsageError (see walk_tree)."""
    if root.is_symlink():
        return root
    for entry in walk_tree(root, "for links", max_entries=max_entries, max_depth=max_depth):
        if entry.is_symlink() or not (entry.is_dir(follow_symlinks=False) or entry.is_file(follow_symlinks=False)):
            return Path(entry.path)
    return None


def _special_kind(path: Path) -> str:
    """What a file that is neither regular nor a directory is, for a message."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return "a special file"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a device file" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a special file"


def _refuse_linked_parent(directory: Path, max_levels: int = 12) -> None:
    """A write never goes through a linked directory (`sources/`, `.staging/`, `history/`...):
    inside a project (a directory with status.json above), no directory between the file
    and the project's own may be a link; elsewhere, the file's own directory may not be."""
    chain: list[Path] = []
    inside_project = False
    for candidate in [directory, *directory.parents][:max_levels]:
        chain.append(candidate)
        if os.path.lexists(candidate / STATUS_FILE):
            inside_project = True
            break
    if not inside_project:
        chain = [directory]
    for candidate in chain:
        if candidate.is_symlink():
            raise OSError(errno.ELOOP, "is a symbolic link; Pensieve does not write through links", str(candidate))


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _new_temporary(directory: Path, create: Callable[[str], _T]) -> tuple[_T, str]:
    """create(name) for a new, unused temporary name in `directory` (create must fail with
    FileExistsError on a name in use, as O_EXCL and mkdir do)."""
    for _attempt in range(100):
        name = os.path.join(directory, f"{TMP_PREFIX}{secrets.token_hex(6)}")
        try:
            return create(name), name
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no unused temporary name", str(directory))


def shared_temporary_dir(directory: Path) -> Path:
    """A new temporary directory with the mode a plain mkdir gives (0755 under umask 022),
    where mkdtemp gives 0700: for an export, which is made to be read by others."""
    return Path(_new_temporary(directory, lambda name: os.mkdir(name, 0o777))[1])


def _open_temporary(directory: Path, shared: bool) -> tuple[int, str]:
    if not shared:
        return tempfile.mkstemp(prefix=TMP_PREFIX, dir=directory)  # 0600: state may hold secrets
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    return _new_temporary(directory, lambda name: os.open(name, flags, 0o666))  # less the umask


@contextlib.contextmanager
def _replacing(path: Path, replace: bool = True, shared: bool = False) -> Iterator[tuple[BinaryIO, str]]:
    """Write `path` through a temporary file in its directory: afterwards it is either
    complete or as it was. Yields the open temporary file and its name. Without `replace`,
    an existing path is left as it is and FileExistsError raised (checked atomically: of
    concurrent writers, exactly one creates the file). The file is 0600 unless `shared`
    (then the mode the umask allows, as for any new file)."""
    _refuse_linked_parent(path.parent)
    path.parent.mkdir(parents=True, exist_ok=True)
    _refuse_linked_parent(path.parent)
    try:
        fd, tmp = _open_temporary(path.parent, shared)
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, str(path)) from None
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle, tmp
            handle.flush()
            os.fsync(handle.fileno())
        if replace:
            os.replace(tmp, path)
        elif not rename_noreplace(Path(tmp), path):
            raise FileExistsError(errno.EEXIST, "already exists", str(path))
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and exc.filename is None:
            # A full disk fails a write, which names no file: name the one being written.
            raise OSError(exc.errno, exc.strerror, str(path)) from None
        raise
    fsync_dir(path.parent)


def atomic_write_bytes(path: Path, data: bytes, *, replace: bool = True, shared: bool = False) -> None:
    """Every file Pensieve writes goes through here: configured secrets are scrubbed first.
    replace=False: create path, or raise FileExistsError if it exists (see _replacing).
    Files are 0600; `shared` (exports, made for others to read) gives the mode the umask
    allows instead. Never for a project's state, which may hold what a user keeps private."""
    data = scrub_secret_bytes(data)
    with _replacing(path, replace, shared) as (handle, _tmp):
        handle.write(data)


def atomic_write_text(path: Path, text: str, *, replace: bool = True) -> None:
    # "replace": a lone surrogate (possible in JSON from a model) must not make a write fail.
    atomic_write_bytes(path, text.encode("utf-8", errors="replace"), replace=replace)


def atomic_copy(src: Path, dst: Path) -> None:
    """Copy src to dst atomically (dst is complete or absent), keeping src's times."""
    with _replacing(dst) as (handle, tmp), src.open("rb") as source:
        shutil.copyfileobj(source, handle)
        handle.flush()
        shutil.copystat(src, tmp)


def remove_stale_temporaries(root: Path) -> list[Path]:
    """Delete `.tmp-` files and directories a killed writer left under root.

    Only call this while holding the project's run lock (no live writer then)."""
    stale = [
        Path(entry.path)
        for entry in walk_tree(root, "for temporary files", prune=lambda entry: entry.name.startswith(TMP_PREFIX))
        if entry.name.startswith(TMP_PREFIX)
    ]
    removed = []
    for path in stale:
        with contextlib.suppress(OSError):
            remove_tree(path)
            removed.append(path)
    return removed


def remove_tree(path: Path, max_depth: int = MAX_TREE_DEPTH) -> None:
    """Delete path (a file, or a directory and everything in it) like shutil.rmtree, but
    without recursion (shutil.rmtree recurses, and a RecursionError escapes ignore_errors)
    and relative to open directories (no link is ever followed, and no path grows long).
    Raises OSError, ELOOP for a tree deeper than max_depth, leaving what it could not delete."""
    if not stat.S_ISDIR(os.lstat(path).st_mode):
        os.unlink(path)
        return
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
    # One frame per open directory: its descriptor, its name in its parent, and its
    # subdirectories still to delete (its other entries are deleted when it is opened).
    frames: list[tuple[int, str, list[str]]] = []

    def enter(name: str, parent: int | None) -> None:
        if len(frames) > max_depth:
            raise OSError(errno.ELOOP, f"nested more than {max_depth} levels deep", str(path))
        fd = os.open(name, flags, dir_fd=parent)
        frames.append((fd, name, []))
        with os.scandir(fd) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    frames[-1][2].append(entry.name)
                else:
                    os.unlink(entry.name, dir_fd=fd)

    try:
        enter(str(path), None)
        while frames:
            fd, name, subdirectories = frames[-1]
            if subdirectories:
                enter(subdirectories.pop(), fd)
                continue
            frames.pop()
            os.close(fd)
            if frames:
                os.rmdir(name, dir_fd=frames[-1][0])
    finally:
        for fd, _name, _rest in frames:
            os.close(fd)
    os.rmdir(path)


def atomic_move(src: Path, dst: Path) -> None:
    """Rename within one file system and make the rename durable."""
    _refuse_linked_parent(dst.parent)
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
    # O_NOFOLLOW: a planted link must not make the lock (which is truncated) another file.
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
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


def lock_is_held(path: Path | str) -> bool:
    """Whether some process holds the flock on `path`: the lock decides, never a pid written
    in the file (a killed run's pid may be reused; a copied project carries its pid along).

    Asked by taking a shared lock without waiting and dropping it at once; a run taking the
    lock at that instant waits for it (run_lock's `wait_s`)."""
    try:
        # O_NONBLOCK: a FIFO planted as the lock does not hang the question.
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as exc:
            return exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
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
    if not _NAME_RE.fullmatch(name) or name in {".", ".."}:
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
        if not (project.dir / STATUS_FILE).is_file() and not project.dir.is_symlink():
            known = [p.id for p in self.projects()]
            hint = f"; projects here: {', '.join(known[:8])}" if known else "; create one with `pensieve new`"
            raise UsageError(
                f"unknown project {project_id!r} in workspace {self.name!r}{hint}", kind=ErrorKind.NOT_FOUND
            )
        project.refuse_links()
        return project

    def projects(self) -> list[Project]:
        return [Project(self, entry.name) for entry in self.project_entries()]

    def project_entries(self) -> list[os.DirEntry[str]]:
        """The project directories by id (a link to a directory included: it is refused
        where it is read); one scandir, no stat per entry."""
        try:
            with os.scandir(self.projects_dir) as entries:
                found = [
                    entry
                    for entry in entries
                    if not entry.name.startswith(".") and _NAME_RE.fullmatch(entry.name) and entry.is_dir()
                ]
        except (FileNotFoundError, NotADirectoryError):
            return []
        return sorted(found, key=lambda entry: entry.name)

    def unique_id(self, base: str) -> str:
        candidate, n = base, 2
        while os.path.lexists(self.projects_dir / candidate):
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
            return read_file_nofollow(self.dir / BRIEF_FILE, MAX_BRIEF_FILE_BYTES).decode("utf-8", errors="replace")
        except OSError:
            return ""

    def refuse_links(self) -> None:
        """Refuse a project with a symbolic link, a FIFO, a socket or a device in it (someone
        handed over an unpacked project): Pensieve's writes and reads would follow a link out
        of the project, and opening a FIFO blocks. A tree too large or too deep to check
        whole is refused too (UsageError from find_link)."""
        found = find_link(self.dir)
        if found is None:
            return
        where = "the project directory itself" if found == self.dir else found.relative_to(self.dir).as_posix()
        if found.is_symlink():
            raise UsageError(
                f"project {self.id} contains a symbolic link ({where}); Pensieve does not follow links in a "
                "project. Replace the link by a copy of the file it points to, or remove it"
            )
        raise UsageError(
            f"project {self.id} contains {_special_kind(found)} ({where}); Pensieve reads and writes only "
            "regular files and directories in a project. Remove it"
        )

    @contextlib.contextmanager
    def run_lock(self, wait_s: float = RUN_LOCK_WAIT_S) -> Iterator[None]:
        """One `run` per project (a lock left by a dead process is simply taken over). A
        holder is waited for `wait_s`: the studio saving an edit, or asking whether the
        project runs, holds the lock for an instant; a run holds it far longer. The
        holder's pid is written for the error message."""

        def busy(holder: str) -> ProjectBusy:
            return ProjectBusy(f"project {self.id} is being run by process {holder or 'unknown'}")

        with exclusive_lock(self.dir / LOCK_FILE, busy, wait_s) as fd:
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

    def taken(project_id: str) -> UsageError:
        return UsageError(
            f"project {project_id!r} already exists in workspace {workspace.name!r}; choose another --id",
            kind=ErrorKind.CONFLICT,
        )

    if project_id is not None:
        check_name("project id", project_id)
        if os.path.lexists(workspace.projects_dir / project_id):
            raise taken(project_id)
        final_id = base = project_id
    else:
        first_line = next((line for line in brief.splitlines() if line.strip()), brief)
        base = slugify(first_line)
        final_id = workspace.unique_id(base)
    try:
        workspace.projects_dir.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=TMP_PREFIX, dir=workspace.projects_dir))
    except OSError as exc:
        raise UsageError(
            f"cannot write to workspace {workspace.root}: {exc.strerror}; check its permissions or set PENSIEVE_HOME"
        ) from None
    try:
        atomic_write_text(staging / BRIEF_FILE, brief)
        for _attempt in range(1000):
            atomic_write_text(staging / STATUS_FILE, make_status(final_id))
            # Without replacing: of concurrent `new`s with one id, one wins; the others are
            # told the id is taken (--id) or take the next free one (an id from the brief).
            if rename_noreplace(staging, workspace.projects_dir / final_id):
                break
            if project_id is not None:
                raise taken(project_id)
            final_id = workspace.unique_id(base)
        else:
            raise UsageError(f"no free project id for {base!r}; choose one with --id")
        fsync_dir(workspace.projects_dir)
    except BaseException:
        with contextlib.suppress(OSError):
            remove_tree(staging)
        raise
    return Project(workspace, final_id)


def rename_noreplace(src: Path, dst: Path) -> bool:
    """Rename src to dst unless dst exists (atomically: renameat2 RENAME_NOREPLACE); False
    when dst exists. Where the kernel lacks it, a hard link claims the name for a file and a
    directory made at dst for a directory (both fail when dst exists)."""
    try:
        _renameat2(src, dst)
        return True
    except FileExistsError:
        return False
    except OSError as exc:
        if exc.errno not in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
            raise
    if not src.is_dir():
        try:
            os.link(src, dst, follow_symlinks=False)  # atomic: exactly one creator succeeds
        except FileExistsError:
            return False
        os.unlink(src)
        return True
    try:
        os.mkdir(dst)  # atomic: exactly one creator succeeds
    except FileExistsError:
        return False
    os.rename(src, dst)  # replaces the empty directory just made
    return True


def _renameat2(src: Path, dst: Path) -> None:
    import ctypes
    import ctypes.util

    libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    function = getattr(libc, "renameat2", None)
    if function is None:
        raise OSError(errno.ENOSYS, "renameat2 is not available")
    at_fdcwd, rename_noreplace_flag = -100, 1
    result = function(at_fdcwd, os.fsencode(src), at_fdcwd, os.fsencode(dst), rename_noreplace_flag)
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), str(dst))
