"""`pensieve batch`, `pensieve worker` and `pensieve queue`: many articles on a durable queue.

The queue itself (DBOS workflows, workers, recovery) is pensieve.batch.queue, imported
inside the commands only: `list`, `status` and `--help` never load DBOS.
"""

from __future__ import annotations

import math
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich.table import Table
from rich.text import Text

from pensieve.cli.support import (
    JsonOpt,
    WorkspaceOpt,
    err,
    fail,
    guarded,
    out,
    plain_table,
    storage_error,
    workspace_of,
)
from pensieve.errors import PensieveError, UsageError
from pensieve.json_text import print_json

if TYPE_CHECKING:
    from pensieve.batch.queue import Planned, Worker
    from pensieve.config import Settings
    from pensieve.project.workspace import Workspace

# DBOS keeps the limit per queue, not per process (batch_queue.Worker.concurrency_problem).
SAME_N = "Every process working one queue uses the same N: another N is refused while they run."
ConcurrencyOpt = Annotated[
    int,
    typer.Option("--concurrency", "-c", help=f"Projects this process runs at once. {SAME_N}", min=1, max=256),
]
TERMINAL = ("complete", "failed", "stopped", "paused")


def _stop_on_signals() -> threading.Event:
    """SIGINT and SIGTERM set the event; the command then stops cleanly."""
    stop = threading.Event()

    def handler(signum: int, frame: Any) -> None:
        stop.set()

    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)
    return stop


