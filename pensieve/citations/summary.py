"""The citation check's result as data: what status.json keeps and `pensieve check --json` prints.

Plain records and nothing else, so that status.py can load a stored summary without
importing the checker (see pensieve.citations.check for how the figures are found).
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, Field


@dataclass(frozen=True)
class Problem:
    file: str
    kind: str  # unknown_citation | unfetched_url | quote_not_in_source | missing_reference |
    #            orphan_reference | duplicate_reference | reference_mismatch | low_citation_share |
    #            unaddressed_claim | consistency (a consistency report's open finding)
    detail: str

    def __str__(self) -> str:
        return f"{self.file}: {self.kind}: {self.detail}"


class FileSummary(BaseModel):
    """One checked artifact's figures."""

    citations: int = 0
    paragraphs: int = 0
    cited_paragraphs: int = 0
    # cited_paragraphs / paragraphs rounded to 3 places; None for a file with no prose paragraphs.
    cited_paragraph_share: float | None = None


class CheckSummary(BaseModel):
    """The latest check of a project. The defaults only matter for a hand-edited status.json:
    every Pensieve version has written all of these fields."""

    ok: bool = True
    sources: int = 0
    citations_checked: int = 0
    quotes_checked: int = 0
    files: dict[str, FileSummary] = Field(default_factory=dict)
    problems: list[Problem] = Field(default_factory=list)
