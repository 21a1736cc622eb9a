"""The evidence for a project: which files are aligned, against which sources, where the
result is kept, and what the next stage is told about unsupported sentences.

Used by the pipeline (after the drafter, the reviser and the polisher, off the event loop)
and by `pensieve evidence` / `pensieve check`, which recompute only entries whose artifact
changed since they were stored.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pensieve.article.reference_list import reader_numbers
from pensieve.config import Settings
from pensieve.evidence.align import Alignment, SourceText, SourceView, Thresholds, align_text, candidates, view_of
from pensieve.evidence.elsewhere import recheck
from pensieve.evidence.segment import cited_sentences
from pensieve.evidence.store import ALIGNED, VERSION, artifact_entry, readable_evidence, save_entry
from pensieve.evidence.vectors import VECTORS_DIR, VectorCache, shared_cache
from pensieve.front_matter import split_front_matter
from pensieve.project.workspace import SCRATCH_DIR, Project, atomic_write_text
from pensieve.stages import FINAL_ARTICLE, STAGES, Artifact
from pensieve.topics.embedder import Embedder, get_embedder

FACT_CHECK = Artifact.FACT_CHECK
# What a first draft restates: what the first checked stage is written from. On the five
# by-hand projects (tests/data/evidence_real_*), the cited sentences of its research notes and
# outline select 80% of the windows draft_v1's check embeds (1,501; they select 2,192), so a
# warm-up embeds those while the outliner and the drafter wait (docs/evidence.md, "Speed").
ANTICIPATED = next(stage for stage in STAGES if stage.evidence).reads
# Windows embedded between two looks at `stop`: about a CPU second, and enough for the
# embedder's bulk path (one thread per core).
ANTICIPATION_CHUNK = 64


def thresholds(settings: Settings) -> Thresholds:
    return Thresholds(settings.evidence.supported_score, settings.evidence.weak_score)


def load_source_texts(project_dir: Path) -> tuple[dict[str, SourceText], dict[str, str]]:
    """Archived texts by id (with where the text starts in sources/Sn.md), and URL -> id."""
    from pensieve.project.source_archive import SourceArchive

    archive = SourceArchive(project_dir)
    texts: dict[str, SourceText] = {}
    urls: dict[str, str] = {}
    for entry in archive.entries():
        try:
            raw = (project_dir / entry.file).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        body = split_front_matter(raw)[1]
        offset = len(raw) - len(body) if raw.endswith(body) else 0
        # The archive's title and URL name the document (its number, its date): facts of
        # the source a passage need not repeat.
        meta = "\n".join(x for x in (entry.title, entry.url, entry.final_url) if x)
        texts[entry.id] = SourceText(entry.id, body, offset, meta, pages=entry.pages)
        for url in (entry.url, entry.final_url, *entry.also):
            if url:
                urls.setdefault(url.rstrip("/"), entry.id)
    return texts, urls


def align_file(
    project: Project,
    name: str,
    settings: Settings,
    embedder: Callable[[], Embedder] = get_embedder,
    sources: tuple[dict[str, SourceText], dict[str, str]] | None = None,
    cache: VectorCache | None = None,
    *,
    look_elsewhere: bool = True,
) -> Alignment | None:
    """Align one artifact (None if it does not exist) and store the result in evidence.json.
    `look_elsewhere=False` leaves the wrong-source look to `look_elsewhere` (the pipeline runs
    it beside the next stage: it only makes citations weak, and no stage is sent those)."""
    path = project.file(name)
    if not path.is_file():
        return None
    text = path.read_text(encoding="utf-8", errors="replace")
    texts, urls = sources or load_source_texts(project.dir)
    numbers, labels = reader_keys(project.dir, text, urls) if name == FINAL_ARTICLE else (None, None)
    cache = cache or shared_cache(project.dir / VECTORS_DIR, embedder)
    # Read before aligning: the pipeline checks a draft while the fact checker runs, and the
    # verdicts must not depend on whether its fact_check.md landed during the seconds of work.
    quotes = verified_quotes(project.dir, texts)
    alignment = align_text(name, text, texts, cache, embedder, thresholds(settings), numbers, labels)
    if look_elsewhere and recheck(alignment.claims, alignment.citations, texts, cache, thresholds(settings)):
        alignment.refresh()
    apply_fact_check(alignment, quotes)
    store(project, alignment, settings)
    return alignment


def look_elsewhere(
    project: Project, alignment: Alignment, settings: Settings, embedder: Callable[[], Embedder] = get_embedder
) -> int:
    """The wrong-source look (`elsewhere.recheck`) for an alignment `align_file` stored without
    it; evidence.json is stored again when a citation is lowered. Returns how many were."""
    texts = load_source_texts(project.dir)[0]
    cache = shared_cache(project.dir / VECTORS_DIR, embedder)
    lowered = recheck(alignment.claims, alignment.citations, texts, cache, thresholds(settings))
    if lowered:
        alignment.refresh()
        apply_fact_check(alignment, verified_quotes(project.dir, texts))  # a verified quote still holds
        store(project, alignment, settings)
    return lowered


def warm_up(
    project: Project,
    embedder: Callable[[], Embedder] = get_embedder,
    stop: threading.Event | None = None,
    *,
    anticipate: bool = True,
) -> None:
    """What the next alignment will need, done ahead while a stage waits for its model: once
    the project has archived sources (without any, a check embeds nothing and the model is
    never loaded), the embedding model loaded and every source cut into windows, with the
    vectors cached on disk read and each window's numbers and words found; then, if asked to
    `anticipate` (before the first draft is checked: after that its own sentences say what
    the next check needs), the windows the research notes' and the outline's cited sentences
    would need (ANTICIPATED), a chunk at a time until `stop` is set (a check begins: it
    embeds what is left of its own).
    Never fails: the check itself says what is wrong when it runs."""
    try:
        texts = load_source_texts(project.dir)[0]
        if not texts:
            return
        embedder()
        sources = {sid: source.text for sid, source in texts.items()}
        cache = shared_cache(project.dir / VECTORS_DIR, embedder)
        prepared = cache.prepare(sources)
        views = {sid: view_of(source, *prepared[sid]) for sid, source in texts.items()}
        pending = anticipated_windows(project, views) if anticipate else []
        filled: dict[str, None] = {}
        try:
            for start in range(0, len(pending), ANTICIPATION_CHUNK):
                if stop is not None and stop.is_set():
                    return
                chunk: dict[str, list[int]] = {}
                for sid, index in pending[start : start + ANTICIPATION_CHUNK]:
                    chunk.setdefault(sid, []).append(index)
                cache.fill(chunk, sources, save=False)
                filled.update(dict.fromkeys(chunk))
        finally:  # once a source, not once a chunk
            cache.save(sources[sid] for sid in filled)
    except Exception:  # a warm-up only saves time; the check itself reports failures
        return


def anticipated_windows(project: Project, views: Mapping[str, SourceView]) -> list[tuple[str, int]]:
    """(source, window) pairs the cited sentences of the ANTICIPATED artifacts would be
    aligned with and that have no vector yet, source by source (one file write a source)."""
    wanted: set[tuple[str, int]] = set()
    for name in ANTICIPATED:
        path = project.file(name)
        if not path.is_file():
            continue
        for sentence in cited_sentences(path.read_text(encoding="utf-8", errors="replace")):
            for sid in sentence.ids:
                if sid in views:
                    wanted.update((sid, i) for i in candidates(sentence.claim, views[sid]))
    return sorted((sid, i) for sid, i in wanted if math.isnan(float(views[sid].vectors[i, 0])))


def apply_fact_check(alignment: Alignment, quotes: list[tuple[str, str, str, str]]) -> int:
    """A claim the fact checker verified with a quotation from the same source is supported by
    that quotation (unless a number of the sentence is found in none of its sources): the
    quotation is evidence the alignment may not have ranked first. Returns how many pairs."""
    changed = 0
    for sentence, citations, missing in zip(
        alignment.sentences, alignment.citations, alignment.missing_everywhere, strict=True
    ):
        if missing or not quotes:
            continue
        for citation in citations:
            if citation.verdict == "supported":
                continue
            note = _fact_checked({"text": sentence["text"], "citations": [{"source": citation.source}]}, quotes)
            if note is None:
                continue
            citation.verdict = "supported"
            citation.confidence = 0.8
            citation.reasons = [*citation.reasons, note]
            changed += 1
    if changed:
        alignment.refresh()
    return changed


def reader_keys(project_dir: Path, text: str, urls: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """How final.md cites for the reader, mapped back to source ids: its reference numbers
    (through the URLs of its generated list, the identifier URL of a paper included) and
    its author-year labels."""
    from pensieve.citations.cited_sources import load_sources
    from pensieve.citations.references import author_year_labels, reference_url, works

    sources = load_sources(project_dir)
    work = works(sources)
    known = dict(urls)
    for sid in sorted(sources, key=lambda s: int(s[1:]) if s[1:].isdigit() else 0):
        known.setdefault(reference_url(sources[sid]).rstrip("/"), work[sid])
    labels = {label: work[sid] for sid, label in author_year_labels(sources).items()}
    return reader_numbers(text, known), labels


def store(project: Project, alignment: Alignment, settings: Settings) -> None:
    save_entry(project.dir, alignment.name, alignment.entry(), thresholds(settings).as_dict())


def current_evidence(
    project: Project, settings: Settings, embedder: Callable[[], Embedder] = get_embedder
) -> dict[str, Any]:
    """evidence.json with every aligned artifact on disk up to date: stale entries, damaged
    ones and those of a file that cannot be read at all are aligned again (and the file
    rewritten whole), never trusted nor reported as an error the user cannot get past."""
    stale = stale_artifacts(project)
    if stale:
        sources = load_source_texts(project.dir)
        cache = VectorCache(project.dir / VECTORS_DIR, embedder)
        for name in stale:
            align_file(project, name, settings, embedder, sources, cache)
    return readable_evidence(project.dir) or {"version": VERSION, "artifacts": {}}


def stale_artifacts(project: Project) -> list[str]:
    """Aligned artifacts on disk whose evidence is missing, out of date or not well formed
    (cheap: no model)."""
    data = readable_evidence(project.dir)
    return [name for name in ALIGNED if project.file(name).is_file() and not artifact_entry(project.dir, name, data)[1]]


# A sentence goes to a stage to fix only when the check is this sure of a citation's
# "unsupported" (a number or name not found in the source, an opposite passage, a passage
# about something else): a doubtful list made stages soften sound facts.
CONFIDENT = 0.7


def unsupported_sentences(entry: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Unsupported sentences citing at least one archived source (an id that is not in the
    archive is the citation check's problem, reported and repaired there)."""
    return [
        s
        for s in entry.get("sentences", [])
        if s.get("verdict") == "unsupported" and any(c.get("passage") for c in s.get("citations", []))
    ]


