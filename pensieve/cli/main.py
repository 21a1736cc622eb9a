"""The command line: parse, call one function, render. Nothing else lives here.

Commands that need no model (`list`, `status`, `show`, `sources`, `--help`) never import litellm or
torch: the pipeline and the model seam are imported inside `run` only.
"""

from __future__ import annotations

import gc
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from pensieve import __version__
from pensieve.cli.batch import register as register_batch
from pensieve.cli.estimate import estimate as estimate_command
from pensieve.cli.evidence import evidence as evidence_command
from pensieve.cli.evidence import print_check_evidence, share_problem
from pensieve.cli.export import register as register_export
from pensieve.cli.library import library_app
from pensieve.cli.studio import studio
from pensieve.cli.support import (
    JsonOpt,
    WorkspaceOpt,
    check_text,
    err,
    expected_error,
    fail,
    guarded,
    out,
    plain_table,
    silence,
    workspace_of,
)
from pensieve.cli.tools import tools_command
from pensieve.cli.topics import topics_app
from pensieve.errors import PensieveError, UsageError, shown_name
from pensieve.json_text import print_json

if TYPE_CHECKING:  # the real imports sit inside the commands: `list` and `--help` load no pipeline
    from pensieve.citations.check import CheckReport
    from pensieve.citations.summary import Problem
    from pensieve.config import Settings
    from pensieve.project.listing import ProjectRow
    from pensieve.project.run_outcome import Outcome
    from pensieve.project.source_archive import ArchivedSource
    from pensieve.project.status import Status
    from pensieve.project.workspace import Project
    from pensieve.run.preflight import RunOptions

app = typer.Typer(
    name="pensieve",
    help=(
        "Write researched, cited articles with a pipeline of ten language-model agents.\n\n"
        "Examples:\n\n"
        '  pensieve new "How vector databases index embeddings"\n\n'
        "  pensieve run how-vector-databases-index-embeddings\n\n"
        "  pensieve list --json"
    ),
    context_settings={"help_option_names": ["-h", "--help"]},
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
app.add_typer(topics_app)
app.add_typer(library_app)


def _read_brief(brief: str | None, file: Path | None) -> str:
    if brief is not None and file is not None:
        raise UsageError("give the brief either as an argument or with --file, not both")
    if file is not None:
        try:
            data = file.read_bytes()
        except OSError as exc:
            raise UsageError(f"cannot read brief file {shown_name(str(file))}: {exc.strerror}") from None
        source = shown_name(str(file))
    elif brief == "-":
        data = sys.stdin.buffer.read()
        source = "standard input"
    elif brief is not None:
        return brief
    else:
        raise UsageError('no brief given: pensieve new "what the article is about" (or --file PATH, or - for stdin)')
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"the brief from {source} is not UTF-8 text; convert it to UTF-8") from None


@app.command()
def new(
    brief: Annotated[str | None, typer.Argument(help="The brief; '-' reads it from stdin.")] = None,
    file: Annotated[Path | None, typer.Option("--file", "-f", help="Read the brief from a file.")] = None,
    project_id: Annotated[str | None, typer.Option("--id", help="Project id (default: a slug of the brief).")] = None,
    source: Annotated[
        list[str] | None,
        typer.Option(
            "--source",
            metavar="PATH_OR_URL",
            help="A document the researcher must read (repeatable): added to the library, archived before research.",
        ),
    ] = None,
    no_web: Annotated[
        bool, typer.Option("--no-web", help="research.web false for this project: library only, no web at all.")
    ] = False,
    workspace: WorkspaceOpt = "default",
) -> None:
    """Start an article from a brief; prints the new project's id.

    Example: pensieve new "Why B-trees still matter" --id btrees --source btree-paper.pdf
    """

    def action() -> str:
        from pensieve.config import load_settings, workspace_settings
        from pensieve.project.listing import new_project

        settings = load_settings()  # a broken config is reported now, before anything is created
        text = _read_brief(check_text(brief, "the brief"), file)
        ws = workspace_of(workspace)
        settings = workspace_settings(settings, ws.root)  # its library limits; broken: nothing created
        reading: list[str] = []
        if source:
            from pensieve.library.adding import add_anything
            from pensieve.library.store import Library

            for item in source:
                check_text(item, "--source")
            # Every source first: a source that cannot be added creates no project.
            outcomes = add_anything(Library(ws), source, settings)
            refused = [o.line for o in outcomes if o.document is None]
            if refused:
                more = f" (and {len(refused) - 1} more)" if len(refused) > 1 else ""
                raise UsageError(f"--source {refused[0]}{more}; no project was created")
            reading = list(dict.fromkeys(o.document.id for o in outcomes if o.document is not None))
        project = new_project(ws, text, project_id)
        if reading or no_web:
            from pensieve.library.sources import ResearchPlan, save_plan

            save_plan(project.dir, ResearchPlan(tuple(reading), False if no_web else None))
        return project.id

    out.print(guarded(action), markup=False)