def _exit_now(code: int) -> NoReturn:
    """Leave without waiting for workflow threads parked by Worker.stop()."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _check_models(settings: Settings, model: str | None, item_models: set[str | None]) -> None:
    from pensieve.run.preflight import check_models
    from pensieve.stages import STAGE_NAMES

    models = {m or model or settings.model_for(name) for m in item_models for name in STAGE_NAMES}
    check_models(models, settings, also=", or give each item a model")


def batch(
    file: Annotated[Path, typer.Argument(metavar="FILE", help="YAML, CSV or JSONL: brief, id, target_words, ...")],
    workspace: WorkspaceOpt = "default",
    concurrency: Annotated[
        int,
        typer.Option(
            "--concurrency",
            "-c",
            min=0,
            max=256,
            help=f"Projects this process runs at once (0: the workers run them). {SAME_N}",
        ),
    ] = 4,
    model: Annotated[str | None, typer.Option("--model", help="Model for items that name none.")] = None,
    until: Annotated[str | None, typer.Option("--until", help="Stop each project after this stage.")] = None,
    retry_failed: Annotated[bool, typer.Option("--retry-failed", help="Run failed projects again.")] = False,
    max_cost_usd: Annotated[
        float | None,
        typer.Option(
            "--max-cost-usd",
            help="Budget of the batch's projects, over all runs: past it no project starts, "
            "running ones finish their stage. Needs --concurrency 1 or more.",
        ),
    ] = None,
) -> None:
    """Write an article for every item of FILE, N projects at once; resumable.

    Items have a `brief` and optionally `id`, `target_words`, `audience`, `model`. The same
    file again runs only what is unfinished (--retry-failed: failed projects too).

    Example: pensieve batch briefs.yaml --concurrency 8 --max-cost-usd 5
    """

    def prepare() -> tuple[Workspace, Settings, str, list[Any], dict[str, tuple[str, ...]]]:
        from pensieve.batch.items import add_sources, check_existing, read_items
        from pensieve.batch.queue import queue_url
        from pensieve.config import load_settings
        from pensieve.run.preflight import RunOptions

        RunOptions(until=until, model=model)  # refused as `pensieve run` refuses them
        if max_cost_usd is not None and not (math.isfinite(max_cost_usd) and max_cost_usd > 0):
            raise UsageError("--max-cost-usd must be a number more than 0")  # nan: `spent >= nan` never stops
        if max_cost_usd is not None and concurrency == 0:
            # The budget is kept by the process that runs the projects; with 0 the
            # workers run them, each unaware of it.
            raise UsageError(
                "--max-cost-usd needs --concurrency 1 or more: with --concurrency 0 the workers "
                "run the projects and the budget would not be kept"
            )
        settings = load_settings()
        ws = workspace_of(workspace)
        items = read_items(file)
        check_existing(ws, file, items)
        _check_models(settings, model, {item.model for item in items})
        # Reading lists into the library first: a source that cannot be added refuses the batch.
        reading = add_sources(ws, file, items, settings)
        return ws, settings, queue_url(settings, ws), items, reading

    ws, settings, url, items, reading = guarded(prepare)
    from pensieve.batch.items import create_projects
    from pensieve.batch.queue import Worker

    stop = _stop_on_signals()
    spent = sum(_status_of(ws, item.project_id)[1] or 0.0 for item in items)
    worker = Worker(ws, settings, url, concurrency, kind="batch", max_cost_usd=max_cost_usd, already_spent=spent)
    # The queue database first: unreachable or refused, no project has been created.
    guarded(worker.start)
    try:
        projects, created = create_projects(ws, items, reading)
        err.print(f"{len(projects)} projects ({created} new) in workspace {ws.name}", markup=False)
        planned = worker.plan(items, until, model, retry_failed)
        states = _watch(worker, planned, stop)
    except (PensieveError, OSError) as exc:
        worker.close()
        fail(exc if isinstance(exc, PensieveError) else storage_error(exc))
    except BaseException:  # a bug: say where, then leave the queue as a crash would
        import traceback

        traceback.print_exc()
        worker.stop()
        _exit_now(1)
    if stop.is_set():
        worker.stop()
        err.print("interrupted: run the same command again to continue where it stopped", markup=False)
        _exit_now(130)
    worker.close()
    raise typer.Exit(_summary(ws, worker, planned, states))


def _status_of(ws: Workspace, project: str) -> tuple[str | None, float | None, str | None]:
    """current stage, project cost, error from status.json (None where unreadable)."""
    from pensieve.project.status import load_status

    try:
        doc = load_status(ws.project(project).status_path, keep_copy=False)
    except Exception:
        return None, None, None
    return doc.current_stage, doc.usage.cost_usd, doc.error


def _watch(worker: Worker, planned: list[Planned], stop: threading.Event) -> dict[str, tuple[str, str | None]]:
    """Follow the batch's workflows until each has finished; a live table on a terminal,
    one line per change otherwise. Returns each project's final (state, error)."""
    from dbos import DBOS
    from rich.live import Live

    from pensieve.batch.queue import state_of

    states = {p.project: (p.state, p.error) for p in planned}
    ids = {p.workflow_id: p.project for p in planned if p.workflow_id}
    workers: dict[str, str] = {}
    live = Live(console=err, refresh_per_second=4, transient=False) if err.is_terminal else None
    printed: dict[str, str] = {}
    known: dict[str, tuple[str, str | None, float | None]] = {}

    def refresh() -> bool:
        if ids:
            for w in DBOS.list_workflows(workflow_ids=list(ids), load_input=False, load_output=True):
                states[ids[w.workflow_id]] = state_of(str(w.status), w.output)
                workers[ids[w.workflow_id]] = (
                    "this process" if w.executor_id == worker.executor_id else (w.executor_id or "")
                )
        rows = []
        for p in planned:
            state = states[p.project][0]
            if state == "running" or p.project not in known or known[p.project][0] != state:
                # status.json is read for running projects, and once when a state changes.
                stage, cost, _ = _status_of(worker.workspace, p.project)
                known[p.project] = (state, stage, cost)
            _, stage, cost = known[p.project]
            # A project complete as far as asked (--until) names its next stage: not shown.
            shown = None if state == "complete" else stage
            rows.append((p.project, state, shown, cost, workers.get(p.project, "") if state == "running" else ""))
        if live is not None:
            live.update(_table(rows))
        else:
            for project, state, stage, cost, _where in rows:
                line = f"{project}: {state}" + (f" at {stage}" if state == "running" and stage else "")
                if printed.get(project) != line:
                    printed[project] = line
                    err.print(
                        line + (f" (${cost:.4f})" if cost is not None and state in TERMINAL else ""), markup=False
                    )
        return all(states[p.project][0] in TERMINAL for p in planned)

    if live is not None:
        live.start()
    try:
        while not refresh():
            if stop.wait(max(1.0, worker.settings.queue.poll_interval_s)):  # a person reads it
                break
    finally:
        if live is not None:
            live.stop()
    return states


