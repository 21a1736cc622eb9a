"""The studio's library page and API: the workspace library's documents with where each
is cited, its search, and adding documents (an upload's bytes, or a URL fetched once
through the safe fetch), all through `pensieve.library` as the CLI does."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import PurePath
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from pensieve.errors import UsageError
from pensieve.project.workspace import Workspace
from pensieve.studio import api
from pensieve.studio.projects import BadRequest, citing_sentences

UPLOAD_PATH = "/api/library/upload"
# The guard's cap on an upload's body (the library's own library.max_file_bytes applies too).
MAX_UPLOAD_BYTES = 100_000_000
MAX_QUERY_CHARS = 500


def cited_in(workspace: Workspace) -> dict[str, list[dict[str, Any]]]:
    """Per library document id: the projects that archived it, as which source, and how
    many sentences cite it there."""
    from pensieve.library.sources import doc_id_of
    from pensieve.project.source_archive import list_sources

    found: dict[str, list[dict[str, Any]]] = {}
    for project in workspace.projects():
        try:
            sources = [s for s in list_sources(project.dir) if doc_id_of(s)]
        except OSError:
            continue
        if not sources:
            continue
        citing = citing_sentences(project)
        for source in sources:
            sentences = citing.get(source.id, [])
            pages = sorted({str(c.get("page")) for c in sentences if c.get("page")}, key=_page_order)
            found.setdefault(doc_id_of(source), []).append(
                {"project": project.id, "source": source.id, "sentences": len(sentences), "pages": pages}
            )
    return found


def _page_order(label: str) -> tuple[int, str]:
    return (int(label), "") if label.isdigit() else (1_000_000, label)


def documents_json(workspace: Workspace) -> dict[str, Any]:
    from pensieve.library.store import Library

    where = cited_in(workspace)
    return {"documents": [{**d.summary(), "cited_in": where.get(d.id, [])} for d in Library(workspace).documents()]}


def search_json(workspace: Workspace, query: str) -> dict[str, Any]:
    from pensieve.config import load_settings, workspace_settings
    from pensieve.library.index import search
    from pensieve.library.store import Library
    from pensieve.topics.embedder import get_embedder

    settings = workspace_settings(load_settings(), workspace.root)
    try:
        hits = search(Library(workspace), query, settings.library.max_results, get_embedder)
    except UsageError as exc:
        raise BadRequest(str(exc)) from None
    return {
        "query": query,
        "hits": [
            {"id": h.doc.id, "title": h.doc.title, "page": h.passage.page or None, "passage": h.text, "score": h.score}
            for h in hits
        ],
    }


def _added(outcome: Any) -> dict[str, Any]:
    if outcome.document is None:
        raise BadRequest(outcome.line)
    return {"id": outcome.document.id, "title": outcome.document.title, "new": outcome.new}


def _index(workspace: Workspace) -> None:
    from pensieve.library.index import update_index
    from pensieve.library.store import Library
    from pensieve.topics.embedder import ModelUnavailable, get_embedder

    with contextlib.suppress(ModelUnavailable):  # the first search says so
        update_index(Library(workspace), get_embedder)


async def library_api(request: Request) -> Response:
    workspace = api.studio_of(request).workspace
    query = request.query_params.get("q")
    if query is None:
        return JSONResponse(await asyncio.to_thread(documents_json, workspace))
    if len(query) > MAX_QUERY_CHARS:
        raise BadRequest(f"the query is over {MAX_QUERY_CHARS} characters")
    return JSONResponse(await asyncio.to_thread(search_json, workspace, query))


async def upload(request: Request) -> Response:
    """The file's bytes as the body; its name in ?name= (a name only, never a path)."""
    from pensieve.config import load_settings, workspace_settings
    from pensieve.library.adding import Outcome, limits_of
    from pensieve.library.extract import ExtractionError
    from pensieve.library.store import Library, parse_tags

    workspace = api.studio_of(request).workspace
    name = PurePath(request.query_params.get("name") or "").name
    if not name or len(name) > 200:
        raise BadRequest("name: give the file's name (e.g. paper.pdf) in ?name=")
    try:
        tags = parse_tags(request.query_params.get("tags"))
    except UsageError as exc:
        raise BadRequest(str(exc)) from None
    data = await request.body()
    if not data:
        raise BadRequest("the body is empty: send the file's bytes")
    settings = workspace_settings(load_settings(), workspace.root)
    if len(data) > settings.library.max_file_bytes:
        raise BadRequest(f"{name}: larger than library.max_file_bytes ({settings.library.max_file_bytes:,})")

    def add() -> dict[str, Any]:
        try:
            doc, new = Library(workspace).add_bytes(name, data, limits_of(settings), tags=tags)
        except ExtractionError as exc:
            return _added(Outcome(name, reason=str(exc)))
        _index(workspace)
        return _added(Outcome(name, doc, new))

    return JSONResponse(await asyncio.to_thread(add), status_code=201)


async def add_url(request: Request) -> Response:
    from pensieve.config import load_settings, workspace_settings
    from pensieve.library.adding import fetch_document, is_url
    from pensieve.library.store import Library

    workspace = api.studio_of(request).workspace
    body = await api.json_body(request)
    url = body.get("url")
    if not isinstance(url, str) or not is_url(url):
        raise BadRequest('"url" must be an http or https URL')
    outcome = await fetch_document(Library(workspace), url.strip(), workspace_settings(load_settings(), workspace.root))
    result = _added(outcome)
    await asyncio.to_thread(_index, workspace)
    return JSONResponse(result, status_code=201)


ROUTES = [
    Route("/api/library", library_api, methods=["GET"]),
    Route(UPLOAD_PATH, upload, methods=["POST"]),
    Route("/api/library/url", add_url, methods=["POST"]),
]

__all__ = ["MAX_UPLOAD_BYTES", "ROUTES", "UPLOAD_PATH", "cited_in", "documents_json"]
