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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cache
from pathlib import Path
from types import UnionType
from typing import Any, Literal, Required, TypedDict, Union, Unpack, get_args, get_origin, get_type_hints, overload

from pensieve.clock import now_iso
from pensieve.project.workspace import open_regular_nofollow, read_file_nofollow
from pensieve.redact import scrub

_MAX_FIELD = 500


class EventKind(StrEnum):
    STAGE_START = "stage_start"
    STAGE_END = "stage_end"
    STAGE_ERROR = "stage_error"
    STAGE_INTERRUPTED = "stage_interrupted"
    MODEL = "model"
    RETRY = "retry"
    TOOL = "tool"
    CONTEXT_COMPACTED = "context_compacted"
    TEXT_TOOL_CALLS = "text_tool_calls"
    REPAIR = "repair"
    CITATION_CHECK = "citation_check"
    EVIDENCE = "evidence"
    NOTE = "note"
    FETCH = "fetch"
    WEB_SEARCH = "web_search"
    LIBRARY_SEARCH = "library_search"
    MCP_SERVER = "mcp_server"
    MCP_CALL = "mcp_call"
    TOPICS_WARNING = "topics_warning"
    TOPIC_CAPTURED = "topic_captured"
    TOPIC_CAPTURE_FAILED = "topic_capture_failed"
    # How a `pensieve run` process ended, its last event (pensieve.project.run_outcome.RunEnd):
    # outcome, exit_code, pid, error, error_kind, failed_stage, message.
    RUN_END = "run_end"


# -- what each kind of event carries: checked where an event is emitted ---------------------
class StageStart(TypedDict):
    model: str
    attempt: int


class StageEnd(TypedDict):
    usage: dict[str, object]  # the stage's Usage as status.json has it


class StageError(TypedDict):
    error: str


class NoData(TypedDict):
    pass


class ModelCall(TypedDict, total=False):
    """A model call answered (tokens, cost, tool calls) or failed for good (error...)."""

    model: Required[str]
    purpose: Required[str]
    duration_s: Required[float]
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None
    tool_calls: list[str]
    error: str
    error_kind: str
    detail: str
    attempts: int


class Retry(TypedDict):
    error: str
    error_kind: str
    detail: str
    wait_s: float


class ToolCall(TypedDict):
    tool: str
    arguments: str  # a summary
    duration_s: float
    error: str | None
    result_chars: int


class ContextCompacted(TypedDict):
    elided_tool_results: int


class TextToolCalls(TypedDict):
    tools: list[str]  # calls the model wrote as text, run as calls


class Repair(TypedDict):
    reason: str  # reminder | contract | cut_off
    message: str  # the turn asking for a better artifact


class CitationCheck(TypedDict):
    ok: bool
    problems: list[str]
    problem_count: int
    citations_checked: int


class EvidenceChecked(TypedDict):
    file: str
    summary: Mapping[str, object]  # cited_sentences, supported, weak, unsupported, supported_share
    judge_calls: int


class Note(TypedDict):
    message: str  # something the user should know that is not an error


class Fetch(TypedDict, total=False):
    url: Required[str]
    final_url: str
    status: int
    bytes: int
    truncated: bool
    source: str
    new_source: bool
    from_archive: bool
    duration_s: float
    error: str


class WebSearch(TypedDict, total=False):
    provider: Required[str]
    search_kind: Required[str]
    results: Required[int]
    per_provider: Required[dict[str, int]]
    duration_s: Required[float]
    error: str  # the providers that failed, and why


class LibrarySearch(TypedDict):
    query: str
    results: int


class McpServer(TypedDict, total=False):
    server: Required[str]
    ok: Required[bool]
    tools: list[str]
    error: str | None


class McpCall(TypedDict, total=False):
    server: Required[str]
    tool: Required[str]
    source: str
    new_source: bool
    result_chars: int
    truncated: bool
    duration_s: float
    error: str


class TopicCaptured(TypedDict):
    slug: str
    path: str


class TopicCaptureFailed(TypedDict):
    error: str


class RunEnded(TypedDict):
    """How a `pensieve run` process ended (pensieve.project.run_outcome.RunEnd)."""

    outcome: str
    exit_code: int
    pid: int
    error: str | None
    error_kind: str | None
    failed_stage: str | None
    message: str | None


