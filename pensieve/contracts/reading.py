"""Reading markdown the way the contracts judge it: headings, sections, titles, word
counts, and the key terms two texts share (with MiniLM similarity as a lazy fallback)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    pass

MAX_BRIEF_TERMS = 12  # a long brief is judged on its first key terms (its title comes first)
SIMILARITY_CHARS = 1500  # MiniLM reads ~256 word pieces: the title and opening sections


@cache
def tool_names() -> frozenset[str]:
    """The catalog's tools: a JSON object naming one is a tool call, whatever else it says.
    Read from the light name table: this module is imported with the stage table by `pensieve list`."""
    from pensieve.tool_matrix import TOOL_NAMES

    return frozenset(TOOL_NAMES)


class LazyPattern:
    """A regex compiled on first use: the stage table imports this module for every command,
    `pensieve list` included, and compiling these patterns up front costs ~10 ms."""

    __slots__ = ("_compiled", "_flags", "_source")

    def __init__(self, source: str, flags: int = 0) -> None:
        self._source, self._flags = source, flags
        self._compiled: re.Pattern[str] | None = None

    @property
    def compiled(self) -> re.Pattern[str]:
        if self._compiled is None:  # two threads may both compile it: harmless
            self._compiled = re.compile(self._source, self._flags)
        return self._compiled

    def search(self, text: str) -> re.Match[str] | None:
        return self.compiled.search(text)

    def match(self, text: str) -> re.Match[str] | None:
        return self.compiled.match(text)

    def findall(self, text: str) -> list[Any]:
        return self.compiled.findall(text)

    def finditer(self, text: str) -> Iterator[re.Match[str]]:
        return self.compiled.finditer(text)


# ---------------------------------------------------------------- reading markdown


class Heading(NamedTuple):
    level: int
    text: str  # as written, markup stripped
    line: int


class Section(NamedTuple):
    heading: Heading
    body: str  # up to the next heading of any level


_ATX = LazyPattern(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_SETEXT_TITLE = LazyPattern(r"^\S.*\n=+\s*$", re.M)
# A line that is only bold text ("**Angle:**", "**Key questions**: ...") serves as a heading.
_BOLD_LINE = LazyPattern(r"^\s*(?:[-*]\s+)?\*\*([^*\n]{1,80}?)\s*:?\s*\*\*\s*:?")
_FENCE = LazyPattern(r"^\s*(```|~~~)")


def _clean_heading(text: str) -> str:
    text = re.sub(r"[*_`]+", "", text)
    text = re.sub(r"^\s*(?:\d+[.)]|[ivx]+[.)])\s+", "", text, flags=re.I)  # "1. Angle", "ii) Scope"
    return text.strip().rstrip(":").strip()


def headings(text: str, *, bold_lines: bool = False) -> list[Heading]:
    """Markdown headings (`#`..`######`, outside code fences); bold-only lines too if asked."""
    found: list[Heading] = []
    in_fence = False
    for number, line in enumerate(text.splitlines()):
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        match = _ATX.match(line)
        if match:
            found.append(Heading(len(match.group(1)), _clean_heading(match.group(2)), number))
        elif bold_lines:
            bold = _BOLD_LINE.match(line)
            if bold:
                found.append(Heading(6, _clean_heading(bold.group(1)), number))
    return found


def sections(text: str) -> list[Section]:
    """Every heading of level 2 or more, with the text under it."""
    lines = text.splitlines()
    marks = headings(text)
    out = []
    for index, heading in enumerate(marks):
        end = marks[index + 1].line if index + 1 < len(marks) else len(lines)
        if heading.level >= 2:
            out.append(Section(heading, "\n".join(lines[heading.line + 1 : end])))
    return out


_TITLE_LINE = LazyPattern(r"^\s*(?:\*\*)?title(?:\*\*)?\s*:\s*\S", re.I)


def has_title(text: str) -> bool:
    """A `# Title` heading, a setext title (underlined with ===), or a first line `Title: ...`."""
    if any(h.level == 1 and h.text for h in headings(text)) or _SETEXT_TITLE.search(text):
        return True
    first = next((line for line in text.splitlines() if line.strip()), "")
    return bool(_TITLE_LINE.match(first))


_WORDISH = LazyPattern(r"\S*[^\W_]\S*")


def word_count(text: str) -> int:
    """Words as a reader counts them: whitespace-separated tokens holding a letter or digit."""
    return len(_WORDISH.findall(text))


def article_body(text: str) -> str:
    """An article without its revision notes and reference list (neither is the article)."""
    # Imported here: the citation parser compiles its patterns on import, and this package
    # is imported with the stage table by every command.
    from pensieve.article.blocks import split_notes, split_references

    article, _notes = split_notes(text)
    body, _references = split_references(article)
    return body


# ---------------------------------------------------------------- key terms

# English function words, and the words of briefs that name the task rather than the topic.
_STOPWORD_TEXT = """
    a about above after again against all also am an and any are as at be because been before being below
    between both but by can could did do does doing down during each even ever every few for from further
    get gets got had has have having he her here hers him his how however i if in into is it its itself just
    less let like made make makes many may me might more most much must my no nor not now of off on once one
    only or other our ours out over own per same she should so some such than that the their theirs them
    then there these they this those through thus to too under until up upon us use used uses using very via
    was way ways we well were what when where whether which while who whom whose why will with within without
    would yet you your yours
    article articles brief write writing explain explained explaining explains guide overview introduction
    post blog piece essay reader readers topic
