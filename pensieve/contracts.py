"""Stage contracts: what each stage's artifact must be before it may be committed.

A real model on a bad day writes junk that looks like progress: a JSON tool call as text,
a refusal, the task message repeated back, an eight-word draft, a topic brief about a
different subject. Each stage row declares a `Contract` (data: a tuple of requirements),
and `check_artifact` returns every `Violation` with the figures that explain it, e.g.
`length: 412 words, the target is at least 900 (60% of article.target_words 1500)`.
The same violations become the repair turn sent to the model (`repair_instruction`) and,
when repairs run out, the stage's one-line error (`stage_error`).

Pure functions over strings, cheap to import (`pensieve list` imports the stage table):
the only heavy piece, the MiniLM similarity used when a topic brief shares too few terms
with the brief, is imported lazily and can be replaced by any callable.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, ClassVar, Literal, NamedTuple

from pensieve.citations.text import cited_ids, normalize_citations, parse_fact_table, split_notes, split_references

if TYPE_CHECKING:
    from pensieve.config import ContractsSettings, Settings
    from pensieve.stages import Stage

# Similarity of two texts, higher is closer (MiniLM cosine by default).
Similarity = Callable[[str, str], float]


@cache
def tool_names() -> frozenset[str]:
    """The catalog's tools: a JSON object naming one is a tool call, whatever else it says.
    Imported on first use: this module is imported with the stage table by `pensieve list`."""
    from pensieve.tools import TOOL_NAMES

    return frozenset(TOOL_NAMES)


ECHO_SHINGLE_WORDS = 8  # sequences this long rarely repeat by chance, but do when a prompt is copied
MAX_BRIEF_TERMS = 12  # a long brief is judged on its first key terms (its title comes first)
SIMILARITY_CHARS = 1500  # MiniLM reads ~256 word pieces: the title and opening sections
VERDICTS = ("supported", "contradicted", "not found", "uncited")  # as fact_checker.md asks


class _Pattern:
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


@dataclass(frozen=True)
class Violation:
    """One way an artifact fails its contract."""

    contract: str  # the requirement's name: length, sections, on_topic, not_tool_call, ...
    message: str  # what is wrong, with the figures
    fix: str = ""  # what the model should do about it (said in the repair turn)

    def __str__(self) -> str:
        return f"{self.contract}: {self.message}"


# ---------------------------------------------------------------- reading markdown


class Heading(NamedTuple):
    level: int
    text: str  # as written, markup stripped
    line: int


class Section(NamedTuple):
    heading: Heading
    body: str  # up to the next heading of any level


_ATX = _Pattern(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_SETEXT_TITLE = _Pattern(r"^\S.*\n=+\s*$", re.M)
# A line that is only bold text ("**Angle:**", "**Key questions**: ...") serves as a heading.
_BOLD_LINE = _Pattern(r"^\s*(?:[-*]\s+)?\*\*([^*\n]{1,80}?)\s*:?\s*\*\*\s*:?")
_FENCE = _Pattern(r"^\s*(```|~~~)")


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


_TITLE_LINE = _Pattern(r"^\s*(?:\*\*)?title(?:\*\*)?\s*:\s*\S", re.I)


def has_title(text: str) -> bool:
    """A `# Title` heading, a setext title (underlined with ===), or a first line `Title: ...`."""
    if any(h.level == 1 and h.text for h in headings(text)) or _SETEXT_TITLE.search(text):
        return True
    first = next((line for line in text.splitlines() if line.strip()), "")
    return bool(_TITLE_LINE.match(first))


_WORDISH = _Pattern(r"\S*[^\W_]\S*")


def word_count(text: str) -> int:
    """Words as a reader counts them: whitespace-separated tokens holding a letter or digit."""
    return len(_WORDISH.findall(text))


def article_body(text: str) -> str:
    """An article without its revision notes and reference list (neither is the article)."""
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
_TERM = _Pattern(r"[^\W_][\w'\u2019-]*[^\W_]|[^\W_]")


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


# ---------------------------------------------------------------- what is checked


class Inputs(NamedTuple):
    """Everything a requirement may look at besides the artifact."""

    filename: str
    kind: str
    settings: Settings
    brief_text: str = ""
    task_message: str | None = None
    prompt: str | None = None
    web_sources: int | None = None
    earlier_articles: Mapping[str, str] | None = None
    similarity: Similarity | None = None

    @property
    def limits(self) -> ContractsSettings:
        return self.settings.contracts


class Requirement:
    """One thing an artifact must be; `check` returns the violation, or None.

    Plain classes rather than dataclasses: each dataclass costs about a millisecond to
    create, and `pensieve list` imports this module through the stage table. Requirements
    are values all the same: equal when of the same class with the same parameters.
    """

    name: ClassVar[str]

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and vars(self) == vars(other)

    def __hash__(self) -> int:
        return hash((type(self), tuple(sorted(vars(self).items()))))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(repr(v) for v in vars(self).values())})"

    def check(self, text: str, given: Inputs) -> Violation | None:
        raise NotImplementedError

    def violation(self, message: str, fix: str) -> Violation:
        return Violation(self.name, message, fix)


def _plural(count: int, noun: str, plural: str | None = None) -> str:
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


class Title(Requirement):
    name: ClassVar[str] = "title"

    def check(self, text: str, given: Inputs) -> Violation | None:
        if has_title(text):
            return None
        return self.violation("no title", "start the document with a `# Title` line")


def _heading_has(heading: str, wanted: str) -> bool:
    """Tolerant heading match: every key word of `wanted` starts a word of the heading
    ("## 1. The angle", "## Length & format"), or a short heading has its first or last
    key word ("## Length", "## Questions")."""
    words = re.findall(r"[a-z0-9]+", heading.lower())
    needed = [w for w in re.findall(r"[a-z0-9]+", wanted.lower()) if w not in _STOPWORDS]
    if not needed:
        return False
    if all(any(word.startswith(n) for word in words) for n in needed):
        return True
    short = [w for w in words if w not in _STOPWORDS]
    return len(short) <= 2 and any(word.startswith(n) for word in short for n in (needed[0], needed[-1]))


class Sections(Requirement):
    """Named sections the prompt asks for (headings of any level, or bold lead-in lines)."""

    name: ClassVar[str] = "sections"

    def __init__(self, names: tuple[str, ...]) -> None:
        self.names = names

    def check(self, text: str, given: Inputs) -> Violation | None:
        found = [h.text for h in headings(text, bold_lines=True)]
        missing = [n for n in self.names if not any(_heading_has(h, n) for h in found)]
        if not missing:
            return None
        return self.violation(
            f"sections missing: {', '.join(missing)}",
            f"give the {given.kind} the headings {', '.join(f'## {n}' for n in self.names)}",
        )


class HeadedSections(Requirement):
    """At least N `##` sections (headings of level 2 or deeper); N is a `contracts.*` setting."""

    name: ClassVar[str] = "sections"

    def __init__(self, setting: Literal["min_article_sections", "min_outline_sections"]) -> None:
        self.setting = setting

    def check(self, text: str, given: Inputs) -> Violation | None:
        needed = int(getattr(given.limits, self.setting))
        count = len(sections(article_body(text)))
        if count >= needed:
            return None
        return self.violation(
            f"{_plural(count, 'headed section')}, at least {needed} needed (contracts.{self.setting})",
            f"give each part of the {given.kind} its own ## heading",
        )


class Length(Requirement):
    """At least a share of article.target_words (revision notes and references not counted)."""

    name: ClassVar[str] = "length"

    def __init__(self, setting: Literal["draft_min_share", "final_min_share"]) -> None:
        self.setting = setting

    def check(self, text: str, given: Inputs) -> Violation | None:
        share = float(getattr(given.limits, self.setting))
        target = given.settings.article.target_words
        needed = round(target * share)
        words = word_count(article_body(text))
        if words >= needed:
            return None
        return self.violation(
            f"{words} words, the target is at least {needed} ({share:.0%} of article.target_words {target})",
            f"write the whole {given.kind}, about {target} words",
        )


class OnTopic(Requirement):
    """About the brief: shares its key terms, or failing that is semantically close to it."""

    name: ClassVar[str] = "on_topic"

    def check(self, text: str, given: Inputs) -> Violation | None:
        brief = given.brief_text.strip()
        if not brief:
            return None
        found, missing = shared_terms(brief, text)
        total = len(found) + len(missing)
        min_share = given.limits.topic_min_term_share
        if not total or len(found) / total >= min_share:
            return None
        message = (
            f"not about the brief: it shares {len(found)} of the brief's {total} key terms "
            f"(missing: {', '.join(missing[:8])}; at least {min_share:.0%} needed, contracts.topic_min_term_share)"
        )
        if given.limits.topic_semantic:
            similarity = given.similarity or embedding_similarity
            try:
                score = similarity(brief, text)
            except Exception as exc:  # a missing or broken model must not hide the term figures
                message += f", and its meaning could not be compared ({str(exc)[:160]})"
            else:
                floor = given.limits.topic_min_similarity
                if score >= floor:
                    return None
                message += f", and its similarity to the brief is {score:.2f} (contracts.topic_min_similarity {floor})"
        return self.violation(message, f"write the {given.kind} about the subject of brief.md")


_NOT_FINDINGS = _Pattern(
    r"\b(open questions?|unanswered|unresolved|uncertaint|remaining questions?|gaps|sources?|references?|"
    r"bibliography|further reading)\b",
    re.I,
)
_OPEN_QUESTIONS = _Pattern(
    r"\b(open|unanswered|unresolved|remaining|outstanding)\s+(questions?|issues?)\b|\buncertaint|\bgaps\b", re.I
)
_CONTENT_LINE = _Pattern(r"^\s*(?:[-*+]|\d+[.)])\s+\S|^\s*[^\s#|>-].{20,}", re.M)


class Findings(Requirement):
    """At least one section (other than open questions or sources) with findings in it."""

    name: ClassVar[str] = "findings"

    def check(self, text: str, given: Inputs) -> Violation | None:
        candidates = [s for s in sections(text) if not _NOT_FINDINGS.search(s.heading.text)]
        if any(_CONTENT_LINE.search(s.body) for s in candidates):
            return None
        fix = "write one ## section per key question of topic_brief.md, with the findings as bullet points"
        if candidates:
            empty = ", ".join(s.heading.text for s in candidates[:6])
            return self.violation(f"the findings sections are empty ({empty})", fix)
        return self.violation("no findings section", fix)


class OpenQuestions(Requirement):
    name: ClassVar[str] = "open_questions"

    def check(self, text: str, given: Inputs) -> Violation | None:
        if any(_OPEN_QUESTIONS.search(h.text) for h in headings(text, bold_lines=True)):
            return None
        return self.violation(
            "no open-questions section", "end with `## Open questions`: what remains uncertain or disputed"
        )


class CitesSources(Requirement):
    """With web tools: at least one page fetched, and cited by its id."""

    name: ClassVar[str] = "cites_sources"

    def check(self, text: str, given: Inputs) -> Violation | None:
        fetched = given.web_sources
        if fetched is None:
            return None
        if fetched < 1:
            return self.violation(
                "no source was fetched, though web tools are available",
                "search with web_search, read the best pages with fetch_url, and cite each finding by the id "
                "fetch_url reports (e.g. [S1])",
            )
        body, _references = split_references(text)
        # [S1], or a form the citation normaliser turns into it: (S1), [s1], [^S1], [S1, p. 4].
        if cited_ids(normalize_citations(body)):
            return None
        return self.violation(
            f"no source is cited ({_plural(fetched, 'page')} fetched)",
            "cite each finding by its source id, e.g. [S1]",
        )


# "(~300 words)", "250-300 words", "300w", "Words: 200", "word budget: 250", "budget ~300".
_BUDGET = _Pattern(
    r"\b\d{2,5}(?:,\d{3})?\s*(?:(?:-|\u2013|\u2014|to)\s*\d{2,5}\s*)?(?:words?|w)\b"
    r"|\bwords?\s*(?:budget|count|target)?\s*[:=\u2013\u2014-]?\s*"
    r"(?:about|approx\.?|approximately|~|\u2248|c\.)?\s*\d{2,5}\b"
    r"|\bbudget\s*[:=]?\s*(?:about|~|\u2248)?\s*\d{2,5}\b",
    re.I,
)


class WordBudgets(Requirement):
    """At least `contracts.min_outline_sections` sections carry a word budget."""

    name: ClassVar[str] = "word_budgets"

    def check(self, text: str, given: Inputs) -> Violation | None:
        needed = given.limits.min_outline_sections
        parts = sections(text)
        budgeted = [s for s in parts if _BUDGET.search(s.heading.text) or _BUDGET.search(s.body)]
        if len(budgeted) >= needed:
            return None
        without = [s.heading.text for s in parts if s not in budgeted]
        listed = f"; without one: {', '.join(without[:8])}" if without else ""
        has = "has" if len(budgeted) == 1 else "have"
        return self.violation(
            f"{len(budgeted)} of {_plural(len(parts), 'section')} {has} a word budget, at least {needed} needed "
            f"(contracts.min_outline_sections){listed}",
            'give each ## section a word budget, e.g. "(~300 words)"',
        )


_NUMBERED = _Pattern(
    r"^\s*(?:[*_]{1,2})?(?:#{1,6}\s*)?(?:(?:finding|issue|item)\s*#?\s*)?\d{1,3}\s*[.):]\s*\S", re.I | re.M
)
_NO_CHANGES = _Pattern(
    r"\bno\s+(?:further\s+)?(?:changes?|edits?|revisions?|issues?|problems?|findings?)\s+(?:are\s+|were\s+)?"
    r"(?:needed|necessary|required|found)\b|\bnothing\s+to\s+(?:change|fix)\b",
    re.I,
)


class NumberedFindings(Requirement):
    name: ClassVar[str] = "numbered_findings"

    def check(self, text: str, given: Inputs) -> Violation | None:
        if _NUMBERED.search(text) or _NO_CHANGES.search(text):
            return None
        return self.violation(
            'no numbered findings and no explicit "No changes needed"',
            'number each finding (1. ..., 2. ...), or say "No changes needed" if there is nothing to change',
        )


def _verdict(raw: str) -> str:
    return " ".join(re.sub(r"[^a-z ]+", " ", raw.lower()).split())


class ClaimsTable(Requirement):
    """The table the citation check parses: | # | claim | cited id | verdict | evidence |."""

    name: ClassVar[str] = "claims_table"

    def check(self, text: str, given: Inputs) -> Violation | None:
        rows = parse_fact_table(text)
        if not rows:
            return self.violation(
                "no claims table",
                "write one row per claim under the header | # | claim | cited id | verdict | evidence |",
            )
        odd = [f'claim {row.number} "{row.verdict}"' for row in rows if _verdict(row.verdict) not in VERDICTS]
        if not odd:
            return None
        return self.violation(
            f"verdicts that are not one of {', '.join(VERDICTS)}: {', '.join(odd[:8])}",
            "give each claim exactly one of those verdicts",
        )