# The data each kind carries: what its emitters must give.
DATA_OF: dict[EventKind, type] = {
    EventKind.STAGE_START: StageStart,
    EventKind.STAGE_END: StageEnd,
    EventKind.STAGE_ERROR: StageError,
    EventKind.STAGE_INTERRUPTED: NoData,
    EventKind.MODEL: ModelCall,
    EventKind.RETRY: Retry,
    EventKind.TOOL: ToolCall,
    EventKind.CONTEXT_COMPACTED: ContextCompacted,
    EventKind.TEXT_TOOL_CALLS: TextToolCalls,
    EventKind.REPAIR: Repair,
    EventKind.CITATION_CHECK: CitationCheck,
    EventKind.EVIDENCE: EvidenceChecked,
    EventKind.NOTE: Note,
    EventKind.FETCH: Fetch,
    EventKind.WEB_SEARCH: WebSearch,
    EventKind.LIBRARY_SEARCH: LibrarySearch,
    EventKind.MCP_SERVER: McpServer,
    EventKind.MCP_CALL: McpCall,
    EventKind.TOPICS_WARNING: Note,
    EventKind.TOPIC_CAPTURED: TopicCaptured,
    EventKind.TOPIC_CAPTURE_FAILED: TopicCaptureFailed,
    EventKind.RUN_END: RunEnded,
}


@dataclass(frozen=True)
class Event:
    kind: EventKind
    stage: str | None
    # Written through EventSink.emit (checked against the kind's TypedDict there); read
    # through data_of, which gives it that type back.
    data: dict[str, object] = field(default_factory=dict)
    ts: str = field(default_factory=now_iso)


Subscriber = Callable[[Event], None]


class EventSink:
    """What emitters need: tools, the model client and the pipeline all take one. The data
    of each kind is checked where it is emitted, against its TypedDict (DATA_OF)."""

    @overload
    def emit(
        self, kind: Literal[EventKind.STAGE_START], stage: str | None = ..., **data: Unpack[StageStart]
    ) -> None: ...
    @overload
    def emit(self, kind: Literal[EventKind.STAGE_END], stage: str | None = ..., **data: Unpack[StageEnd]) -> None: ...
    @overload
    def emit(
        self, kind: Literal[EventKind.STAGE_ERROR], stage: str | None = ..., **data: Unpack[StageError]
    ) -> None: ...
    @overload
    def emit(
        self, kind: Literal[EventKind.STAGE_INTERRUPTED], stage: str | None = ..., **data: Unpack[NoData]
    ) -> None: ...
    @overload
    def emit(self, kind: Literal[EventKind.MODEL], stage: str | None = ..., **data: Unpack[ModelCall]) -> None: ...
    @overload
    def emit(self, kind: Literal[EventKind.RETRY], stage: str | None = ..., **data: Unpack[Retry]) -> None: ...
    @overload
    def emit(self, kind: Literal[EventKind.TOOL], stage: str | None = ..., **data: Unpack[ToolCall]) -> None: ...
    @overload
    def emit(
        self, kind: Literal[EventKind.CONTEXT_COMPACTED], stage: str | None = ..., **data: Unpack[ContextCompacted]
    ) -> None: ...
    @overload
    def emit(
        self, kind: Literal[EventKind.TEXT_TOOL_CALLS], stage: str | None = ..., **data: Unpack[TextToolCalls]
    ) -> None: ...
    @overload
    def emit(self, kind: Literal[EventKind.REPAIR], stage: str | None = ..., **data: Unpack[Repair]) -> None: ...
    @overload
    def emit(
        self, kind: Literal[EventKind.CITATION_CHECK], stage: str | None = ..., **data: Unpack[CitationCheck]
    ) -> None: ...
    @overload
    def emit(
        self, kind: Literal[EventKind.EVIDENCE], stage: str | None = ..., **data: Unpack[EvidenceChecked]
    ) -> None: ...
    @overload
    def emit(self, kind: Literal[EventKind.NOTE], stage: str | None = ..., **data: Unpack[Note]) -> None: ...
    @overload
    def emit(self, kind: Literal[EventKind.FETCH], stage: str | None = ..., **data: Unpack[Fetch]) -> None: ...
    @overload
    def emit(self, kind: Literal[EventKind.WEB_SEARCH], stage: str | None = ..., **data: Unpack[WebSearch]) -> None: ...
    @overload
    def emit(
        self, kind: Literal[EventKind.LIBRARY_SEARCH], stage: str | None = ..., **data: Unpack[LibrarySearch]
    ) -> None: ...
    @overload
    def emit(self, kind: Literal[EventKind.MCP_SERVER], stage: str | None = ..., **data: Unpack[McpServer]) -> None: ...
    @overload
    def emit(self, kind: Literal[EventKind.MCP_CALL], stage: str | None = ..., **data: Unpack[McpCall]) -> None: ...
    @overload
    def emit(self, kind: Literal[EventKind.TOPICS_WARNING], stage: str | None = ..., **data: Unpack[Note]) -> None: ...
    @overload
    def emit(
        self, kind: Literal[EventKind.TOPIC_CAPTURED], stage: str | None = ..., **data: Unpack[TopicCaptured]
    ) -> None: ...
    @overload
    def emit(
        self, kind: Literal[EventKind.TOPIC_CAPTURE_FAILED], stage: str | None = ..., **data: Unpack[TopicCaptureFailed]
    ) -> None: ...
    @overload
    def emit(self, kind: Literal[EventKind.RUN_END], stage: str | None = ..., **data: Unpack[RunEnded]) -> None: ...
    def emit(self, kind: EventKind, stage: str | None = None, **data: object) -> None:
        self.deliver(Event(kind, stage, dict(data)))

    def deliver(self, event: Event) -> None:
        raise NotImplementedError


