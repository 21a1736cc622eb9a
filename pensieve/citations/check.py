"""The citation check, in code: every citation resolves to a page Pensieve actually fetched.

Checks, without a model:
- every citation id in a text exists in the project's source archive, and every bare URL
  outside the reference list is one that was fetched;
- every quoted evidence span in fact_check.md appears in the cited source's archived text
  (after normalising whitespace, quotes and case);
- the reference list matches the citations used: no orphan, no missing entry, no duplicate;
  every URL in it was fetched or is the canonical identifier URL (doi.org, arxiv.org/abs,
  PubMed) of a fetched record;
- the final article in either reference style: numbered ([1], a numbered list) or
  author-year ("(Malkov & Yashunin, 2018)", an alphabetical list), told apart by its list;
- the share of prose paragraphs that carry at least one citation.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from pensieve.article.blocks import paragraphs, split_notes, split_references, strip_code
from pensieve.article.citations import (
    CITE_GROUP,
    NUMBER_GROUP,
    SOURCE_ID,
    bare_urls,
    citation_count,
    cited_ids,
    normalize_citations,
    number_groups,
)
from pensieve.article.reference_list import labelled_entries, numbered_list
from pensieve.article.tables import parse_fact_table, quoted_spans
from pensieve.article.words import normalize
from pensieve.citations.cited_sources import CitedSource
from pensieve.citations.references import (
    AUTHOR_YEAR,
    NUMBERED,
    author_year_labels,
    publication,
    sort_key,
    surname,
    works,
)
from pensieve.citations.summary import CheckSummary, FileSummary, Problem
from pensieve.project.source_archive import normalize_url
from pensieve.stages import CITING_FILES, CLAIMS_TABLE, Artifact, comes_after
from pensieve.web.identifiers import canonical_urls

# The artifacts that cite sources, in pipeline order; final.md is numbered for the reader.
UNSUPPORTED = ("contradicted", "not found", "uncited")


@dataclass
class FileFigures:
    citations: int = 0
    paragraphs: int = 0
    cited_paragraphs: int = 0

    @property
    def cited_share(self) -> float | None:
        return round(self.cited_paragraphs / self.paragraphs, 3) if self.paragraphs else None


@dataclass
class CheckReport:
    sources: int
    files: dict[str, FileFigures] = field(default_factory=dict)
    quotes_checked: int = 0
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def citations_checked(self) -> int:
        return sum(f.citations for f in self.files.values()) + self.quotes_checked

    def summary(self) -> CheckSummary:
        """The figures and problems as status.json keeps them and `pensieve check --json` prints them."""
        return CheckSummary(
            ok=self.ok,
            sources=self.sources,
            citations_checked=self.citations_checked,
            quotes_checked=self.quotes_checked,
            files={
                name: FileSummary(
                    citations=figures.citations,
                    paragraphs=figures.paragraphs,
                    cited_paragraphs=figures.cited_paragraphs,
                    cited_paragraph_share=figures.cited_share,
                )
                for name, figures in self.files.items()
            },
            problems=list(self.problems),
        )


def _url_key(url: str) -> str:
    # The archive's own key (scheme and host case, default port, fragment), and a trailing
    # slash a writer may drop.
    return normalize_url(url).rstrip("/")


def _source_urls(source: CitedSource) -> set[str]:
    """Every URL that names this source: as fetched, and its identifiers' canonical URLs."""
    urls = (source.url, source.final_url, *source.also, *canonical_urls(source.doi, source.arxiv_id, source.pmid))
    return {_url_key(u) for u in urls if u}


def _known_urls(sources: dict[str, CitedSource]) -> set[str]:
    return {key for s in sources.values() for key in _source_urls(s)}


def final_style(text: str, default: str) -> str:
    """The reference style a final article is in, read from its list (numbered entries or
    bullets), else from its citations, else the configured one."""
    article, _notes = split_notes(strip_code(text))
    body, references = split_references(article)
    numbered = numbered_list(references) if references is not None else None
    if numbered is not None:
        return NUMBERED if numbered else AUTHOR_YEAR
    if NUMBER_GROUP.search(body):
        return NUMBERED
    return default


