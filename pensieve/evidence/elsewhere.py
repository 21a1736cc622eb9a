"""A claim cited to the wrong source: the cited page says it only loosely while another source
of the project says it closely, in more of the sentence's words. Moving a claim to the
neighbouring source is a slip models make (a planted "wrong source" in the real set); a reader
checking the cited page alone finds something near it and lets it pass.

Looked at only where it can change a verdict, so a check embeds a few windows more, not the
whole archive: a supported citation scoring below DOUBTFUL, against the LOOK_AT other sources
whose best window shares the sentence's rarest words most, through the first WINDOWS windows
the alignment would embed for a citation of them (`candidates`) and any of the others already
embedded. Measured on the real set (docs/evidence.md): 2 wrong sources caught that nothing
else catches, no genuine sentence flagged; the right source was the first by words both times
(LOOK_AT 2 leaves room for a page that words it otherwise).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from pensieve.evidence import lexical
from pensieve.evidence.align import (
    Citation,
    SourceText,
    SourceView,
    Thresholds,
    assess,
    candidates,
    rare_word_scores,
    view_of,
)
from pensieve.evidence.vectors import VectorCache

DOUBTFUL = 0.70  # a supported citation scoring below this may be the wrong source
CLEAR = 0.80  # the other source's passage scores at least this ...
CLOSER = 0.12  # ... and this much more than the cited one ...
MORE_WORDS = 0.15  # ... and holds this share more of the sentence's words
LOOK_AT = 2
RUNNER_UP = 0.8  # the second source only when it shares nearly as much (its words score this share)
# New windows embedded per source looked at (4 to all of them: the same catches on the real set;
# all of them cost the pipeline's first check 0.7-1.0 s on 14 long pages).
WINDOWS = 5


def recheck(
    claims: list[str],
    citations: list[list[Citation]],
    sources: Mapping[str, SourceText],
    cache: VectorCache,
    thresholds: Thresholds,
    among: list[set[str]] | None = None,
) -> int:
    """Lower to weak each doubtful citation another source says much more closely (in place;
    the caller refreshes the verdicts). `among`: per claim, the sources it may have come from
    (default: every source not cited by it). Returns how many citations were lowered."""
    doubtful = [k for k, cited in enumerate(citations) if any(_doubtful(c) for c in cited)]
    if not doubtful:
        return 0
    texts = {sid: source.text for sid, source in sources.items()}
    prepared = cache.prepare(texts)
    views = {sid: view_of(source, *prepared[sid]) for sid, source in sources.items()}
    looks: dict[int, list[tuple[str, list[int]]]] = {}
    needed: dict[str, set[int]] = {}
    for k in doubtful:
        cited = {c.source for c in citations[k]}
        pool = among[k] if among is not None else set(views)
        looks[k] = _closest_by_words(claims[k], [views[sid] for sid in sorted(pool - cited) if sid in views])
        for sid, windows in looks[k]:
            needed.setdefault(sid, set()).update(windows)
    if not needed:
        return 0
    cache.fill(needed, texts)
    vectors = cache.claims([claims[k] for k in doubtful])
    lowered = 0
    for k, vector in zip(doubtful, vectors, strict=True):
        found = [assess(claims[k], vector, views[sid], thresholds, [], windows) for sid, windows in looks[k]]
        for citation in citations[k]:
            closer = _said_closer(claims[k], citation, found)
            if closer is not None:
                citation.verdict = "weak"
                citation.confidence = 0.5
                citation.reasons.append(
                    f"{closer.source} says it more closely ({closer.score:.2f} against {citation.score:.2f}):"
                    f" is {citation.source} the source?"
                )
                lowered += 1
    return lowered


def _doubtful(citation: Citation) -> bool:
    return citation.verdict == "supported" and citation.score < DOUBTFUL and citation.passage is not None


def _closest_by_words(claim: str, views: list[SourceView]) -> list[tuple[str, list[int]]]:
    """The LOOK_AT sources whose best window shares the claim's rarest words most (by each
    source's own rarity), with the windows a citation of them would be weighed on."""
    ranked: list[tuple[float, SourceView, list[float]]] = []
    for view in views:
        scores = rare_word_scores(claim, view)
        if scores and max(scores) > 0:
            ranked.append((max(scores), view, scores))
    ranked.sort(key=lambda r: -r[0])
    close = [(view, scores) for best, view, scores in ranked[:LOOK_AT] if best >= ranked[0][0] * RUNNER_UP]
    return [(view.source.id, _pool(claim, view, scores)) for view, scores in close]


def _pool(claim: str, view: SourceView, scores: list[float]) -> list[int]:
    """The first WINDOWS windows a citation of the source would be weighed on (`scores`: its
    windows' rare-word scores, already computed), and any other of them already embedded
    (free: an earlier sentence needed it)."""
    pool = candidates(claim, view, scores)
    return pool[:WINDOWS] + [i for i in pool[WINDOWS:] if not math.isnan(float(view.vectors[i, 0]))]


def _said_closer(claim: str, citation: Citation, found: list[Citation]) -> Citation | None:
    if not _doubtful(citation) or citation.passage is None:
        return None
    own_words = lexical.coverage(claim, citation.passage["text"])
    for other in sorted(found, key=lambda c: -c.score):
        if (
            other.verdict == "supported"
            and other.passage is not None
            and other.score >= max(CLEAR, citation.score + CLOSER)
            and lexical.coverage(claim, other.passage["text"]) >= own_words + MORE_WORDS
        ):
            return other
    return None