def _sure(citation: dict[str, Any]) -> bool:
    confidence = citation.get("confidence")
    judged = citation.get("judge") or {}
    if judged.get("answer") == "no":
        return True  # the model judge agreed it is unsupported
    return (
        citation.get("verdict") == "unsupported"
        and judged.get("answer") != "yes"
        and isinstance(confidence, int | float)
        and confidence >= CONFIDENT
    )


def confident_sentences(entry: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The unsupported sentences the check is sure of: the ones a stage is asked to fix."""
    return [s for s in unsupported_sentences(entry) if any(_sure(c) for c in s.get("citations", []))]


def _closest(sentence: dict[str, Any]) -> str:
    for citation in sentence.get("citations", []):
        if not _sure(citation):
            continue
        passage = citation.get("passage")
        if passage and passage.get("text"):
            text = " ".join(str(passage["text"]).split())
            text = text if len(text) <= 240 else text[:240].rsplit(" ", 1)[0] + " ..."
            return f'closest passage in {citation["source"]}: "{text}"'
    return "no passage found"


def _what_differs(sentence: dict[str, Any]) -> str:
    reasons = [r for c in sentence.get("citations", []) if _sure(c) for r in c.get("reasons") or []]
    reasons = [r for r in reasons if not r.startswith("closest passage")] or list(sentence.get("findings") or [])
    return "; ".join(dict.fromkeys(reasons)) or "the cited source was not found to say this"


def verified_quotes(project_dir: Path, texts: dict[str, SourceText]) -> list[tuple[str, str, str, str]]:
    """(claim number, claim, source id, quote) of fact_check.md's supported claims whose quote
    is in the cited source's archived text as written: claims a fact checker verified."""
    from pensieve.article.tables import parse_fact_table, quoted_spans
    from pensieve.article.words import normalize

    try:
        table = (project_dir / FACT_CHECK).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    flat = {sid: normalize(t.text) for sid, t in texts.items()}
    found = []
    for row in parse_fact_table(table):
        if row.verdict != "supported":
            continue
        for quote in quoted_spans(row.evidence):
            for sid in row.evidence_ids or row.cited:
                if sid in flat and len(quote) >= 12 and normalize(quote) in flat[sid]:
                    found.append((row.number, row.claim, sid, quote))
    return found


def _fact_checked(sentence: dict[str, Any], quotes: list[tuple[str, str, str, str]]) -> str | None:
    """The verified fact-check quote for the same claim, if any, as a note."""
    from pensieve.evidence import lexical

    text = str(sentence.get("text", ""))
    cited = {str(c.get("source")) for c in sentence.get("citations", [])}
    for number, claim, sid, quote in quotes:
        if sid in cited and lexical.coverage(claim, text) >= 0.6 and lexical.coverage(text, claim + " " + quote) >= 0.5:
            return f'fact_check.md claim {number} verified it with the quote "{quote}" from {sid}'
    return None


def repair_instructions(
    entry: Mapping[str, Any],
    name: str,
    limit: int,
    *,
    own: bool,
    project_dir: Path | None = None,
    texts: dict[str, SourceText] | None = None,
) -> str | None:
    """What to tell the stage that can fix the unsupported sentences of `name` (None: nothing).

    Only sentences the check is sure of; each with what differs and the passage. A sentence
    fact_check.md verified with a quote is said to be so. With project_dir, a list longer
    than `limit` is written whole to scratch/evidence_<name> for the stage to read (never
    cut without saying where the rest is). own: the stage wrote `name` itself and is being
    sent back; else it revises it."""
    listed = confident_sentences(entry)
    if not listed:
        return None
    quotes = verified_quotes(project_dir, texts or load_source_texts(project_dir)[0]) if project_dir else []
    lines = []
    for sentence in listed:
        text = " ".join(str(sentence["text"]).split())
        # final.md cites with reader numbers ([1]); the stage fixes scratch/final.md, which cites ids.
        ids = ", ".join(dict.fromkeys(str(c.get("source")) for c in sentence.get("citations", [])))
        line = f'- "{text}" (cites {ids}) -- {_what_differs(sentence)}; {_closest(sentence)}'
        checked = _fact_checked(sentence, quotes)
        if checked:
            line += f" (but {checked}: keep the sentence unless that quote does not say it)"
        lines.append(line)
    from pensieve.untrusted import sanitize, wrap

    full_name = f"{SCRATCH_DIR}/evidence_{name}"
    shown = lines
    rest = ""
    if len(lines) > limit:
        shown = lines[:limit]
        if project_dir is not None:
            full = f"# Evidence check of {name}: all {len(lines)} sentences\n\n" + "\n".join(lines) + "\n"
            atomic_write_text(project_dir / full_name, full)
            rest = f"- ... and {len(lines) - limit} more: read {full_name} (read_project_file) for the whole list"
        else:
            shown = lines  # nowhere to put the rest: list them all
    intro = (
        f"The evidence check could not find support in the cited sources for {len(lines)} cited sentence(s) of "
        f"{name} (only the ones it is sure of are listed; the passage shown is the closest one found; sources "
        "are in sources/Sn.md). "
    )
    if own:
        intro += (
            f"Start from scratch/{name} (your text with source ids) and write {name} again. "
            "For each sentence below: cite the source id that does say it, or correct it to what the source says, "
            "or remove it. Never invent numbers, dates or names.\n"
        )
    else:
        intro += (
            "For each sentence below, in your version: cite the source id that does say it, or correct it to what "
            "the source says, or remove it. Never invent numbers, dates or names.\n"
        )
    body = "\n".join(shown + ([rest] if rest else []))
    # Sentences are model text and passages come from web pages: data, never instructions.
    return intro + wrap(f"evidence check of {name}", sanitize(body, collapse_whitespace=False))


def problems_of(entry: Mapping[str, Any], name: str) -> list[str]:
    """One line per unsupported sentence the check is sure of, as status.json keeps problems."""
    out = []
    for sentence in confident_sentences(entry):
        text = " ".join(str(sentence["text"]).split())
        text = text if len(text) <= 120 else text[:120].rsplit(" ", 1)[0] + " ..."
        findings = "; ".join(sentence.get("findings") or [])
        out.append(f'{name}: unsupported_citation: "{text}"' + (f" ({findings})" if findings else ""))
    return out