def check_text(
    name: str,
    text: str,
    sources: dict[str, CitedSource],
    min_share: float,
    report: CheckReport,
    style: str = NUMBERED,
) -> None:
    if name == Artifact.FINAL and final_style(text, style) == AUTHOR_YEAR:
        check_author_year(name, text, sources, min_share, report)
        return
    article, _notes = split_notes(strip_code(text))
    body, references = split_references(article)
    figures = FileFigures()
    known_urls = _known_urls(sources)
    numbered = name == Artifact.FINAL

    ids = cited_ids(body)
    figures.citations = citation_count(body, numbered) + (citation_count(body) if numbered else 0)
    for sid in ids:
        if sid not in sources:
            report.problems.append(Problem(name, "unknown_citation", f"[{sid}] is not in the source archive"))
    for url in bare_urls(body):
        if _url_key(url) not in known_urls:
            report.problems.append(Problem(name, "unfetched_url", f"{url} was never fetched"))

    if references is not None:
        entries = labelled_entries(references)
        labels = [label for label, _ in entries]
        for label in sorted({lbl for lbl in labels if labels.count(lbl) > 1}):
            report.problems.append(Problem(name, "duplicate_reference", f"[{label}] is listed more than once"))
        urls = [u for _, rest in entries for u in bare_urls(rest)]
        for url in sorted({u for u in urls if urls.count(u) > 1}):
            report.problems.append(Problem(name, "duplicate_reference", f"{url} is listed more than once"))
        for label, rest in entries:
            for url in bare_urls(rest):
                if _url_key(url) not in known_urls:
                    report.problems.append(Problem(name, "unfetched_url", f"reference {url} was never fetched"))
            source = sources.get(label)
            if (
                source is not None
                and bare_urls(rest)
                and not any(_url_key(u) in _source_urls(source) for u in bare_urls(rest))
            ):
                report.problems.append(
                    Problem(name, "reference_mismatch", f"[{label}] is listed with a URL that is not its source's")
                )
        if numbered:
            used = {n for g in number_groups(body) for n in g.labels}
        else:
            used = {sid for sid in ids if sid in sources}  # unknown ids are reported above
        listed = set(labels) - {"?"}
        for label in sorted(used - listed, key=_sort_key):
            report.problems.append(
                Problem(name, "missing_reference", f"[{label}] is cited but not in the reference list")
            )
        # Research notes list every archived source, cited in the notes or not.
        orphans = set() if name == Artifact.RESEARCH_NOTES else listed - used
        for label in sorted(orphans, key=_sort_key):
            report.problems.append(Problem(name, "orphan_reference", f"[{label}] is listed but never cited"))
    elif (ids or (numbered and NUMBER_GROUP.search(body))) and name != Artifact.RESEARCH_NOTES:
        report.problems.append(Problem(name, "missing_reference", "citations are used but there is no reference list"))

    if name != Artifact.RESEARCH_NOTES:
        prose = paragraphs(body)
        pattern = NUMBER_GROUP if numbered else CITE_GROUP
        _cited_share(name, prose, lambda p: bool(pattern.search(p) or CITE_GROUP.search(p)), min_share, figures, report)
    report.files[name] = figures


def _cited_share(
    name: str,
    prose: list[str],
    cites: Callable[[str], bool],
    min_share: float,
    figures: FileFigures,
    report: CheckReport,
) -> None:
    figures.paragraphs = len(prose)
    figures.cited_paragraphs = sum(1 for p in prose if cites(p))
    share = figures.cited_share
    if share is not None and share < min_share:
        report.problems.append(
            Problem(
                name,
                "low_citation_share",
                f"{figures.cited_paragraphs} of {figures.paragraphs} paragraphs cite a source "
                f"({share:.0%}; check.min_cited_paragraph_share is {min_share:.0%})",
            )
        )


# An author-year citation: "(Malkov & Yashunin, 2018)", "(Smith et al., 2020a; Nature, n.d.)".
_PARENS = re.compile(r"\(([^()\n]{1,600})\)")
_LOOKS_CITED = re.compile(r"^[^\s,][^;]*,\s*(?:\d{4}[a-z]?|n\.d\.(?:-[a-z])?)$")
# Only a citation names several authors this way: "(Nobody et al., 1999)", "(Roe & Doe, 2001)".
_AUTHORS_SHAPED = re.compile(r"\bet al\b|\s&\s")
_LEAD_SPLIT = re.compile(r"\s+(?:&|and|et al\b\.?)\s*|,", re.I)


def _fold(text: str) -> str:
    return " ".join(text.casefold().split()).strip(" .,")


