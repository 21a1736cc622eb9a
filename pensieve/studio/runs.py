"""Runs started from the studio, and the live feed of a project's event log.

A run is an ordinary `python -P -m pensieve run ID` process in its own session: closing the
studio does not stop it, and the project's run lock keeps two runs from overlapping. Stop
sends SIGINT to the process holding the lock, so the run ends exactly as after Ctrl-C; only
when that process is `pensieve run` of the project, never a queue worker running many.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from pensieve.errors import ErrorKind, UsageError
from pensieve.project.listing import lock_holder
from pensieve.project.run_outcome import ENDED_WELL, RECORD_ERRORS_ENV, RunEnd, last_run_end
from pensieve.project.workspace import RUN_LOCK_WAIT_S, Project, open_nofollow
from pensieve.studio.projects import BadRequest, Conflict, NotFound

# Set when the studio is told to stop: live feeds end so the server can close at once.
STOPPING = threading.Event()
RUN_LOG = "studio-run.log"  # the run's own output, under scratch/: for people (how it ended is its run_end event)
STARTUP_WAIT_S = 30.0


@dataclass
class RunManager:
    """The runs this studio started (so it can reap them), one starting run per project."""

    workspace_name: str
    children: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    # Children seen holding their project's lock: from then on the lock alone says whether
    # they run (a run that released it is ending, and its project may be edited again).
    locked: set[int] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _alive_child(self, project_id: str) -> subprocess.Popen[bytes] | None:
        child = self.children.get(project_id)
        if child is not None and child.poll() is None:
            return child
        return None

    def running_pid(self, project: Project) -> int | None:
        holder = lock_holder(project)
        if holder is not None:
            return holder
        child = self._alive_child(project.id)
        return child.pid if child is not None and child.pid not in self.locked else None

    async def start(
        self, project: Project, until: object = None, from_stage: object = None, model: str | None = None
    ) -> dict[str, object]:
        """Start `pensieve run`; returns once the run holds the project's lock (202), or
        raises Conflict (already running) / BadRequest (the run refused to start)."""
        from pensieve.run.preflight import RunOptions  # on use: the studio starts without the pipeline's modules

        try:
            options = RunOptions.from_api(until, from_stage, model)
        except UsageError as exc:
            raise BadRequest(str(exc)) from None
        command = ["run", project.id, "-w", self.workspace_name, "-q", *options.as_args()]
        # -P: the studio's working directory is not put first on sys.path, so a `typer.py`
        # (or a `pensieve/`) planted there is not what the run imports.
        args = [sys.executable, "-P", "-m", "pensieve", *command]
        # The studio itself holds the lock for an instant while it saves an edit: the run
        # waits for the save rather than being refused as "already running".
        deadline = time.monotonic() + RUN_LOCK_WAIT_S
        while lock_holder(project) == os.getpid() and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        with self._lock:
            holder = self.running_pid(project)
            if holder is not None:
                raise Conflict(f"project {project.id} is already running (process {holder}); stop it first")
            log_path = project.scratch_dir / RUN_LOG
            project.scratch_dir.mkdir(parents=True, exist_ok=True)
            events_from = _log_size(project.events_path)  # the child's run_end comes after this
            with log_path.open("wb") as log:
                child = subprocess.Popen(
                    args,
                    env=_child_env(),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd=os.getcwd(),
                    start_new_session=True,  # Ctrl-C on the studio does not reach the run
                    close_fds=True,
                )
            self.children[project.id] = child
            threading.Thread(target=child.wait, daemon=True, name=f"reap-{child.pid}").start()
        started = {"id": project.id, "pid": child.pid, "args": command}
        deadline = time.monotonic() + STARTUP_WAIT_S
        while time.monotonic() < deadline:
            if lock_holder(project) == child.pid:
                self.locked.add(child.pid)
                return started
            code = child.poll()
            if code is not None:
                end = await asyncio.to_thread(last_run_end, project.events_path, pid=child.pid, after=events_from)
                return {**started, "finished": _ended_at_once(end, code)}
            await asyncio.sleep(0.05)
        return started

    def stop(self, project: Project) -> dict[str, object]:
        pid = lock_holder(project)
        if pid is None:
            child = self._alive_child(project.id)
            pid = child.pid if child is not None else None
        if pid is None:
            raise Conflict(f"project {project.id} is not running")
        refusal = _not_a_run_of(pid, project.id)
        if refusal is not None:
            raise Conflict(refusal)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGINT)
        return {"id": project.id, "pid": pid, "signal": "SIGINT"}


def _child_env() -> dict[str, str]:
    """The studio's environment, with the same pensieve package first on the path."""
    import pensieve
    from pensieve.studio.security import TOKEN_ENV

    env = {k: v for k, v in os.environ.items() if k != TOKEN_ENV}  # a run has no use for the studio's token
    env[RECORD_ERRORS_ENV] = "1"  # a refusal is recorded as the run's ending: start() reads it there
    root = str(Path(pensieve.__file__).resolve().parents[1])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