class EventBus(EventSink):
    """Delivers each event to every subscriber, in the order they subscribed."""

    def __init__(self, *subscribers: Subscriber) -> None:
        self._subscribers: list[Subscriber] = list(subscribers)

    def subscribe(self, subscriber: Subscriber) -> None:
        self._subscribers.append(subscriber)

    def deliver(self, event: Event) -> None:
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


class EventLog(EventSink):
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

    def deliver(self, event: Event) -> None:
        """Log one event directly (code that runs outside a pipeline run, e.g. capture)."""
        self(event)

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


# -- reading: an event's data checked against its kind's TypedDict ----------------------------
# Readers (the progress display, the batch worker, whatever reads events.jsonl back) take
# an event's data through data_of, so mypy checks the field names they read and a malformed
# event (a field missing or of another type, a line from an older or damaged log) is
# skipped by its reader, never a KeyError.


@cache
def _fields(shape: type) -> tuple[frozenset[str], dict[str, object]]:
    required: frozenset[str] = getattr(shape, "__required_keys__", frozenset())
    return required, get_type_hints(shape)


def _matches(value: object, annotation: object) -> bool:
    """Whether a JSON value fits a field's annotation (the types the TypedDicts above use)."""
    origin, args = get_origin(annotation), get_args(annotation)
    if annotation is object or annotation is Any:
        return True
    if annotation is type(None):
        return value is None
    if annotation is bool:
        return type(value) is bool
    if annotation is int:
        return type(value) is int
    if annotation is float:  # JSON writes 2.0 as 2.0, but a hand-made line may say 2
        return type(value) in (int, float)
    if annotation is str:
        return isinstance(value, str)
    if origin in (Union, UnionType):
        return any(_matches(value, arg) for arg in args)
    if origin is list:
        return isinstance(value, list) and all(_matches(item, args[0]) for item in value)
    if origin in (dict, Mapping):
        return isinstance(value, dict) and all(
            isinstance(key, str) and _matches(item, args[1]) for key, item in value.items()
        )
    return False  # a type the shapes do not use: refuse rather than pass it on unchecked


def well_formed(data: Mapping[str, object], shape: type) -> bool:
    """Whether `data` has every required field of the TypedDict `shape`, each field it has
    of its declared type (fields the shape does not name are allowed: a newer writer)."""
    required, hints = _fields(shape)
    if not required <= data.keys():
        return False
    return all(_matches(value, hints[key]) for key, value in data.items() if key in hints)