_SAYS_NONE = _Pattern(
    r"\bno\s+(?:other\s+|earlier\s+|previous\s+|prior\s+|existing\s+|related\s+|completed?\s+|published\s+|"
    r"finished\s+|more\s+)*(?:articles?|projects?)\b"
    r"|\b(?:only|first)\s+(?:completed?\s+|finished\s+)?(?:article|project)\b"
    r"|\b(?:nothing|none|no\s+articles?)\s+to\s+compare\b"
    r"|\bthere\s+(?:are|were)\s+none\b",
    re.I,
)
_BACKTICKED = _Pattern(r"`([A-Za-z0-9][\w.-]{0,79})`")
_SLUG = _Pattern(r"\b[a-z0-9]+(?:-[a-z0-9]+){2,}\b")


def _names_something(text: str) -> bool:
    """Without the project list: a backticked id (not a file or a tool) or a slug-like id."""
    for name in _BACKTICKED.findall(text):
        if not name.endswith(".md") and name not in tool_names():
            return True
    return bool(_SLUG.search(text))


class NamesCompared(Requirement):
    """Names the earlier articles it compared (by id or title), or says there are none."""

    name: ClassVar[str] = "names_compared"

    def check(self, text: str, given: Inputs) -> Violation | None:
        earlier = given.earlier_articles
        says_none = bool(_SAYS_NONE.search(text))
        if not earlier:
            if says_none or _names_something(text):
                return None
            if earlier is None:
                return self.violation(
                    "it neither names the earlier articles it compared nor says there are none",
                    'name the ones it compared (their ids), or say there are none ("No earlier articles to compare.")',
                )
            return self.violation(
                "it does not say that there are no earlier articles to compare (the workspace has no other "
                "complete article)",
                'say so, e.g. "No earlier articles to compare."',
            )
        lowered = " ".join(text.lower().split())
        for project_id, title in earlier.items():
            if re.search(rf"(?<![\w-]){re.escape(project_id.lower())}(?![\w-])", lowered):
                return None
            if title and len(title) >= 8 and " ".join(title.lower().split()) in lowered:
                return None
        ids = ", ".join(list(earlier)[:6]) + (", ..." if len(earlier) > 6 else "")
        articles = _plural(len(earlier), "earlier article")
        if says_none:
            message = f"it says there are no earlier articles, but list_projects shows {articles} ({ids})"
        else:
            message = f"it names none of the workspace's {articles} ({ids})"
        return self.violation(message, "compare the article with them and name the ones compared by id")


