"""The studio's pages and the app itself: `create_app` wires the routes, the API and the
guard (pensieve.studio.security) that every request passes first."""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from markupsafe import Markup
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates
from starlette.types import ASGIApp, Receive, Scope, Send

from pensieve.errors import ErrorKind, PensieveError, ProjectBusy, UsageError
from pensieve.project.workspace import Project, Workspace
from pensieve.stages import ARTICLE_VERSIONS, FINAL_ARTICLE
from pensieve.studio import api
from pensieve.studio import library as library_api
from pensieve.studio import projects as data
from pensieve.studio.projects import BadRequest, Conflict, NotFound
from pensieve.studio.render import render_markdown
from pensieve.studio.runs import FeedCounter, RunManager, TooManyFeeds, count_lines, last_run_error
from pensieve.studio.security import SANDBOX_CSP, BodyTooLarge, Guard

HERE = Path(__file__).parent
LOG = logging.getLogger("pensieve.studio")


@dataclass
class Studio:
    workspace: Workspace
    runs: RunManager
    feeds: FeedCounter = field(default_factory=FeedCounter)
    _models: list[str] | None = field(default=None)

    def project(self, project_id: str) -> Project:
        return data.project_of(self.workspace, project_id)

    def event_count(self, project: Project) -> int:
        return count_lines(project.events_path)

    def models(self) -> list[str]:
        """The models the configuration names (llm.model and agents.*.model): the only
        choices a page may pick; never a string the browser made up."""
        if self._models is None:
            from pensieve.config import load_settings

            try:
                settings = load_settings()
            except PensieveError:
                return []
            found = [settings.llm.model] if settings.llm.model else []
            found += [a.model for a in settings.agents.values() if a.model and a.model not in found]
            self._models = [m for m in found if m]
        return self._models

    def preflight(self, model: str | None) -> None:
        """What `pensieve run` would refuse (no model, a missing key), checked before the
        form creates anything, and said in the studio's terms: the configuration file and
        key, or the form's Model field. BadRequest names the fix."""
        from pensieve.config import load_settings
        from pensieve.config_files import config_path, pensieve_home
        from pensieve.run.preflight import check_models
        from pensieve.stages import STAGE_NAMES

        try:
            settings = load_settings()
            home = pensieve_home()
            where = config_path(home)
            config = str(where) if where is not None else f"{home / 'configs' / 'pensieve.yaml'} (create it)"
            check_models(
                {model or settings.model_for(name) for name in STAGE_NAMES},
                settings,
                config=config,
                choose="choose a model in the Model field when one is configured",
            )
        except PensieveError as exc:
            raise BadRequest(str(exc)) from None

    def checked_model(self, value: object) -> str | None:
        if value is None or value == "":
            return None
        if not isinstance(value, str) or value not in self.models():
            raise BadRequest("model: choose one of the configured models: " + (", ".join(self.models()) or "(none)"))
        return value

    def topic_list(self) -> dict[str, object]:
        from pensieve.topics.library import load_library

        library = load_library(self.workspace)
        return {
            "topics": [
                {
                    "slug": t.slug,
                    "title": t.title,
                    "summary": t.summary,
                    "tags": list(t.tags),
                    "updated": t.updated,
                    "body": t.body,
                }
                for t in library.topics
            ],
            "problems": library.problems,
        }

    def topic_search(self, query: str) -> dict[str, object]:
        from pensieve.config import load_settings
        from pensieve.topics.search import search_topic_library

        settings = load_settings()
        try:
            found = search_topic_library(
                self.workspace, query, k=settings.topics.max_results, min_score=settings.topics.min_score
            )
        except UsageError as exc:
            raise BadRequest(str(exc)) from None
        return {
            "query": query,
            "hits": [{"slug": h.slug, "title": h.title, "snippet": h.snippet, "score": h.score} for h in found.hits],
        }


def _templates() -> Jinja2Templates:
    templates = Jinja2Templates(directory=str(HERE / "templates"))
    templates.env.autoescape = True
    # render_markdown escapes everything (no raw HTML, links checked): its output is safe markup.
    templates.env.globals["markdown"] = lambda text: Markup(render_markdown(text))  # noqa: S704
    return templates


