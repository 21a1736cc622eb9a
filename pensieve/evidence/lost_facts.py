"""Facts lost between drafts: a sourced sentence of one version whose fact the next lacks.

A reviser short of room, or a polisher tightening prose, can drop a sentence that carried a
sourced fact, citation and all; nothing else notices, since what remains is all cited.
Each cited sentence of the earlier version is looked for in the later one: it is kept when
a sentence there (or two neighbouring ones, for a sentence split in two) says most of its
words and every one of its figures. What is not kept is listed, with its
sources and the figures that went missing, in the stage's result and by `pensieve check`,
as a warning: a writer may have cut it on purpose.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

from pensieve.article.citations import without_ids
from pensieve.evidence.segment import body_sentences, cited_sentences, claim_text
from pensieve.project.workspace import Project
from pensieve.stages import STAGES, Stage

_FIGURE = re.compile(r"(?<![\w.])\d+(?:[.,:]\d+)*(?:%|\b)")
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]{3,}")
_STOP = frozenset(
    {
        *("that", "this", "with", "from", "have", "were", "which", "their", "there", "about", "into", "than"),
        *("then", "they", "them", "these", "those", "when", "what", "will", "would", "could", "should", "also"),
        *("been", "being", "more", "most", "such", "only", "some", "other", "over", "under", "between", "after"),
        *("before", "while", "where", "because", "each", "many", "much", "very", "just", "like", "does", "your"),
    }
)
KEPT_WORDS = 0.5  # the share of a sentence's words a later sentence must say to be the same claim
SAME_WORDS = 0.7  # ... and to be it when a figure of it sits elsewhere in the later version


@dataclass(frozen=True)
class LostFact:
    draft: str  # the earlier version it was in
    later: str  # the version that lacks it
    sentence: str
    sources: tuple[str, ...]
    missing: tuple[str, ...]  # figures (numbers, versions, years) not found in the later version

    def line(self) -> str:
        gone = f" ({', '.join(self.missing)} no longer in {self.later})" if self.missing else ""
        cited = ", ".join(self.sources)
        return f'{self.draft}: a sourced fact is not in {self.later}: "{self.sentence}" [{cited}]{gone}'


def _figures(text: str) -> set[str]:
    return {m.group(0).rstrip(".,:") for m in _FIGURE.finditer(text)}


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text)} - _STOP


def _kept(words: set[str], figures: set[str], candidates: list[str], everywhere: set[str]) -> bool:
    for candidate in candidates:
        share = len(words & _words(candidate)) / len(words) if words else 1.0
        if share < KEPT_WORDS:
            continue
        if figures <= _figures(candidate):
            return True
        # "RFC 1522 restricted ..." become "The first design restricted ... [S2]": the
        # figure moved to the paragraph before; the same words say it is the same claim.
        if figures <= everywhere and share >= SAME_WORDS:
            return True
    return False


def lost_facts(before_name: str, before: str, after_name: str, after: str) -> list[LostFact]:
    """The cited sentences of `before` whose claim `after` no longer makes."""
    later = [claim_text(span.text) for span in body_sentences(after)]
    windows = later + [f"{a} {b}" for a, b in itertools.pairwise(later)]
    everywhere = _figures(after)
    lost: list[LostFact] = []
    for sentence in cited_sentences(before):
        words, figures = _words(sentence.claim), _figures(sentence.claim)
        if _kept(words, figures, windows, everywhere):
            continue
        missing = tuple(sorted(figures - everywhere))
        shown = " ".join(without_ids(sentence.text).split())  # as written: `&*x` stays `&*x`
        lost.append(LostFact(before_name, after_name, shown, sentence.ids, missing))
    return lost


def stage_lost_facts(project: Project, stage: Stage) -> list[LostFact] | None:
    """The lost facts of one stage's rewrite on disk; None when it rewrites nothing (yet)."""
    after = project.file(stage.writes)
    if stage.revises is None or not after.is_file():
        return None
    before = next((a for a in (stage.revises, *stage.optional_reads) if project.file(a).is_file()), None)
    if before is None:
        return None
    text = project.file(before).read_text(encoding="utf-8", errors="replace")
    return lost_facts(before, text, stage.writes, after.read_text(encoding="utf-8", errors="replace"))


def project_lost_facts(project: Project) -> list[LostFact]:
    """Lost facts of every rewrite on disk (each stage that revises an earlier version)."""
    return [fact for stage in STAGES for fact in stage_lost_facts(project, stage) or []]
