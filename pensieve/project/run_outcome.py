"""How a `pensieve run` process ended: the `run_end` event it appends to events.jsonl last.

The studio starts runs as child processes; it learns how each ended from this event and
from status.json, never from the words the run printed (a line of its output can say
anything: a warning, a model's text, a library's message). The event is written for every
run of a project that exists, so the studio can tell a refusal (`error_kind` says which
sort, as `pensieve.errors.ErrorKind`) from a failed stage, an interrupt, a crash, or a
finished run. A run refused in a terminal changes nothing, its event log included: only a
run whose starter asks for it (RECORD_ERRORS_ENV, set by the studio for its children)
records an ending by error.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import BinaryIO, Literal, cast, get_args

from pensieve.project.events import EventKind, EventLog, RunEnded
from pensieve.project.workspace import Project, open_nofollow

# complete / paused: the run ended well (exit 0); failed: a stage failed (status.json says
# which and why); error: a PensieveError or a file system error stopped it, before it started
# (a refusal) or during it; interrupted: Ctrl-C or SIGINT; crashed: an unexpected exception.
Outcome = Literal["complete", "paused", "failed", "error", "interrupted", "crashed"]
OUTCOMES: tuple[str, ...] = get_args(Outcome)
ENDED_WELL = frozenset({"complete", "paused"})

# Set to "1" in a run's environment: an ending by error (outcome "error", a refusal among
# them) is recorded too. The studio sets it for the runs it starts; it waits for the answer.
RECORD_ERRORS_ENV = "PENSIEVE_RECORD_ERRORS"
SCAN_LIMIT = 8 << 20  # bytes of events.jsonl read back from its end to find the last run_end
_CHUNK = 64 << 10


@dataclass(frozen=True)
class RunEnd:
    """The run_end event's fields (beside events.jsonl's own ts, kind and stage)."""

    outcome: Outcome
    exit_code: int
    pid: int
    error: str | None = None  # the one-line reason, for every outcome but complete and paused
    error_kind: str | None = None  # an ErrorKind value, for outcome "error"
    failed_stage: str | None = None  # the first stage that failed, for outcome "failed"
    message: str | None = None  # what a run that ended well said (where the article is, or what is next)

    def as_json(self) -> RunEnded:
        return cast(RunEnded, asdict(self))  # the same fields, by name

    @classmethod
    def from_record(cls, record: object) -> RunEnd | None:
        """The RunEnd of one events.jsonl record, None for any other record or a malformed one."""
        if not isinstance(record, dict) or record.get("kind") != EventKind.RUN_END.value:
            return None
        outcome, exit_code, pid = record.get("outcome"), record.get("exit_code"), record.get("pid")
        if outcome not in OUTCOMES or type(exit_code) is not int or type(pid) is not int:
            return None
        texts = {key: record.get(key) for key in ("error", "error_kind", "failed_stage", "message")}
        if any(value is not None and not isinstance(value, str) for value in texts.values()):
            return None
        return cls(
            outcome=outcome,
            exit_code=exit_code,
            pid=pid,
            error=texts["error"],
            error_kind=texts["error_kind"],
            failed_stage=texts["failed_stage"],
            message=texts["message"],
        )


def record_run_end(project: Project, end: RunEnd) -> None:
    """Append the run_end event. Best effort: a full disk or a planted events.jsonl must not
    turn the run's own ending (its message, its exit code) into a traceback."""
    with contextlib.suppress(OSError):
        EventLog(project.events_path).emit(EventKind.RUN_END, None, **end.as_json())


def last_run_end(path: Path, *, pid: int | None = None, after: int = 0) -> RunEnd | None:
    """The latest run_end in the event log at `path` (of process `pid` when given), looking
    only at the bytes from offset `after` and at most SCAN_LIMIT back from the end: None
    when there is none there, or the log cannot be read (a link is not followed)."""
    try:
        with open_nofollow(path) as handle:
            size = os.fstat(handle.fileno()).st_size
            floor = max(after, size - SCAN_LIMIT, 0)
            for line in _lines_backwards(handle, floor, size):
                if b'"run_end"' not in line:
                    continue  # most lines: no JSON parsed
                with contextlib.suppress(ValueError, RecursionError):
                    end = RunEnd.from_record(json.loads(line))
                    if end is not None and (pid is None or end.pid == pid):
                        return end
    except OSError:
        return None
    return None


def _lines_backwards(handle: BinaryIO, floor: int, size: int) -> Iterator[bytes]:
    """The lines between offsets floor and size, last first, read in chunks from the end
    (the first may be cut short at floor; a reader parsing it finds no JSON)."""
    position, carry = size, b""
    while position > floor:
        start = max(floor, position - _CHUNK)
        handle.seek(start)
        parts = (handle.read(position - start) + carry).split(b"\n")
        position = start
        carry = parts.pop(0) if position > floor else b""  # its start is in the chunk before
        yield from (line for line in reversed(parts) if line.strip())
