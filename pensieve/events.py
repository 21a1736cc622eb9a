"""events.jsonl: one line per model call and tool call, appended, secrets scrubbed."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

from pensieve.redact import scrub
from pensieve.status import now_iso

_MAX_FIELD = 500


def _short(value: Any) -> Any:
    if isinstance(value, str):
        return value if len(value) <= _MAX_FIELD else value[:_MAX_FIELD] + f"...[{len(value)} chars]"
    if isinstance(value, dict):
        return {str(k): _short(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_short(v) for v in value[:20]]
    return value


class EventLog:
    """Appends whole lines with O_APPEND, so a crash can lose at most the last line."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._checked_tail = False

    def _needs_newline(self) -> bool:
        """A line cut short by a crash must not swallow the first line this run appends."""
        try:
            with self.path.open("rb") as handle:
                handle.seek(0, os.SEEK_END)
                if handle.tell() == 0:
                    return False
                handle.seek(-1, os.SEEK_END)
                return handle.read(1) != b"\n"
        except OSError:
            return False

    def emit(self, kind: str, stage: str | None = None, **fields: Any) -> None:
        record = {"ts": now_iso(), "kind": kind, "stage": stage, **_short(fields)}
        line = scrub(json.dumps(record, ensure_ascii=False, default=str)) + "\n"
        with self._lock:
            if not self._checked_tail:
                self._checked_tail = True
                if self._needs_newline():
                    line = "\n" + line
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                # "replace": lone surrogates from a model's JSON must not break the log.
                os.write(fd, line.encode("utf-8", errors="replace"))
            finally:
                os.close(fd)


def read_events(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    events = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a line cut short by a crash
    return events