def _table(rows: list[tuple[str, str, str | None, float | None, str]]) -> Table:
    table = Table(box=None, pad_edge=False)
    for column in ("project", "state", "stage", "cost", "worker"):
        table.add_column(column, no_wrap=True, overflow="ellipsis")
    for project, state, stage, cost, where in rows:
        table.add_row(Text(project), state, stage or "-", f"${cost:.4f}" if cost is not None else "-", Text(where))
    return table


def _summary(ws: Workspace, worker: Worker, planned: list[Planned], states: dict[str, tuple[str, str | None]]) -> int:
    counts: dict[str, int] = {}
    total = 0.0
    for p in planned:
        state, error = states[p.project]
        counts[state] = counts.get(state, 0) + 1
        _, cost, status_error = _status_of(ws, p.project)
        total += cost or 0.0
        if state == "failed":
            err.print(f"failed: {p.project}: {error or status_error or 'unknown error'}", markup=False)
        elif state == "stopped":
            err.print(f"not finished: {p.project}: {error}", markup=False)
    others = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()) if s not in ("complete", "failed"))
    err.print(
        f"batch: {counts.get('complete', 0)} complete, {counts.get('failed', 0)} failed"
        + (f", {others}" if others else "")
        + f"; cost this run ${worker.spent:.4f}, projects' total ${total:.4f}",
        markup=False,
    )
    if counts.get("failed"):
        err.print("fix the cause, then run the same command with --retry-failed", markup=False)
        return 1
    if counts.get("stopped"):
        # The budget counts what the projects spent before too: the same value stops again.
        err.print(
            f"to continue, run the same command with --max-cost-usd above ${total:.4f} "
            "(the budget counts what the batch's projects have spent in every run)",
            markup=False,
        )
    return 0


def worker(workspace: WorkspaceOpt = "default", concurrency: ConcurrencyOpt = 4) -> None:
    """Work the workspace's queue until stopped (Ctrl-C or SIGTERM); run one per machine.

    Every worker shares the queue database (queue.url / PENSIEVE_QUEUE_URL) and the
    workspace directory. A stopped or killed worker's projects are resumed by the others.
    """

    def prepare() -> Worker:
        from pensieve.batch.queue import Worker, queue_url
        from pensieve.config import load_settings

        settings = load_settings()
        ws = workspace_of(workspace)
        return Worker(ws, settings, queue_url(settings, ws), concurrency, kind="worker", log=_log)

    stop = _stop_on_signals()
    me = guarded(prepare)
    guarded(me.start)
    from pensieve.batch.queue import shown_url

    _log(f"worker {me.executor_id} on queue {me.queue} at {shown_url(me.url)}, {concurrency} at once; Ctrl-C stops")
    stop.wait()
    _log("stopping: the projects in flight are paused and resumed by the next worker")
    me.stop()
    _log("stopped")
    _exit_now(0)


def _log(line: str) -> None:
    err.print(f"{time.strftime('%H:%M:%S')} {line}", markup=False)


def queue(workspace: WorkspaceOpt = "default", as_json: JsonOpt = False) -> None:
    """Show the workspace's queue: queued, running (and which worker), complete, failed."""

    def action() -> tuple[list[Any], list[Any]]:
        from pensieve.batch.queue import queue_url, read_queue
        from pensieve.config import load_settings

        settings = load_settings()
        ws = workspace_of(workspace)
        return read_queue(ws, queue_url(settings, ws))

    entries, workers = guarded(action)
    from pensieve.batch.queue import group_entries, queue_json

    if as_json:
        print_json(queue_json(entries, workers))
        return
    groups = group_entries(entries)
    if not entries and not workers:
        err.print(f"the queue of workspace {workspace!r} is empty; start with: pensieve batch FILE", markup=False)
        return
    counts = ", ".join(f"{len(g)} {n}" for n, g in groups.items() if g)
    out.print(f"queue pensieve.{workspace}: {counts or 'empty'}", markup=False)
    table = plain_table("project", "state", "worker", "error", fold=("error",))
    for name in ("running", "queued", "failed", "other", "complete"):
        for e in groups[name]:
            table.add_row(Text(e.project), e.state, Text(e.worker or ""), Text(e.error or ""))
    out.print(table)
    for w in workers:
        age = time.time() - w.heartbeat_at
        out.print(f"worker {w.label}, {w.concurrency} at once, heartbeat {age:.0f}s ago", markup=False)


def register(app: typer.Typer) -> None:
    app.command()(batch)
    app.command()(worker)
    app.command("queue")(queue)
