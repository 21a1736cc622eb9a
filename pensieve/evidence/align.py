"""The alignment: each (cited sentence, cited source) pair gets the source passage that best
supports the sentence, a score and a verdict.

The score is the MiniLM cosine similarity between the sentence (its words, citations
removed) and the passage, one of the source's sentence windows. The verdict then weighs
the lexical evidence (pensieve.evidence.lexical): a number, date or name the sentence states
must be in the passage or the sentences next to it; a passage that says the opposite
(negation, direction) does not support it; a claim stronger than its passage is weak.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
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
_LEXICAL_CANDIDATES = 16  # windows sharing the most words with a claim: the only ones embedded
# ... of which only those sharing at least this share of the best window's rare words (and
# never fewer than _LEXICAL_MIN): a sentence copied from a page has one window far ahead of
# the rest, and embedding the tail is most of a cold check's cost.
_LEXICAL_SHARE = 0.5
_LEXICAL_MIN = 6
_FACT_SHARE = 0.5  # a window holding one of its numbers, with at least this share of that floor
_SMALL_SOURCE = 40  # a source with at most this many windows is embedded whole
_SUPPORT_WINDOWS = 3  # a sentence may rest on this many passages of one source together
# Below this share of its content words near the passage, a sentence says more than the
# passage does (paraphrases in the labelled set: 0.33 and up; related claims: down to 0.1).
_MIN_COVERAGE = 0.25
# A passage "says the opposite" only when it is about what the sentence is about: this
# share of the sentence's words (negation and direction words aside) near it.
_SAME_SUBJECT = 0.5
# ... or this share, when the passage's sentence uses a word's opposite (easy / awkward):
# a pair of opposites is itself evidence that the two are about the same thing.
_OPPOSITE_WORD_SUBJECT = 0.4
_AS_CLOSE = 0.2
_SAID_IN_WORDS = 0.6  # share of the sentence's words in the passage that makes a close passage say it
# ... or in the passage with the sentences next to it (0.6 to 0.8 measured the same on the
# real set: a writer's summary of a passage and its neighbour).
_SAID_NEARBY = 0.7
# A sentence resting on a few passages together: this share of its words within them.
# (Genuine sentences that gather facts: 0.8-1.0; planted errors mostly 0.2-0.6.)
_UNION_COVERAGE = 0.75
_HEADER_CHARS = 1_500  # a page's header (number, status, dates, version) comes first
_TITLE_CHARS = 300  # its title line(s)
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
    meta: str = ""  # what the archive knows of it: title, URL, identifiers
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
    confidence: float = 0.5  # how sure the verdict is (0..1): repairs are asked only when sure
    passages: list[dict[str, Any]] = field(default_factory=list)  # further passages it rests on

    def as_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "verdict": self.verdict,
            "score": round(self.score, 3),
            "confidence": round(self.confidence, 2),
            "passage": self.passage,
            "passages": self.passages,
            "missing": self.missing,
            "reasons": self.reasons,
            "judge": self.judge,
        }


def _worse(a: str, b: str) -> str:
    return a if _RANK[a] > _RANK[b] else b


@dataclass
class SourceView:
    """One source as the alignment reads it: its windows and vectors, its whole text and its
    header (facts of the source itself: number, dates, version), computed once."""

    source: SourceText
    windows: list[Span]
    vectors: npt.NDArray[np.float32]
    whole: lexical.Haystack
    known: lexical.Haystack
    flat: str
    idf: dict[str, float]
    stems: list[set[str]]
    identifiers: set[str] = field(default_factory=set)  # number keys of its metadata lines
    # Its title and metadata lines only: its own number and dates, not those its prose cites.
    own: lexical.Haystack = field(default_factory=lambda: lexical.Haystack.of(""))


def header_text(text: str) -> str:
    """The page's header and metadata: its opening, its `Key: value` lines and table rows
    near the top (`Created: 29-Sep-2014`, `| Version | 3.12 |`)."""
    return text[:_HEADER_CHARS] + "\n" + header_lines(text)


def header_lines(text: str) -> str:
    """Only the `Key: value` lines and table rows near the top: the page's identifiers and
    dates, without its opening prose."""
    head = text[: _HEADER_CHARS * 3]
    lines = re.findall(r"^[ \t]*(?:[-*][ \t]+)?[\w][\w .()/-]{0,40}:[ \t]+\S.*$|^[ \t]*\|.*\|[ \t]*$", head, re.M)
    return "\n".join(lines)


def _stems(words: set[str]) -> set[str]:
    return {w[:6] for w in words if len(w) > 3 and w not in lexical.STOP and not w.isdigit()}


_VIEWS: dict[tuple[int, SourceText], tuple[list[Span], SourceView]] = {}


def view_of(source: SourceText, windows: list[Span], vectors: npt.NDArray[np.float32]) -> SourceView:
    """The source as the alignment reads it, computed once per list of windows (a process
    that aligns the same sources again, the pipeline's next draft, reuses it)."""
    key = (id(windows), source)
    cached = _VIEWS.get(key)
    if cached is not None and cached[0] is windows and cached[1].vectors is vectors:
        return cached[1]
    view = _view_of(source, windows, vectors)
    if len(_VIEWS) > 64:
        _VIEWS.clear()
    _VIEWS[key] = (windows, view)
    return view


def _view_of(source: SourceText, windows: list[Span], vectors: npt.NDArray[np.float32]) -> SourceView:
    import math

    words = _window_facts(windows)[1]
    stems = [_stems(w) for w in words]
    counts: dict[str, int] = {}
    for window_stems in stems:
        for stem in window_stems:
            counts[stem] = counts.get(stem, 0) + 1
    idf = {stem: math.log(1 + len(windows) / n) for stem, n in counts.items()}
    whole = source_haystack(source, windows)
    known = lexical.Haystack.of(source.meta + "\n" + header_text(source.text))
    # A day or month of its dates ("Start Date: 2017-08-02" holds 2 and 8) identifies nothing:
    # "case #2" is no identifier of the page.
    identifiers = {
        k
        for k in lexical.number_keys(source.meta + "\n" + header_lines(source.text))
        if not (k.isdigit() and len(k) < 3)
    }
    own = lexical.Haystack.of(source.meta + "\n" + header_lines(source.text) + "\n" + source.text[:_TITLE_CHARS])
    return SourceView(source, windows, vectors, whole, known, whole.flat, idf, stems, identifiers, own)


def candidates(claim: str, view: SourceView, scores: list[float] | None = None) -> list[int]:
    """The windows worth embedding for a claim: those sharing its rarest words, those holding
    its numbers, and those holding its quotations (a small source: all of them). `scores`:
    the windows' `rare_word_scores` for the claim, when the caller has them already."""
    count = len(view.windows)
    if count <= _SMALL_SOURCE:
        return list(range(count))
    scores = scores if scores is not None else rare_word_scores(claim, view)
    order = sorted((i for i in range(count) if scores[i] > 0), key=lambda i: -scores[i])
    floor = scores[order[0]] * _LEXICAL_SHARE if order else 0.0
    chosen = [i for n, i in enumerate(order[:_LEXICAL_CANDIDATES]) if n < _LEXICAL_MIN or scores[i] >= floor]
    numeric = [f for f in lexical.facts(claim) if f.kind in ("number", "date")]
    if numeric:
        keys = _window_facts(view.windows)[0]
        holding = [i for i in order if scores[i] >= floor * _FACT_SHARE and any(keys[i] & f.keys for f in numeric)]
        chosen += [i for i in holding[:_FACT_CANDIDATES] if i not in chosen]
    chosen += [i for i in _quoted_windows(claim, view) if i not in chosen]
    return chosen


def rare_word_scores(claim: str, view: SourceView) -> list[float]:
    """Per window of the source, how much of the claim's rarest words it holds (the summed
    rarity, within this source, of the word stems they share)."""
    wanted = _stems(lexical.word_keys(claim))
    return [sum(view.idf.get(s, 0.0) for s in wanted & window) for window in view.stems]


def _quoted_windows(claim: str, view: SourceView) -> list[int]:
    found = []
    for quote in lexical.quotations(claim):
        probe = lexical.flat(quote)[:60]
        found += [i for i, w in enumerate(view.windows) if probe in lexical.flat(w.text)]
    return found


def _quotes(claim: str, view: SourceView) -> tuple[list[str], list[str]]:
    """The sentence's quotations found in the source as written (modulo typography), and
    those whose words are nowhere together in it (a quotation with its markup or an elided
    word differing is still the page's)."""
    found: list[str] = []
    not_found: list[str] = []
    for quote in lexical.quotations(claim):
        if lexical.flat(quote) in view.flat:
            found.append(quote)
        elif not _words_together(quote, view):
            not_found.append(quote)
    return found, not_found


def _words_together(quote: str, view: SourceView) -> bool:
    words = {w for w in lexical.word_keys(quote) if len(w) > 2}
    if not words:
        return True
    _numbers, window_words = _window_facts(view.windows)
    count = len(view.windows)
    return any(
        len(words - set().union(*(window_words[j] for j in _around(i, count)))) <= len(words) // 5
        for i in range(count)
        if window_words[i] & words
    )


def assess(
    claim: str,
    vector: npt.NDArray[np.float32],
    view: SourceView,
    thresholds: Thresholds,
    others: list[lexical.Haystack] | None = None,
    pool: list[int] | None = None,
    names: tuple[str, ...] = (),
) -> Citation:
    """One (sentence, source) pair: the passages that best support it, and the verdict.
    `names`: what the sentence writes as code (`lexical.code_names`, read before the claim
    text loses its backticks)."""
    import numpy as np

    source, windows = view.source, view.windows
    if not windows:
        return Citation(
            source.id, "unsupported", 0.0, None, reasons=[f"{source.id} has no archived text"], confidence=0.9
        )
    pool = pool if pool is not None else candidates(claim, view)
    embedded = [i for i in pool if not np.isnan(view.vectors[i, 0])]
    if not embedded:
        return Citation(
            source.id, "unsupported", 0.0, None, reasons=[f"nothing in {source.id} is about this"], confidence=0.7
        )
    sims = {i: float(view.vectors[i] @ vector) for i in embedded}
    facts = lexical.facts(claim)
    numeric = [f for f in facts if f.kind in ("number", "date")]
    # The source's own number, dates and title are known facts of it, never demanded of a
    # passage; a number another cited source gives is that source's to support.
    elsewhere = [f for f in numeric if view.known.has(f) or any(o.has(f) for o in others or [])]
    facts = [f for f in facts if f not in elsewhere]
    quoted, misquoted = _quotes(claim, view)
    anchored = set(_quoted_windows(claim, view)) if quoted else set()

    by_sim = sorted(embedded, key=lambda i: -sims[i])
    order = by_sim[:_CANDIDATES]
    if numeric:
        keys = _window_facts(windows)[0]
        holding = [i for i in by_sim if any(keys[i] & f.keys for f in numeric)]
        order.extend(i for i in holding[:_FACT_CANDIDATES] if i not in order)
    order.extend(i for i in anchored if i in sims and i not in order)

    index, missing, support = _choose(claim, windows, order, facts, sims, by_sim, thresholds, anchored)
    window = windows[index]
    score = sims[index]
    near = _around(index, len(windows)) + support
    context_text = " ".join(windows[i].text for i in sorted(set(near)))
    covered = lexical.coverage(claim, context_text)
    if index in anchored and covered >= _SAME_SUBJECT:
        score = max(score, thresholds.supported)  # the page says it in the sentence's words
    if _about_the_document(numeric, elsewhere, claim, view):
        score = max(score, thresholds.supported)  # "RFC 1558, opened in March 2016": its header says so
    said_near = lexical.coverage(claim, window.text) >= _SAID_IN_WORDS or covered >= _SAID_NEARBY
    if thresholds.weak <= score < thresholds.supported and said_near:
        # MiniLM scores a faithful paraphrase of a technical passage 0.40-0.55; a passage that
        # uses most of the sentence's own words (or does with the sentences next to it) says it.
        score = thresholds.supported
    together = _together(claim, view, by_sim, sims, facts, thresholds) if score < thresholds.supported else None
    if together is not None:
        # Every word and value of the sentence within a few passages of the page that are about
        # it: a sentence gathering facts the page states a paragraph apart (MiniLM scores no
        # single window of it above 0.55).
        best, context_text, covered = together
        score, support = thresholds.supported, [i for i in best if i != index]
    found = _Findings(
        "supported" if score >= thresholds.supported else "weak" if score >= thresholds.weak else "unsupported"
    )
    if found.verdict != "supported":
        found.sure.append(0.55 + (thresholds.weak - score) if found.verdict == "unsupported" else 0.4)
        found.reasons.append(f"closest passage of {source.id} scores {score:.2f}")
    # A number the page's opening prose gives ("the previous RFC, 1522") is no identifier of
    # the page, unlike its title and metadata lines: it must be near the passage like any other.
    rests_on = _haystack_of(windows, _around(index, len(windows)) + support)
    borrowed = [
        f
        for f in elsewhere
        if f.surface[:1].isdigit()
        and not view.own.has(f)
        and not any(o.has(f) for o in others or [])
        and not rests_on.has(f)
    ]
    _fact_findings(found, missing + borrowed, view, others or [], window)
    _name_findings(found, claim, names, view, others or [])
    # A quotation another cited source of the sentence holds is that source's to support.
    misquoted = [q for q in misquoted if not _said_by(others or [], lexical.flat(q))]
    for quote in misquoted:
        found.add("weak", f'the quoted words "{_short(quote)}" not found in {source.id}', 0.7)
    # "Rust 2021" where the passage the sentence rests on says "Rust 2024" (2021 being
    # elsewhere in the page): the value the passage gives for the same thing differs. The
    # source's own identifiers are its own: never compared.
    # The section's heading numbers what its passages are about ("Problem case #1: ..."), and
    # "the second problem case" is case #2.
    value, other_value = (
        lexical.value_conflict(
            lexical.ordinals_as_numbers(claim),
            lexical.ordinals_as_numbers(window.text + "\n" + _heading(source.text, window.start)),
        )
        if sims[index] >= thresholds.supported
        else ("", "")
    )
    if other_value and not view.identifiers & lexical.number_keys(value):
        found.add("unsupported", f"the passage gives {other_value}", 0.8)
    # What the page says otherwise: a count its list does not have, or the opposite.
    opposite = (
        _miscounted(claim, view, _around(index, len(windows)) + support)
        or _opposite(claim, index, windows, sims, thresholds)
        or _granted_reversed(claim, index, windows, sims, by_sim, thresholds)
    )
    if opposite:
        found.add("unsupported", opposite, 0.7)
    # An absolute the page states anywhere it says this (any passage as close as a supporting
    # one) is the page's, not the writer's.
    close = " ".join(windows[i].text for i in by_sim if sims[i] >= thresholds.supported)
    for reason, sure in _overstated(claim, quoted, context_text + " " + close, window.text, score, thresholds):
        found.add("weak", reason, sure)
    # Its words near the chosen passage, or else near the page's few passages most similar to
    # it (a passage chosen for a number or a quotation may hold few of the words around them).
    if covered < _MIN_COVERAGE and _words_near_closest(claim, windows, by_sim) < _MIN_COVERAGE:
        found.add("weak", "most of its words are not in the passage", 0.45)
    verdict, reasons = found.verdict, found.reasons
    if verdict == "supported":
        confidence = min(1.0, 0.6 + 2 * (score - thresholds.supported) + (0.2 if index in anchored else 0.0))
    else:
        confidence = min(1.0, max(found.sure, default=0.5))
    passage = _passage(source, window)
    extra = [_passage(source, windows[i]) for i in support if i != index]
    shown = [f.surface for f in missing if f.kind != "entity" or not view.whole.has(f)]
    return Citation(source.id, verdict, score, passage, shown, reasons, confidence=confidence, passages=extra)


@dataclass
class _Findings:
    """A pair's verdict as the checks lower it, with their reasons and how sure each is."""

    verdict: str
    reasons: list[str] = field(default_factory=list)
    sure: list[float] = field(default_factory=list)

    def add(self, verdict: str, reason: str, sure: float) -> None:
        self.verdict = _worse(self.verdict, verdict)
        self.reasons.append(reason)
        self.sure.append(sure)


def _choose(
    claim: str,
    windows: list[Span],
    order: list[int],
    facts: list[lexical.Fact],
    sims: dict[int, float],
    by_sim: list[int],
    thresholds: Thresholds,
    anchored: set[int],
) -> tuple[int, list[lexical.Fact], list[int]]:
    """The passage the sentence rests on (with the facts missing near it and the passages
    that support it together with it)."""
    best: tuple[float, int, list[lexical.Fact], list[int]] | None = None
    for index in order:
        support = _support(index, by_sim, sims, thresholds)
        context = _haystack_of(windows, _around(index, len(windows)) + support)
        own = _haystack(windows, index, index)
        missing = [f for f in facts if not context.has(f)]
        # Facts next to the passage count, but a passage that states them itself is better.
        aside = [f for f in facts if f.kind != "entity" and f not in missing and not own.has(f)]
        penalty = sum(0.3 if f.kind != "entity" else 0.05 for f in missing) + 0.1 * len(aside)
        # The passage that says it uses its words: a similar passage about something else
        # ("supported for the wrong reason") ranks below one that states the claim.
        said = lexical.coverage(claim, " ".join(windows[i].text for i in _around(index, len(windows))))
        rank = sims[index] - penalty + 0.3 * said + (0.3 if index in anchored else 0.0)
        if best is None or rank > best[0]:
            best = (rank, index, missing, support)
    assert best is not None
    return best[1], best[2], best[3]


def _fact_findings(
    found: _Findings, missing: list[lexical.Fact], view: SourceView, others: list[lexical.Haystack], window: Span
) -> None:
    sid = view.source.id
    heading: lexical.Haystack | None = None
    for fact in missing:
        if fact.kind in ("number", "date"):
            heading = heading or lexical.Haystack.of(_heading(view.source.text, window.start))
            if heading.has(fact):
                continue  # "Problem case #3: ..." heads the section the passage is in
            if view.whole.has(fact):
                found.add("weak", f"{fact.surface} is in {sid}, but not near the passage", 0.4)
            else:
                found.add("unsupported", f"{fact.surface} not found in {sid}", 0.9)
        elif not (view.whole.has(fact) or view.known.has(fact) or any(o.has(fact) for o in others)):
            # (a name the page gives elsewhere is fine: pages name their subject once)
            found.add("unsupported", f"{fact.surface} not found in {sid}", 0.7)


def _name_findings(
    found: _Findings, claim: str, names: tuple[str, ...], view: SourceView, others: list[lexical.Haystack]
) -> None:
    """What the sentence names that the page never names so, unless another source the
    sentence cites does: a name written as code (`cargo fix` cited to a page that never writes
    it), a thing named by its year ("the 2016 roadmap" where the page is "the 2017 Rust
    Roadmap"). On the real set neither fires on a genuine sentence."""
    sid = view.source.id
    for name in names:
        if lexical.flat(name) not in view.flat and not _said_by(others, lexical.flat(name)):
            found.add("unsupported", f"`{name}` not found in {sid}", 0.7)
    ours, theirs = lexical.year_named_otherwise(claim, view.flat)
    if theirs and not _said_by(others, ours):
        found.add("unsupported", f'{sid} says "{_as_the_page_writes(theirs, view.source.text)}", not "{ours}"', 0.8)


def _said_by(others: list[lexical.Haystack], words: str) -> bool:
    """Whether another source the sentence cites writes these (flattened) words: then they are
    that source's to support."""
    return any(words in other.flat for other in others)


def _miscounted(claim: str, view: SourceView, near: list[int]) -> str:
    """ "six major goals" where a passage it rests on introduces them ("The RFC has several
    major goals:") and the list after it has four: what the page's list counts ('' if the
    count agrees or no such list is near)."""
    counts = lexical.counted(claim)
    if not counts:
        return ""
    for i in sorted(set(near)):
        window = view.windows[i]
        if not window.text.rstrip().endswith(":"):
            continue
        listed = lexical.listed_after(view.source.text, window.end)
        words = lexical.word_keys(window.text)
        for number, noun in counts:
            if listed and listed != number and any(w.startswith(noun[:-1]) for w in words):
                return f"the passage lists {listed} {noun}, not {number}"
    return ""


def _as_the_page_writes(words: str, text: str) -> str:
    """Words found in the flattened page, as the page writes them ("2017 Rust Roadmap")."""
    pattern = r"[\s*_`]+".join(re.escape(w) for w in words.split())
    match = re.search(pattern, text, re.I)
    return match.group(0).replace("*", "").replace("`", "") if match else words


def _heading(text: str, start: int) -> str:
    """The heading of the section a passage is in (a Markdown `#` line before it)."""
    found = [m for m in re.finditer(r"^#{1,6}[ \t]+.*$", text[:start], re.M)]
    return found[-1].group(0) if found else ""


def _about_the_document(numeric: list[lexical.Fact], known: list[lexical.Fact], claim: str, view: SourceView) -> bool:
    """A sentence about the document itself (its number, dates, tracking issue): every number
    it gives is in the page's header or metadata, and its words are there too."""
    header = view.source.meta + "\n" + header_text(view.source.text)
    return bool(numeric) and len(known) == len(numeric) and lexical.coverage(claim, header) >= 0.4


def _passage(source: SourceText, window: Span) -> dict[str, Any]:
    passage: dict[str, Any] = {
        "text": window.text,
        "start": source.offset + window.start,
        "end": source.offset + window.end,
    }
    page = label_at(source.pages, window.start)  # a library document's page
    if page:
        passage["page"] = page
    return passage


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[:limit].rsplit(" ", 1)[0] + " ..."


def _together(
    claim: str,
    view: SourceView,
    by_sim: list[int],
    sims: dict[int, float],
    facts: list[lexical.Fact],
    thresholds: Thresholds,
) -> tuple[list[int], str, float] | None:
    """The source's most similar windows, when together (with the sentences next to them)
    they hold nearly all of the sentence's words and every one of its values: those windows,
    their text with their neighbours' and the share of the sentence's words in it."""
    best = by_sim[:_SUPPORT_WINDOWS]
    if not best or sims[best[0]] < thresholds.weak:
        return None  # nothing in the page is about the sentence
    near = sorted({j for i in best for j in _around(i, len(view.windows))})
    text = " ".join(view.windows[j].text for j in near)
    covered = lexical.coverage(claim, text)
    if covered < _UNION_COVERAGE:
        return None
    hay = _haystack_of(view.windows, near)
    return (best, text, covered) if all(hay.has(f) for f in facts) else None


def _overstated(
    claim: str, quoted: list[str], near: str, rests_on: str, score: float, thresholds: Thresholds
) -> list[tuple[str, float]]:
    """Why the sentence says more than the page (reason, how sure): an absolute or a dropped
    hedge (`_stronger`), or, on a passage that is about it, an absolute over a longer list
    ("always implement AsyncFn, AsyncFnMut and AsyncFnOnce" against "always implement
    AsyncFnOnce")."""
    found = []
    stronger = _stronger(claim, quoted, near, rests_on)
    if stronger:
        found.append(("stated more strongly than the passage: " + ", ".join(stronger), 0.4))
    named, added = (
        lexical.widened(*lexical.matching_clauses(claim, rests_on)) if score >= thresholds.supported else ([], [])
    )
    if added:
        found.append((f"the passage says it of {', '.join(named)}, not of {', '.join(added)}", 0.5))
    return found


def _words_near_closest(claim: str, windows: list[Span], by_sim: list[int]) -> float:
    """The share of the sentence's words within the page's most similar passages and the
    sentences next to them."""
    near = sorted({j for i in by_sim[:_SUPPORT_WINDOWS] for j in _around(i, len(windows))})
    return lexical.coverage(claim, " ".join(windows[j].text for j in near))


def _stronger(claim: str, quoted: list[str], passage: str, rests_on: str) -> list[str]:
    # A word inside a quotation the page holds verbatim is the page's own ("ultimately failed
    # to solve" claims no solving), so only the writer's words are checked for strength.
    own_words = claim
    for quote in quoted:
        own_words = own_words.replace(quote, " ")
    return lexical.stronger_cues(own_words, passage, rests_on)


def _around(index: int, count: int) -> list[int]:
    return list(range(max(0, index - 1), min(count, index + 2)))


def _support(index: int, by_sim: list[int], sims: dict[int, float], thresholds: Thresholds) -> list[int]:
    """Passages that may support the sentence together with the chosen one: the next most
    similar windows of the same source, if they are about it at all."""
    return [i for i in by_sim[:_SUPPORT_WINDOWS] if i != index and sims[i] >= thresholds.supported][
        : _SUPPORT_WINDOWS - 1
    ]


def _opposite(claim: str, index: int, windows: list[Span], sims: dict[int, float], thresholds: Thresholds) -> str:
    """Why the passage says the opposite of the sentence ('' when it does not): the same
    subject, with the polarity (not / no / never) or the direction (rose / fell) reversed.
    A passage nearby, as close, that keeps the sentence's polarity settles it the other way."""
    if sims[index] < thresholds.supported:
        return ""  # a passage about something else says nothing against the sentence
    subject = lexical.without_cues(claim)
    claim_way = lexical.direction(claim)
    contrasts = lexical.CONTRAST.search(claim) is not None

    def differs(text: str) -> str:
        # "X rather than Y" against the page's "Y rather than X" in other words: about the
        # same two things by construction, whatever share of the sentence's words it uses.
        swapped = lexical.sides_swapped(*lexical.matching_clauses(claim, text)) if contrasts else ""
        if swapped:
            return f"the passage says the opposite ({swapped})"
        covered = lexical.coverage(subject, text)
        if covered < _OPPOSITE_WORD_SUBJECT:
            return ""
        # Polarity as a reader sees it, as wholes and clause against clause: the part of the
        # sentence the passage is about against the passage's sentence that says it ("X, but
        # not an executor" is not denied by a passage saying X; a "not ready yet" beside the
        # clause that states the claim is no denial of it). "not ... without" is no double
        # negative.
        said, clause = lexical.matching_clauses(claim, text)
        if covered >= _SAME_SUBJECT and _polarity_differs(claim, text) and _polarity_differs(said, clause):
            return "the passage says the opposite (negation)"
        turned = lexical.reversed_in(said, clause)
        if turned:
            return f"the passage says the opposite ({turned})"
        way = lexical.direction(text)
        if covered >= _SAME_SUBJECT and claim_way and way and claim_way.isdisjoint(way):
            return f"the passage goes the other way ({'/'.join(sorted(way))})"
        return ""

    found = differs(windows[index].text)
    if not found:
        return ""
    # Another passage of the source that says the sentence as fully, with its polarity:
    # the page says both (or the chosen one was about something else).
    said = lexical.coverage(subject, windows[index].text)
    # ... or says the clause the chosen passage contradicts as fully ("a closure cannot return
    # a future that borrows": the page's "closures cannot return futures that borrow").
    part = lexical.without_cues(lexical.matching_clauses(claim, windows[index].text)[0])
    part_said = lexical.coverage(part, windows[index].text)
    negated = lexical.negates(claim)
    agreeing = [
        i
        for i, sim in sims.items()
        if i != index
        and sim >= max(thresholds.weak, sims[index] - _AS_CLOSE)
        and (
            lexical.coverage(subject, windows[i].text) >= max(_SAME_SUBJECT, said)
            or lexical.coverage(part, windows[i].text) >= max(_SAME_SUBJECT, part_said)
        )
        and not differs(windows[i].text)
        # "returns a future without evaluating any of the body" says no too, in other words.
        and (negated or not lexical.may_negate(windows[i].text))
    ]
    return "" if agreeing else found


def _granted_reversed(
    claim: str, index: int, windows: list[Span], sims: dict[int, float], by_sim: list[int], thresholds: Thresholds
) -> str:
    """ "X is allowed, but Y is not" where the chosen passage or one of the three closest grants
    Y and denies X: a page says which of two things holds once, often beside a passage that only
    names them (the chosen one). No finding when one of them says it the sentence's way round
    (unlike a negation, a passage that merely shares the words does not settle it)."""
    if not lexical.two_sided(claim):
        return ""
    close = [i for i in dict.fromkeys([index, *by_sim[:3]]) if sims.get(i, 0.0) >= thresholds.supported]
    if any(lexical.granted_same_way(claim, windows[i].text) for i in close):
        return ""  # the page also says it the sentence's way round
    for i in close:
        granted = lexical.granted_swapped(claim, lexical.matching_clauses(claim, windows[i].text)[1])
        if granted:
            where = "the passage" if i == index else f'"{_short(windows[i].text)}"'
            return f"{where} says the opposite ({granted})"
    return ""


def _polarity_differs(sentence: str, passage: str) -> bool:
    negated = lexical.negates(passage)
    if lexical.negates(sentence) == negated:
        return False
    return not (lexical.may_negate(sentence) if negated else lexical.may_negate(passage))


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
    return _haystack_of(windows, list(range(first, last + 1)))


def _haystack_of(windows: list[Span], indexes: list[int]) -> lexical.Haystack:
    """Some windows as one text for the fact checks."""
    numbers, words = _window_facts(windows)
    chosen = sorted(set(indexes))
    text = " ".join(windows[i].text for i in chosen)
    return lexical.Haystack(
        text, set().union(*(numbers[i] for i in chosen)), set().union(*(words[i] for i in chosen)), text.lower()
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
    claims: list[str] = field(default_factory=list)  # per sentence, its words (`claim_text`)
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
    """Each citation is judged on its own: one that supports the sentence never clears a
    claim another citation does not support."""
    return max((c.verdict for c in citations), key=lambda v: _RANK[v], default="unsupported")


def _findings(missing_everywhere: list[str], citations: list[Citation]) -> list[str]:
    findings = list(missing_everywhere)
    for citation in citations:
        if citation.judge is not None and citation.judge.get("answer") == "yes":
            continue
        if citation.verdict == "supported":
            continue
        reasons = [r for r in citation.reasons if not any(r.startswith(m.split(" not found in ")[0]) for m in findings)]
        if not reasons and len(reasons) < len(citation.reasons):
            continue  # already said: "14% is not in S3"
        label = "was not found to support it" if citation.verdict == "unsupported" else "supports it only weakly"
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
    texts = {sid: sources[sid].text for sid in sorted(wanted)}
    prepared = cache.prepare(texts)
    views = {sid: view_of(sources[sid], *prepared[sid]) for sid in wanted}
    # Only the windows a claim could rest on are embedded (cold: a few hundred, not thousands).
    pools = [{sid: candidates(s.claim, views[sid]) for sid in s.ids if sid in views} for s in sentences]
    needed: dict[str, set[int]] = {}
    for pool in pools:
        for sid, indexes in pool.items():
            needed.setdefault(sid, set()).update(indexes)
    cache.fill(needed, texts)
    # Without a single archived source among the citations there is nothing to embed.
    vectors = cache.claims([s.claim or s.text for s in sentences]) if wanted else [None] * len(sentences)
    for sentence, vector, pool in zip(sentences, vectors, pools, strict=True):
        names = tuple(lexical.code_names(sentence.text))
        cited_wholes = {sid: views[sid].whole for sid in sentence.ids if sid in views}
        citations = [
            _remembered(
                cache,
                (sentence.claim, names, sources[sid], tuple(sources[o] for o in cited_wholes if o != sid), thresholds),
                partial(
                    assess,
                    sentence.claim,
                    vector,
                    views[sid],
                    thresholds,
                    [w for other, w in cited_wholes.items() if other != sid],
                    pool[sid],
                    names,
                ),
            )
            if sid in views and vector is not None
            else Citation(
                sid, "unsupported", 0.0, None, reasons=[f"{sid} is not in the source archive"], confidence=0.9
            )
            for sid in sentence.ids
        ]
        alignment.citations.append(citations)
        alignment.claims.append(sentence.claim or sentence.text)
        where = " or ".join(sentence.ids)
        alignment.missing_everywhere.append(
            [
                f"{fact.surface} not found in {where}"
                for fact in lexical.facts(sentence.claim)
                if fact.kind in ("number", "date")
                and not any(w.has(fact) or views[sid].known.has(fact) for sid, w in cited_wholes.items())
            ]
        )
        alignment.sentences.append(_sentence_json(sentence))
    alignment.refresh()
    return alignment


def _remembered(cache: VectorCache, key: tuple[Any, ...], assessed: Callable[[], Citation]) -> Citation:
    """A pair's verdict, assessed once per cache: a revised draft keeps most sentences of the
    draft before it, and assessing them again was 0.67 s of a 1.13 s re-check (profiled on
    bench_pipeline's article, Intel VM); on the EPYC VM the same draft again takes 0.06 s
    against 0.17 s (`bench_evidence --part cold`). The key holds all `assess` reads: the
    claim (its vector and candidate windows follow from it and the cache's embedder), the
    source, the other sources the sentence cites, the thresholds. Copies go out: the fact
    check and the judge change the citations they are given."""
    known = cache.verdict(key)
    if isinstance(known, Citation):
        return copy.deepcopy(known)
    citation = assessed()
    cache.remember_verdict(key, copy.deepcopy(citation))
    return citation


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


def assess_sources(
    pairs: list[tuple[str, SourceText]],
    embedder: Callable[[], Embedder],
    thresholds: Thresholds,
    cache: VectorCache | None = None,
    others: list[list[SourceText]] | None = None,
) -> list[Citation]:
    """(sentence, whole source) pairs judged as the pipeline judges them: the labelled sets.
    Windows a claim could rest on are embedded once per source, sentences in one batch.
    `others`: per pair, the other sources the same sentence cites."""
    cache = cache or VectorCache(None, embedder)
    others = others or [[] for _ in pairs]
    sources = {src.id: src for _, src in pairs} | {src.id: src for group in others for src in group}
    texts = {sid: src.text for sid, src in sources.items()}
    prepared = cache.prepare(texts)
    views = {sid: view_of(sources[sid], *prepared[sid]) for sid in sources}
    claims = [claim_text_of(sentence) for sentence, _ in pairs]
    pools = [candidates(claim, views[src.id]) for claim, (_, src) in zip(claims, pairs, strict=True)]
    needed: dict[str, set[int]] = {}
    for pool, (_, src) in zip(pools, pairs, strict=True):
        needed.setdefault(src.id, set()).update(pool)
    cache.fill(needed, texts)
    vectors = embedder().encode(claims)
    return [
        assess(
            claim,
            vector,
            views[src.id],
            thresholds,
            [views[o.id].whole for o in group],
            pool,
            tuple(lexical.code_names(sentence)),
        )
        for claim, vector, pool, (sentence, src), group in zip(claims, vectors, pools, pairs, others, strict=True)
    ]


def assess_pairs(
    pairs: list[tuple[str, str]], embedder: Callable[[], Embedder], thresholds: Thresholds
) -> list[Citation]:
    """(sentence, passage) pairs, each passage standing in for a whole source (the labelled
    set); the passages' windows and the sentences are embedded in one batch each."""
    names = {passage: f"P{i}" for i, passage in enumerate(dict.fromkeys(p for _, p in pairs))}
    return assess_sources([(sentence, SourceText(names[p], p)) for sentence, p in pairs], embedder, thresholds)


def assess_pair(sentence: str, passage: str, embedder: Callable[[], Embedder], thresholds: Thresholds) -> Citation:
    """One sentence against one passage standing in for a whole source."""
    return assess_pairs([(sentence, passage)], embedder, thresholds)[0]


def claim_text_of(sentence: str) -> str:
    from pensieve.evidence.segment import claim_text

    return claim_text(sentence)
