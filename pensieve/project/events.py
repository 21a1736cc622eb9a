"""One event stream: everything that happens in a run is an `Event` on an `EventBus`.

Observers subscribe instead of being called from every site: the events.jsonl log
(`EventLog`), the progress display on stderr (pensieve.cli.progress), and whatever comes
next (a batch view, a web page). Emitters only say what happened.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

from pensieve.clock import now_iso
from pensieve.project.workspace import open_regular_nofollow, read_file_nofollow
from pensieve.redact import scrub

_MAX_FIELD = 500


class EventKind(StrEnum):
    STAGE_START = "stage_start"  # model, attempt
    STAGE_END = "stage_end"  # usage
    STAGE_ERROR = "stage_error"  # error
    STAGE_INTERRUPTED = "stage_interrupted"
    MODEL = "model"  # model, purpose, tokens, cost, duration_s, tool_calls | error, error_kind, attempts
    RETRY = "retry"  # error, error_kind, wait_s
    TOOL = "tool"  # tool, arguments (a summary), duration_s, error, result_chars
    CONTEXT_COMPACTED = "context_compacted"  # elided_tool_results
    TEXT_TOOL_CALLS = "text_tool_calls"  # tools: calls the model wrote as text, run as calls
    REPAIR = "repair"  # reason (reminder | contract | cut_off), message: a turn asking for a better artifact
    CITATION_CHECK = "citation_check"  # ok, problems, problem_count, citations_checked
    EVIDENCE = "evidence"  # file, summary (cited_sentences, supported, weak, unsupported, supported_share), judge_calls
    NOTE = "note"  # message: something the user should know that is not an error
    FETCH = "fetch"
    WEB_SEARCH = "web_search"
    LIBRARY_SEARCH = "library_search"  # query, results: a search of the workspace library
    MCP_SERVER = "mcp_server"  # server, ok, tools | error: a server started (or failed to) for the run
    MCP_CALL = "mcp_call"  # server, tool, source, new_source, result_chars, truncated, duration_s | error
    TOPICS_WARNING = "topics_warning"
    TOPIC_CAPTURED = "topic_captured"
    TOPIC_CAPTURE_FAILED = "topic_capture_failed"
    # How a `pensieve run` process ended, its last event (pensieve.project.run_outcome.RunEnd):
    # outcome, exit_code, pid, error, error_kind, failed_stage, message.
    RUN_END = "run_end"


@dataclass(frozen=True)
class Event:
    kind: EventKind
    stage: str | None
    data: dict[str, Any] = field(default_factory=dict)
    ts: str = field(default_factory=now_iso)

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)


Subscriber = Callable[[Event], None]


class EventSink(Protocol):
    """What emitters need: tools, the model client and the pipeline all take one."""

    def emit(self, kind: EventKind, stage: str | None = None, **data: Any) -> None: ...


class EventBus:
    """Delivers each event to every subscriber, in the order they subscribed."""

    def __init__(self, *subscribers: Subscriber) -> None:
        self._subscribers: list[Subscriber] = list(subscribers)

    def subscribe(self, subscriber: Subscriber) -> None:
        self._subscribers.append(subscriber)

    def emit(self, kind: EventKind, stage: str | None = None, **data: Any) -> None:
        event = Event(kind, stage, data)
        for subscriber in self._subscribers:
            subscriber(event)

    def note(self, message: str, stage: str | None = None) -> None:
        self.emit(EventKind.NOTE, stage, message=message)


def _short(value: Any) -> Any:
    if isinstance(value, str):
        return value if len(value) <= _MAX_FIELD else value[:_MAX_FIELD] + f"...[{len(value)} chars]"
    if isinstance(value, dict):
        return {str(k): _short(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_short(v) for v in value[:20]]
    return value


class EventLog:
    """events.jsonl, a subscriber: appends whole lines with O_APPEND, so a crash can lose
    at most the last line. Secrets are scrubbed and long fields cut."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._checked_tail = False

    def __call__(self, event: Event) -> None:
        record = {"ts": event.ts, "kind": str(event.kind), "stage": event.stage, **_short(event.data)}
        line = scrub(json.dumps(record, ensure_ascii=False, default=str)) + "\n"
        with self._lock:
            if not self._checked_tail:
                self._checked_tail = True
                if self._needs_newline():
                    line = "\n" + line
            # O_NOFOLLOW: a link planted as events.jsonl must not send the log elsewhere;
            # O_NONBLOCK and the mode check: a planted FIFO must not hang the run.
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
            try:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    raise OSError(errno.EINVAL, "not a regular file", str(self.path))
                # "replace": lone surrogates from a model's JSON must not break the log.
                os.write(fd, line.encode("utf-8", errors="replace"))
            finally:
                os.close(fd)

    def emit(self, kind: EventKind, stage: str | None = None, **data: Any) -> None:
        """Log one event directly (code that runs outside a pipeline run, e.g. capture)."""
        self(Event(kind, stage, data))

    def _needs_newline(self) -> bool:
        """A line cut short by a crash must not swallow the first line this run appends."""
        try:
            fd = open_regular_nofollow(self.path)  # a planted FIFO would block a plain open
        except OSError:
            return False
        try:
            size = os.fstat(fd).st_size
            return size > 0 and os.pread(fd, 1, size - 1) != b"\n"
        except OSError:
            return False
        finally:
            os.close(fd)


def read_events(path: Path) -> list[dict[str, Any]]:
    try:
        raw = read_file_nofollow(path)
    except OSError:
        return []
    events = []
    for line in raw.decode("utf-8", errors="replace").splitlines():
        try:
            events.append(json.loads(line))
        except (json.JSONDecodeError, RecursionError):
            continue  # a line cut short by a crash
    return events
