"""The errors Pensieve raises on purpose, each mapped to an exit code by the CLI, and the
one wording of a pydantic validation error inside their messages."""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import ValidationError


def format_validation_error(error: ValidationError, *, noun: str = "argument", limit: int = 5) -> str:
    """`where: what` for the first `limit` problems of a pydantic error, joined by "; ".

    A key the model does not have reads `unknown <noun>` (a tool's argument, a config key,
    a status.json field) instead of pydantic's "Extra inputs are not permitted"."""
    parts = []
    for item in error.errors()[:limit]:
        where = ".".join(str(part) for part in item["loc"])
        msg = f"unknown {noun}" if item["type"] == "extra_forbidden" else item["msg"]
        msg = msg.removeprefix("Value error, ")  # our validators' messages say it all
        # A check across sections names its own key (agents.researcher.tools.allow[0]: ...).
        parts.append(f"{where}: {msg}" if where else msg)
    return "; ".join(parts)


def has_lone_surrogate(text: str) -> bool:
    """Whether text holds a lone surrogate: bytes that were not UTF-8 (an argument, kept by
    Python's surrogateescape) or an escape such as `\\udcff` in JSON or YAML. It is no text:
    no file can hold it as UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # raised for surrogates only
        return True
    return False


def shown_name(name: str, limit: int = 60) -> str:
    """A file name someone gave, quoted for one line of an error: control characters escaped
    (repr: a newline in a name never splits the line), and cut when it is longer than anyone
    needs to recognise it."""
    if name.isprintable() and len(name) <= limit:
        return name  # an ordinary name reads best as it is
    text = repr(name)
    return text if len(text) <= limit else f"{text[: limit - 5]}...{text[0]} ({len(name)} characters)"


class ErrorKind(StrEnum):
    """What sort of refusal an error is, for callers that answer other than with an exit code
    (the studio maps it to 400, 404 or 409) instead of sorting messages by their words."""

    BAD_INPUT = "bad_input"  # the request itself is wrong: fix it and ask again
    NOT_FOUND = "not_found"  # it names something that does not exist
    CONFLICT = "conflict"  # it clashes with what exists or runs now


class PensieveError(Exception):
    """An expected failure with a one-line message for the user."""

    exit_code = 1
    kind = ErrorKind.BAD_INPUT

    def __init__(self, message: str = "", *, kind: ErrorKind | None = None) -> None:
        super().__init__(message)
        if kind is not None:
            self.kind = kind


class UsageError(PensieveError):
    """Bad input or configuration: nothing was changed (exit 2)."""

    exit_code = 2


class Busy(PensieveError):
    """Another process holds a lock this needs: a project's run lock, an index's or the
    library's update lock (exit 1)."""

    exit_code = 1
    kind = ErrorKind.CONFLICT


class ProjectBusy(Busy):
    """Another process holds the project's run lock (exit 1)."""


class CorruptState(PensieveError):
    """status.json cannot be read; it is never silently reset (exit 2)."""

    exit_code = 2


class StageFailed(Exception):
    """A stage cannot finish; the message is stored in status.json as its error.

    Not a PensieveError: the run goes on to settle the project, and the CLI reports the
    failed stage with exit 1."""