# ---------------------------------------------------------------- checks for every artifact

_THINK = _Pattern(r"</?think(?:ing)?\s*>", re.I)
_TOOL_TAG = _Pattern(r"<\s*/?\s*tool_call\s*>|<\|tool_call|<function=", re.I)
_TOOL_TAG_BODY = _Pattern(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.I | re.S)
_FENCED = _Pattern(r"^\s*```[\w-]*[ \t]*\n(.*?)^\s*```", re.S | re.M)
_JSON_START = _Pattern(r"[\[{]\s*\"(?:name|tool|tool_name|function|tool_calls|type)\"")
_ARGUMENT_KEYS = ("arguments", "parameters", "args", "input")


def _tool_named(value: Any) -> str | None:
    """The tool a decoded JSON value calls, if it is shaped like a tool call."""
    if isinstance(value, list):
        for item in value[:5]:
            called = _tool_named(item)
            if called:
                return called
        return None
    if not isinstance(value, dict):
        return None
    if "tool_calls" in value:
        return _tool_named(value["tool_calls"])
    name: Any = value.get("name") or value.get("tool") or value.get("tool_name")
    has_arguments = any(key in value for key in _ARGUMENT_KEYS)
    function = value.get("function")
    if isinstance(function, dict):
        name = function.get("name") or name
        has_arguments = has_arguments or any(key in function for key in _ARGUMENT_KEYS)
    elif isinstance(function, str):
        name = name or function
    if isinstance(name, str) and name and (has_arguments or name in tool_names()):
        return name
    return None