@app.command()
def run(
    project_id: Annotated[str, typer.Argument(metavar="ID", help="The project to run.")],
    workspace: WorkspaceOpt = "default",
    stage: Annotated[str | None, typer.Option("--stage", help="Run just this stage again.")] = None,
    until: Annotated[str | None, typer.Option("--until", help="Stop after this stage (project left paused).")] = None,
    from_stage: Annotated[
        str | None, typer.Option("--from", help="Run this stage and every later one again (after editing a file).")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Re-run stages even if complete.")] = False,
    model: Annotated[str | None, typer.Option("--model", help="Model for this run (any litellm model string).")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Plain line log instead of the live table.")] = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Show a failed model call's whole error chain (for bug reports).")
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the plan and the estimate; call no model, change nothing.")
    ] = False,
) -> None:
    """Run the stages that are not complete, in order; resumes wherever the project stopped.

    Examples: pensieve run btrees --until outliner; pensieve run btrees --stage drafter;
    pensieve run btrees --dry-run
    """

    def prepare() -> tuple[Project, Settings, RunOptions]:
        from pensieve.config import load_settings
        from pensieve.run.preflight import RunOptions

        options = RunOptions(stage=stage, until=until, force=force, model=model, from_stage=from_stage)
        check_text(model, "--model")
        settings = load_settings()
        project = workspace_of(workspace).existing_project(project_id)
        return project, settings, options

    if dry_run:
        from pensieve.cli.estimate import dry_run as print_plan

        project, settings, options = guarded(prepare)
        raise typer.Exit(guarded(lambda: print_plan(project, settings, options)))
    _hear_stop_requests()
    from pensieve.cli.run_ending import record_ending

    found: Project | None = None  # once known: where the run's ending is recorded
    try:
        project, settings, options = prepare()
        found = project
        from pensieve.model.llm import start_import

        start_import()  # litellm loads while the pipeline's modules, preflight and the lock do
        from pensieve.cli.progress import make_reporter
        from pensieve.run.pipeline import preflight_warnings, run_project

        for warning in preflight_warnings(settings, options):
            err.print(warning, markup=False)
        reporter = make_reporter(quiet, verbose)
        with reporter:
            result = run_project(project, settings, options, reporter)
    except (PensieveError, OSError, RecursionError) as exc:
        # A refusal (nothing changed), a full disk, a directory made read-only during the run.
        error = expected_error(exc)
        record_ending(workspace, project_id, found, "error", error.exit_code, error=error)
        fail(error)
    except KeyboardInterrupt:
        # Before the run started, nothing changed; after, the stage in flight is marked.
        record_ending(workspace, project_id, found, "interrupted", 130, error="interrupted before it finished")
        err.print(f"interrupted: run `pensieve run {project_id}` to continue where it stopped", markup=False)
        raise typer.Exit(130) from None
    except Exception as exc:  # a bug: recorded, then shown as Python shows it
        record_ending(workspace, project_id, found, "crashed", 1, error=f"{type(exc).__name__}: {exc}")
        raise
    final = result.status
    if result.failed:
        record_ending(workspace, project_id, project, "failed", 1, error=final.error, failed_stage=final.current_stage)
        err.print(f"failed: {final.error}", markup=False)
        err.print(f"fix the cause, then `pensieve run {project.id}` retries from {final.current_stage}", markup=False)
        raise typer.Exit(1)
    spent, total = result.spent, final.usage
    cost = f", ${spent.cost_usd:.4f}" if spent.cost_usd is not None else (", cost unknown" if spent.calls else "")
    if spent.cost_usd is not None and not spent.cost_known:
        cost += " (some calls had no known price)"
    summary = (
        f"this run: {spent.calls} model calls, {spent.total_tokens:,} tokens{cost}; "
        f"project total {total.total_tokens:,} tokens"
    )
    if final.status == "complete":
        from pensieve.stages import Artifact

        outcome: Outcome = "complete"
        ending = f"complete: {project.file(Artifact.FINAL)}"
    else:
        outcome, ending = "paused", f"paused before {final.current_stage}: `pensieve run {project.id}` continues"
    record_ending(workspace, project_id, project, outcome, 0, message=ending)
    err.print(ending, markup=False)
    err.print(summary, markup=False)
    _print_stale(project, final)


