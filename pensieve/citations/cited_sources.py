"""The archive as the citation check sees it: id -> (url, title, archived text)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class CitedSource:
    id: str
    url: str
    final_url: str
    title: str
    fetched_at: str
    text: str
    also: tuple[str, ...] = ()  # other URLs that reached the same page
    # The work's metadata, as the archive keeps it (pensieve.project.source_archive.SourceMeta).
    authors: tuple[str, ...] = ()
    year: int | None = None
    venue: str = ""
    doi: str = ""
    publisher: str = ""
    published: str = ""
    arxiv_id: str = ""
    pmid: str = ""


def load_sources(project_dir: Path) -> dict[str, CitedSource]:
    from pensieve.project.source_archive import SourceArchive

    archive = SourceArchive(project_dir)
    loaded = {}
    for entry in archive.entries():
        try:
            text = archive.text(entry)
        except OSError:
            text = ""  # a source file removed by hand: its quotes will not be found
        loaded[entry.id] = CitedSource(
            entry.id,
            entry.url,
            entry.final_url,
            entry.title,
            entry.fetched_at,
            text,
            entry.also,
            **entry.meta.as_fields(),
        )
    return loaded