def _decode(text: str) -> Any:
    try:
        return json.loads(text, strict=False)  # strict=False: raw newlines inside strings, as models write them
    except ValueError:
        return None


def tool_call_in(text: str) -> str | None:
    """The tool named by a tool call written as text: tagged, bare or fenced JSON; else None.

    JSON that names one of Pensieve's tools counts anywhere; JSON naming some other function
    counts only when it is most of the text (an article may show a JSON example).
    """
    stripped = text.strip()
    if _TOOL_TAG.search(text):
        for body in _TOOL_TAG_BODY.findall(text):
            tagged = _tool_named(_decode(body.strip()))
            if tagged:
                return tagged
        return "a tool"
    name = _tool_named(_decode(stripped))
    if name:
        return name
    size = max(len(stripped), 1)
    for match in _FENCED.finditer(text):
        name = _tool_named(_decode(match.group(1).strip()))
        if name and (name in tool_names() or len(match.group(0).strip()) >= size / 2):
            return name
    decoder = json.JSONDecoder(strict=False)
    for match in _JSON_START.finditer(text):
        try:
            value, end = decoder.raw_decode(text, match.start())
        except ValueError:
            continue
        name = _tool_named(value)
        if name and (name in tool_names() or end - match.start() >= size / 2):
            return name
    return None


