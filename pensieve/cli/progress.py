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
from dataclasses import dataclass, field
from types import TracebackType
from typing import TextIO

from rich.console import Console
from rich.live import Live
from rich.table import Table

from pensieve.cli.support import silence
from pensieve.project.events import Event, EventKind
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
        stage = event.stage or ""
        match event.kind:
            case EventKind.STAGE_START:
                self.stage_started(stage, str(event.get("model", "")))
            case EventKind.STAGE_END:
                usage = event.get("usage") or {}
                tokens = int(usage.get("prompt_tokens", 0)) + int(usage.get("completion_tokens", 0))
                self.stage_finished(stage, "complete", f"{tokens:,} tokens")
            case EventKind.STAGE_ERROR:
                self.stage_finished(stage, "error", scrub(str(event.get("error", ""))))
            case EventKind.STAGE_INTERRUPTED:
                self.stage_finished(stage, "interrupted", "")
            case EventKind.TOOL:
                self.tool_called(
                    stage, str(event.get("tool")), scrub(str(event.get("arguments", ""))), bool(event.get("error"))
                )
            case EventKind.MODEL if event.get("error") is None:
                self.model_called(stage, int(event.get("prompt_tokens", 0)), int(event.get("completion_tokens", 0)))
            case EventKind.MODEL if self.verbose and event.get("detail"):
                self.note(f"{stage}: model call failed: {event.get('detail')}")
            case EventKind.RETRY:
                error, wait = str(event.get("error", ""))[:160], float(event.get("wait_s", 0.0))
                self.note(f"{stage}: model call failed ({error}); retrying in {wait:.1f}s")
                if self.verbose and event.get("detail"):
                    self.note(f"{stage}: {event.get('detail')}")
            case EventKind.CITATION_CHECK if not event.get("ok"):
                self.note(f"citation check after {stage}: {event.get('problem_count', 0)} problem(s)")
            case EventKind.EVIDENCE if (event.get("summary") or {}).get("cited_sentences"):
                summary = event.get("summary") or {}
                self.note(
                    f"evidence after {stage}: {summary.get('supported', 0)}/{summary.get('cited_sentences', 0)} "
                    f"cited sentences supported, {summary.get('unsupported', 0)} unsupported"
                )
            case EventKind.REPAIR:
                self.note(f"{stage}: {_ASKED_AGAIN.get(str(event.get('reason')), 'asking the model again')}")
            case EventKind.NOTE:
                self.note(str(event.get("message", "")))
            case EventKind.TOPIC_CAPTURED:
                self.note(f"topic memory: the article was captured as {event.get('slug')}")
            case EventKind.TOPIC_CAPTURE_FAILED:
                self.note(f"topic memory: the article was not captured ({event.get('error')})")
            case _:
                pass

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