def _hear_stop_requests() -> None:
    """A run detached in a session of its own (the studio starts runs so) hears SIGINT: it is
    how the studio's Stop asks for a graceful end. Started from a shell's background job, such
    a process inherits SIGINT ignored, and Stop would do nothing until the model answered.
    (No terminal's Ctrl-C can reach a session leader, so nothing else changes.)"""
    import signal

    if os.getsid(0) == os.getpid() and signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@app.command("list")
def list_(workspace: WorkspaceOpt = "default", as_json: JsonOpt = False) -> None:
    """Show every project of the workspace and where it stands."""

    def action() -> list[ProjectRow]:
        from pensieve.project.listing import summarize_projects

        # workspace_of checks the configuration (cheap once validated, see config_files).
        return summarize_projects(workspace_of(workspace))

    rows = guarded(action)
    if as_json:
        print_json([r.to_json() for r in rows])
        return
    if not rows:
        err.print(f'no projects in workspace {workspace!r}; start one with: pensieve new "your brief"', markup=False)
        return
    table = Table(box=None, pad_edge=False)
    # The id and status are never cut (they are what people copy); the brief gives way.
    for column in ("id", "status", "stage", "updated", "supported"):
        table.add_column(column, no_wrap=True)
    table.add_column("brief", no_wrap=True, overflow="ellipsis", min_width=10)
    for r in rows:
        state = f"{r.status} ({r.problems} problems)" if r.problems else r.status
        supported = f"{r.supported_share:.0%}" if r.supported_share is not None else "-"
        table.add_row(
            r.id,
            state,
            r.current_stage or "-",
            (r.updated_at or "-")[:19].replace("T", " "),
            supported,
            r.brief_line[:70],
        )
    out.print(table)


def _fmt_tokens(n: int) -> str:
    return f"{n:,}" if n else "-"


@app.command()
def status(
    project_id: Annotated[str, typer.Argument(metavar="ID")],
    workspace: WorkspaceOpt = "default",
    as_json: JsonOpt = False,
) -> None:
    """Per stage: status, times, duration, model calls, tokens, cost and errors."""

    def action() -> tuple[Project, Status, dict[str, str]]:
        from pensieve.project.staleness import demote_missing
        from pensieve.project.status import load_status

        project = workspace_of(workspace).existing_project(project_id)
        doc = load_status(project.status_path)
        # Shown as the next run will see it (not saved: `status` changes nothing).
        return project, doc, demote_missing(project, doc)

    project, doc, missing = guarded(action)
    for name, artifact in missing.items():
        err.print(
            f"note: {artifact} is missing, so {name} is pending again; `pensieve run {project.id}` runs it again",
            markup=False,
        )
    if as_json:
        from pensieve.project.status import status_json

        print_json(status_json(project, doc))
        return
    from pensieve.project.listing import effective_status
    from pensieve.stages import ARTICLE_VERSIONS

    table = plain_table(
        "stage", "status", "started", "duration", "calls", "prompt tok", "compl tok", "cost", "error", fold=("error",)
    )
    for name, entry in doc.stages.items():
        duration = f"{entry.duration_s:.1f}s" if entry.duration_s is not None else "-"
        cost = (
            f"${entry.usage.cost_usd:.4f}" if entry.usage.cost_usd is not None else ("?" if entry.usage.calls else "-")
        )
        table.add_row(
            name,
            entry.status,
            (entry.started_at or "-")[:19].replace("T", " "),
            duration,
            str(entry.usage.calls or "-"),
            _fmt_tokens(entry.usage.prompt_tokens),
            _fmt_tokens(entry.usage.completion_tokens),
            cost,
            entry.error or "",
        )
    out.print(f"{doc.id}: {effective_status(project, doc)}", markup=False)
    out.print(table)
    u = doc.usage
    cost = f"${u.cost_usd:.4f}" if u.cost_usd is not None else "unknown"
    suffix = "" if u.cost_known else " (some calls had no known price)"
    out.print(
        f"total: {u.calls} model calls, {u.prompt_tokens:,} prompt + {u.completion_tokens:,} completion tokens, "
        f"cost {cost}{suffix}",
        markup=False,
    )
    if doc.check is not None:
        files = doc.check.files
        latest = next((files[n] for n in reversed(ARTICLE_VERSIONS) if n in files), None)
        share = latest.cited_paragraph_share if latest else None
        shown = f", {share:.0%} of paragraphs cite a source" if share is not None else ""
        out.print(
            f"citations: {doc.check.citations_checked} checked against {doc.check.sources} "
            f"archived sources{shown}; {len(doc.problems)} problem(s)",
            markup=False,
        )
    from pensieve.evidence.store import describe_share, latest_summary

    supported = describe_share(latest_summary(project.dir))
    if supported:
        out.print(f"evidence: {supported}", markup=False)
    for problem in doc.problems:
        out.print(f"problem: {problem}", markup=False)
    _print_stale(project, doc)