_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'"})
# An apology or "as an AI" where the document should begin: never part of an artifact.
_APOLOGY_START = _Pattern(
    r"^(?:(?:i'?m|i am)\s+(?:so\s+|very\s+|really\s+)?(?:sorry|afraid)\b|sorry\b|i apologi[sz]e\b|as an ai\b|"
    r"i must decline\b)",
    re.I,
)
# Saying it cannot do the task: a refusal only in a short text without findings or lists
# (a review may well say it could not reach the sources, then give its findings).
_CANNOT = _Pattern(
    r"^(?:unfortunately,?\s+i\b|i\s+(?:can ?not|can't|won't|will not|am unable|am not able)\b|"
    r"i'm\s+(?:unable|not able)\b|i\s+(?:do not|don't)\s+have\s+(?:access|the ability)\b)"
    r"|\b(?:i'?m sorry|i am sorry|i apologi[sz]e)\b[^.]{0,40}\b(?:can ?not|can't|unable|not able)\b"
    r"|\bi\s+(?:can ?not|can't|am unable to|am not able to)\s+(?:help|assist|comply|fulfil|fulfill|complete|"
    r"write|create|provide|do that|access|browse)\b",
    re.I | re.M,
)
_STRUCTURE = _Pattern(r"^\s*(?:[-*+]\s|\d+[.)]\s|\|)", re.M)
_SHORT_TEXT_WORDS = 60  # a refusal is a sentence or three


