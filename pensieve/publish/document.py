"""An artifact read for publishing: its title, body, citations, references and evidence.

Read once, then rendered by every format. Citations are found in the artifact as written
(`[S3]` in drafts, `[1]` in final.md, whose generated reference list maps each number back
to an archived source) and replaced in `markdown` by placeholders that carry their index,
so the markdown parser never sees them and their offsets in the file stay known: the
evidence file (see pensieve.evidence, issue 11) locates sentences by those offsets.

Evidence is attached only when it was computed on this very text (its artifact_sha256);
stale evidence is reported, never shown as current.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pensieve.article.blocks import (
    TITLE_HEADING,
    code_spans,
    inside,
    is_reference_section,
    split_notes,
    split_references,
)
from pensieve.article.citations import CITE_GROUP, NUMBER_GROUP, bare_urls, id_groups, number_groups
from pensieve.article.reference_list import entries as listed_entries
from pensieve.errors import CorruptState, UsageError
from pensieve.evidence.schema import CitationEvidence, EvidenceSummary
from pensieve.evidence.store import EVIDENCE_FILE, VERDICTS, load_evidence, text_sha256, well_formed
from pensieve.front_matter import FrontMatterError, parse_front_matter
from pensieve.project.source_archive import ArchivedSource, SourceArchive, normalize_url
from pensieve.project.workspace import BRIEF_FILE, check_name
from pensieve.publish.references import ReferenceParts, clean_text, pages_text, reference_parts
from pensieve.stages import FINAL_ARTICLE

DEFAULT_ARTIFACT: str = FINAL_ARTICLE.value

# Placeholders for citations inside the markdown handed to the parser: private-use
# characters (removed from the artifact first, so content cannot forge one).
_OPEN, _CLOSE = "\ue000", "\ue001"
PLACEHOLDER = re.compile(f"{_OPEN}(\\d+){_CLOSE}")
_PRIVATE = re.compile(f"[{_OPEN}{_CLOSE}]")


@dataclass(frozen=True)
class CitedEvidence:
    """What the evidence check found for one citation of one sentence."""

    verdict: str  # supported | weak | unsupported
    score: float | None
    passage: str | None  # the best passage of the source, if any
    missing: tuple[str, ...]
    judge: str | None  # the judge's one-line reason, if a judge ran
    sentence: str  # the sentence as the evidence file has it
    findings: tuple[str, ...]
    page: str = ""  # a library document's page of the passage


@dataclass(frozen=True)
class CiteItem:
    """One source of a citation group: `[1, 3]` has two."""

    label: str  # as written: "3" or "S3"
    source_id: str | None  # None when it cannot be resolved to an archived source
    number: int | None  # its number in the exported reference list
    evidence: CitedEvidence | None

    @property
    def verdict(self) -> str:
        return self.evidence.verdict if self.evidence is not None else "unchecked"


@dataclass(frozen=True)
class Citation:
    index: int
    offset: int  # in the artifact file's text
    written: str  # "[1, 3]"
    items: tuple[CiteItem, ...]


@dataclass(frozen=True)
class Passage:
    """A passage of a source that a sentence of the article cites, for the reference list."""

    number: int  # the citing sentence's citation number
    evidence: CitedEvidence


@dataclass
class Reference:
    number: int
    source_id: str
    source: ArchivedSource
    parts: ReferenceParts
    archived_file: str | None  # relative to the project, when the archived text exists
    passages: list[Passage] = field(default_factory=list)


@dataclass(frozen=True)
class EvidenceState:
    status: str  # "current" | "stale" | "absent" | "unreadable"
    generated_at: str | None = None
    summary: EvidenceSummary | None = None


@dataclass
class Article:
    project_dir: Path
    name: str
    title: str
    text: str  # the artifact as on disk
    sha256: str  # of the text (UTF-8, newlines as \n): what evidence.json's artifact_sha256 records
    markdown: str  # body for the parser: title, reference list and notes removed; citations as placeholders
    citations: list[Citation]
    references: list[Reference]
    evidence: EvidenceState
    warnings: list[str]
    data: bytes = b""  # the file's bytes as read

    @property
    def project_id(self) -> str:
        return self.project_dir.name

    @property
    def unsourced(self) -> bool:
        """Written without web sources: nothing cited, and no page archived that could be.
        Exports say so instead of "0 sources" and an evidence check of nothing."""
        if self.references or self.citations:
            return False
        from pensieve.project.source_archive import SourceArchive

        return not SourceArchive(self.project_dir).entries()

    def sources_note(self) -> str:
        """The sources line of an export: "3 sources", or "written without web sources"."""
        if self.unsourced:
            return "written without web sources"
        count = len(self.references)
        return f"{count} source{'s' if count != 1 else ''}"

    def reference(self, source_id: str) -> Reference | None:
        return next((r for r in self.references if r.source_id == source_id), None)

    def cite_text(self, citation: Citation, *, marked: bool = False) -> str:
        """The citation as plain text in the export's numbering: `[1, 3]` (unknown ids kept
        with a `?`); `marked` adds the verdict of a weak or unsupported one: `[1, 3 (unsupported)]`."""
        labels = []
        for item in citation.items:
            label = str(item.number) if item.number is not None else f"{item.label}?"
            if marked and item.verdict in ("weak", "unsupported"):
                label += f" ({item.verdict})"
            labels.append(label)
        return "[" + ", ".join(labels) + "]"

    def plain(self, markdown: str, *, marked: bool = False) -> str:
        """`markdown` with its placeholders written back as numbered citations."""
        return PLACEHOLDER.sub(lambda m: self.cite_text(self.citations[int(m.group(1))], marked=marked), markdown)


def artifact_path(project_dir: Path, name: str) -> Path:
    """The artifact's file, checked to be a plain markdown file name inside the project."""
    check_name("file name", name)
    if not name.endswith(".md"):
        raise UsageError(f"--file {name!r} is not a markdown artifact; give one such as final.md or draft_v2.md")
    return project_dir / name