TEMPLATES = _templates()


def page(request: Request, template: str, status_code: int = 200, **context: Any) -> Response:
    context.setdefault("title", "Pensieve studio")
    context["nonce"] = request.state.csp_nonce
    context["workspace"] = api.studio_of(request).workspace.name
    return TEMPLATES.TemplateResponse(request, template, context, status_code=status_code)


def project_estimate(project: Project) -> dict[str, Any] | None:
    """The estimate `pensieve estimate` prints (as its JSON, without the prompts), shown on
    the project page before a run; None when the configuration cannot be read."""
    from pensieve.config import load_settings
    from pensieve.estimate import estimate_project

    try:
        return estimate_project(project, load_settings()).to_json()
    except PensieveError:
        return None


# -- pages -------------------------------------------------------------------------------------
async def projects_page(request: Request) -> Response:
    rows = await asyncio.to_thread(data.list_detail, api.studio_of(request).workspace)
    return page(request, "projects.html", rows=rows, title="Projects - Pensieve studio")


async def new_page(request: Request) -> Response:
    studio = api.studio_of(request)
    models = await asyncio.to_thread(studio.models)
    return page(request, "new.html", models=models, title="New article - Pensieve studio")


async def project_page(request: Request) -> Response:
    studio = api.studio_of(request)
    project = studio.project(request.path_params["id"])
    v = await asyncio.to_thread(data.view, project)
    running = studio.runs.running_pid(project)
    run_error = None if running is not None else await asyncio.to_thread(last_run_error, project)
    estimate = None
    if running is None and v.status.status != "complete":
        estimate = await asyncio.to_thread(project_estimate, project)
    return page(
        request,
        "project.html",
        project=project,
        view=v,
        run_error=run_error if run_error != v.status.error else None,
        estimate=estimate,
        brief=project.read_brief(),
        stages=data.stage_titles(),
        models=studio.models(),
        running_pid=running,
        events=await asyncio.to_thread(studio.event_count, project),
        title=f"{project.id} - Pensieve studio",
    )


async def file_page(request: Request) -> Response:
    studio = api.studio_of(request)
    project = studio.project(request.path_params["id"])
    name = request.path_params["name"]
    found = await asyncio.to_thread(data.read_artifact, project, name)
    versions = await asyncio.to_thread(data.versions, project, name)
    writer = next((s for s in data.stage_titles() if s[2] == name), None)
    return page(
        request,
        "file.html",
        project=project,
        file=found,
        versions=versions,
        writer=writer,
        editing=request.query_params.get("edit") == "1",
        title=f"{name} - {project.id}",
    )


async def read_page(request: Request) -> Response:
    studio = api.studio_of(request)
    project = studio.project(request.path_params["id"])
    name = request.query_params.get("file", FINAL_ARTICLE.value)
    if name not in ARTICLE_VERSIONS:
        *others, last = (a.value for a in reversed(ARTICLE_VERSIONS))
        raise BadRequest(f"the Read page shows {', '.join(others)} or {last}")
    article, references = await asyncio.to_thread(_render_article, project, name)
    return page(
        request, "read.html", project=project, article=article, references=references, name=name, title=article.title
    )


def _render_article(project: Project, name: str) -> Any:
    from pensieve.publish.render import render_article
    from pensieve.studio.render import with_archived_links

    data.read_artifact(project, name)  # the name, a symlink, a missing file: refused as for any artifact
    try:
        article = render_article(project.dir, name)
    except UsageError as exc:
        raise NotFound(str(exc)) from None
    return article, with_archived_links(article.references_html, project.id)