def _name_part(citation: str) -> str:
    """'Malkov & Yashunin, 2018' -> 'Malkov & Yashunin'; 'Smith, 2020a' -> 'Smith'."""
    return citation.rsplit(",", 1)[0] if _LOOKS_CITED.match(citation) else re.sub(r",\s*[a-z]$", "", citation)


def _lead(name: str) -> str:
    """The first author (or the publication) of a citation's name part."""
    return _fold(_LEAD_SPLIT.split(name, maxsplit=1)[0])


def citable_names(sources: dict[str, CitedSource], labels: dict[str, str]) -> set[str]:
    """What a writer names when meaning an archived source: each label's author or
    publication part, every author's surname and the publication (case-folded)."""
    names = {_fold(_name_part(label)) for label in labels.values()}
    for source in sources.values():
        names.update(_fold(surname(a)) for a in source.authors)
        names.add(_fold(publication(source)))
    return {n for n in names if n}


def _author_year_citations(
    body: str, by_label: dict[str, str], names: set[str] | None = None
) -> tuple[list[list[str]], list[str]]:
    """(the source ids of each citation, in order; parts that were meant as citations but
    match no source).

    "(Paris, 2016)" or "(version 2, 2019)" is shaped like a citation but is prose: an
    unmatched part counts as a citation only beside a real one in the same parentheses,
    when it names several authors ("et al.", "&"), or when its name part is an archived
    source's author or publication ("(Malkov, 2019)" for Malkov & Yashunin, 2018)."""
    groups: list[list[str]] = []
    unknown: list[str] = []
    for match in _PARENS.finditer(body):
        parts = [p.strip() for p in match.group(1).split(";")]
        known = [by_label[p] for p in parts if p in by_label]
        if known:
            groups.append(known)
        for part in parts:
            if part in by_label or not _LOOKS_CITED.match(part):
                continue
            name = _name_part(part)
            if known or _AUTHORS_SHAPED.search(name) or (names and ({_fold(name), _lead(name)} & names)):
                unknown.append(part)
    return groups, unknown


def check_author_year(
    name: str, text: str, sources: dict[str, CitedSource], min_share: float, report: CheckReport
) -> None:
    """A final article in author-year style: every "(Author, year)" names an archived
    source, the list holds exactly the cited ones, once each, alphabetically, and every
    URL in it was fetched or is a fetched record's identifier URL."""
    article, _notes = split_notes(strip_code(text))
    body, references = split_references(article)
    figures = FileFigures()
    labels = author_year_labels(sources)
    work = works(sources)
    by_label = {label: work[sid] for sid, label in labels.items()}
    groups, unknown = _author_year_citations(body, by_label, citable_names(sources, labels))
    figures.citations = sum(len(g) for g in groups) + citation_count(body)
    for part in dict.fromkeys(unknown):
        report.problems.append(Problem(name, "unknown_citation", f"({part}) matches no archived source"))
    for sid in cited_ids(body):  # an id the transform could not resolve
        if sid not in sources:
            report.problems.append(Problem(name, "unknown_citation", f"[{sid}] is not in the source archive"))
    known_urls = _known_urls(sources)
    for url in bare_urls(body):
        if _url_key(url) not in known_urls:
            report.problems.append(Problem(name, "unfetched_url", f"{url} was never fetched"))
    used = list(dict.fromkeys(sid for g in groups for sid in g))

    if references is None:
        if used:
            report.problems.append(
                Problem(name, "missing_reference", "citations are used but there is no reference list")
            )
    else:
        entries = [
            line.strip().lstrip("-*").strip()
            for line in references.splitlines()[1:]
            if line.strip().startswith(("-", "*")) or line.strip()[:1].isdigit()
        ]
        listed: list[str] = []
        for entry in entries:
            urls = bare_urls(entry)
            for url in urls:
                if _url_key(url) not in known_urls:
                    report.problems.append(Problem(name, "unfetched_url", f"reference {url} was never fetched"))
            owners = [sid for sid, s in sources.items() if any(_url_key(u) in _source_urls(s) for u in urls)]
            if not owners:
                if not urls:
                    report.problems.append(
                        Problem(name, "orphan_reference", f"{entry[:60]!r} names no archived source")
                    )
                continue
            sid = work[min(owners, key=lambda s: int(s[1:]))]
            if sid in listed:
                report.problems.append(
                    Problem(name, "duplicate_reference", f"({labels[sid]}) is listed more than once")
                )
            listed.append(sid)
        for sid in used:
            if sid not in listed:
                report.problems.append(
                    Problem(name, "missing_reference", f"({labels[sid]}) is cited but not in the reference list")
                )
        for sid in dict.fromkeys(listed):
            if sid not in used:
                report.problems.append(Problem(name, "orphan_reference", f"({labels[sid]}) is listed but never cited"))
        if entries != sorted(entries, key=sort_key):
            report.problems.append(
                Problem(name, "reference_order", "the reference list is not in alphabetical order (author-year style)")
            )

    prose = paragraphs(body)
    _cited_share(
        name,
        prose,
        lambda p: bool(_author_year_citations(p, by_label)[0] or CITE_GROUP.search(p)),
        min_share,
        figures,
        report,
    )
    report.files[name] = figures


