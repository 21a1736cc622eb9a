"""What every command module shares: the consoles, error handling and common options."""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, NoReturn, TextIO, TypeVar

import typer
from rich.console import Console

from pensieve.errors import PensieveError, UsageError, has_lone_surrogate, shown_name

if TYPE_CHECKING:  # imported for real inside the functions, so `--help` stays light
    from rich.table import Table

    from pensieve.project.workspace import Workspace

err = Console(stderr=True, highlight=False, soft_wrap=True)
# Piped output is not cut to 80 columns: tables keep whole ids for scripts and `grep`.
out = Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 240)

WorkspaceOpt = Annotated[str, typer.Option("--workspace", "-w", help="Workspace name under workspaces/.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON only on stdout.")]

T = TypeVar("T")


def fail(error: PensieveError) -> NoReturn:
    from pensieve.redact import scrub

    err.print(f"error: {scrub(str(error))}", markup=False)
    raise typer.Exit(error.exit_code)


def guarded(action: Callable[[], T]) -> T:
    try:
        return action()
    except (PensieveError, OSError, RecursionError) as exc:
        fail(expected_error(exc))


def expected_error(exc: PensieveError | OSError | RecursionError) -> PensieveError:
    """An expected failure as the PensieveError whose one line the user is shown."""
    if isinstance(exc, PensieveError):
        return exc
    if isinstance(exc, OSError):
        return storage_error(exc)
    return PensieveError("a file Pensieve read is nested too deeply to be one of its own; check the project's files")


def storage_error(exc: OSError) -> PensieveError:
    """A file system failure (a full disk, a read-only directory, a refused link) as one
    line naming the path and the cause; files are written atomically, so none is left
    half-written (exit 1)."""
    if exc.errno == errno.ENAMETOOLONG:
        # Only a name someone gave is ever that long: bad input (exit 2), shown shortened.
        named = shown_name(str(exc.filename)) if exc.filename else "a file name"
        return UsageError(f"{named}: the file name is too long for the file system; give a shorter one")
    where = f"{exc.filename}: " if exc.filename else ""
    cause = exc.strerror or type(exc).__name__
    hint = ""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        hint = "; free some space and run the command again (nothing was left half-written)"
    elif exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        hint = "; check the permissions of the directory (nothing was left half-written)"
    elif exc.errno == errno.ELOOP:
        hint = "; Pensieve does not follow symbolic links in a project: replace the link by the file"
    return PensieveError(f"{where}{cause}{hint}")


def silence(stream: TextIO) -> None:
    """A closed pipe (`| head` has read enough) becomes /dev/null: later writes, and the
    interpreter's flush at exit, succeed without output instead of raising BrokenPipeError."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # not a real file (a test's capture): nothing to redirect
        pass


def workspace_of(name: str) -> Workspace:
    """The workspace a command works in. Every command comes here first, so this is where
    the configuration is checked (cheaply) for the commands that do not load it whole."""
    from pensieve.cli.config_check import checked_workspace

    return checked_workspace(name)


def check_text(value: str | None, what: str) -> str | None:
    """A command-line argument must be text: bytes that are not UTF-8 arrive as lone
    surrogates (Python's surrogateescape), which no file can hold."""
    if value is not None and has_lone_surrogate(value):
        raise UsageError(f"{what} is not valid UTF-8 text; check the terminal's encoding or use --file")
    return value


def plain_table(*columns: str, fold: tuple[str, ...] = ()) -> Table:
    """The commands' borderless table with these columns, each cut with an ellipsis when
    too wide but the `fold` ones (long text: titles, errors, URLs), which wrap."""
    from rich.table import Table

    table = Table(box=None, pad_edge=False)
    for column in columns:
        table.add_column(column, overflow="fold" if column in fold else "ellipsis")
    return table