def refusal_in(text: str) -> str | None:
    """The refusing sentence, if the artifact is a refusal rather than a document."""
    lines = [line for line in text.translate(_APOSTROPHES).splitlines() if not line.lstrip().startswith("#")]
    body = "\n".join(lines).strip().lstrip("*_> ").strip()
    match = _APOLOGY_START.match(body)
    if match is None and word_count(body) < _SHORT_TEXT_WORDS and not _STRUCTURE.search(body):
        match = _CANNOT.search(body)
    if match is None:
        return None
    start = body.rfind("\n", 0, match.start()) + 1
    sentence = re.split(r"(?<=[.!?])\s|\n", body[start:], maxsplit=1)[0]
    return sentence[:100]


def _shingles(text: str, size: int = ECHO_SHINGLE_WORDS) -> set[tuple[str, ...]]:
    words = re.findall(r"[^\W_]+", text.lower())
    return {tuple(words[i : i + size]) for i in range(len(words) - size + 1)}


def echo_overlap(text: str, *sources: str) -> float:
    """Share of the text's 8-word sequences that also occur in the sources (0 for short texts)."""
    mine = _shingles(text)
    if not mine:
        return 0.0
    theirs: set[tuple[str, ...]] = set().union(*(_shingles(s) for s in sources if s))
    return len(mine & theirs) / len(mine)


def _universal(text: str, given: Inputs) -> tuple[list[Violation], bool]:
    """Checks every artifact gets; the flag says the text is not a document at all."""
    found: list[Violation] = []
    kind = given.kind
    name = tool_call_in(text)
    if name:
        found.append(
            Violation(
                "not_tool_call",
                f"it is a tool call written as text ({name}), not the {kind}",
                f"call {name} through the tool interface, with the whole markdown document as its content"
                if name == "write_project_file"
                else "call tools through the tool interface, never as JSON in the reply",
            )
        )
    refusal = refusal_in(text)
    if refusal:
        found.append(
            Violation("not_refusal", f'it is a refusal ("{refusal}"), not the {kind}', f"write the {kind} as asked")
        )
    sources = {"system prompt": given.prompt or "", "task message": given.task_message or ""}
    overlap = echo_overlap(text, *sources.values())
    limit = given.limits.echo_max_overlap
    if overlap > limit:
        echoed = [label for label, source in sources.items() if source and echo_overlap(text, source) > 0]
        found.append(
            Violation(
                "not_echo",
                f"{overlap:.0%} of its {ECHO_SHINGLE_WORDS}-word sequences repeat the {' and '.join(echoed)} "
                f"(contracts.echo_max_overlap is {limit:.0%})",
                f"write the {kind} itself, not the instructions",
            )
        )
    not_a_document = bool(found)
    if _THINK.search(text):
        found.append(
            Violation("no_think", "it contains a <think> block", f"write only the {kind}, without your reasoning")
        )
    return found, not_a_document


def strip_think(text: str) -> str:
    """The text without <think>...</think> blocks (an unclosed one runs to the end)."""
    return re.sub(r"<think(?:ing)?\s*>.*?(?:</think(?:ing)?\s*>|\Z)", "", text, flags=re.S | re.I)


# ---------------------------------------------------------------- contracts and the check


@dataclass(frozen=True)
class Contract:
    """What a stage's artifact must be: its kind (for messages) and its requirements.

    Every artifact also gets the universal checks: not empty, not a tool call written as
    text, not a refusal, not an echo of the prompt or task message, no <think> block.
    """

    kind: str
    requires: tuple[Requirement, ...] = ()


# The sections refiner.md asks for (tests/test_contracts.py keeps the two in step).
TOPIC_BRIEF_SECTIONS = ("Angle", "Audience", "Scope", "Key questions", "Prior knowledge", "Length and form")

