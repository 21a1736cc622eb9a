"""`pensieve library ...`: the workspace library of the writer's own documents.

Only `add` and `search` load the embedding model (to index and to search); `list`, `show`
and `remove` read the catalog alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from pensieve.cli.support import JsonOpt, WorkspaceOpt, check_text, err, guarded, out, plain_table, workspace_of
from pensieve.errors import UsageError
from pensieve.json_text import print_json

if TYPE_CHECKING:  # imported for real inside the commands
    from collections.abc import Callable

    from pensieve.library.adding import Outcome
    from pensieve.library.index import Hit
    from pensieve.library.store import Document

library_app = typer.Typer(
    name="library",
    help=(
        "The workspace library: your own PDFs, Word files, pages and notes, searched and cited by the agents.\n\n"
        "Examples:\n\n"
        "  pensieve library add paper.pdf notes/ https://example.org/report.html --tags raft\n\n"
        '  pensieve library search "leader election timeout" --k 5\n\n'
        "  pensieve library show 3f2a9c0d1b7e"
    ),
    context_settings={"help_option_names": ["-h", "--help"]},
    no_args_is_help=True,
    rich_markup_mode=None,
)


def _index_after_add(workspace: str) -> None:
    """Embed what was added now, so the first search does not pay for it (and says why not);
    on a terminal, a bar shows the passages embedded (1,000 pages take half a minute or more)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from pensieve.library.index import update_index
    from pensieve.library.store import Library
    from pensieve.topics.embedder import ModelUnavailable, get_embedder

    bar = Progress(
        TextColumn("embedding passages"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal,
    )
    task = bar.add_task("embedding", total=None)
    try:
        with bar:
            report = update_index(
                Library(workspace_of(workspace)),
                get_embedder,
                lambda done, total: bar.update(task, completed=done, total=total),
            )
    except ModelUnavailable as exc:
        err.print(f"warning: added, but not indexed yet: {exc}", markup=False)
        return
    if report.note():
        err.print(f"note: {report.note()}", markup=False)


@library_app.command("add")
def library_add(
    items: Annotated[list[str], typer.Argument(metavar="PATH_OR_URL...", help="Files, folders or http(s) URLs.")],
    tags: Annotated[str | None, typer.Option("--tags", help="Comma-separated tags, e.g. a,b.")] = None,
    workspace: WorkspaceOpt = "default",
    as_json: JsonOpt = False,
) -> None:
    """Add documents (PDF, DOCX, HTML, Markdown, text; folders whole; URLs fetched once); prints one id per document.

    A file that cannot be read (no text layer, encrypted, damaged, too large, a link or a
    FIFO) gets a one-line reason on stderr and is not added; the others are (exit 1).

    Example: pensieve library add paper.pdf notes/ --tags consensus
    """

    loading: list[Callable[[], None]] = []

    def each(outcome: Outcome) -> None:
        """Said as it happens; the first new document starts the model loading while the
        others are read (it is needed to index them)."""
        if outcome.document is not None and outcome.new and not loading:
            from pensieve.topics.embedder import load_in_background

            loading.append(load_in_background())
        if outcome.document is None:
            err.print(f"error: {outcome.line}", markup=False)
        elif not as_json:
            word = "added" if outcome.new else "already in the library"
            err.print(f"{word}: {outcome.given} -> {outcome.document.id} ({outcome.document.title})", markup=False)

    def action() -> list[Outcome]:
        from pensieve.config import load_settings, workspace_settings
        from pensieve.library.adding import add_anything
        from pensieve.library.store import Library, parse_tags

        for item in items:
            check_text(item, "a path or URL")
        check_text(tags, "--tags")
        chosen = parse_tags(tags)
        ws = workspace_of(workspace)
        settings = workspace_settings(load_settings(), ws.root)
        return add_anything(Library(ws), items, settings, chosen, each)

    try:
        outcomes = guarded(action)
        added = [o for o in outcomes if o.document is not None]
        if added:
            guarded(lambda: _index_after_add(workspace))
    finally:
        for wait in loading:  # never leave the interpreter while a thread imports torch
            wait()
    if as_json:
        print_json(
            [
                {"given": o.given, "id": o.document.id if o.document else None, "new": o.new, "error": o.reason or None}
                for o in outcomes
            ]
        )
    else:
        for doc_id in dict.fromkeys(o.document.id for o in added if o.document is not None):
            out.print(doc_id, markup=False)
    if len(added) < len(outcomes):
        raise typer.Exit(1)


def _documents(workspace: str) -> list[Document]:
    from pensieve.library.store import Library

    return Library(workspace_of(workspace)).documents()


@library_app.command("list")
def library_list(workspace: WorkspaceOpt = "default", as_json: JsonOpt = False) -> None:
    """List the library's documents with their metadata."""
    docs = guarded(lambda: _documents(workspace))
    if as_json:
        print_json([d.summary() for d in docs])
        return
    if not docs:
        err.print(
            f"the library of workspace {workspace!r} is empty; add documents with: pensieve library add PATH",
            markup=False,
        )
        return
    table = plain_table("id", "title", "authors", "year", "kind", "pages", "tags", fold=("title",))
    for d in docs:
        table.add_row(
            d.id,
            d.title,
            ", ".join(d.authors[:3]) or "-",
            str(d.year or "-"),
            d.kind,
            str(d.pages or "-"),
            ", ".join(d.tags) or "-",
        )
    out.print(table)


@library_app.command("show")
def library_show(
    doc_id: Annotated[str, typer.Argument(metavar="ID", help="The document's id (library list shows them).")],
    workspace: WorkspaceOpt = "default",
    as_json: JsonOpt = False,
) -> None:
    """Show a document's metadata, its page map and the start of its text."""

    def action() -> tuple[Document, str]:
        from pensieve.library.store import Library

        library = Library(workspace_of(workspace))
        doc = library.get(check_text(doc_id, "the id") or "")
        return doc, library.text(doc)

    doc, text = guarded(action)
    if as_json:
        print_json({**doc.summary(), "marks": [list(m) for m in doc.marks], "text_start": text[:2000]})
        return
    lines = [
        f"id:        {doc.id}",
        f"title:     {doc.title}",
        f"authors:   {', '.join(doc.authors) or '-'}",
        f"date:      {doc.published or '-'}",
        f"doi:       {doc.doi or '-'}",
        f"isbn:      {doc.isbn or '-'}",
        f"kind:      {doc.kind}" + (f", {doc.pages} pages" if doc.pages else ""),
        f"file:      {doc.file_name}",
        f"url:       {doc.url or '-'}",
        f"added:     {doc.added_at}",
        f"tags:      {', '.join(doc.tags) or '-'}",
        f"size:      {doc.size:,} bytes, {doc.chars:,} characters of text",
    ]
    if doc.marks:
        shown = ", ".join(f"{label}@{offset}" for offset, label in doc.marks[:12])
        more = f" ... ({len(doc.marks)} in all)" if len(doc.marks) > 12 else ""
        lines.append(f"{doc.mark_kind}s:     {shown}{more}")
    out.print("\n".join(lines), markup=False)
    out.print("", markup=False)
    out.print(text[:1500] + ("\n..." if len(text) > 1500 else ""), markup=False)


@library_app.command("search")
def library_search(
    query: Annotated[str, typer.Argument(help="What to look for, in words.")],
    k: Annotated[
        int | None, typer.Option("--k", help="How many passages at most (default library.max_results).")
    ] = None,
    workspace: WorkspaceOpt = "default",
    as_json: JsonOpt = False,
) -> None:
    """Search the library (BM25 and meaning, fused); the index is brought up to date first.

    Example: pensieve library search "what happens when the leader fails" --k 3
    """

    def action() -> list[Hit]:
        from pensieve.config import load_settings, workspace_settings
        from pensieve.library.index import clean_query, search, update_index
        from pensieve.library.store import Library
        from pensieve.topics.embedder import get_embedder

        clean_query(check_text(query, "the query") or "")
        if k is not None and k < 1:
            raise UsageError(f"--k must be at least 1, not {k}")
        ws = workspace_of(workspace)
        settings = workspace_settings(load_settings(), ws.root)
        library = Library(ws)
        note = update_index(library, get_embedder).note()
        if note:
            err.print(f"note: {note}", markup=False)
        return search(library, query, k or settings.library.max_results, get_embedder)

    hits = guarded(action)
    if as_json:
        print_json(
            [
                {
                    "id": h.doc.id,
                    "title": h.doc.title,
                    "page": h.passage.page or None,
                    "start": h.passage.start,
                    "end": h.passage.end,
                    "passage": h.text,
                    "score": round(h.score, 5),
                }
                for h in hits
            ]
        )
        return
    if not hits:
        err.print("nothing in the library matches", markup=False)
        return
    table = plain_table("id", "title", "page", "passage", fold=("passage",))
    for h in hits:
        text = " ".join(h.text.split())
        table.add_row(h.doc.id, h.doc.title, h.passage.page or "-", text[:300] + (" ..." if len(text) > 300 else ""))
    out.print(table)


@library_app.command("remove")
def library_remove(
    doc_id: Annotated[str, typer.Argument(metavar="ID", help="The document's id.")],
    workspace: WorkspaceOpt = "default",
) -> None:
    """Remove a document from the library (projects keep their archived copy)."""

    def action() -> Document:
        from pensieve.library.store import Library

        return Library(workspace_of(workspace)).remove(check_text(doc_id, "the id") or "")

    doc = guarded(action)
    err.print(f"removed {doc.id} ({doc.title})", markup=False)
