"""Live progress on stderr: a rich table on a terminal, plain lines otherwise.

Both reporters are subscribers of the run's event stream (pensieve.project.events): `Display`
turns each event into the one or two things a person watching needs to see, and the two
classes only differ in how they show them. stdout is kept for data (ids, --json), so
progress never pollutes a pipe.
"""

from __future__ import annotations

import sys
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import TextIO

from rich.console import Console
from rich.live import Live
from rich.table import Table

from pensieve.cli.support import silence
from pensieve.project.events import Event, EventKind, data_of
from pensieve.redact import scrub


@dataclass
class _Row:
    model: str
    state: str = "running"
    started: float = field(default_factory=time.monotonic)
    ended: float | None = None
    calls: int = 0
    tokens: int = 0
    last: str = ""


# What a turn that asks for a better artifact is about (pensieve.run.finishing).
_ASKED_AGAIN = {
    "reminder": "the model did not write its file; reminding it",
    "contract": "the artifact does not meet its contract; asking the model to fix it",
    "cut_off": "the reply was cut off by the output limit; asking the model to write within it",
}


class Display(ABC):
    """Event -> what a person sees; subclasses say how to show it."""

    # `pensieve run --verbose`: a failed model call's whole exception chain too (bug reports).
    verbose: bool = False

    def __call__(self, event: Event) -> None:
        # Each kind's data is read typed (data_of): an event whose data lacks a field or has
        # another type is not shown, never a KeyError in the middle of a run.
        shown = _SHOWN.get(event.kind)
        if shown is not None:
            shown(self, event.stage or "", event)

    def _stage_start(self, stage: str, event: Event) -> None:
        if (data := data_of(event, EventKind.STAGE_START)) is not None:
            self.stage_started(stage, data["model"])

    def _stage_end(self, stage: str, event: Event) -> None:
        if (data := data_of(event, EventKind.STAGE_END)) is not None:
            usage = data["usage"]
            tokens = _count(usage.get("prompt_tokens")) + _count(usage.get("completion_tokens"))
            self.stage_finished(stage, "complete", f"{tokens:,} tokens")

    def _stage_error(self, stage: str, event: Event) -> None:
        if (data := data_of(event, EventKind.STAGE_ERROR)) is not None:
            self.stage_finished(stage, "error", scrub(data["error"]))

    def _stage_interrupted(self, stage: str, event: Event) -> None:
        self.stage_finished(stage, "interrupted", "")

    def _tool(self, stage: str, event: Event) -> None:
        if (data := data_of(event, EventKind.TOOL)) is not None:
            self.tool_called(stage, data["tool"], scrub(data["arguments"]), bool(data["error"]))

    def _model(self, stage: str, event: Event) -> None:
        data = data_of(event, EventKind.MODEL)
        if data is None:
            return
        if data.get("error") is None:
            self.model_called(stage, data.get("prompt_tokens", 0), data.get("completion_tokens", 0))
        elif self.verbose and data.get("detail"):
            self.note(f"{stage}: model call failed: {data.get('detail')}")

    def _retry(self, stage: str, event: Event) -> None:
        if (data := data_of(event, EventKind.RETRY)) is not None:
            error, wait = data["error"][:160], float(data["wait_s"])
            self.note(f"{stage}: model call failed ({error}); retrying in {wait:.1f}s")
            if self.verbose and data["detail"]:
                self.note(f"{stage}: {data['detail']}")

    def _citation_check(self, stage: str, event: Event) -> None:
        if (data := data_of(event, EventKind.CITATION_CHECK)) is not None and not data["ok"]:
            self.note(f"citation check after {stage}: {data['problem_count']} problem(s)")

    def _evidence(self, stage: str, event: Event) -> None:
        data = data_of(event, EventKind.EVIDENCE)
        summary = data["summary"] if data is not None else {}
        if summary.get("cited_sentences"):
            self.note(
                f"evidence after {stage}: {summary.get('supported', 0)}/{summary.get('cited_sentences', 0)} "
                f"cited sentences supported, {summary.get('unsupported', 0)} unsupported"
            )

    def _repair(self, stage: str, event: Event) -> None:
        if (data := data_of(event, EventKind.REPAIR)) is not None:
            self.note(f"{stage}: {_ASKED_AGAIN.get(data['reason'], 'asking the model again')}")

    def _note(self, stage: str, event: Event) -> None:
        if (data := data_of(event, EventKind.NOTE)) is not None:
            self.note(data["message"])

    def _topic_captured(self, stage: str, event: Event) -> None:
        if (data := data_of(event, EventKind.TOPIC_CAPTURED)) is not None:
            self.note(f"topic memory: the article was captured as {data['slug']}")

    def _topic_capture_failed(self, stage: str, event: Event) -> None:
        if (data := data_of(event, EventKind.TOPIC_CAPTURE_FAILED)) is not None:
            self.note(f"topic memory: the article was not captured ({data['error']})")

    @abstractmethod
    def stage_started(self, stage: str, model: str) -> None: ...

    @abstractmethod
    def stage_finished(self, stage: str, status: str, detail: str) -> None: ...

    @abstractmethod
    def tool_called(self, stage: str, name: str, summary: str, is_error: bool) -> None: ...

    @abstractmethod
    def model_called(self, stage: str, prompt_tokens: int, completion_tokens: int) -> None: ...

    @abstractmethod
    def note(self, message: str) -> None: ...


