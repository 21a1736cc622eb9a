"""What every command module shares: the consoles, error handling and common options."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, NoReturn, TypeVar

import typer
from rich.console import Console

from pensieve.errors import PensieveError

if TYPE_CHECKING:  # imported for real inside the functions, so `--help` stays light
    from pensieve.workspace import Workspace

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
    except PensieveError as exc:
        fail(exc)


def print_json(data: object) -> None:
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def workspace_of(name: str) -> Workspace:
    from pensieve.config import pensieve_home
    from pensieve.workspace import open_workspace

    return open_workspace(pensieve_home(), name)
