"""`pensieve topics ...`: the workspace's topic memory. Only search and reindex load the model."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from pensieve.cli.support import JsonOpt, WorkspaceOpt, check_text, err, guarded, out, plain_table, workspace_of
from pensieve.errors import UsageError, shown_name
from pensieve.json_text import print_json

if TYPE_CHECKING:  # imported for real inside the commands: only search and reindex load the model
    from pensieve.topics.capture import Captured
    from pensieve.topics.index import UpdateReport
    from pensieve.topics.library import Library
    from pensieve.topics.search import TopicSearchResult

topics_app = typer.Typer(
    name="topics",
    help=(
        "The workspace's topic memory: notes the agents search before researching.\n\n"
        "Examples:\n\n"
        '  pensieve topics add "Raft consensus" --file raft.md --tags distributed,consensus\n\n'
        '  pensieve topics search "how do replicas agree on a leader"\n\n'
        "  pensieve topics capture btrees"
    ),
    context_settings={"help_option_names": ["-h", "--help"]},
    no_args_is_help=True,
    rich_markup_mode=None,
)


def _warn(problems: list[str]) -> None:
    for problem in problems:
        err.print(f"warning: {problem}", markup=False)


@topics_app.command("add")
def topics_add(
    title: Annotated[str, typer.Argument(help="The topic's title; its slug becomes the file name.")],
    body: Annotated[str | None, typer.Option("--body", help="The topic's markdown body.")] = None,
    file: Annotated[Path | None, typer.Option("--file", "-f", help="Read the body from a file.")] = None,
    tags: Annotated[str | None, typer.Option("--tags", help="Comma-separated tags, e.g. a,b.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing topic with the same slug.")] = False,
    workspace: WorkspaceOpt = "default",
) -> None:
    """Write a topic file; prints its slug.

    Example: pensieve topics add "Raft consensus" --body "Leaders, terms and logs..." --tags raft
    """

    def action() -> Path:
        from pensieve.topics.library import add_topic, parse_tags

        check_text(title, "the topic title")
        check_text(body, "--body")
        check_text(tags, "--tags")
        if body is not None and file is not None:
            raise UsageError("give the body either with --body or with --file, not both")
        text = body or ""
        if file is not None:
            try:
                text = file.read_bytes().decode("utf-8")
            except OSError as exc:
                raise UsageError(f"cannot read {shown_name(str(file))}: {exc.strerror}") from None
            except UnicodeDecodeError:
                raise UsageError(f"{file} is not UTF-8 text; convert it to UTF-8") from None
        return add_topic(workspace_of(workspace), title, text, tags=parse_tags(tags), force=force)

    path = guarded(action)
    err.print(f"wrote {path}", markup=False)
    out.print(path.stem, markup=False)


@topics_app.command("list")
def topics_list(workspace: WorkspaceOpt = "default", as_json: JsonOpt = False) -> None:
    """List the workspace's topics (files with broken front matter are reported and skipped)."""

    def action() -> Library:
        from pensieve.topics.library import load_library

        return load_library(workspace_of(workspace))

    library = guarded(action)
    _warn(library.problems)
    if as_json:
        print_json(
            [
                {
                    "slug": t.slug,
                    "title": t.title,
                    "tags": list(t.tags),
                    "summary": t.summary,
                    "sources": list(t.sources),
                    "updated": t.updated,
                }
                for t in library.topics
            ]
        )
        return
    if not library.topics:
        err.print(f"no topics in workspace {workspace!r}; add one with: pensieve topics add TITLE", markup=False)
        return
    table = plain_table("slug", "title", "tags", "updated", fold=("title",))
    for t in library.topics:
        table.add_row(t.slug, t.title, ", ".join(t.tags) or "-", t.updated or "-")
    out.print(table)


@topics_app.command("show")
def topics_show(
    slug: Annotated[str, typer.Argument(metavar="SLUG", help="The topic's slug (its file name without .md).")],
    workspace: WorkspaceOpt = "default",
) -> None:
    """Print a topic file."""

    def action() -> str:
        from pensieve.project.workspace import read_file_nofollow
        from pensieve.topics.library import existing_topic_path

        path = existing_topic_path(workspace_of(workspace), slug)
        return read_file_nofollow(path).decode("utf-8", errors="replace")

    sys.stdout.write(guarded(action))


@topics_app.command("search")
def topics_search(
    query: Annotated[str, typer.Argument(help="A topic or concept in natural language.")],
    k: Annotated[int | None, typer.Option("--k", help="How many topics at most (default topics.max_results).")] = None,
    workspace: WorkspaceOpt = "default",
    as_json: JsonOpt = False,
) -> None:
    """Search the topics by meaning; the index is brought up to date first.

    Example: pensieve topics search "how replicas agree on one leader" --k 3
    """

    def action() -> TopicSearchResult:
        from pensieve.config import load_settings
        from pensieve.topics.search import clean_query, search_topic_library

        clean_query(check_text(query, "the query") or "")
        if k is not None and k < 1:
            raise UsageError(f"--k must be at least 1, not {k}")
        settings = load_settings()
        ws = workspace_of(workspace)
        return search_topic_library(ws, query, k=k or settings.topics.max_results, min_score=settings.topics.min_score)

    result = guarded(action)
    _warn(result.report.problems)
    if as_json:
        print_json(
            [{"slug": h.slug, "title": h.title, "snippet": h.snippet, "score": round(h.score, 4)} for h in result.hits]
        )
        return
    if not result.hits:
        err.print("no topic is relevant enough (topics.min_score sets the floor)", markup=False)
        return
    table = plain_table("score", "slug", "title", "snippet", fold=("snippet",))
    for h in result.hits:
        table.add_row(f"{h.score:.2f}", h.slug, h.title, h.snippet)
    out.print(table)


@topics_app.command("reindex")
def topics_reindex(workspace: WorkspaceOpt = "default", as_json: JsonOpt = False) -> None:
    """Bring the search index up to date now (searches also do it); embeds only new or changed files."""

    def action() -> UpdateReport:
        from pensieve.topics.search import reindex_library

        return reindex_library(workspace_of(workspace))

    report = guarded(action)
    _warn(report.problems)
    if as_json:
        print_json(
            {
                "embedded": report.embedded,
                "unchanged": report.unchanged,
                "removed": report.removed,
                "chunks_embedded": report.chunks_embedded,
            }
        )
        return
    out.print(
        f"embedded {len(report.embedded)} files ({report.chunks_embedded} chunks), "
        f"{len(report.unchanged)} unchanged, {len(report.removed)} removed",
        markup=False,
    )


@topics_app.command("capture")
def topics_capture(
    project_id: Annotated[str, typer.Argument(metavar="PROJECT_ID", help="The finished project to remember.")],
    workspace: WorkspaceOpt = "default",
) -> None:
    """Turn a finished project into a topic file (no model call); prints its slug.

    Runs by itself when a project completes, unless topics.capture is false.
    """

    def action() -> Captured:
        from pensieve.topics.capture import capture_project

        return capture_project(workspace_of(workspace).existing_project(project_id))

    captured = guarded(action)
    err.print(f"{'updated' if captured.updated_existing else 'wrote'} {captured.path}", markup=False)
    out.print(captured.slug, markup=False)
