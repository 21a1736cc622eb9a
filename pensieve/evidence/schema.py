"""The shape of evidence.json, as its readers may rely on it once `store.well_formed` has
checked an entry (the file itself is untrusted: a hand edit or another program may leave
anything in it, so the raw document stays a plain dict until an entry is checked).

The format is described for users in docs/evidence.md; these types are that description
for the type checker: `list`, `status`, `check`, the exports, the studio and the repair
lists read entries through them.
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

Verdict = Literal["supported", "weak", "unsupported"]


class Passage(TypedDict):
    """A stretch of an archived source: its text and where it is in sources/<id>.md."""

    text: str
    start: int
    end: int
    page: NotRequired[str]  # a library document's printed page label


class JudgeAnswer(TypedDict):
    """The model's second opinion on a disputed pair (evidence.judge)."""

    answer: str
    reason: NotRequired[str]


class CitationEvidence(TypedDict):
    """One citation of a sentence, judged on its own."""

    source: str  # the source id, S1, S2 ...
    verdict: Verdict
    score: float
    passage: Passage | None  # the passage the verdict rests on (None: nothing close)
    confidence: NotRequired[float]  # 0..1: repairs are asked only when sure
    passages: NotRequired[list[Passage]]  # further passages of the same source it rests on
    missing: NotRequired[list[str]]  # facts of the sentence found in no passage
    reasons: NotRequired[list[str]]
    judge: NotRequired[JudgeAnswer | None]


class SentenceEvidence(TypedDict):
    """A cited sentence of the article, with offsets into the artifact's text."""

    index: int
    text: str
    start: int
    end: int
    verdict: Verdict  # the worst of its citations'
    citations: list[CitationEvidence]
    findings: list[str]  # what a reader is told ("2014 not found in S5")


class EvidenceSummary(TypedDict):
    cited_sentences: int
    supported: int
    weak: int
    unsupported: int
    supported_share: float | None  # None when no sentence is cited


class ArtifactEvidence(TypedDict):
    """One aligned artifact (draft_v1.md, draft_v2.md, final.md): stale when its
    artifact_sha256 no longer matches the file."""

    artifact_sha256: str
    summary: EvidenceSummary
    sentences: list[SentenceEvidence]


__all__ = [
    "ArtifactEvidence",
    "CitationEvidence",
    "EvidenceSummary",
    "JudgeAnswer",
    "Passage",
    "SentenceEvidence",
    "Verdict",
]