def missing_artifact_message(project_id: str, name: str) -> str:
    from pensieve.stages import STAGES

    writer = next((s for s in STAGES if s.writes == name), None)
    if writer is None:
        return f"project {project_id} has no {name}; export an existing artifact with --file (e.g. final.md)"
    return (
        f"project {project_id} is not finished: {name} is missing (the {writer.title} has not run); "
        f"run `pensieve run {project_id}` first"
    )


def without_marks(article: Article) -> Article:
    """The article as readers get it by default: citations and references without the
    evidence check's verdicts, passages and summary (`export --evidence-marks` keeps them)."""
    from dataclasses import replace

    citations = [replace(c, items=tuple(replace(item, evidence=None) for item in c.items)) for c in article.citations]
    references = [replace(r, passages=[]) for r in article.references]
    evidence = replace(article.evidence, summary=None)
    return replace(article, citations=citations, references=references, evidence=evidence)


def load_article(project_dir: Path, name: str = DEFAULT_ARTIFACT) -> Article:
    path = artifact_path(project_dir, name)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise UsageError(missing_artifact_message(project_dir.name, name)) from None
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    # The text as the evidence check reads it (Path.read_text: universal newlines), whose
    # sha256 and character offsets evidence.json records.
    read = data.decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "\n")
    sha = text_sha256(read)  # as the alignment hashed it
    # Same length: evidence offsets stay valid, and no content can forge a placeholder.
    text = _PRIVATE.sub("\ufffd", read)
    if not text.strip():
        raise UsageError(f"{name} of project {project_dir.name} is empty; run the stage that writes it again")
    warnings: list[str] = []

    start, front_title = _front_matter(text)
    cuts = _cuts(text, start)
    title_match = next((m for m in TITLE_HEADING.finditer(text, start) if not inside(m.start(), cuts)), None)
    title = ""
    if title_match is not None and not text[start : title_match.start()].strip():
        title = _plain_title(title_match.group(1))
        cuts.append((title_match.start(), title_match.end()))
    title = title or front_title or _brief_title(project_dir) or project_dir.name

    archive = SourceArchive(project_dir)
    sources = {s.id: s for s in archive.entries()}
    numbers = _numbered_references(text, cuts, archive)
    evidence_state, sentences = _load_evidence(project_dir, name, sha, warnings)

    code = code_spans(text)
    labels = _author_year_labels(project_dir, sources) if numbers and not any(_is_number(k) for k in numbers) else {}
    matches = _citation_matches(text, start, numbers, labels, skip=code + cuts)
    order: dict[str, int] = {}
    for found_group in matches:
        for _label, sid in found_group.items:
            if sid is not None and sid in sources:
                order.setdefault(sid, len(order) + 1)

    references = [
        Reference(number, sid, sources[sid], reference_parts(sources[sid]), _archived_file(project_dir, sources[sid]))
        for sid, number in order.items()
    ]
    by_id = {r.source_id: r for r in references}
    citations: list[Citation] = []
    unresolved: list[str] = []
    for index, found_group in enumerate(matches):
        items = []
        for label, mapped in found_group.items:
            sid = mapped if mapped is not None and mapped in sources else None
            evidence = _evidence_for(sentences, found_group.start, sid) if sid is not None else None
            number = order.get(sid) if sid is not None else None
            items.append(CiteItem(label, sid, number, evidence))
            if sid is None:
                unresolved.append(label)
            elif evidence is not None and number is not None:
                by_id[sid].passages.append(Passage(number, evidence))
        citations.append(Citation(index, found_group.start, found_group.written, tuple(items)))
    for ref in references:
        # A library document's reference names the pages of the passages it is cited for.
        pages = [p.evidence.page for p in ref.passages if p.evidence.verdict != "unsupported"]
        if pages:
            ref.parts = replace(ref.parts, pages=pages_text(pages))
    if unresolved:
        listed = ", ".join(dict.fromkeys(unresolved))
        warnings.append(f"{name}: citation(s) {listed} match no archived source; they are shown unlinked")

    markdown = _with_placeholders(text, start, cuts, matches)
    return Article(project_dir, name, title, text, sha, markdown, citations, references, evidence_state, warnings, data)