"""
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())
_TERM = LazyPattern(r"[^\W_][\w'\u2019-]*[^\W_]|[^\W_]")


def _stem(word: str) -> str:
    """A light stemmer: plural and -ing/-ed endings, doubled consonants, a final e."""
    w = word.lower().replace("\u2019", "'").removesuffix("'s")
    if len(w) > 4 and w.endswith("ies"):
        w = w[:-3] + "y"
    elif len(w) > 4 and w.endswith(("xes", "ches", "shes", "sses", "zes")):
        w = w[:-2]
    elif len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    if len(w) > 5 and w.endswith("ing"):
        w = w[:-3]
    elif len(w) > 4 and w.endswith("ed"):
        w = w[:-2]
    if len(w) > 3 and w[-1] == w[-2] and w[-1] not in "lsz":
        w = w[:-1]
    if len(w) > 3 and w.endswith("e"):
        w = w[:-1]
    return w


def key_terms(text: str) -> dict[str, str]:
    """Stemmed key terms in order of first use -> the word as first written."""
    terms: dict[str, str] = {}
    for token in _TERM.findall(text):
        for part in token.split("-"):
            lowered = part.lower()
            short_acronym = len(part) == 2 and part.isupper() and part.isalpha()
            if lowered in _STOPWORDS or (len(part) < 3 and not short_acronym) or part.isdigit():
                continue
            terms.setdefault(_stem(part), lowered)
    return terms


def _matches(term: str, stems: set[str]) -> bool:
    if term in stems:
        return True
    # "calibration" and "calibrate" stem apart: a shared prefix of 5+ letters is the same word.
    return len(term) >= 5 and any(len(s) >= 5 and (s.startswith(term) or term.startswith(s)) for s in stems)


def shared_terms(brief: str, text: str) -> tuple[list[str], list[str]]:
    """(terms of the brief found in text, terms missing), as the brief writes them."""
    wanted = list(key_terms(brief).items())[:MAX_BRIEF_TERMS]
    stems = set(key_terms(text))
    found = [word for term, word in wanted if _matches(term, stems)]
    missing = [word for term, word in wanted if not _matches(term, stems)]
    return found, missing


def embedding_similarity(first: str, second: str) -> float:
    """MiniLM cosine similarity (loads the model on first use: seconds)."""
    from pensieve.topics.embedder import get_embedder

    vectors = get_embedder().encode([first[:SIMILARITY_CHARS], second[:SIMILARITY_CHARS]])
    return float(vectors[0] @ vectors[1])
