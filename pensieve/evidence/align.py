"""The alignment: each (cited sentence, cited source) pair gets the source passage that best
supports the sentence, a score and a verdict.

The score is the MiniLM cosine similarity between the sentence (its words, citations
removed) and the passage, one of the source's sentence windows. The verdict then weighs
the lexical evidence (pensieve.evidence.lexical): a number, date or name the sentence states
must be in the passage or the sentences next to it; a passage that says the opposite
(negation, direction) does not support it; a claim stronger than its passage is weak.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pensieve.evidence import lexical
from pensieve.evidence.segment import CitedSentence, Span, cited_sentences
from pensieve.evidence.store import VERDICTS, summarize, text_sha256
from pensieve.evidence.vectors import VectorCache
from pensieve.project.source_archive import label_at
from pensieve.topics.embedder import Embedder

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

_CANDIDATES = 6  # most similar windows weighed against the lexical evidence
_FACT_CANDIDATES = 12  # windows holding one of the sentence's numbers, weighed too
# Below this share of its content words near the passage, a sentence says more than the
# passage does (paraphrases in the labelled set: 0.33 and up; related claims: down to 0.1).
_MIN_COVERAGE = 0.25
_RANK = {v: i for i, v in enumerate(VERDICTS)}  # supported best


@dataclass(frozen=True)
class Thresholds:
    supported: float = 0.55
    weak: float = 0.40

    def as_dict(self) -> dict[str, float]:
        return {"supported": self.supported, "weak": self.weak}


@dataclass(frozen=True)
class SourceText:
    id: str
    text: str  # the archived text (after the front matter)
    offset: int = 0  # where that text starts in sources/<id>.md
    # A library document's page map: (offset in text, page label), so a passage has a page.
    pages: tuple[tuple[int, str], ...] = ()


@dataclass
class Citation:
    source: str
    verdict: str
    score: float
    passage: dict[str, Any] | None
    missing: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)  # why not supported, for the findings
    judge: dict[str, str] | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "verdict": self.verdict,
            "score": round(self.score, 3),
            "passage": self.passage,
            "missing": self.missing,
            "judge": self.judge,
        }


def _worse(a: str, b: str) -> str:
    return a if _RANK[a] > _RANK[b] else b


def assess(
    claim: str,
    vector: npt.NDArray[np.float32],
    windows: list[Span],
    vectors: npt.NDArray[np.float32],
    source: SourceText,
    thresholds: Thresholds,
    whole: lexical.Haystack | None = None,
) -> Citation:
    """One (sentence, source) pair: the best passage and the verdict."""
    import numpy as np

    if not windows:
        return Citation(source.id, "unsupported", 0.0, None, reasons=[f"{source.id} has no archived text"])
    whole = whole or source_haystack(source, windows)
    facts = lexical.facts(claim)
    sims = vectors @ vector
    order = list(np.argsort(-sims)[:_CANDIDATES])
    numeric = [f for f in facts if f.kind in ("number", "date")]
    if numeric:
        keys = _window_facts(windows)[0]
        holding = [i for i in range(len(windows)) if any(keys[i] & f.keys for f in numeric)]
        holding.sort(key=lambda i: -float(sims[i]))
        order.extend(i for i in holding[:_FACT_CANDIDATES] if i not in order)

    best: tuple[float, int, list[lexical.Fact]] | None = None
    for index in order:
        own = _haystack(windows, index, index)
        context = _haystack(windows, max(0, index - 1), min(len(windows) - 1, index + 1))
        missing = [f for f in facts if not context.has(f)]
        # Facts next to the passage count, but a passage that states them itself is better.
        aside = [f for f in facts if f.kind != "entity" and f not in missing and not own.has(f)]
        penalty = sum(0.3 if f.kind != "entity" else 0.05 for f in missing) + 0.2 * len(aside)
        rank = float(sims[index]) - penalty
        if best is None or rank > best[0]:
            best = (rank, int(index), missing)
    assert best is not None
    _rank, index, missing = best
    window = windows[index]
    score = float(sims[index])
    reasons: list[str] = []

    verdict = "supported" if score >= thresholds.supported else "weak" if score >= thresholds.weak else "unsupported"
    if verdict != "supported":
        reasons.append(f"closest passage of {source.id} scores {score:.2f}")
    for fact in missing:
        if fact.kind in ("number", "date"):
            verdict = "unsupported"
            where = "the passage" if whole.has(fact) else source.id
            reasons.append(f"{fact.surface} is not in {where}")
        elif whole.has(fact):
            continue  # a name the page gives elsewhere (pages name their subject once)
        else:
            verdict = "unsupported"
            reasons.append(f"{fact.surface} is not in {source.id}")
    if lexical.negated(claim) != lexical.negated(window.text):
        verdict = "unsupported"
        reasons.append("the passage says the opposite (negation)")
    claim_way, passage_way = lexical.direction(claim), lexical.direction(window.text)
    if claim_way and passage_way and claim_way.isdisjoint(passage_way):
        verdict = "unsupported"
        reasons.append(f"the passage goes the other way ({'/'.join(sorted(passage_way))})")
    stronger = lexical.stronger_cues(claim, window.text)
    if stronger:
        verdict = _worse(verdict, "weak")
        reasons.append("stated more strongly than the passage: " + ", ".join(stronger))
    context_text = " ".join(w.text for w in windows[max(0, index - 1) : index + 2])
    if lexical.coverage(claim, context_text) < _MIN_COVERAGE:
        verdict = _worse(verdict, "weak")
        reasons.append("most of its words are not in the passage")
    passage: dict[str, Any] = {
        "text": window.text,
        "start": source.offset + window.start,
        "end": source.offset + window.end,
    }
    page = label_at(source.pages, window.start)
    if page:
        passage["page"] = page
    shown = [f.surface for f in missing if f.kind != "entity" or not whole.has(f)]
    return Citation(source.id, verdict, score, passage, shown, reasons)


_FACTS_OF: dict[int, tuple[list[Span], list[set[str]], list[set[str]]]] = {}


def _window_facts(windows: list[Span]) -> tuple[list[set[str]], list[set[str]]]:
    """Each window's number keys and words, computed once per list of windows (the vector
    cache keeps the lists, so re-aligning against the same source reuses them)."""
    cached = _FACTS_OF.get(id(windows))
    if cached is not None and cached[0] is windows:
        return cached[1], cached[2]
    numbers = [lexical.number_keys(w.text) for w in windows]
    words = [lexical.word_keys(w.text) for w in windows]
    if len(_FACTS_OF) > 256:
        _FACTS_OF.clear()
    _FACTS_OF[id(windows)] = (windows, numbers, words)
    return numbers, words


def _haystack(windows: list[Span], first: int, last: int) -> lexical.Haystack:
    """Windows first..last (inclusive) as one text for the fact checks."""
    numbers, words = _window_facts(windows)
    text = " ".join(w.text for w in windows[first : last + 1])
    return lexical.Haystack(
        text, set().union(*numbers[first : last + 1]), set().union(*words[first : last + 1]), text.lower()
    )


def source_haystack(source: SourceText, windows: list[Span]) -> lexical.Haystack:
    """The whole source: its windows' facts (the windows cover the text) and its text."""
    numbers, words = _window_facts(windows)
    return lexical.Haystack(source.text, set().union(*numbers), set().union(*words), source.text.lower())


