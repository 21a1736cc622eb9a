"""What each kind of artifact must contain: one `Requirement` per rule, each returning the
`Violation` that explains, with figures, how an artifact falls short."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Literal, NamedTuple

from pensieve.contracts.reading import (
    _STOPWORDS,
    LazyPattern,
    article_body,
    embedding_similarity,
    has_title,
    headings,
    sections,
    shared_terms,
    tool_names,
    word_count,
)

if TYPE_CHECKING:
    from pensieve.config import ContractsSettings, Settings

# Similarity of two texts, higher is closer (MiniLM cosine by default).
Similarity = Callable[[str, str], float]
VERDICTS = ("supported", "contradicted", "not found", "uncited")  # as fact_checker.md asks


@dataclass(frozen=True)
class Violation:
    """One way an artifact fails its contract."""

    contract: str  # the requirement's name: length, sections, on_topic, not_tool_call, ...
    message: str  # what is wrong, with the figures
    fix: str = ""  # what the model should do about it (said in the repair turn)

    def __str__(self) -> str:
        return f"{self.contract}: {self.message}"


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
    # The stage's inputs it never read with read_project_file (empty when unknown).
    unread: tuple[str, ...] = ()
    # The project's own text (its artifacts, archived sources): the instructions quote it
    # (the evidence lists quote the article's sentences and the sources' passages), and an
    # artifact that keeps it says it again without echoing the instructions. Read only when
    # an echo is suspected (it can be megabytes).
    own_text: Callable[[], Sequence[str]] | None = None

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
            f"{_plural(words, 'word')}, the target is at least {needed} ({share:.0%} of article.target_words {target})",
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


_NOT_FINDINGS = LazyPattern(
    r"\b(open questions?|unanswered|unresolved|uncertaint|remaining questions?|gaps|sources?|references?|"
    r"bibliography|further reading)\b",
    re.I,
)
_OPEN_QUESTIONS = LazyPattern(
    r"\b(open|unanswered|unresolved|remaining|outstanding)\s+(questions?|issues?)\b|\buncertaint|\bgaps\b", re.I
)
_CONTENT_LINE = LazyPattern(r"^\s*(?:[-*+]|\d+[.)])\s+\S|^\s*[^\s#|>-].{20,}", re.M)


def _finding_line(body: str) -> bool:
    """A content line that states something: a line that only asks a question is no finding."""
    for match in _CONTENT_LINE.finditer(body):
        end = body.find("\n", match.start())
        line = body[match.start() : end if end != -1 else len(body)]
        if not line.rstrip().rstrip("*_").rstrip().endswith("?"):
            return True
    return False


class Findings(Requirement):
    """At least one section (other than open questions or sources) with findings in it."""

    name: ClassVar[str] = "findings"

    def check(self, text: str, given: Inputs) -> Violation | None:
        candidates = [s for s in sections(text) if not _NOT_FINDINGS.search(s.heading.text)]
        if any(_finding_line(s.body) for s in candidates):
            return None
        fix = "write one ## section per key question of topic_brief.md, with the findings as bullet points"
        if any(_CONTENT_LINE.search(s.body) for s in candidates):
            # A real model's notes: "## Research questions" listing the brief's questions again.
            asked = ", ".join(s.heading.text for s in candidates[:6])
            return self.violation(f"the findings sections hold only questions, no findings ({asked})", fix)
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
        from pensieve.article.blocks import split_references  # on use: see reading
        from pensieve.article.citations import cited_ids, normalize_citations

        body, _references = split_references(text)
        # [S1], or a form the citation normaliser turns into it: (S1), [s1], [^S1], [S1, p. 4].
        if cited_ids(normalize_citations(body)):
            return None
        return self.violation(
            f"no source is cited ({_plural(fetched, 'page')} fetched)",
            "cite each finding by its source id, e.g. [S1]",
        )


# "(~300 words)", "250-300 words", "300w", "Words: 200", "word budget: 250", "budget ~300".
_BUDGET = LazyPattern(
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


_NUMBERED = LazyPattern(
    r"^\s*(?:[*_]{1,2})?(?:#{1,6}\s*)?(?:(?:finding|issue|item)\s*#?\s*)?\d{1,3}\s*[.):]\s*\S", re.I | re.M
)
# "No changes needed" as a statement of its own (a line or a sentence), not words inside
# some other sentence ("the draft has no changes needed" is not a verdict).
_NO_CHANGES = LazyPattern(
    r"(?:^|[.!?:]\s+)[*_>\s]*(?:no\s+(?:further\s+)?(?:changes?|edits?|revisions?|issues?|problems?|findings?)\s+"
    r"(?:are\s+|were\s+)?(?:needed|necessary|required|found)\b|nothing\s+to\s+(?:change|fix)\b)",
    re.I | re.M,
)


class NumberedFindings(Requirement):
    name: ClassVar[str] = "numbered_findings"

    def check(self, text: str, given: Inputs) -> Violation | None:
        if _NUMBERED.search(text):
            return None
        if _NO_CHANGES.search(text):
            if not given.unread:
                return None
            return self.violation(
                f'it says "No changes needed" but never read {", ".join(given.unread)}',
                f"read {', '.join(given.unread)} with read_project_file, then review it",
            )
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
        from pensieve.article.tables import parse_fact_table  # on use: see reading.article_body

        rows = parse_fact_table(text)
        if not rows:
            return self.violation(
                "no claims table",
                "write one row per claim under the header | # | claim | cited id | verdict | evidence |",
            )
        odd = [row for row in rows if _verdict(row.verdict) not in VERDICTS]
        if not odd:
            return None
        split = [row for row in odd if row.cells != row.columns]
        if split:
            # The verdict column holds the wrong text because a `|` inside a cell split it:
            # say that, not "bad verdict" (which sends the model after the wrong fix).
            numbers = ", ".join(f"{row.number} ({row.cells} cells)" for row in split[:8])
            return self.violation(
                f"rows with more or fewer cells than the header's {split[0].columns}: claim {numbers}; "
                "a | inside a cell splits it",
                "write a | inside a cell as \\| (or inside `code`), so each row has exactly the header's cells",
            )
        return self.violation(
            f"verdicts that are not one of {', '.join(VERDICTS)}: "
            + ", ".join(f'claim {row.number} "{row.verdict}"' for row in odd[:8]),
            "give each claim exactly one of those verdicts",
        )


_SAYS_NONE = LazyPattern(
    r"\bno\s+(?:other\s+|earlier\s+|previous\s+|prior\s+|existing\s+|related\s+|completed?\s+|published\s+|"
    r"finished\s+|more\s+)*(?:articles?|projects?)\b"
    r"|\b(?:only|first)\s+(?:completed?\s+|finished\s+)?(?:article|project)\b"
    r"|\b(?:nothing|none|no\s+articles?)\s+to\s+compare\b"
    r"|\bthere\s+(?:are|were)\s+none\b",
    re.I,
)
_BACKTICKED = LazyPattern(r"`([A-Za-z0-9][\w.-]{0,79})`")
_SLUG = LazyPattern(r"\b[a-z0-9]+(?:-[a-z0-9]+){2,}\b")


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
