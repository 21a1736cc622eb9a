"""What extraction gives and what bounds it: shared by `extract` (in this process) and
`isolation` (which runs the PDF reader in a child process and must not import `extract`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Kind = Literal["pdf", "docx", "html", "markdown", "text"]


class ExtractionError(ValueError):
    """A file that cannot be added: the message is the one-line reason."""


@dataclass(frozen=True)
class Limits:
    """The `library.*` limits that bound extraction."""

    max_pages: int = 2_000
    max_unpacked_bytes: int = 200_000_000
    max_text_chars: int = 5_000_000
    # A PDF is read in a child process (pensieve.library.isolation) killed past this time,
    # with at most this much memory for the PDF itself.
    timeout_s: float = 120.0
    memory_mb: int = 2_048


@dataclass(frozen=True)
class Extracted:
    kind: Kind
    text: str
    # (offset in text, label): where each page ("12", "iv") or heading starts, in order.
    marks: tuple[tuple[int, str], ...]
    mark_kind: Literal["page", "heading", ""]
    title: str = ""
    authors: tuple[str, ...] = ()
    published: str = ""  # ISO date or its prefix
    doi: str = ""
    isbn: str = ""


__all__ = ["Extracted", "ExtractionError", "Kind", "Limits"]