QUEUE_COMMANDS = ("worker", "batch")  # run their projects in-process, under the project's lock


def pensieve_arguments(words: list[str]) -> list[str] | None:
    """The arguments of a `pensieve` command line, None for any other process:
    `python -m pensieve run p1 ...`, or the `pensieve` script (`python .../bin/pensieve run p1`)."""
    for i, word in enumerate(words):
        if word == "-m" and i + 1 < len(words):
            return words[i + 2 :] if words[i + 1] == "pensieve" else None
        if i <= 1 and Path(word).name == "pensieve":
            return words[i + 1 :]
    return None


def _not_a_run_of(pid: int, project_id: str) -> str | None:
    """Why the lock holder `pid` must not be sent SIGINT, or None when it is `pensieve run` of
    this project. A queue process (`pensieve worker`, `pensieve batch`) holds the lock of each
    project it runs: interrupting it would stop every project it works on."""
    cmdline = Path(f"/proc/{pid}/cmdline")
    if not cmdline.parent.exists():
        return None  # no /proc: the lock holder is the best knowledge there is
    try:
        words = cmdline.read_bytes().decode("utf-8", "replace").rstrip("\0").split("\0")
    except OSError:
        return f"process {pid} holding {project_id} cannot be inspected; not signalled"
    args = pensieve_arguments(words)
    if args and args[0] == "run" and project_id in args[1:]:
        return None
    if args and args[0] in QUEUE_COMMANDS:
        return (
            f"project {project_id} is being run by a queue worker (`pensieve {args[0]}`, process {pid}), "
            "which the studio does not interrupt: that would stop every project it runs. To stop it, press "
            f"Ctrl-C where it runs (or `kill -INT {pid}`); its projects pause and resume when a worker runs again"
        )
    return f"process {pid} holding {project_id} is not `pensieve run {project_id}`; not signalled"


def _ended_at_once(end: RunEnd | None, code: int) -> str:
    """What a run that ended before it was seen holding the lock said when it ended well;
    a refusal or a failure raises what its kind answers (400, 404 or 409), in its words."""
    if end is None:  # killed, or no project to record in: all there is to know is the code
        if code == 0:
            return "the run ended at once"
        raise BadRequest(f"the run exited with code {code} before starting; its output is in scratch/{RUN_LOG}")
    if end.outcome in ENDED_WELL:
        return end.message or end.outcome
    error = end.error or f"the run ended ({end.outcome}, exit code {end.exit_code})"
    if end.error_kind == ErrorKind.CONFLICT:
        raise Conflict(error)
    if end.error_kind == ErrorKind.NOT_FOUND:
        raise NotFound(error)
    raise BadRequest(error)


def last_run(project: Project) -> RunEnd | None:
    """How the project's latest run ended (a run started here or in a terminal), from the
    run_end event it wrote last: None when no run recorded one."""
    return last_run_end(project.events_path)


def last_run_error(project: Project) -> str | None:
    """Why the latest run failed or was refused, None when it ended well or was interrupted
    (the stages say so): kept across reloads until the next run ends."""
    end = last_run(project)
    if end is None or end.outcome in ENDED_WELL or end.outcome == "interrupted":
        return None
    return end.error


MAX_FEEDS_PER_PROJECT = 8  # live feeds open at once on one project (tabs, scripts)