@dataclass
class Alignment:
    """One artifact's alignment, as evidence.json stores it."""

    name: str
    sha256: str
    sentences: list[dict[str, Any]]
    citations: list[list[Citation]]  # per sentence, kept for the judge and the repair list
    missing_everywhere: list[list[str]] = field(default_factory=list)  # per sentence

    def entry(self) -> dict[str, Any]:
        return {"artifact_sha256": self.sha256, "summary": summarize(self.sentences), "sentences": self.sentences}

    def refresh(self) -> None:
        """Recompute each sentence's verdict and findings from its citations (after the judge)."""
        for sentence, citations, missing in zip(self.sentences, self.citations, self.missing_everywhere, strict=True):
            sentence["citations"] = [c.as_json() for c in citations]
            sentence["verdict"] = _sentence_verdict(citations)
            sentence["findings"] = _findings(missing, citations)


def _sentence_verdict(citations: list[Citation]) -> str:
    return min((c.verdict for c in citations), key=lambda v: _RANK[v], default="unsupported")


def _findings(missing_everywhere: list[str], citations: list[Citation]) -> list[str]:
    findings = list(missing_everywhere)
    for citation in citations:
        if citation.judge is not None and citation.judge.get("answer") == "yes":
            continue
        if citation.verdict == "supported":
            continue
        reasons = [r for r in citation.reasons if not any(r.startswith(m.split(" is not in ")[0]) for m in findings)]
        if not reasons and len(reasons) < len(citation.reasons):
            continue  # already said: "14% is not in S3"
        label = "does not support it" if citation.verdict == "unsupported" else "supports it only weakly"
        text = f"{citation.source} {label}"
        if reasons:
            text += ": " + "; ".join(reasons)
        if citation.judge is not None:
            text += f" (judge: {citation.judge.get('answer')}, {citation.judge.get('reason', '')})"
        findings.append(text)
    return findings