def _sort_key(label: str) -> tuple[int, str]:
    digits = re.sub(r"\D", "", label)
    return (int(digits) if digits else 0, label)


def check_fact_table(text: str, sources: dict[str, CitedSource], report: CheckReport) -> list[str]:
    """Verify each evidence quotation against its source; returns the unsupported claim numbers."""
    unsupported = []
    rows = parse_fact_table(text)
    for row in rows:
        if row.verdict in UNSUPPORTED:
            unsupported.append(row.number)
        ids = row.evidence_ids or row.cited
        spans = quoted_spans(row.evidence)
        for sid in set(row.cited + row.evidence_ids):
            if sid not in sources:
                report.problems.append(
                    Problem(
                        Artifact.FACT_CHECK, "unknown_citation", f"claim {row.number}: [{sid}] is not in the archive"
                    )
                )
        if not spans or row.verdict == "uncited":
            continue
        for span in spans:
            report.quotes_checked += 1
            wanted = normalize(span)
            found = any(sid in sources and _quoted_in(wanted, sources[sid].text) for sid in ids)
            if not found:
                where = ", ".join(ids) or "no source id"
                report.problems.append(
                    Problem(
                        Artifact.FACT_CHECK,
                        "quote_not_in_source",
                        f'claim {row.number}: "{span[:80]}" does not appear in {where}',
                    )
                )
    return unsupported


def _quoted_in(wanted: str, source_text: str) -> bool:
    # The table was normalised like every text; a page that itself reads "(S1)" was not.
    return wanted in normalize(source_text) or wanted in normalize(normalize_citations(source_text))


def check_revision_notes(draft_v2: str, unsupported: list[str], report: CheckReport) -> None:
    """The Reviser must say what it did about every claim that was not supported."""
    _article, notes = split_notes(draft_v2)
    notes = notes or ""
    for number in unsupported:
        if not re.search(rf"(claim\s*#?\s*{re.escape(number)}\b|#\s*{re.escape(number)}\b)", notes, re.I):
            report.problems.append(
                Problem(
                    Artifact.DRAFT_V2,
                    "unaddressed_claim",
                    f"revision notes do not say what was done about claim {number}",
                )
            )


def run_check(
    texts: dict[str, str],
    sources: dict[str, CitedSource],
    min_share: float,
    upto: str | None = None,
    style: str = NUMBERED,
) -> CheckReport:
    """Check the given artifacts (name -> text). `upto` limits the check to files a stage has
    produced; `style` is the configured reference style, used when final.md does not show its own."""
    report = CheckReport(sources=len(sources))
    # Every form a model writes ([s1], (S1), [S1; S2], [S1, p. 4]...) is checked as [S1].
    texts = {name: normalize_citations(text) for name, text in texts.items()}
    order: list[str] = list(CITING_FILES)
    if upto is not None:
        order = order[: order.index(upto) + 1]
    for name in order:
        if name in texts:
            # The share bar applies when the run could cite: with no archived source the
            # drafter was told not to cite, and an unsourced article is not a failed one.
            share = min_share if name != Artifact.RESEARCH_NOTES and sources else 0.0
            check_text(name, texts[name], sources, share, report, style)
    if Artifact.FACT_CHECK in texts and (upto is None or comes_after(upto, CLAIMS_TABLE)):
        unsupported = check_fact_table(texts[Artifact.FACT_CHECK], sources, report)
        if Artifact.DRAFT_V2 in texts:
            check_revision_notes(texts[Artifact.DRAFT_V2], unsupported, report)
    return report


__all__ = ["SOURCE_ID", "CheckReport", "Problem", "run_check"]
