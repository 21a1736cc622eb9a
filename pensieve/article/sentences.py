"""An article's sentences with their character offsets: the cited sentences of an artifact,
every sentence of its body, and the sentence windows of a source's archived text.

Offsets always refer to the text given, so a reader can highlight the exact span in the
artifact or in `sources/Sn.md`. A sentence ends at . ! or ? but never after an abbreviation
or an initial, nor inside inline code, a quotation, a URL or a version number. Citation forms
are normalised per sentence (never the whole text, which would move the offsets); final.md's
reader numbers ([1]) are mapped back to source ids through its generated reference list
(`reference_list.reader_numbers`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pensieve.article.blocks import article_extent, code_spans, prose_blocks
from pensieve.article.citations import CITE_GROUP, NUMBER_GROUP, SOURCE_ID, normalize_citations

# A sentence ends at . ! or ? (after closing quotes or brackets, and after any citations
# written after the stop: "... grew. [S3]") when whitespace and a capital, digit, quote or
# bracket follow.
_BOUNDARY = re.compile(
    r"[.!?][\"'\u201d\u2019)\]]*(?:[ \t]*\[[^\[\]\n]{1,80}\](?!\())*(?=\s+[\"'\u201c\u2018(\[*_]*[A-Z0-9]|\s*\Z)"
)
_ABBREVIATIONS = frozenset(
    [
        "e.g",
        "i.e",
        "etc",
        "al",
        "vs",
        "cf",
        "fig",
        "figs",
        "no",
        "nos",
        "dr",
        "mr",
        "mrs",
        "ms",
        "prof",
        "st",
        "jr",
        "sr",
        "inc",
        "ltd",
        "co",
        "corp",
        "approx",
        "ca",
        "est",
        "dept",
        "jan",
        "feb",
        "mar",
        "apr",
        "jun",
        "jul",
        "aug",
        "sep",
        "sept",
        "oct",
        "nov",
        "dec",
        "u.s",
        "u.k",
    ]
)
_MIN_SOURCE_SENTENCE = 25  # shorter pieces (menu items, captions) are merged with the next
_MAX_SOURCE_SENTENCE = 600


@dataclass(frozen=True)
class Span:
    start: int
    end: int
    text: str


@dataclass(frozen=True)
class CitedSentence:
    index: int
    start: int
    end: int
    text: str  # as written, citation markers included
    claim: str  # the words only: citations, links and emphasis removed
    ids: tuple[str, ...]  # normalised source ids, in order


def _abbreviation_before(text: str, stop: int) -> bool:
    """Whether the '.' at `stop` ends an abbreviation or an initial, not a sentence."""
    if text[stop] != ".":
        return False
    word = re.search(r"([A-Za-z][A-Za-z.]*)$", text[max(0, stop - 24) : stop])
    if word is None:
        return False
    token = word.group(1).lower().rstrip(".")
    return token in _ABBREVIATIONS or len(token) == 1


# What a sentence boundary never falls inside: inline code (`Literal["r", "rb"]. Next`),
# a quotation ("... ends. Then ..."), a URL (https://a.b/c. d) or a version (v1.2.3).
_WHOLE = re.compile(
    r"`[^`\n]+`"
    r"|\"[^\"\n]{1,400}\"|\u201c[^\u201c\u201d\n]{1,400}\u201d"
    r"|(?:https?://|www\.)[^\s<>()\[\]]+[^\s<>()\[\].,;:!?'\"]"
    r"|\bv?\d+(?:\.\d+)+\b"
)


def _kept_whole(block: str) -> list[tuple[int, int]]:
    return [(m.start(), m.end()) for m in _WHOLE.finditer(block)]


def _inside(block: str, position: int, spans: list[tuple[int, int]]) -> bool:
    # The stop may end a quotation or a code span ("... ends." or `x.`): only a stop with
    # more of the span after it is not a boundary.
    return any(a < position < b and block[position + 1 : b].strip("\"'`\u201d\u2019)]") for a, b in spans)


def split_sentences(text: str, start: int, end: int) -> list[Span]:
    """Sentences of text[start:end] (one block of prose), stripped, with absolute offsets."""
    spans: list[Span] = []
    cursor = start
    block = text[start:end]
    whole = _kept_whole(block)
    for match in _BOUNDARY.finditer(block):
        if _abbreviation_before(block, match.start()) or _inside(block, match.start(), whole):
            continue
        _add(text, cursor, start + match.end(), spans)
        cursor = start + match.end()
    _add(text, cursor, end, spans)
    return spans


def _add(text: str, start: int, end: int, spans: list[Span]) -> None:
    piece = text[start:end]
    stripped = piece.strip()
    if not stripped:
        return
    offset = start + (len(piece) - len(piece.lstrip()))
    spans.append(Span(offset, offset + len(stripped), stripped))


_LINK = re.compile(r"\[([^\[\]\n]*)\]\([^)\n]*\)")
_EMPHASIS = re.compile(r"[*_`]+")


def claim_text(sentence: str) -> str:
    """The sentence's words: citations, link targets and emphasis removed."""
    text = CITE_GROUP.sub("", normalize_citations(sentence))
    text = NUMBER_GROUP.sub("", text)
    text = _LINK.sub(r"\1", text)
    text = _EMPHASIS.sub("", text)
    text = re.sub(r"\s+([.,;:!?])", r"\1", text)
    return " ".join(text.split())