def _front_matter(text: str) -> tuple[int, str]:
    """(offset where the body starts, the front matter's title or "")."""
    if not text.startswith("---"):
        return 0, ""
    try:
        parsed = parse_front_matter(text)
    except FrontMatterError:
        return 0, ""
    if parsed is None:
        return 0, ""
    meta, body = parsed
    title = clean_text(meta.get("title")) if isinstance(meta, dict) else ""
    return len(text) - len(body), title


def _cuts(text: str, start: int) -> list[tuple[int, int]]:
    """Spans left out of the published body: the reference list (generated again from the
    archive) and a reviser's notes."""
    body = text[start:]
    cuts: list[tuple[int, int]] = []
    _article, notes = split_notes(body)
    if notes:
        at = body.rfind(notes.rstrip())
        if at >= 0:
            cuts.append((start + at, start + at + len(notes.rstrip())))
    _rest, refs = split_references(body)
    if refs:
        at = body.rfind(refs)
        if at >= 0:
            cuts.append((start + at, start + at + len(refs)))
    return cuts


def _plain_title(heading: str) -> str:
    heading = CITE_GROUP.sub("", NUMBER_GROUP.sub("", heading))
    return clean_text(re.sub(r"[*_`]+", "", heading).replace("\\", ""))


def _brief_title(project_dir: Path) -> str:
    try:
        brief = (project_dir / BRIEF_FILE).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    line = next((line for line in brief.splitlines() if line.strip()), "")
    return clean_text(line.lstrip("#"))[:200]