TOPIC_BRIEF = Contract("topic brief", (Title(), Sections(TOPIC_BRIEF_SECTIONS), OnTopic()))
RESEARCH_NOTES = Contract("research notes", (Findings(), OpenQuestions(), CitesSources()))
OUTLINE = Contract("outline", (Title(), HeadedSections("min_outline_sections"), WordBudgets()))
DRAFT = Contract("draft", (Title(), HeadedSections("min_article_sections"), Length("draft_min_share")))
FINAL = Contract("final article", (Title(), HeadedSections("min_article_sections"), Length("final_min_share")))
REVIEW = Contract("review", (NumberedFindings(),))
FACT_CHECK = Contract("fact check", (ClaimsTable(),))
CONSISTENCY_REPORT = Contract("consistency report", (NamesCompared(),))
ANY_ARTIFACT = Contract("document")  # a row without a contract: the universal checks only


def contract_of(stage: Stage) -> Contract:
    """The stage row's contract (pensieve/stages.py), or just the checks every artifact gets."""
    return stage.contract or ANY_ARTIFACT


def check_artifact(
    stage: Stage,
    text: str,
    *,
    settings: Settings,
    brief_text: str,
    task_message: str | None = None,
    prompt: str | None = None,
    web_sources: int | None = None,
    earlier_articles: Mapping[str, str] | None = None,
    similarity: Similarity | None = None,
) -> list[Violation]:
    """Every way `text` fails the contract of the stage's artifact; [] when it meets it.

    - brief_text: the user's brief (brief.md), for the topic brief's on_topic check.
    - task_message, prompt: the stage's task message and system prompt, for the echo check.
    - web_sources: pages in the project's source archive when the stage has web tools,
      None when it has none (then nothing has to be cited).
    - earlier_articles: id -> title of the workspace's other projects that were complete
      when the stage started (what list_projects showed it); None when not known.
    - similarity: replaces the MiniLM similarity of the on_topic fallback (tests).
    """
    if not settings.contracts.enabled:
        return []
    contract = contract_of(stage)
    given = Inputs(
        filename=str(stage.writes),
        kind=contract.kind,
        settings=settings,
        brief_text=brief_text,
        task_message=task_message,
        prompt=prompt,
        web_sources=web_sources,
        earlier_articles=earlier_articles,
        similarity=similarity,
    )
    if not text.strip():
        return [Violation("not_empty", "it is empty", f"write the whole {contract.kind}")]
    found, not_a_document = _universal(text, given)
    if not_a_document:
        return found  # what else it lacks follows from that: the repair is to write the document
    content = strip_think(text)
    for requirement in contract.requires:
        violation = requirement.check(content, given)
        if violation:
            found.append(violation)
    return found


def violation_summary(violations: Sequence[Violation]) -> str:
    """One line: `length: 412 words, the target is ...; sections: sections missing: Scope`."""
    return "; ".join(str(v) for v in violations)


def repair_instruction(stage: Stage, violations: Sequence[Violation]) -> str:
    """The turn that tells the model exactly what is wrong with its artifact and what to do."""
    filename = str(stage.writes)
    listed = "\n".join(f"- {v.contract}: {v.message}" + (f"; {v.fix}" if v.fix else "") for v in violations)
    return (
        f"`{filename}` does not meet its contract yet:\n{listed}\n"
        f"Write `{filename}` again with write_project_file: the complete document, fixing every point above. "
        "Then reply with one short line, and no tool call."
    )


def stage_error(stage: Stage, violations: Sequence[Violation], *, kept_as: str | None = None) -> str:
    """The stage's one-line error: the contracts broken with their figures, and the remedy."""
    kept = f" The rejected artifact is kept as {kept_as}." if kept_as else ""
    return (
        f"{stage.writes} does not meet its contract: {violation_summary(violations)}.{kept} "
        f"The model did not write a valid {contract_of(stage).kind}: try a stronger model "
        f"(--model, or agents.{stage.name}.model in the configuration)."
    )


__all__ = [
    "Contract",
    "Requirement",
    "Similarity",
    "Violation",
    "check_artifact",
    "contract_of",
    "embedding_similarity",
    "repair_instruction",
    "stage_error",
    "violation_summary",
]
