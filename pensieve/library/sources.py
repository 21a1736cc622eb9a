"""A library document in a project: archived as a source [Sn], and the project's reading list.

Reading a document archives it like a fetched page (`sources/Sn.md` with its metadata,
the original file under `sources/raw/`), under the URL `library://<id>`, with its page
map, so `check`, `evidence`, `sources`, the references of every export and the evidence
bundle treat it like any other source, and a passage's page comes from the map.

A project's `research.json` keeps what `pensieve new --source/--no-web` and batch items'
`sources:` said: the reading list (library document ids the researcher must read) and
whether the web is offered at all.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pensieve.errors import CorruptState
from pensieve.library.extract import MEDIA_TYPES
from pensieve.library.store import Document, Library
from pensieve.project.source_archive import ArchivedSource, SourceArchive, SourceMeta
from pensieve.project.workspace import Project, atomic_write_text, read_file_nofollow

SCHEME = "library://"
RESEARCH_FILE = "research.json"


def library_url(doc_id: str) -> str:
    return f"{SCHEME}{doc_id}"


def doc_id_of(source: ArchivedSource) -> str:
    """The library document an archived source is ('' for a web page)."""
    return source.origin.removeprefix("library:") if source.origin.startswith("library:") else ""


def archive_document(project_dir: Path, library: Library, doc: Document) -> tuple[ArchivedSource, bool]:
    """The document as a source of the project (archived now if it is not yet); (source, is_new)."""
    archive = SourceArchive(project_dir)
    found = archive.find(library_url(doc.id))
    if found is not None and found.pages == doc.marks:
        return found, False
    try:
        body = read_file_nofollow(library.original_path(doc))
    except OSError:
        body = b""  # the original is gone: the text is what the citations are checked against
    meta = SourceMeta(authors=doc.authors, year=doc.year, doi=doc.doi, published=doc.published)
    return archive.add(
        url=library_url(doc.id),
        final_url=doc.url or library_url(doc.id),
        title=doc.title,
        content_type=MEDIA_TYPES.get(doc.kind, "text/plain"),  # type: ignore[call-overload]
        body=body,
        text=library.text(doc),
        meta=meta,
        origin=f"library:{doc.id}",
        pages=doc.marks,
    )


@dataclass(frozen=True)
class ResearchPlan:
    """A project's research.json: its reading list and whether the web is offered."""

    reading_list: tuple[str, ...] = ()
    web: bool | None = None  # None: as the configuration says (research.web)

    def to_json(self) -> str:
        data: dict[str, Any] = {"reading_list": list(self.reading_list)}
        if self.web is not None:
            data["web"] = self.web
        return json.dumps(data, indent=1) + "\n"


def load_plan(project_dir: Path) -> ResearchPlan:
    path = project_dir / RESEARCH_FILE
    try:
        raw = read_file_nofollow(path, max_size=1_000_000)
    except FileNotFoundError:
        return ResearchPlan()
    except OSError as exc:
        raise CorruptState(f"{path}: cannot read ({exc.strerror})") from None
    try:
        data = json.loads(raw.decode("utf-8"))
        ids = tuple(str(i) for i in data.get("reading_list") or [])
        web = data.get("web")
        if web is not None and not isinstance(web, bool):
            raise TypeError("web must be true or false")
    except (ValueError, TypeError, AttributeError, RecursionError) as exc:
        raise CorruptState(f"{path} is not a research plan ({exc}); fix it or remove it") from None
    return ResearchPlan(ids, web)


def save_plan(project_dir: Path, plan: ResearchPlan) -> None:
    atomic_write_text(project_dir / RESEARCH_FILE, plan.to_json())


def prepare_reading_list(project_dir: Path, library: Library) -> tuple[list[ArchivedSource], list[str]]:
    """Archive every document of the reading list (before research starts): the sources,
    and the ids no longer in the library nor archived (removed since `new --source`)."""
    plan = load_plan(project_dir)
    archive = SourceArchive(project_dir)
    sources: list[ArchivedSource] = []
    missing: list[str] = []
    for doc_id in plan.reading_list:
        doc = library.find(doc_id)
        if doc is not None:
            sources.append(archive_document(project_dir, library, doc)[0])
        elif (kept := archive.find(library_url(doc_id))) is not None:
            sources.append(kept)  # removed from the library; the project's copy remains
        else:
            missing.append(doc_id)
    return sources, missing


def reading_list_instructions(project: Project, can_read: bool) -> str:
    """Archive the reading list now and tell the researcher what it must read."""
    library = Library(project.workspace)
    sources, missing = prepare_reading_list(project.dir, library)
    lines = []
    for source in sources:
        doc_id = doc_id_of(source)
        pages = sum(1 for _ in source.pages) if source.content_type == MEDIA_TYPES["pdf"] else 0
        extent = f", {pages} pages" if pages else ""
        lines.append(f"- {source.id}: {source.title or doc_id} (library document {doc_id}{extent})")
    lines += [f"- (library document {doc_id} was removed from the library: skip it)" for doc_id in missing]
    how = (
        "Read each with read_library_document (its id) before anything else"
        if can_read
        else "They are archived in sources/ (read them with read_project_file)"
    )
    from pensieve.untrusted import sanitize

    return (
        "Reading list: the writer asks you to read these documents of their library and to use them as "
        f"primary sources. They are archived as the sources below; cite them by these ids. {how}.\n"
        + sanitize("\n".join(lines), collapse_whitespace=False)
    )
