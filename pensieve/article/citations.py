"""An article's citation markers: reading them, and every form a model writes made canonical.

Citation ids are those the source archive assigns (`[S3]`, also `[S3, S7]`); every other
form a model writes (`(S3)`, `[s3]`, `[S3, p. 4]`, `[^S3]`, `[S3; S7]`, `[S3][S7]`...) is made
canonical by normalize_citations before anything reads or rewrites a text. Final articles
are renumbered for the reader (`[1]`) with a generated reference list that maps each number
back to its id. Code is never read for citations.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import NamedTuple

from pensieve.article.blocks import in_prose

CITE_GROUP = re.compile(r"\[((?:S\d+)(?:\s*[,;]\s*S\d+)*)\]")
SOURCE_ID = re.compile(r"S\d+")
# Reader-facing citations: [1], [2, 3]; not links ([1](...)) and not years like [2024].
NUMBER_GROUP = re.compile(r"\[(\d{1,3}(?:\s*[,;]\s*\d{1,3})*)\](?!\()")
# The scheme of the URL Pensieve gives an MCP result (tools/mcp.py, source_url): it is
# archived, listed and cited like a fetched page, so the checks must read it too.
MCP_SCHEME = "mcp"
# Likewise a document of the workspace library (pensieve/library/sources.py): library://<id>.
LIBRARY_SCHEME = "library"
URL_START = rf"(?:https?|{MCP_SCHEME}|{LIBRARY_SCHEME})://"
# A URL written out in text; a pair of parentheses inside it is kept (Foo_(bar)), the
# brackets or parenthesis around it are not.
URL = re.compile(URL_START + r"(?:[^\s<>()\[\]\"'`]|\([^\s<>()\[\]\"'`]*\))+")


def citation_count(text: str, numbered: bool = False) -> int:
    """How many citations a text makes ([S1, S2] counts two)."""
    pattern, item = (NUMBER_GROUP, r"\d+") if numbered else (CITE_GROUP, r"S\d+")
    return sum(len(re.findall(item, group.group(1))) for group in pattern.finditer(text))


def cited_ids(text: str) -> list[str]:
    """Source ids in order of first use (duplicates removed)."""
    seen: dict[str, None] = {}
    for group in CITE_GROUP.finditer(text):
        for sid in SOURCE_ID.findall(group.group(1)):
            seen.setdefault(sid, None)
    return list(seen)


# Citation forms models write, all made canonical `[S1]` (several ids: `[S1, S2]`, the form
# the numbering turns into `[1, 2]`): [s1], [S1, p. 4], [^S1], [S1; S2], [S1 and S2],
# [S1-S3], [S1][S2], [S1] [S2], (S1), (S1, S2), ([S1]).
_LOCATOR = (
    r"(?:pp?|pages?|paras?|paragraphs?|sec(?:tion)?s?|§{1,2}|ch(?:ap(?:ter)?)?s?|ll?|lines?|fig(?:ure)?s?"
    r"|tables?|slides?|at)\.?\s*\d+[a-z]?(?:\s*[-–]\s*\d+[a-z]?)?"
)
_CITED_ITEM = re.compile(rf"\^?(S)0*(\d+)(?:\s*[-–]\s*\^?S?0*(\d+))?(?:\s*[,:]?\s*{_LOCATOR})?", re.I)
_LOCATOR_ITEM = re.compile(_LOCATOR, re.I)
_PAGE_NUMBER = re.compile(r"\d+[a-z]?(?:\s*[-–]\s*\d+[a-z]?)?")
_ITEM_SEPARATOR = re.compile(r"\s*(?:[,;&]|\band\b)\s*", re.I)
_BRACKETED = re.compile(r"\[([^\[\]\n]{1,300})\](?!\()")
_PARENTHESISED = re.compile(r"(?<![\w\]])\(([^()\n]{1,300})\)")
_CANONICAL_RUN = re.compile(r"\[S\d+(?:, S\d+)*\](?:[ \t]*\[S\d+(?:, S\d+)*\])+(?!\()")
_MAX_RANGE = 20
_MAX_PASSES = 5
_MAYBE_CITED = re.compile(r"s\d", re.I)  # no "S" before a digit: nothing to normalise


def _cited(content: str, *, in_parentheses: bool) -> list[str] | None:
    """The ids a bracket's (or parenthesis') content cites, or None if it is not a citation."""
    if in_parentheses:
        content = content.replace("[", "").replace("]", "")
    ids: list[str] = []
    after_locator = False
    for item in _ITEM_SEPARATOR.split(content.strip()):
        if not item:
            continue  # "[S1, ]", "[S1;; S2]"
        cited = _CITED_ITEM.fullmatch(item)
        # In parentheses only the capital form: "(s1)" is more often a variable than a source.
        if cited and not (in_parentheses and cited.group(1) == "s"):
            first = int(cited.group(2))
            last = int(cited.group(3)) if cited.group(3) else first
            if not first <= last <= first + _MAX_RANGE:
                return None
            ids.extend(f"S{n}" for n in range(first, last + 1))
            after_locator = False
        elif ids and _LOCATOR_ITEM.fullmatch(item):
            after_locator = True
        elif after_locator and _PAGE_NUMBER.fullmatch(item):
            continue
        else:
            return None
    return list(dict.fromkeys(ids)) or None


def _canonical(ids: list[str]) -> str:
    return "[" + ", ".join(dict.fromkeys(ids)) + "]"


def _is_definition(text: str, match: re.Match[str]) -> bool:
    """`[^S1]: ...` (or `[S1]: ...`) opening a line defines a footnote or link: not a citation."""
    line_start = text.rfind("\n", 0, match.start()) + 1
    return not text[line_start : match.start()].strip() and text.startswith(":", match.end())


def _normalize_prose(prose: str) -> str:
    def bracketed(match: re.Match[str]) -> str:
        ids = _cited(match.group(1), in_parentheses=False)
        return match.group(0) if ids is None or _is_definition(prose, match) else _canonical(ids)

    def parenthesised(match: re.Match[str]) -> str:
        ids = _cited(match.group(1), in_parentheses=True)
        return match.group(0) if ids is None else _canonical(ids)

    def run(match: re.Match[str]) -> str:
        return _canonical(SOURCE_ID.findall(match.group(0)))

    text = _BRACKETED.sub(bracketed, prose)
    text = _PARENTHESISED.sub(parenthesised, text)
    return _CANONICAL_RUN.sub(run, text)


def normalize_citations(text: str) -> str:
    """Every citation form models write made the canonical `[S1]` / `[S1, S2]`.

    `(S1)`, `[s1]`, `[S1, p. 4]`, `[^S1]`, `[S1; S2]`, `[S1 and S2]`, `[S1-S3]`, `[S1][S2]`
    and their combinations; code blocks, inline code, links (`[S1](url)`), footnote and link
    definitions, and brackets that are not citations ("[Section 1]", "(S1 class cars)") are
    left alone. Idempotent: canonical text is returned unchanged.
    """
    if not _MAYBE_CITED.search(text):
        return text
    for _ in range(_MAX_PASSES):  # nested forms like "((S1))" settle in a pass or two
        normalized = in_prose(text, _normalize_prose)
        if normalized == text:
            break
        text = normalized
    return text


_FOOTNOTE_DEFINITION = re.compile(r"^[ \t]*\[\^S\d+\]:.*(?:\n[ \t]+\S.*)*\n?", re.I | re.M)


def drop_footnote_definitions(text: str) -> str:
    """`[^S3]: Title, https://...` lines are a reference list the model typed: the generated
    one replaces them (code is left alone)."""
    return in_prose(text, lambda prose: _FOOTNOTE_DEFINITION.sub("", prose))


def bare_urls(text: str) -> list[str]:
    """Every URL written out in text, in order, without the punctuation or emphasis after it."""
    return [u.rstrip(".,;:!?*_") for u in URL.findall(text)]


# The marks a one-line summary drops: [1], [1, 2], [1-3], [S3], [S1; S2] (reader-facing
# numbers and source ids alike, ranges too).
_MARKS = re.compile(r"\s*\[(?:S?\d+(?:\s*[,;\u2013-]\s*S?\d+)*)\]", re.I)


def without_marks(text: str) -> str:
    """The text with its citation marks (and the space before each) removed."""
    return _MARKS.sub("", text)


_SPACED_GROUP = re.compile(r"\s*" + CITE_GROUP.pattern)


def without_ids(text: str) -> str:
    """The text with its `[S3, S7]` groups (and the space before each) removed; reader
    numbers are kept."""
    return _SPACED_GROUP.sub("", text)


# A canonical citation ([S3], [S3, S7], as normalize_citations writes them) with the blanks
# before it (group 1) and its ids (group 2); not a link's text ([S3](url)).
CANONICAL_GROUP = re.compile(r"([ \t]*)\[(S\d+(?:, S\d+)*)\](?!\()")


class Group(NamedTuple):
    """One citation group as written: `[S3, S7]` or `[1, 3]`, with its labels in order
    ("S3", or "3" for a reader number) and where it starts and ends in the text."""

    start: int
    end: int
    written: str
    labels: tuple[str, ...]


def id_groups(text: str, start: int = 0) -> Iterator[Group]:
    """The `[S3, S7]` groups of text[start:] (canonical form: normalise first)."""
    for match in CITE_GROUP.finditer(text, start):
        yield Group(match.start(), match.end(), match.group(0), tuple(SOURCE_ID.findall(match.group(1))))


def number_groups(text: str, start: int = 0) -> Iterator[Group]:
    """The reader-number groups `[1, 3]` of text[start:] (never a link `[1](...)`)."""
    for match in NUMBER_GROUP.finditer(text, start):
        yield Group(match.start(), match.end(), match.group(0), tuple(_NUMBER.findall(match.group(1))))


_NUMBER = re.compile(r"\d+")