async def export_download(request: Request) -> Response:
    """An export format of the article, as a download (made in memory; nothing is written)."""
    from pensieve.clock import now_iso
    from pensieve.publish.document import load_article
    from pensieve.publish.export import FORMATS, render_format

    project = api.studio_of(request).project(request.path_params["id"])
    fmt = request.path_params["fmt"]
    if fmt not in (*FORMATS, "bundle"):
        raise BadRequest(f"unknown format {fmt!r}; one of: {', '.join(FORMATS)}, bundle")

    def make() -> bytes:
        data.read_artifact(project, FINAL_ARTICLE)
        try:
            article = load_article(project.dir, FINAL_ARTICLE)
            if fmt == "bundle":  # as `pensieve export --bundle --output X.zip`, in memory
                from pensieve.publish.bundle import bundle_files, zip_bytes

                return zip_bytes(bundle_files(article, exported_at=now_iso()))
            return render_format(article, fmt, exported_at=now_iso())
        except UsageError as exc:
            raise NotFound(str(exc)) from None

    body = await asyncio.to_thread(make)
    media = {
        "html": "text/html; charset=utf-8",
        "md": "text/markdown; charset=utf-8",
        "json": "application/json",
        "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "bundle": "application/zip",
    }[fmt]
    filename = f"{project.id}-bundle.zip" if fmt == "bundle" else f"{project.id}.{fmt}"
    return Response(
        body,
        media_type=media,
        headers={
            "content-disposition": f'attachment; filename="{filename}"',
            "content-security-policy": SANDBOX_CSP,
        },
    )


async def diff_page(request: Request) -> Response:
    studio = api.studio_of(request)
    project = studio.project(request.path_params["id"])
    all_versions = await asyncio.to_thread(data.versions, project, None)
    a, b = request.query_params.get("a"), request.query_params.get("b")
    runs: list[tuple[str, str]] | None = None
    if a and b:
        runs = await asyncio.to_thread(
            lambda: data.word_diff(data.read_version(project, a), data.read_version(project, b))
        )
    return page(
        request,
        "diff.html",
        project=project,
        versions=all_versions,
        a=a,
        b=b,
        runs=runs,
        title=f"Compare - {project.id}",
    )


async def sources_page(request: Request) -> Response:
    project = api.studio_of(request).project(request.path_params["id"])

    def collect() -> tuple[list[Any], dict[str, list[dict[str, Any]]]]:
        from pensieve.project.source_archive import list_sources

        return list_sources(project.dir), data.citing_sentences(project)

    found, citing = await asyncio.to_thread(collect)
    return page(request, "sources.html", project=project, sources=found, citing=citing, title=f"Sources - {project.id}")


async def source_page(request: Request) -> Response:
    project = api.studio_of(request).project(request.path_params["id"])
    sid = request.path_params["sid"]
    source = await asyncio.to_thread(data.source_entry, project, sid)
    text = await asyncio.to_thread(data.source_text, project, sid)
    return page(request, "source.html", project=project, source=source, text=text, title=f"{sid} - {project.id}")


async def source_raw(request: Request) -> Response:
    """The page as fetched: never as HTML. Plain text, as a download, in a sandbox."""
    project = api.studio_of(request).project(request.path_params["id"])
    body, filename = await asyncio.to_thread(data.source_raw, project, request.path_params["sid"])
    return Response(
        body,
        media_type="text/plain; charset=utf-8",
        headers={
            "content-disposition": f'attachment; filename="{filename}.txt"',
            "content-security-policy": SANDBOX_CSP,
        },
    )


async def topics_page(request: Request) -> Response:
    listed = await asyncio.to_thread(api.studio_of(request).topic_list)
    return page(request, "topics.html", listed=listed, title="Topics - Pensieve studio")


async def library_page(request: Request) -> Response:
    from pensieve.studio.library import documents_json

    listed = await asyncio.to_thread(documents_json, api.studio_of(request).workspace)
    return page(request, "library.html", listed=listed, title="Library - Pensieve studio")


async def queue_page(request: Request) -> Response:
    from pensieve.studio.queue import queue_view, worker_rows

    view = await asyncio.to_thread(queue_view, api.studio_of(request).workspace)
    return page(request, "queue.html", view=view, workers=worker_rows(view), title="Queue - Pensieve studio")


async def root_redirect(request: Request) -> Response:
    return RedirectResponse("/", status_code=303)


# -- errors ------------------------------------------------------------------------------------
# What each kind of refusal answers (pensieve.errors.ErrorKind), whatever its words.
HTTP_STATUS = {ErrorKind.BAD_INPUT: 400, ErrorKind.NOT_FOUND: 404, ErrorKind.CONFLICT: 409}


