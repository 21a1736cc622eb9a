"""Live progress on stderr: a rich table on a terminal, plain lines otherwise.

stdout is kept for data (ids, --json), so progress never pollutes a pipe.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from types import TracebackType
from typing import TextIO

from rich.console import Console
from rich.live import Live
from rich.table import Table

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


class PlainReporter:
    """One line per event, for logs and pipes."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.started = time.monotonic()

    def _line(self, text: str) -> None:
        elapsed = time.monotonic() - self.started
        print(f"[{elapsed:7.1f}s] {scrub(text)}", file=self.stream, flush=True)

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


class LiveReporter:
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


def make_reporter(quiet: bool = False) -> PlainReporter | LiveReporter:
    console = Console(stderr=True)
    if console.is_terminal and not quiet:
        return LiveReporter(console)
    return PlainReporter()
