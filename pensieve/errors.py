"""The errors Pensieve raises on purpose, each mapped to an exit code by the CLI."""

from __future__ import annotations


class PensieveError(Exception):
    """An expected failure with a one-line message for the user."""

    exit_code = 1


class UsageError(PensieveError):
    """Bad input or configuration: nothing was changed (exit 2)."""

    exit_code = 2


class ProjectBusy(PensieveError):
    """Another process holds the project's run lock (exit 1)."""

    exit_code = 1


class CorruptState(PensieveError):
    """status.json cannot be read; it is never silently reset (exit 2)."""

    exit_code = 2