def _print_stale(project: Project, doc: Status) -> None:
    from pensieve.project.staleness import stale_stages

    for name, changed in stale_stages(project, doc).items():
        err.print(
            f"note: {', '.join(changed)} changed since {name} ran; `pensieve run {project.id} --from {name}` "
            "runs it and the stages after it again",
            markup=False,
        )


@app.command()
def show(
    project_id: Annotated[str, typer.Argument(metavar="ID")],
    file: Annotated[str, typer.Argument(help="Artifact to print (default final.md).")] = "final.md",
    workspace: WorkspaceOpt = "default",
) -> None:
    """Print final.md (or another artifact) of a project."""

    def action() -> str:
        from pathlib import PurePosixPath

        from pensieve.tools.files import resolve_inside

        project = workspace_of(workspace).existing_project(project_id)
        check_text(file, "the file name")
        name = shown_name(file)
        if file.startswith(("/", "~")) or ".." in PurePosixPath(file).parts or "\x00" in file:
            raise UsageError(f"{name}: give a file name inside the project, e.g. final.md")
        try:
            path = resolve_inside(project.dir, PurePosixPath(file))
        except Exception:
            raise UsageError(f"{name} is outside the project") from None
        try:
            if not path.is_file():
                have = ", ".join(sorted(p.name for p in project.dir.glob("*.md")))
                raise UsageError(f"{project.id} has no {name} yet; it has: {have}")
            return path.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:  # a name too long for the file system, a directory...
            raise UsageError(f"{name} cannot be read ({exc.strerror}); give a file name such as final.md") from None

    sys.stdout.write(guarded(action))


@app.command()
def sources(
    project_id: Annotated[str, typer.Argument(metavar="ID")],
    workspace: WorkspaceOpt = "default",
    as_json: JsonOpt = False,
) -> None:
    """List the web pages archived for a project (its sources/ directory), by source id.

    Example: pensieve sources btrees --json
    """

    def action() -> tuple[Project, list[ArchivedSource]]:
        from pensieve.project.source_archive import list_sources

        project = workspace_of(workspace).existing_project(project_id)
        return project, list_sources(project.dir)

    project, found = guarded(action)
    if as_json:
        print_json([s.record() for s in found])
        return
    if not found:
        err.print(f"{project.id} has no sources yet; the researcher archives every page it fetches", markup=False)
        return
    table = plain_table("id", "fetched", "size", "title", "url", fold=("title", "url"))
    for s in found:
        # Titles come from web pages: Text() keeps rich from reading "[...]" in them as markup.
        table.add_row(s.id, s.fetched_at[:19].replace("T", " "), f"{s.size:,}", Text(s.title or "-"), Text(s.final_url))
    out.print(table)


@app.command()
def repair(
    project_id: Annotated[str, typer.Argument(metavar="ID")],
    workspace: WorkspaceOpt = "default",
) -> None:
    """Rebuild an unreadable status.json from the artifacts on disk (the old file is kept)."""

    def action() -> str:
        from pensieve.project.status import rebuild_status
        from pensieve.project.workspace import BRIEF_FILE

        ws = workspace_of(workspace)
        project = ws.project(project_id)
        if not (project.dir / BRIEF_FILE).is_file() and not project.dir.is_symlink():
            raise UsageError(f"unknown project {project_id!r} in workspace {ws.name!r}")
        project.refuse_links()
        with project.run_lock():
            doc = rebuild_status(project)
        done = sum(1 for s in doc.stages.values() if s.status == "complete")
        return f"rebuilt {project.status_path}: {done} of {len(doc.stages)} stages complete"

    err.print(guarded(action), markup=False)


