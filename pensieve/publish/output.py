"""Where an export may write: it replaces its output file, and only a regular file."""

from __future__ import annotations

from pathlib import Path

from pensieve.errors import UsageError
from pensieve.project.workspace import special_file_kind


def check_replaceable(target: Path) -> None:
    """An export replaces its output file, and only a regular file: a FIFO or a device node
    (/dev/full as root) would otherwise be renamed over and lost."""
    kind = special_file_kind(target)
    if kind == "a directory" or (kind == "a symbolic link" and target.is_dir()):
        raise UsageError(f"{target} is a directory; give a file name with --output")
    if kind is not None:
        raise UsageError(
            f"{target} is {kind}, not a regular file; an export only replaces a file: choose another --output"
        )
