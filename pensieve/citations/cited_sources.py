"""The archive as the citation check sees it: id -> (url, title, archived text)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pensieve.project.source_archive import SourceArchive, WorkFields


@dataclass(frozen=True)
class CitedSource(WorkFields):
    """A source as the citation check reads it; the work's metadata (WorkFields) as the
    archive keeps it, keyword-only."""

    id: str
    url: str
    final_url: str
    title: str
    fetched_at: str
    text: str
    also: tuple[str, ...] = ()  # other URLs that reached the same page


def load_sources(project_dir: Path) -> dict[str, CitedSource]:

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
