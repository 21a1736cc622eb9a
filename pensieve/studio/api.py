"""The JSON API under /api: the pages use it; scripts and independent checks drive it.

JSON in and out; errors as {"error": "..."} with a fitting status code.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from pensieve.errors import ErrorKind, UsageError
from pensieve.studio import projects as data
from pensieve.studio.projects import BadRequest, Conflict
from pensieve.studio.runs import last_run, tail_events

if TYPE_CHECKING:
    from pensieve.studio.app import Studio

MAX_QUERY_CHARS = 500


def studio_of(request: Request) -> Studio:
    studio: Studio = request.app.state.studio
    return studio


async def json_body(request: Request) -> dict[str, Any]:
    raw = await request.body()
    if not raw.strip():
        return {}
    if "json" not in request.headers.get("content-type", "application/json"):
        raise BadRequest("send JSON (Content-Type: application/json)")
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise BadRequest("the body is not valid JSON") from None
    except RecursionError:
        raise BadRequest("the body is JSON nested too deeply; send a flat object") from None
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    return body


def _optional_str(body: dict[str, Any], key: str) -> str | None:
    value = body.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise BadRequest(f'"{key}" must be a string')
    return value


async def list_projects(request: Request) -> Response:
    ws = studio_of(request).workspace
    detail = request.query_params.get("detail") == "1"
    rows = await asyncio.to_thread(data.list_detail if detail else data.list_json, ws)
    return JSONResponse(rows)


def brief_with_options(brief: str, target_words: object, audience: object) -> str:
    """The brief, with the form's target length and audience said in it (the refiner reads it)."""
    extra = []
    if target_words not in (None, ""):
        try:
            words = int(str(target_words))
        except ValueError:
            raise BadRequest('"target_words" must be a whole number of words') from None
        if not 100 <= words <= 20_000:
            raise BadRequest('"target_words" must be between 100 and 20,000')
        extra.append(f"Target length: about {words:,} words.")
    if audience not in (None, ""):
        if not isinstance(audience, str) or len(audience) > 300 or "\n" in audience:
            raise BadRequest('"audience" must be one line of at most 300 characters')
        data.checked_text(audience, "audience")
        extra.append(f"Audience: {audience.strip()}.")
    return brief.rstrip() + ("\n\n" + "\n".join(extra) if extra else "")


async def create_project(request: Request) -> Response:
    studio = studio_of(request)
    body = await json_body(request)
    brief = body.get("brief")
    if not isinstance(brief, str):
        raise BadRequest('"brief" is required: say what the article should be about')
    data.checked_text(brief, "brief")
    project_id = _optional_str(body, "id")
    if project_id is not None:
        data.validate_id(project_id)
        if (studio.workspace.projects_dir / project_id).exists():
            raise Conflict(f"project {project_id!r} already exists; choose another id")
    model = studio.checked_model(body.get("model"))
    if model is not None and body.get("start") is not True:
        # A project keeps no model of its own: a run takes one, so a model without a run
        # would be dropped while the user believes it chosen.
        raise BadRequest(
            "model: a model is chosen for a run; start the run now, or leave the model out and "
            "choose it on the project page when you run it"
        )
    text = brief_with_options(brief, body.get("target_words"), body.get("audience"))
    if body.get("start") is True:
        # Refused before anything is created: a retry after fixing it makes no second project.
        await asyncio.to_thread(studio.preflight, model)

    def make() -> dict[str, object]:
        from pensieve.project.listing import new_project, summarize

        project = new_project(studio.workspace, text, project_id)
        row = summarize(project)
        assert row is not None
        return row.to_json()

    try:
        created = await asyncio.to_thread(make)
    except UsageError as exc:
        if exc.kind is ErrorKind.CONFLICT:
            raise Conflict(str(exc)) from None
        raise BadRequest(str(exc)) from None
    if body.get("start") is True:
        project = data.project_of(studio.workspace, str(created["id"]))
        try:
            created["run"] = await studio.runs.start(project, model=model)
        except (BadRequest, Conflict) as exc:
            created["run"] = {"error": str(exc)}
    return JSONResponse(created, status_code=201)


async def get_project(request: Request) -> Response:
    project = studio_of(request).project(request.path_params["id"])
    return JSONResponse(await asyncio.to_thread(data.status_json, project))


async def project_view(request: Request) -> Response:
    """The project page's data: status, effective state, running pid, stale stages, files,
    and how the latest run ended (its run_end event: outcome, exit code, error and its kind)."""
    studio = studio_of(request)
    project = studio.project(request.path_params["id"])
    v = await asyncio.to_thread(data.view, project)
    ended = await asyncio.to_thread(last_run, project)
    return JSONResponse(
        {
            "id": project.id,
            "state": v.state,
            "running_pid": studio.runs.running_pid(project),
            "stale": v.stale,
            "stale_downstream": v.stale_downstream,
            "files": v.files,
            "status": v.status.model_dump(mode="json"),
            "events": await asyncio.to_thread(studio.event_count, project),
            "last_run": ended.as_json() if ended is not None else None,
        }
    )


async def get_file(request: Request) -> Response:
    project = studio_of(request).project(request.path_params["id"])
    return JSONResponse(await asyncio.to_thread(data.read_artifact, project, request.path_params["name"]))