_PARENS = re.compile(r"\(([^()\n]{1,600})\)")


def _author_year_ids(sentence: str, labels: dict[str, str]) -> list[str]:
    """Ids of '(Malkov & Yashunin, 2018; Jégou et al., 2011)' citations (label -> id)."""
    found = []
    for match in _PARENS.finditer(sentence):
        found += [labels[p.strip()] for p in match.group(1).split(";") if p.strip() in labels]
    return found


def _without_author_year(sentence: str, labels: dict[str, str]) -> str:
    def drop(match: re.Match[str]) -> str:
        parts = [p.strip() for p in match.group(1).split(";")]
        return "" if parts and all(p in labels for p in parts) else match.group(0)

    return _PARENS.sub(drop, sentence)


def _ids_of(sentence: str, numbers: dict[str, str] | None, labels: dict[str, str] | None = None) -> tuple[str, ...]:
    ids: dict[str, None] = {}
    for sid in _author_year_ids(sentence, labels or {}):
        ids.setdefault(sid, None)
    canonical = normalize_citations(sentence)
    for group in CITE_GROUP.finditer(canonical):
        for sid in SOURCE_ID.findall(group.group(1)):
            ids.setdefault(sid, None)
    if numbers is not None:
        for group in NUMBER_GROUP.finditer(sentence):
            for number in re.findall(r"\d+", group.group(1)):
                if number in numbers:
                    ids.setdefault(numbers[number], None)
    return tuple(ids)


def cited_sentences(
    text: str, numbers: dict[str, str] | None = None, labels: dict[str, str] | None = None
) -> list[CitedSentence]:
    """Every sentence of the article's body that cites a source, in order.

    `numbers` maps final.md's reader numbers to ids, `labels` its author-year labels
    ("Malkov & Yashunin, 2018") to ids (None for drafts, which cite [Sn])."""
    end = article_extent(text)
    skip = code_spans(text)
    found: list[CitedSentence] = []
    for block_start, block_end in prose_blocks(text, 0, end, skip):
        for span in split_sentences(text, block_start, block_end):
            ids = _ids_of(span.text, numbers, labels)
            if not ids:
                continue
            claim = claim_text(_without_author_year(span.text, labels) if labels else span.text)
            found.append(CitedSentence(len(found), span.start, span.end, span.text, claim, ids))
    return found


def source_sentences(text: str) -> list[Span]:
    """The archived text's sentences: the windows a claim is compared with. Very short
    pieces are joined to the next, very long ones cut at a word."""
    pieces: list[Span] = []
    for block_start, block_end in prose_blocks(text, 0, len(text), []):
        pieces.extend(split_sentences(text, block_start, block_end))
    # Headings and table rows count in a source: pages put facts in them.
    for line in re.finditer(r"^[ \t]*(?:#{1,6}|\|)[ \t]*(.+?)[ \t|]*$", text, re.M):
        if len(line.group(1)) >= _MIN_SOURCE_SENTENCE:
            pieces.append(Span(line.start(1), line.end(1), line.group(1)))
    pieces.sort(key=lambda s: s.start)
    merged: list[Span] = []
    pending: Span | None = None
    for piece in pieces:
        if pending is not None:
            piece = Span(pending.start, piece.end, text[pending.start : piece.end])
            pending = None
        if len(piece.text) < _MIN_SOURCE_SENTENCE:
            pending = piece
            continue
        merged.extend(_cut(text, piece))
    if pending is not None:
        merged.append(pending)
    return merged


def _cut(text: str, span: Span) -> list[Span]:
    if len(span.text) <= _MAX_SOURCE_SENTENCE:
        return [span]
    out: list[Span] = []
    start = span.start
    while start < span.end:
        end = min(span.end, start + _MAX_SOURCE_SENTENCE)
        if end < span.end:
            space = text.rfind(" ", start + _MAX_SOURCE_SENTENCE // 2, end)
            end = space if space != -1 else end
        piece = text[start:end].strip()
        if piece:
            offset = start + (len(text[start:end]) - len(text[start:end].lstrip()))
            out.append(Span(offset, offset + len(piece), piece))
        start = end
    return out


def body_sentences(text: str) -> list[Span]:
    """Every sentence of the article's body, cited or not (prose only, as cited_sentences reads it)."""
    end = article_extent(text)
    skip = code_spans(text)
    return [span for start, stop in prose_blocks(text, 0, end, skip) for span in split_sentences(text, start, stop)]