@overload
def data_of(event: Event, kind: Literal[EventKind.STAGE_START]) -> StageStart | None: ...
@overload
def data_of(event: Event, kind: Literal[EventKind.STAGE_END]) -> StageEnd | None: ...
@overload
def data_of(event: Event, kind: Literal[EventKind.STAGE_ERROR]) -> StageError | None: ...
@overload
def data_of(event: Event, kind: Literal[EventKind.STAGE_INTERRUPTED]) -> NoData | None: ...
@overload
def data_of(event: Event, kind: Literal[EventKind.MODEL]) -> ModelCall | None: ...
@overload
def data_of(event: Event, kind: Literal[EventKind.RETRY]) -> Retry | None: ...
@overload
def data_of(event: Event, kind: Literal[EventKind.TOOL]) -> ToolCall | None: ...
@overload
def data_of(event: Event, kind: Literal[EventKind.CONTEXT_COMPACTED]) -> ContextCompacted | None: ...
@overload
def data_of(event: Event, kind: Literal[EventKind.TEXT_TOOL_CALLS]) -> TextToolCalls | None: ...
@overload
def data_of(event: Event, kind: Literal[EventKind.REPAIR]) -> Repair | None: ...
@overload
def data_of(event: Event, kind: Literal[EventKind.CITATION_CHECK]) -> CitationCheck | None: ...
@overload
def data_of(event: Event, kind: Literal[EventKind.EVIDENCE]) -> EvidenceChecked | None: ...
@overload
def data_of(event: Event, kind: Literal[EventKind.NOTE]) -> Note | None: ...
@overload
def data_of(event: Event, kind: Literal[EventKind.FETCH]) -> Fetch | None: ...
@overload
def data_of(event: Event, kind: Literal[EventKind.WEB_SEARCH]) -> WebSearch | None: ...
@overload
def data_of(event: Event, kind: Literal[EventKind.LIBRARY_SEARCH]) -> LibrarySearch | None: ...
@overload
def data_of(event: Event, kind: Literal[EventKind.MCP_SERVER]) -> McpServer | None: ...
@overload
def data_of(event: Event, kind: Literal[EventKind.MCP_CALL]) -> McpCall | None: ...
@overload
def data_of(event: Event, kind: Literal[EventKind.TOPICS_WARNING]) -> Note | None: ...
@overload
def data_of(event: Event, kind: Literal[EventKind.TOPIC_CAPTURED]) -> TopicCaptured | None: ...
@overload
def data_of(event: Event, kind: Literal[EventKind.TOPIC_CAPTURE_FAILED]) -> TopicCaptureFailed | None: ...
@overload
def data_of(event: Event, kind: Literal[EventKind.RUN_END]) -> RunEnded | None: ...
@overload
def data_of(event: Event, kind: EventKind) -> Mapping[str, object] | None: ...
def data_of(event: Event, kind: EventKind) -> Mapping[str, object] | None:
    """The event's data typed as its kind's TypedDict, or None when the event is of another
    kind or its data does not have that shape."""
    if event.kind != kind or not well_formed(event.data, DATA_OF[kind]):
        return None
    return event.data


_ENVELOPE = ("ts", "kind", "stage")


def parse_event(record: object) -> Event | None:
    """The Event of one events.jsonl record (ts, kind and stage beside the data), None for
    anything else: not an object, an unknown kind, a stage or time that is not text. The
    data is checked when read, by data_of."""
    if not isinstance(record, dict):
        return None
    kind, stage, ts = record.get("kind"), record.get("stage"), record.get("ts")
    if not isinstance(kind, str) or kind not in _KINDS or not isinstance(ts, str):
        return None
    if stage is not None and not isinstance(stage, str):
        return None
    data = {str(key): value for key, value in record.items() if key not in _ENVELOPE}
    return Event(EventKind(kind), stage, data, ts)


_KINDS = frozenset(kind.value for kind in EventKind)


def load_events(path: Path) -> list[Event]:
    """events.jsonl as Events, in order; lines that are not an event (cut short by a crash,
    damaged, of an unknown kind) are skipped."""
    return [event for record in read_events(path) if (event := parse_event(record)) is not None]
