"""The evidence for a project: which files are aligned, against which sources, where the
result is kept, and what the next stage is told about unsupported sentences.

Used by the pipeline (after the drafter, the reviser and the polisher, off the event loop)
and by `pensieve evidence` / `pensieve check`, which recompute only entries whose artifact
changed since they were stored.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from pensieve.config import Settings
from pensieve.evidence.align import Alignment, SourceText, Thresholds, align_text
from pensieve.evidence.segment import reader_numbers
from pensieve.evidence.store import ALIGNED, VERSION, artifact_entry, readable_evidence, save_entry
from pensieve.evidence.vectors import VECTORS_DIR, VectorCache
from pensieve.front_matter import split_front_matter
from pensieve.project.workspace import Project
from pensieve.stages import FINAL_ARTICLE
from pensieve.topics.embedder import Embedder, get_embedder


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
        texts[entry.id] = SourceText(entry.id, body, offset, entry.pages)
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
) -> Alignment | None:
    """Align one artifact (None if it does not exist) and store the result in evidence.json."""
    path = project.file(name)
    if not path.is_file():
        return None
    text = path.read_text(encoding="utf-8", errors="replace")
    texts, urls = sources or load_source_texts(project.dir)
    numbers, labels = reader_keys(project.dir, text, urls) if name == FINAL_ARTICLE else (None, None)
    cache = cache or VectorCache(project.dir / VECTORS_DIR, embedder)
    alignment = align_text(name, text, texts, cache, embedder, thresholds(settings), numbers, labels)
    store(project, alignment, settings)
    return alignment


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


def unsupported_sentences(entry: dict[str, Any]) -> list[dict[str, Any]]:
    """Unsupported sentences citing at least one archived source (an id that is not in the
    archive is the citation check's problem, reported and repaired there)."""
    return [
        s
        for s in entry.get("sentences", [])
        if s.get("verdict") == "unsupported" and any(c.get("passage") for c in s.get("citations", []))
    ]


def _closest(sentence: dict[str, Any]) -> str:
    for citation in sentence.get("citations", []):
        passage = citation.get("passage")
        if passage and passage.get("text"):
            text = " ".join(str(passage["text"]).split())
            text = text if len(text) <= 240 else text[:240].rsplit(" ", 1)[0] + " ..."
            return f'closest in {citation["source"]}: "{text}"'
    return "no passage found"


def repair_instructions(entry: dict[str, Any], name: str, limit: int, *, own: bool) -> str | None:
    """What to tell the stage that can fix the unsupported sentences of `name` (None: nothing).

    own: the stage wrote `name` itself and is being sent back; else it revises it."""
    unsupported = unsupported_sentences(entry)
    if not unsupported:
        return None
    lines = []
    for sentence in unsupported[:limit]:
        text = " ".join(str(sentence["text"]).split())
        problems = "; ".join(sentence.get("findings") or []) or "its sources do not say this"
        lines.append(f'- "{text}" -- {problems}; {_closest(sentence)}')
    more = len(unsupported) - limit
    if more > 0:
        lines.append(f"- ... and {more} more")
    intro = (
        f"The evidence check found {len(unsupported)} cited sentence(s) in {name} that the cited sources do not "
        "support (the passage shown is the closest one found; sources are in sources/Sn.md). "
    )
    if own:
        intro += (
            f"Start from scratch/{name} (your text with source ids) and write {name} again. "
            "For each sentence below: cite the source id that does say it, or soften it to what the source says, "
            "or remove it. Never invent numbers, dates or names.\n"
        )
    else:
        intro += (
            "For each sentence below, in your version: cite the source id that does say it, or soften it to what "
            "the source says, or remove it. Never invent numbers, dates or names.\n"
        )
    # Sentences are model text and passages come from web pages: data, never instructions.
    from pensieve.untrusted import sanitize, wrap

    return intro + wrap(f"evidence check of {name}", sanitize("\n".join(lines), collapse_whitespace=False))


def problems_of(entry: dict[str, Any], name: str) -> list[str]:
    """One line per unsupported sentence, as status.json keeps problems."""
    out = []
    for sentence in unsupported_sentences(entry):
        text = " ".join(str(sentence["text"]).split())
        text = text if len(text) <= 120 else text[:120].rsplit(" ", 1)[0] + " ..."
        findings = "; ".join(sentence.get("findings") or [])
        out.append(f'{name}: unsupported_citation: "{text}"' + (f" ({findings})" if findings else ""))
    return out