def align_text(
    name: str,
    text: str,
    sources: dict[str, SourceText],
    cache: VectorCache,
    embedder: Callable[[], Embedder],
    thresholds: Thresholds,
    numbers: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
) -> Alignment:
    """Align every cited sentence of an artifact with its cited sources."""
    sentences = cited_sentences(text, numbers, labels)
    alignment = Alignment(name, text_sha256(text), [], [])
    if not sentences:
        return alignment
    wanted = {sid for s in sentences for sid in s.ids if sid in sources}
    windows = cache.windows({sid: sources[sid].text for sid in sorted(wanted)}) if wanted else {}
    wholes = {sid: source_haystack(sources[sid], windows[sid][0]) for sid in wanted}
    # Without a single archived source among the citations there is nothing to embed.
    vectors = embedder().encode([s.claim or s.text for s in sentences]) if wanted else [None] * len(sentences)
    for sentence, vector in zip(sentences, vectors, strict=True):
        citations = [
            assess(sentence.claim, vector, *windows[sid], sources[sid], thresholds, wholes[sid])
            if sid in wanted and vector is not None
            else Citation(sid, "unsupported", 0.0, None, reasons=[f"{sid} is not in the source archive"])
            for sid in sentence.ids
        ]
        alignment.citations.append(citations)
        cited_wholes = [wholes[sid] for sid in sentence.ids if sid in wholes]
        where = " or ".join(sentence.ids)
        alignment.missing_everywhere.append(
            [
                f"{fact.surface} is not in {where}"
                for fact in lexical.facts(sentence.claim)
                if fact.kind in ("number", "date") and not any(w.has(fact) for w in cited_wholes)
            ]
        )
        alignment.sentences.append(_sentence_json(sentence))
    alignment.refresh()
    return alignment


def _sentence_json(sentence: CitedSentence) -> dict[str, Any]:
    return {
        "index": sentence.index,
        "text": sentence.text,
        "start": sentence.start,
        "end": sentence.end,
        "verdict": "unsupported",
        "citations": [],
        "findings": [],
    }


def assess_pairs(
    pairs: list[tuple[str, str]], embedder: Callable[[], Embedder], thresholds: Thresholds
) -> list[Citation]:
    """(sentence, passage) pairs, each passage standing in for a whole source (the labelled
    set); the passages' windows and the sentences are embedded in one batch each."""
    cache = VectorCache(None, embedder)
    passages = {f"P{i}": passage for i, passage in enumerate(dict.fromkeys(p for _, p in pairs))}
    name_of = {passage: name for name, passage in passages.items()}
    windows = cache.windows(passages)
    claims = [claim_text_of(sentence) for sentence, _ in pairs]
    vectors = embedder().encode(claims)
    return [
        assess(claim, vector, *windows[name_of[passage]], SourceText("S1", passage), thresholds)
        for claim, vector, (_, passage) in zip(claims, vectors, pairs, strict=True)
    ]


def assess_pair(sentence: str, passage: str, embedder: Callable[[], Embedder], thresholds: Thresholds) -> Citation:
    """One sentence against one passage standing in for a whole source."""
    return assess_pairs([(sentence, passage)], embedder, thresholds)[0]


def claim_text_of(sentence: str) -> str:
    from pensieve.evidence.segment import claim_text

    return claim_text(sentence)