@app.command()
def check(
    project_id: Annotated[str, typer.Argument(metavar="ID")],
    workspace: WorkspaceOpt = "default",
    as_json: JsonOpt = False,
) -> None:
    """Verify citations without a model: ids exist in the source archive, quotes appear in their
    sources, reference lists match; reports the share of cited paragraphs. Also lists what the
    consistency report still finds (problems) and sourced facts a rewrite dropped (warnings).
    Exit 1 on problems."""

    def action() -> tuple[CheckReport, dict[str, Any] | None, float, str | None, list[Problem], list[str]]:
        from pensieve.citations.hooks import check_project
        from pensieve.cli.evidence import evidence_for_check
        from pensieve.config import load_settings
        from pensieve.evidence.lost_facts import project_lost_facts
        from pensieve.run.findings import report_problems
        from pensieve.stages import ARTICLE_VERSIONS

        project = workspace_of(workspace).existing_project(project_id)
        settings = load_settings()
        articles = ARTICLE_VERSIONS
        if not any(project.file(name).is_file() for name in articles):
            # "every citation checks out" of an article that does not exist would be a lie.
            raise PensieveError(
                f"{project.id} has no article yet ({', '.join(articles)} do not exist), so there is nothing "
                f"to check; `pensieve run {project.id}` writes it"
            )
        report = check_project(project, settings)
        # What the consistency checker still finds, and sourced facts a rewrite dropped.
        findings, lost = report_problems(project), [fact.line() for fact in project_lost_facts(project)]
        try:
            evidence, skipped = evidence_for_check(project, settings), None
        except PensieveError as exc:  # no embedding model: the citation check still stands
            err.print(f"note: the evidence check was skipped: {exc}", markup=False)
            evidence, skipped = None, str(exc)
        return report, evidence, settings.check.min_supported_share, skipped, findings, lost

    report, evidence, min_supported, skipped, findings, lost = guarded(action)
    low_share = share_problem(evidence, min_supported, skipped)
    if as_json:
        summary = report.summary()
        extra = [*findings, *([low_share] if low_share is not None else [])]
        if extra:  # the JSON says what the exit status says
            summary = summary.model_copy(update={"ok": False, "problems": [*summary.problems, *extra]})
        data = summary.model_dump(mode="json")
        data["warnings"] = lost
        if evidence is not None:
            data["evidence"] = {
                "file": evidence["file"],
                **evidence["summary"],
                "min_supported_share": min_supported,
                "unsupported_sentences": [
                    {"text": s["text"], "findings": s["findings"]}
                    for s in evidence["sentences"]
                    if s["verdict"] == "unsupported"
                ],
            }
        print_json(data)
    else:
        out.print(
            f"{report.sources} archived sources, {report.citations_checked} citations and quotes checked", markup=False
        )
        for name, figures in report.files.items():
            share = f"{figures.cited_share:.0%}" if figures.cited_share is not None else "-"
            out.print(
                f"{name}: {figures.citations} citations, {figures.cited_paragraphs}/{figures.paragraphs} "
                f"paragraphs cited ({share})",
                markup=False,
            )
        for problem in [*report.problems, *findings]:
            out.print(f"problem: {problem}", markup=False)
        for warning in lost:
            out.print(f"warning: {warning}", markup=False)
        count = len(report.problems) + len(findings)
        out.print("ok: every citation checks out" if not count else f"{count} problem(s)", markup=False)
        print_check_evidence(evidence, low_share)
    if not report.ok or findings or low_share is not None:
        raise typer.Exit(1)


# Commands that live in their own modules, listed after the core ones in --help.
register_export(app)
register_batch(app)  # batch, worker, queue (pensieve/cli/batch.py)
app.command("tools")(tools_command)
app.command("evidence")(evidence_command)
app.command("estimate")(estimate_command)
app.command()(studio)


def version_callback(value: bool) -> None:
    if value:
        out.print(f"pensieve {__version__}", markup=False)
        raise typer.Exit()


@app.callback()
def root(
    version: Annotated[
        bool, typer.Option("--version", callback=version_callback, is_eager=True, help="Show the version.")
    ] = False,
) -> None:
    pass


def main() -> None:
    """Every command line but the ones pensieve.launch answers itself (the entry point)."""
    try:
        app()
    except BrokenPipeError:
        # stdout went to a reader that stopped (`pensieve list | head`): what it wanted was
        # printed. The usual quiet ending of a filter, not a traceback.
        silence(sys.stdout)
        silence(sys.stderr)
    finally:
        # The process is ending: without this, the interpreter's last collections walk every
        # object litellm and pydantic created (about a second after a run). Files are all
        # written and closed by now; exit handlers still run.
        gc.freeze()