def _numbered_references(text: str, cuts: list[tuple[int, int]], archive: SourceArchive) -> dict[str, str | None]:
    """The artifact's own reference list: number (or id, or `-` entry index) -> archived
    source id, or None for an entry that matches no archived source (its citations are
    shown unresolved). An entry is matched by a URL that reached the page, else by the DOI,
    else by the page's title (an entry may give a work's identifier URL, e.g. doi.org)."""
    mapping: dict[str, str | None] = {}
    sources = archive.entries()
    # The archive's own lookup key for every URL that reached a page (one pass, not one per entry).
    by_url = {normalize_url(u): s.id for s in sources for u in (s.url, s.final_url, *s.also) if u}
    for cut_start, cut_end in cuts:
        section = text[cut_start:cut_end]
        if not is_reference_section(section):
            continue
        for entry in listed_entries(section):
            if entry.kind == "id":
                mapping[entry.label] = entry.label
            elif entry.kind == "number":
                mapping[entry.label] = _match_entry(entry.text, by_url, sources)
            else:
                mapping[f"-{len(mapping) + 1}"] = _match_entry(entry.text, by_url, sources)
    return mapping


def _is_number(key: str) -> bool:
    return key.isdigit()


def _match_entry(line: str, by_url: dict[str, str], entries: list[ArchivedSource]) -> str | None:
    for url in bare_urls(line):
        key = normalize_url(url)
        if key in by_url:
            return by_url[key]
    folded = line.casefold()
    for source in entries:
        doi = clean_text(getattr(source, "doi", "")).casefold()
        if doi and doi in folded:
            return source.id
    titled = [(len(t), s.id) for s in entries if len(t := clean_text(s.title).casefold()) >= 12 and t in folded]
    return max(titled)[1] if titled else None


def _author_year_labels(project_dir: Path, sources: dict[str, ArchivedSource]) -> dict[str, str]:
    """label -> source id for an article in author-year style ("(Malkov & Yashunin, 2018)")."""
    from pensieve.citations.cited_sources import load_sources
    from pensieve.citations.references import author_year_labels

    labels = author_year_labels(load_sources(project_dir))
    return {clean_text(label): sid for sid, label in labels.items() if sid in sources and clean_text(label)}


@dataclass(frozen=True)
class _Found:
    start: int
    end: int
    written: str
    items: list[tuple[str, str | None]]  # (label as written, the source id it names, if any)


_LABEL_GROUP = re.compile(r"\(([^()\n]{2,400})\)")


def _citation_matches(
    text: str,
    start: int,
    numbers: dict[str, str | None],
    labels: dict[str, str],
    skip: list[tuple[int, int]],
) -> list[_Found]:
    """Citation groups in reading order: `[S3, S7]` always, `[1, 2]` when every number is
    in the artifact's reference list (so `[3]` in a draft or a year is left alone), and
    `(Label, 2018; Other, 2019)` when every part is an author-year label of the archive."""
    found: list[_Found] = []
    for group in id_groups(text, start):
        if not inside(group.start, skip):
            found.append(_Found(group.start, group.end, group.written, [(sid, sid) for sid in group.labels]))
    if numbers:
        for group in number_groups(text, start):
            cited = group.labels
            if all(n in numbers for n in cited) and not inside(group.start, skip):
                found.append(_Found(group.start, group.end, group.written, [(n, numbers[n]) for n in cited]))
    if labels:
        for match in _LABEL_GROUP.finditer(text, start):
            parts = [clean_text(p) for p in match.group(1).split(";")]
            if all(p in labels for p in parts) and not inside(match.start(), skip):
                found.append(_Found(match.start(), match.end(), match.group(0), [(p, labels[p]) for p in parts]))
    found.sort(key=lambda f: f.start)
    return found