async def put_file(request: Request) -> Response:
    studio = studio_of(request)
    project = studio.project(request.path_params["id"])
    name = request.path_params["name"]
    data.artifact_path(project, name)  # 400 before reading a body for a file that is not an artifact
    body = await json_body(request)
    if studio.runs.running_pid(project) is not None:
        raise Conflict(f"project {project.id} is running; stop the run (or wait for it) before editing")
    saved = await asyncio.to_thread(data.save_artifact, project, name, body.get("text"), body.get("base_sha256"))
    return JSONResponse(saved)


async def run_project(request: Request) -> Response:
    studio = studio_of(request)
    project = studio.project(request.path_params["id"])
    body = await json_body(request)
    model = studio.checked_model(body.get("model"))
    started = await studio.runs.start(project, until=body.get("until"), from_stage=body.get("from"), model=model)
    return JSONResponse(started, status_code=202)


async def project_estimate(request: Request) -> Response:
    """`pensieve estimate ID --json` (with the prompts): what a run would do and cost."""
    from pensieve.config import load_settings
    from pensieve.estimate import estimate_project

    project = studio_of(request).project(request.path_params["id"])

    def estimate() -> dict[str, Any]:
        try:
            return estimate_project(project, load_settings()).to_json(prompts=True)
        except UsageError as exc:
            raise BadRequest(str(exc)) from None

    return JSONResponse(await asyncio.to_thread(estimate))


async def stop_project(request: Request) -> Response:
    studio = studio_of(request)
    project = studio.project(request.path_params["id"])
    return JSONResponse(studio.runs.stop(project), status_code=202)


async def events(request: Request) -> Response:
    studio = studio_of(request)
    project = studio.project(request.path_params["id"])
    since: int | None = None
    raw = request.query_params.get("since") or request.headers.get("last-event-id")
    if raw is not None:
        if not raw.isdigit() or len(raw) > 9:
            raise BadRequest('"since" must be a line number (0 is the first line)')
        since = int(raw) + (1 if "since" not in request.query_params else 0)

    release = studio.feeds.open(project.id)

    async def stream() -> Any:
        async for number, line in tail_events(project.events_path, since):
            if await request.is_disconnected():
                break
            yield ServerSentEvent(data=line, id=str(number), event="message")

    return CountedFeed(stream(), release, ping=15, send_timeout=30)


class CountedFeed(EventSourceResponse):
    """A live feed that gives its place back however it ends (closed, cut, studio stopping)."""

    def __init__(self, content: Any, release: Callable[[], None], **options: Any) -> None:
        super().__init__(content, **options)
        self._release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._release()


async def versions(request: Request) -> Response:
    project = studio_of(request).project(request.path_params["id"])
    artifact = request.query_params.get("artifact")
    if artifact is not None:
        data.artifact_path(project, artifact)
    return JSONResponse(await asyncio.to_thread(data.versions, project, artifact))


async def diff(request: Request) -> Response:
    project = studio_of(request).project(request.path_params["id"])
    a, b = request.query_params.get("a"), request.query_params.get("b")
    if not a or not b:
        raise BadRequest("give two versions: ?a=draft_v1.md&b=draft_v2.md (or history/<file>)")

    def compute() -> list[tuple[str, str]]:
        return data.word_diff(data.read_version(project, a), data.read_version(project, b))

    runs = await asyncio.to_thread(compute)
    return JSONResponse({"a": a, "b": b, "diff": [[op, text] for op, text in runs]})


async def sources(request: Request) -> Response:
    project = studio_of(request).project(request.path_params["id"])

    def collect() -> list[dict[str, object]]:
        from pensieve.project.source_archive import list_sources

        citing = data.citing_sentences(project)
        return [{**s.record(), "cited_by": citing.get(s.id, [])} for s in list_sources(project.dir)]

    return JSONResponse(await asyncio.to_thread(collect))


async def topics(request: Request) -> Response:
    studio = studio_of(request)
    query = request.query_params.get("q")
    if query is None:
        listed = await asyncio.to_thread(studio.topic_list)
        return JSONResponse(listed)
    if len(query) > MAX_QUERY_CHARS:
        raise BadRequest(f"the query is over {MAX_QUERY_CHARS} characters")
    return JSONResponse(await asyncio.to_thread(studio.topic_search, query))


async def queue(request: Request) -> Response:
    """What `pensieve queue --json` shows, as {"workspace", "queue", "worker_timeout_s"};
    "queue" is null when the workspace has no queue database yet. Read-only."""
    from pensieve.studio.queue import queue_view

    return JSONResponse(await asyncio.to_thread(queue_view, studio_of(request).workspace))


ROUTES = [
    Route("/api/projects", list_projects, methods=["GET"]),
    Route("/api/projects", create_project, methods=["POST"]),
    Route("/api/projects/{id}", get_project, methods=["GET"]),
    Route("/api/projects/{id}/view", project_view, methods=["GET"]),
    Route("/api/projects/{id}/files/{name}", get_file, methods=["GET"]),
    Route("/api/projects/{id}/files/{name}", put_file, methods=["PUT"]),
    Route("/api/projects/{id}/run", run_project, methods=["POST"]),
    Route("/api/projects/{id}/stop", stop_project, methods=["POST"]),
    Route("/api/projects/{id}/estimate", project_estimate, methods=["GET"]),
    Route("/api/projects/{id}/events", events, methods=["GET"]),
    Route("/api/projects/{id}/versions", versions, methods=["GET"]),
    Route("/api/projects/{id}/diff", diff, methods=["GET"]),
    Route("/api/projects/{id}/sources", sources, methods=["GET"]),
    Route("/api/topics", topics, methods=["GET"]),
    Route("/api/queue", queue, methods=["GET"]),
]
