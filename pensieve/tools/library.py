"""search_library and read_library_document: the Researcher's and the Fact Checker's way
into the workspace library (the writer's own documents, pensieve/library/).

A library document is the writer's, but its text may come from anywhere (a downloaded
paper, a fetched page): titles, passages and text are sanitised and wrapped as untrusted.
Reading a document archives it as a source [Sn] of the project with its page map, so it
is cited like any page and the page of a cited passage is found from the map.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING

from pensieve.errors import PensieveError
from pensieve.project.events import EventKind
from pensieve.tools.registry import ToolContext, ToolError, tool
from pensieve.tools.topics import _embedding_unavailable
from pensieve.untrusted import cap, sanitize, wrap

if TYPE_CHECKING:
    from pensieve.config import Settings
    from pensieve.library.store import Document

MAX_TITLE_CHARS = 200
MAX_PASSAGE_CHARS = 900


def _library_unavailable(settings: Settings, environ: Mapping[str, str]) -> str | None:
    return _embedding_unavailable(settings, environ)


def _work(doc: Document) -> str:
    parts = [", ".join(doc.authors[:3]) + (" et al." if len(doc.authors) > 3 else "")] if doc.authors else []
    parts += [str(doc.year)] if doc.year else []
    parts += [f"doi {doc.doi}"] if doc.doi else []
    parts += [f"ISBN {doc.isbn}"] if doc.isbn else []
    parts += [f"{doc.pages} pages"] if doc.pages else []
    return "; ".join(sanitize(p) for p in parts if p)


@tool(canonical="library.search", default_limit=6, unavailable=_library_unavailable)
async def search_library(ctx: ToolContext, query: str) -> str:
    """Search the writer's own library (PDFs, Word files, pages, notes) by keywords and meaning.

    Returns a JSON list of {id, title, page, passage}, best first; an empty list [] means
    nothing matches. Read a document with read_library_document to cite it.

    Args:
        query: What to look for, in a few words, e.g. 'leader election timeout'.
    """
    from pensieve.library.index import search
    from pensieve.library.store import Library
    from pensieve.topics.embedder import get_embedder

    if not query.strip():
        raise ToolError("query is empty; give a few words")
    library = Library(ctx.project.workspace)
    try:
        hits = await asyncio.to_thread(search, library, query, ctx.settings.library.max_results, get_embedder)
    except PensieveError as exc:
        raise ToolError(f"the library cannot be searched: {exc}") from None
    ctx.events.emit(EventKind.LIBRARY_SEARCH, ctx.stage.name, query=query[:200], results=len(hits))
    if not hits:
        if not library.documents():
            return "The library is empty: the writer has added no documents (pensieve library add)."
        return "[]"
    items = [
        {
            "id": hit.doc.id,
            "title": cap(sanitize(hit.doc.title), MAX_TITLE_CHARS),
            "page": hit.passage.page if hit.doc.mark_kind == "page" else None,
            **({"section": sanitize(hit.passage.page)[:200]} if hit.doc.mark_kind == "heading" else {}),
            "passage": cap(sanitize(hit.text), MAX_PASSAGE_CHARS),
        }
        for hit in hits
    ]
    return wrap("workspace library search", json.dumps(items, ensure_ascii=False, indent=1))


def _with_page_marks(text: str, start: int, end: int, marks: tuple[tuple[int, str], ...], kind: str) -> str:
    """text[start:end] with a '[page 12]' line where each page (or section) starts."""
    pieces: list[str] = []
    cursor = start
    for offset, label in marks:
        if offset <= start or offset >= end:
            continue
        pieces.append(text[cursor:offset])
        pieces.append(f"\n[{kind} {label}]\n")
        cursor = offset
    pieces.append(text[cursor:end])
    return "".join(pieces)


@tool(canonical="library.read_document", default_limit=8)
async def read_library_document(ctx: ToolContext, id: str, offset: int = 0) -> str:
    """Read a document of the writer's library (the id from search_library); long documents
    come in parts. Reading archives it as a source: cite it by the source id it names (S1, S2...).

    Args:
        id: The document's id, e.g. '3f2a9c0d1b7e'.
        offset: Where to start, in characters (0: the beginning; the answer names the next offset).
    """
    from pensieve.library.sources import archive_document
    from pensieve.library.store import Library
    from pensieve.project.source_archive import page_at

    if offset < 0:
        raise ToolError("offset must be 0 or more")
    library = Library(ctx.project.workspace)
    try:
        doc = library.get(id)
        source, is_new = await asyncio.to_thread(archive_document, ctx.project.dir, library, doc)
        text = library.text(doc)
    except PensieveError as exc:
        raise ToolError(str(exc)) from None
    except OSError as exc:
        raise ToolError(f"document {id} cannot be read ({exc.strerror}); the writer may re-add it") from None
    ctx.events.emit(
        EventKind.FETCH,
        ctx.stage.name,
        url=source.url,
        source=source.id,
        new_source=is_new,
        from_archive=not is_new,
    )
    if offset >= len(text):
        raise ToolError(f"offset {offset} is past the end of document {doc.id} ({len(text):,} characters)")
    end = min(len(text), offset + ctx.settings.library.read_chars)
    if end < len(text):
        # End on a whitespace so that no word is cut in two.
        space = text.rfind(" ", offset, end)
        end = space if space > offset + ctx.settings.library.read_chars // 2 else end
    kind = "page" if doc.mark_kind == "page" else "section"
    first, last = page_at(source, offset), page_at(source, max(offset, end - 1))
    where = ""
    if first:
        where = f" ({kind}s {first}-{last})" if last != first else f" ({kind} {first})"
    header = (
        f"Source {source.id} (library document {doc.id}, {doc.kind}): cite it as [{source.id}]; "
        f"the page of a cited passage is found from the document's page map. "
        f"Characters {offset:,}-{end:,} of {len(text):,}{where}."
    )
    more = f"\n[more: call read_library_document with offset={end}]" if end < len(text) else "\n[end of document]"
    work = _work(doc)
    body = f"Title: {sanitize(doc.title)[:MAX_TITLE_CHARS]}\n" + (f"Work: {work}\n" if work else "")
    body += "\n" + _with_page_marks(text, offset, end, doc.marks, kind) + more
    return f"{header}\n{wrap(source.url, body)}"