def _with_placeholders(text: str, start: int, cuts: list[tuple[int, int]], matches: list[_Found]) -> str:
    edits = [(s, e, "") for s, e in cuts]
    edits += [(f.start, f.end, f"{_OPEN}{i}{_CLOSE}") for i, f in enumerate(matches)]
    edits.sort()
    out: list[str] = []
    position = start
    for edit_start, edit_end, replacement in edits:
        if edit_start < position:
            continue  # inside a span already cut
        out.append(text[position:edit_start])
        out.append(replacement)
        position = edit_end
    out.append(text[position:])
    return "".join(out).strip() + "\n"


def _archived_file(project_dir: Path, source: ArchivedSource) -> str | None:
    return source.file if source.file and (project_dir / source.file).is_file() else None


# -- evidence ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Sentence:
    start: int
    end: int
    text: str
    findings: tuple[str, ...]
    citations: dict[str, CitationEvidence]


def _load_evidence(
    project_dir: Path, name: str, sha: str, warnings: list[str]
) -> tuple[EvidenceState, list[_Sentence]]:
    try:
        data = load_evidence(project_dir) or {}
    except CorruptState:
        warnings.append(f"{EVIDENCE_FILE} cannot be read; the export shows no evidence")
        return EvidenceState("unreadable"), []
    entry = data.get("artifacts", {}).get(name)
    if entry is None:
        return EvidenceState("absent"), []
    if not well_formed(entry):  # what every reader of the file decides (evidence.store)
        warnings.append(
            f"the evidence of {name} in {EVIDENCE_FILE} is damaged; the export shows no evidence "
            f"(`pensieve evidence {project_dir.name}` rebuilds it)"
        )
        return EvidenceState("unreadable"), []
    generated = clean_text(data.get("generated_at")) or None
    summary = entry["summary"]
    if entry["artifact_sha256"] != sha:
        warnings.append(
            f"evidence is stale for {name}: the file changed after the evidence was computed; "
            f"passages are not shown (run `pensieve evidence {project_dir.name}`)"
        )
        return EvidenceState("stale", generated, summary), []
    sentences = [
        _Sentence(
            item["start"],
            item["end"],
            clean_text(item["text"]),
            tuple(clean_text(f) for f in item["findings"] if clean_text(f)),
            {c["source"]: c for c in item["citations"]},
        )
        for item in entry["sentences"]
    ]
    return EvidenceState("current", generated, summary), sentences


def _evidence_for(sentences: list[_Sentence], offset: int, source_id: str) -> CitedEvidence | None:
    for sentence in sentences:
        if sentence.start <= offset <= sentence.end and source_id in sentence.citations:
            return _cited_evidence(sentence, sentence.citations[source_id])
    return None


def _cited_evidence(sentence: _Sentence, cited: Mapping[str, Any]) -> CitedEvidence:
    verdict = str(cited.get("verdict") or "")
    # Anything but the three known verdicts is shown as unsupported, never as supported.
    verdict = verdict if verdict in VERDICTS else "unsupported"
    passage = cited.get("passage")
    passage_text = clean_text(passage.get("text")) if isinstance(passage, dict) else ""
    judge = cited.get("judge")
    reason = clean_text(judge.get("reason")) if isinstance(judge, dict) else ""
    score = cited.get("score")
    return CitedEvidence(
        verdict=verdict,
        score=float(score) if isinstance(score, (int, float)) and not isinstance(score, bool) else None,
        passage=passage_text or None,
        missing=tuple(clean_text(m) for m in cited.get("missing") or [] if clean_text(m)),
        judge=reason or None,
        sentence=sentence.text,
        findings=sentence.findings,
        page=clean_text(passage.get("page"))[:20] if isinstance(passage, dict) else "",
    )


__all__ = [
    "DEFAULT_ARTIFACT",
    "EVIDENCE_FILE",
    "PLACEHOLDER",
    "Article",
    "Citation",
    "CiteItem",
    "CitedEvidence",
    "EvidenceState",
    "Passage",
    "Reference",
    "load_article",
]