@dataclass
class FeedCounter:
    """How many live feeds each project has open: past the cap a new one is refused (429)
    instead of each feed costing the studio memory and time without end."""

    limit: int = MAX_FEEDS_PER_PROJECT
    open_feeds: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def open(self, project_id: str) -> Callable[[], None]:
        """Take a place for a feed of `project_id`; returns what gives it back (once)."""
        with self._lock:
            count = self.open_feeds.get(project_id, 0)
            if count >= self.limit:
                raise TooManyFeeds(
                    f"project {project_id} already has {count} live feeds open (the limit); "
                    "close other tabs or scripts following it, then reload"
                )
            self.open_feeds[project_id] = count + 1
        released = threading.Event()

        def release() -> None:
            with self._lock:
                if released.is_set():
                    return
                released.set()
                left = self.open_feeds.get(project_id, 1) - 1
                if left > 0:
                    self.open_feeds[project_id] = left
                else:
                    self.open_feeds.pop(project_id, None)

        return release


class TooManyFeeds(Exception):
    """A project has as many live feeds open as allowed (429)."""


# Feeds read in their own two threads: however many catch up on a long log at once, the
# threads that answer pages and the API are never all taken by them.
_FEED_READS = ThreadPoolExecutor(max_workers=2, thread_name_prefix="feed-read")
READ_CHUNK = 256 * 1024  # a feed reads the log this much at a time, off the event loop
MAX_EVENT_LINE = 1 << 20  # a longer "line" is counted but never sent (nor held whole in memory)


def count_lines(path: Path) -> int:
    return _end_of_log(path)[1]


def _end_of_log(path: Path) -> tuple[int, int]:
    """(offset just after the last complete line, number of complete lines), read in chunks."""
    offset = lines = 0
    try:
        with open_nofollow(path) as handle:  # a link planted as the log is not followed
            read = 0
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                found = chunk.count(b"\n")
                if found:
                    lines += found
                    offset = read + chunk.rindex(b"\n") + 1
                read += len(chunk)
    except OSError:
        return 0, 0
    return offset, lines


def _log_size(path: Path) -> int:
    """The log's size; 0 when it is absent or not a regular file (a link is not followed)."""
    try:
        info = path.lstat()
    except OSError:
        return 0
    return info.st_size if stat.S_ISREG(info.st_mode) else 0


def _read_at(path: Path, offset: int, limit: int) -> bytes:
    try:
        # O_NOFOLLOW: the log may have been swapped for a link since the lstat.
        with open_nofollow(path) as handle:
            handle.seek(offset)
            return handle.read(limit)
    except OSError:
        return b""


async def tail_events(path: Path, since: int | None, poll_s: float = 0.1) -> AsyncIterator[tuple[int, str]]:
    """(line number, line) for each complete line of the log from `since` (default: the
    lines written after this call), following the file as it grows, until the studio stops.

    A feed holds at most one chunk and one line in memory, and reads in threads: a long log
    neither fills the studio's memory nor stalls its other requests while it is read."""
    if since is None:  # from the end: only the lines are counted, nothing is kept
        offset, number = await asyncio.to_thread(_end_of_log, path)
        start = number
    else:
        offset = number = 0
        start = max(0, since)
    pending = b""
    oversized = False  # inside a line longer than MAX_EVENT_LINE: skipped up to its end
    while not STOPPING.is_set():
        size = _log_size(path)
        if size < offset:  # replaced or truncated: read it again from the start
            offset, number, pending, oversized = 0, 0, b"", False
        if size > offset:
            loop = asyncio.get_running_loop()
            data = await loop.run_in_executor(_FEED_READS, _read_at, path, offset, min(size - offset, READ_CHUNK))
            if data:
                offset += len(data)
                ends = data.count(b"\n")
                if ends and number + ends <= start:  # still before the first line asked for: only counted
                    number += ends
                    pending, oversized = data[data.rindex(b"\n") + 1 :], False
                    continue
                *lines, rest = (pending + data).split(b"\n")
                for raw in lines:
                    if number >= start and raw.strip() and not oversized:
                        yield number, raw.decode("utf-8", errors="replace")
                    number += 1
                    oversized = False
                if len(rest) > MAX_EVENT_LINE:
                    rest, oversized = b"", True
                pending = rest
                if offset < size:
                    continue  # more of the log is waiting: read on without sleeping
        await asyncio.sleep(poll_s)