def _count(value: object) -> int:
    """A token count from a usage record (0 when it is not a number)."""
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


# The kinds a person watching is shown, and how (the others are for events.jsonl only).
_SHOWN: dict[EventKind, Callable[[Display, str, Event], None]] = {
    EventKind.STAGE_START: Display._stage_start,
    EventKind.STAGE_END: Display._stage_end,
    EventKind.STAGE_ERROR: Display._stage_error,
    EventKind.STAGE_INTERRUPTED: Display._stage_interrupted,
    EventKind.TOOL: Display._tool,
    EventKind.MODEL: Display._model,
    EventKind.RETRY: Display._retry,
    EventKind.CITATION_CHECK: Display._citation_check,
    EventKind.EVIDENCE: Display._evidence,
    EventKind.REPAIR: Display._repair,
    EventKind.NOTE: Display._note,
    EventKind.TOPIC_CAPTURED: Display._topic_captured,
    EventKind.TOPIC_CAPTURE_FAILED: Display._topic_capture_failed,
}


class PlainReporter(Display):
    """One line per event, for logs and pipes."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.started = time.monotonic()

    def _line(self, text: str) -> None:
        elapsed = time.monotonic() - self.started
        try:
            print(f"[{elapsed:7.1f}s] {scrub(text)}", file=self.stream, flush=True)
        except BrokenPipeError:
            # The reader went away (`pensieve run ID 2>&1 | head`): the progress is only a
            # view of events.jsonl, so the run goes on to its end, silently.
            silence(self.stream)

    def stage_started(self, stage: str, model: str) -> None:
        self._line(f"{stage}: started ({model})")

    def stage_finished(self, stage: str, status: str, detail: str) -> None:
        self._line(f"{stage}: {status}{' - ' + detail if detail else ''}")

    def tool_called(self, stage: str, name: str, summary: str, is_error: bool) -> None:
        self._line(f"{stage}: {name}({summary}){' -> error' if is_error else ''}")

    def model_called(self, stage: str, prompt_tokens: int, completion_tokens: int) -> None:
        self._line(f"{stage}: model call, {prompt_tokens} prompt + {completion_tokens} completion tokens")

    def note(self, message: str) -> None:
        self._line(message)

    def __enter__(self) -> PlainReporter:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


class LiveReporter(Display):
    """A table of stages that updates in place while the run goes on."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.rows: dict[str, _Row] = {}
        self.started = time.monotonic()
        self.live = Live(
            self._render(), console=console, refresh_per_second=4, transient=False, get_renderable=self._render
        )

    def _render(self) -> Table:
        table = Table(title=f"pensieve run - {time.monotonic() - self.started:.0f}s", expand=False)
        for column in ("stage", "state", "time", "model calls", "tokens", "last tool call"):
            table.add_column(column, no_wrap=True, overflow="ellipsis")
        for stage, row in self.rows.items():
            elapsed = (row.ended or time.monotonic()) - row.started
            style = {"complete": "green", "error": "red", "interrupted": "yellow"}.get(row.state, "cyan")
            table.add_row(
                stage, f"[{style}]{row.state}[/]", f"{elapsed:.0f}s", str(row.calls), f"{row.tokens:,}", row.last[:60]
            )
        return table

    def stage_started(self, stage: str, model: str) -> None:
        self.rows[stage] = _Row(model)

    def stage_finished(self, stage: str, status: str, detail: str) -> None:
        row = self.rows.setdefault(stage, _Row(""))
        row.state, row.ended = status, time.monotonic()
        if status == "error":
            self.console.print(f"[red]{stage} failed:[/] {scrub(detail)}", markup=True, highlight=False)

    def tool_called(self, stage: str, name: str, summary: str, is_error: bool) -> None:
        row = self.rows.setdefault(stage, _Row(""))
        row.last = f"{name}({summary})" + (" !" if is_error else "")

    def model_called(self, stage: str, prompt_tokens: int, completion_tokens: int) -> None:
        row = self.rows.setdefault(stage, _Row(""))
        row.calls += 1
        row.tokens += prompt_tokens + completion_tokens

    def note(self, message: str) -> None:
        self.console.print(scrub(message), markup=False, highlight=False)

    def __enter__(self) -> LiveReporter:
        self.live.__enter__()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        # Always restore the terminal (cursor, line state), even on Ctrl-C.
        self.live.__exit__(exc_type, exc, tb)


def make_reporter(quiet: bool = False, verbose: bool = False) -> PlainReporter | LiveReporter:
    console = Console(stderr=True)
    reporter: PlainReporter | LiveReporter = (
        LiveReporter(console) if console.is_terminal and not quiet else PlainReporter()
    )
    reporter.verbose = verbose
    return reporter