def _error(request: Request, status: int, message: str, extra: dict[str, Any] | None = None) -> Response:
    if request.url.path.startswith("/api/") or "html" not in request.headers.get("accept", ""):
        return JSONResponse({"error": message, **(extra or {})}, status_code=status)
    return page(request, "error.html", status_code=status, status=status, message=message, title="Error")


async def on_error(request: Request, exc: Exception) -> Response:
    if isinstance(exc, Conflict):
        return _error(request, 409, str(exc), exc.extra)
    if isinstance(exc, UsageError | ProjectBusy):
        return _error(request, HTTP_STATUS[exc.kind], str(exc))
    if isinstance(exc, NotFound):
        return _error(request, 404, str(exc))
    if isinstance(exc, BadRequest):
        return _error(request, 400, str(exc))
    if isinstance(exc, TooManyFeeds):
        return _error(request, 429, str(exc))
    if isinstance(exc, BodyTooLarge):
        return _error(request, 413, "request body over the size limit")
    if isinstance(exc, HTTPException):
        return _error(request, exc.status_code, str(exc.detail))
    raise exc


def internal_error_handler(token: str) -> Any:
    """The answer to anything unexpected: a JSON 500 (or the error page), never a traceback;
    one line on the studio's log with what failed, the path but not the query (a first
    visit's ?token= is there) and the token scrubbed from the message."""

    async def on_internal_error(request: Request, exc: Exception) -> Response:
        from pensieve.redact import scrub

        what = scrub(f"{type(exc).__name__}: {exc}").replace(token, "[token]")
        LOG.error("internal error answering %s %s: %s", request.method, request.url.path, what[:500])
        return _error(request, 500, "internal error")

    return on_internal_error


@dataclass
class Answered:
    """Starlette answers an unexpected error through the handler above, then raises it again
    for the server to log with its traceback; it was answered and logged already, so it
    ends here."""

    app: ASGIApp

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self.app(scope, receive, send)
        except Exception:
            if scope["type"] != "http":
                raise


def create_app(
    workspace: Workspace, *, token: str, host: str = "127.0.0.1", port: int = 8765, extra_hosts: tuple[str, ...] = ()
) -> Guard:
    studio = Studio(workspace, RunManager(workspace.name))
    routes = [
        Route("/", projects_page),
        Route("/index.html", root_redirect),
        Route("/new", new_page),
        Route("/projects/{id}", project_page),
        Route("/projects/{id}/files/{name}", file_page),
        Route("/projects/{id}/read", read_page),
        Route("/projects/{id}/diff", diff_page),
        Route("/projects/{id}/sources", sources_page),
        Route("/projects/{id}/sources/{sid}", source_page),
        Route("/projects/{id}/sources/{sid}/raw", source_raw),
        Route("/projects/{id}/export/{fmt}", export_download),
        Route("/topics", topics_page),
        Route("/library", library_page),
        Route("/queue", queue_page),
        *api.ROUTES,
        *library_api.ROUTES,
        Mount("/static", StaticFiles(directory=str(HERE / "static"), follow_symlink=False), name="static"),
    ]
    handlers: dict[Any, Any] = {
        cls: on_error
        for cls in (
            Conflict,
            ProjectBusy,
            NotFound,
            BadRequest,
            UsageError,
            BodyTooLarge,
            TooManyFeeds,
            HTTPException,
        )
    }
    handlers[Exception] = internal_error_handler(token)
    app = Starlette(routes=routes, exception_handlers=handlers)
    app.state.studio = studio
    return Guard(
        Answered(app),
        token=token,
        host=host,
        port=port,
        extra_hosts=extra_hosts,
        large_bodies={library_api.UPLOAD_PATH: library_api.MAX_UPLOAD_BYTES},
    )


def token_from_env() -> str | None:
    """PENSIEVE_STUDIO_TOKEN if set; a token that cannot guard the studio is refused (UsageError)."""
    from pensieve.studio.security import TOKEN_ENV, token_problem

    value = os.environ.get(TOKEN_ENV, "").strip()
    if not value:
        return None
    problem = token_problem(value)
    if problem is not None:
        raise UsageError(problem)
    return value
