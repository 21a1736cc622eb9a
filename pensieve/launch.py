"""The `pensieve` command's entry point.

`pensieve list --json` is what scripts, dashboards and the studio's users call over and
over, often over thousands of projects. It is answered here without the command-line
framework (Typer builds a pydantic adapter for any option that takes a value) or rich:
the same checks (the configuration, the workspace name), the same rows, the same text.
Every other command line, and a `list --json` that fails in any way, goes to
`pensieve.cli.main`, which parses it and reports what is wrong the usual way; nothing is
printed here before the answer is whole.
"""

from __future__ import annotations

import sys

from pensieve.errors import has_lone_surrogate


def main() -> None:
    args = sys.argv[1:]
    # Bytes on the command line that are not UTF-8 reach us as lone surrogates: refused
    # here with one line (each command also checks its own free-text arguments).
    if any(has_lone_surrogate(arg) for arg in args):
        sys.stderr.write("error: a command-line argument is not valid UTF-8 text; check the terminal's encoding\n")
        raise SystemExit(2)
    workspace = list_json_workspace(args)
    if workspace is not None:
        try:
            text = _list_json(workspace)
        except KeyboardInterrupt:
            sys.stderr.write("Aborted!\n")  # what the full command line says
            raise SystemExit(1) from None
        if text is not None:
            sys.stdout.write(text)
            return
    from pensieve.cli.main import main as cli_main

    cli_main()


def list_json_workspace(args: list[str]) -> str | None:
    """The workspace of a `list --json` command line in a form this parser is sure of
    (`--workspace NAME`, `--workspace=NAME`, `-w NAME`); None for any other command line."""
    if not args or args[0] != "list":
        return None
    workspace, as_json = "default", False
    rest = iter(args[1:])
    for arg in rest:
        if arg == "--json":
            as_json = True
        elif arg in ("--workspace", "-w"):
            value = next(rest, None)
            if value is None:
                return None
            workspace = value
        elif arg.startswith("--workspace="):
            workspace = arg.partition("=")[2]
        else:
            return None
    return workspace if as_json else None


def _list_json(workspace: str) -> str | None:
    """The text `pensieve list --json` prints; None when anything went wrong (the full
    command line then runs the same steps and explains the problem)."""
    from pensieve.cli.config_check import checked_workspace
    from pensieve.json_text import json_text
    from pensieve.project.listing import summarize_projects

    try:
        rows = summarize_projects(checked_workspace(workspace))
    except Exception:  # every failure is reported by the full path, which repeats the work
        return None
    return json_text([row.to_json() for row in rows]) + "\n"
