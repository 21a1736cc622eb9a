"""The durable queue behind `pensieve batch` and `pensieve worker`: DBOS workflows.

Each project run is one DBOS workflow on the workspace's queue; its steps are the waves of
the stage graph (refiner, researcher, outliner, drafter, the three reviewers at once,
reviser, polisher, consistency checker), each run by the ordinary pipeline
(`run.pipeline.run_project`) with `--until` the wave's last stage. DBOS records each finished step,
and the pipeline's two-step commit and status.json keep a finished stage from running
again whichever process picks the workflow up after a crash.

The queue lives in the application's own database: a SQLite file in the workspace by
default, PostgreSQL (`queue.url` / PENSIEVE_QUEUE_URL) when several machines share the
work. Every process registers itself in `pensieve_workers` and beats a heartbeat; a worker
that stops beating (or a dead pid on this host) has its running workflows put back on the
queue for the live ones (DBOS's own recovery, by executor id).

Imported only by `batch`, `worker` and `queue`: DBOS and SQLAlchemy stay out of `list`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from dbos import DBOS, SetWorkflowID

from pensieve.batch.items import BatchItem
from pensieve.config import Settings, load_settings, pensieve_home
from pensieve.errors import ProjectBusy, UsageError
from pensieve.project.events import Event, EventKind, data_of
from pensieve.project.workspace import Project, Workspace, open_workspace
from pensieve.redact import hide_url_secrets, scrub
from pensieve.stages import STAGE_NAMES, STAGES

if TYPE_CHECKING:
    from pensieve.run.pipeline import RunResult

APP_NAME = "pensieve"
# The shape of the workflow and its steps. Every worker on a queue must run the same one:
# DBOS only recovers and dequeues workflows of its own application version.
APP_VERSION = "pensieve-queue-1"
WORKFLOW_NAME = "pensieve.project"
STEP_NAME = "pensieve.stages"
ACTIVE = ("ENQUEUED", "PENDING", "DELAYED")
HOST = socket.gethostname()
LOCK_WAIT_S = 300.0  # a project another process runs is waited for this long, then failed


# -- names ------------------------------------------------------------------------------


def queue_name(workspace: str) -> str:
    return f"pensieve.{workspace}"


def workflow_id(workspace: str, project: str, generation: int) -> str:
    """Stable per project: enqueueing it again attaches to the same workflow."""
    return f"{workspace}/{project}/{generation}"


def parse_workflow_id(wid: str) -> tuple[str, str, int] | None:
    parts = wid.split("/")
    if len(parts) != 3 or not parts[2].isdigit():
        return None
    return parts[0], parts[1], int(parts[2])


def waves(until: str | None = None) -> list[list[str]]:
    """The stages in groups that run at once (each after every earlier group), up to until."""
    depth: dict[str, int] = {}
    for stage in STAGES:
        depth[stage.name] = 1 + max((depth[dep] for dep in stage.after), default=-1)
    last = STAGE_NAMES.index(until) if until else len(STAGE_NAMES) - 1
    groups: dict[int, list[str]] = {}
    for name in STAGE_NAMES[: last + 1]:
        groups.setdefault(depth[name], []).append(name)
    return [groups[d] for d in sorted(groups)]


# -- the database URL -------------------------------------------------------------------


def queue_url(settings: Settings, workspace: Workspace, environ: dict[str, str] | None = None) -> str:
    """PENSIEVE_QUEUE_URL, else queue.url, else a SQLite file in the workspace."""
    env = os.environ if environ is None else environ
    url = env.get("PENSIEVE_QUEUE_URL") or settings.queue.url
    if not url:
        return f"sqlite:///{workspace.root / 'queue.sqlite'}"
    if url.startswith("postgres://"):
        url = "postgresql://" + url.removeprefix("postgres://")
    if not url.startswith(("sqlite:///", "postgresql://", "postgresql+psycopg://")):
        raise UsageError("PENSIEVE_QUEUE_URL must be sqlite:///path or postgresql://user:password@host/db")
    try:
        sa.make_url(url)
    except Exception:
        raise UsageError(
            f"the queue URL {shown_url(url)} cannot be parsed; check PENSIEVE_QUEUE_URL / queue.url"
        ) from None
    return url


def shown_url(url: str) -> str:
    """The URL with its password hidden: the only form that is ever printed or logged (the
    user information's password, a raw `@` in it included, and password= / sslpassword=)."""
    try:
        shown = sa.make_url(url).render_as_string(hide_password=True)
    except Exception:
        return "<unparseable URL>"
    return hide_url_secrets(shown, url)


def redact(text: str, url: str) -> str:
    text = hide_url_secrets(text.replace(url, shown_url(url)), url)
    return scrub(text)


def db_error(exc: BaseException, url: str) -> str:
    """A queue database failure as one line, password hidden: the driver's own first line.
    SQLAlchemy's text adds the statement and a "(Background on this error at: ...)" link,
    psycopg a hint on a second line; what the user acts on is the first line."""
    cause = getattr(exc, "orig", None) or exc
    first = next((line.strip() for line in str(cause).splitlines() if line.strip()), type(cause).__name__)
    return redact(first, url)


def sqlite_path(url: str) -> Path | None:
    return Path(url.removeprefix("sqlite:///")) if url.startswith("sqlite:///") else None


def _engine(url: str) -> sa.Engine:
    parsed = sa.make_url(url)
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    if parsed.drivername.startswith("sqlite"):
        return sa.create_engine(parsed, connect_args={"timeout": 30})
    return sa.create_engine(parsed, pool_size=2, max_overflow=2, pool_pre_ping=True)


class _RedactingFilter(logging.Filter):
    """DBOS's own log lines never show the queue database's password."""

    def __init__(self, url: str) -> None:
        super().__init__()
        self.url = url

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = redact(record.getMessage(), self.url)
        record.args = None
        return True


# -- who works the queue ------------------------------------------------------------------


_META = sa.MetaData()
WORKERS = sa.Table(
    "pensieve_workers",
    _META,
    sa.Column("executor_id", sa.String(100), primary_key=True),
    sa.Column("workspace", sa.String(100), nullable=False),
    sa.Column("kind", sa.String(20), nullable=False),
    sa.Column("host", sa.String(255), nullable=False),
    sa.Column("pid", sa.Integer, nullable=False),
    sa.Column("concurrency", sa.Integer, nullable=False),
    sa.Column("started_at", sa.Float, nullable=False),
    sa.Column("heartbeat_at", sa.Float, nullable=False),
)


@dataclass(frozen=True)
class WorkerRow:
    executor_id: str
    workspace: str
    kind: str
    host: str
    pid: int
    concurrency: int
    started_at: float
    heartbeat_at: float

    @property
    def label(self) -> str:
        return f"{self.kind} pid {self.pid} on {self.host}"


class Registry:
    """The `pensieve_workers` table: one row per live process, with its heartbeat."""

    def __init__(self, url: str, *, create: bool = True) -> None:
        self.engine = _engine(url)
        if create:
            for attempt in range(3):  # two processes creating it at once: one wins
                try:
                    _META.create_all(self.engine)
                    break
                except sa.exc.DBAPIError:
                    if attempt == 2:
                        raise
                    time.sleep(0.2)

    def register(self, row: WorkerRow) -> None:
        with self.engine.begin() as conn:
            conn.execute(WORKERS.delete().where(WORKERS.c.executor_id == row.executor_id))
            conn.execute(WORKERS.insert().values(**row.__dict__))

    def beat(self, executor_id: str) -> None:
        with self.engine.begin() as conn:
            conn.execute(WORKERS.update().where(WORKERS.c.executor_id == executor_id).values(heartbeat_at=time.time()))

    def remove(self, executor_ids: list[str]) -> None:
        if executor_ids:
            with self.engine.begin() as conn:
                conn.execute(WORKERS.delete().where(WORKERS.c.executor_id.in_(executor_ids)))

    def rows(self, workspace: str | None = None) -> list[WorkerRow]:
        query = sa.select(WORKERS)
        if workspace is not None:
            query = query.where(WORKERS.c.workspace == workspace)
        try:
            with self.engine.connect() as conn:
                return [WorkerRow(**dict(r._mapping)) for r in conn.execute(query)]
        except sa.exc.DBAPIError:
            return []  # no table yet: nobody ever worked this queue

    def close(self) -> None:
        self.engine.dispose()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def is_dead(row: WorkerRow, timeout_s: float, now: float | None = None) -> bool:
    """No heartbeat for timeout_s, or (on this host) its process is gone."""
    now = time.time() if now is None else now
    return now - row.heartbeat_at > timeout_s or (row.host == HOST and not _pid_alive(row.pid))


# -- one process working the queue ---------------------------------------------------------


@dataclass
class Job:
    """A workflow's input: what to run (the project) and the item's settings."""

    workspace: str
    project: str
    until: str | None = None
    model: str | None = None
    target_words: int | None = None
    audience: str | None = None

    def as_input(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Seen:
    """What this process saw of one project it ran (for the live table and the budget)."""

    stage: str | None = None
    cost: float = 0.0


@dataclass
class Worker:
    """This process on the queue: DBOS launched with our executor id, a heartbeat, the
    janitor that puts dead workers' projects back, and the runs in flight."""

    workspace: Workspace
    settings: Settings
    url: str
    concurrency: int
    kind: str = "worker"
    max_cost_usd: float | None = None
    # What the batch's projects had spent before this run (their status.json): the budget
    # is the batch's, so the same command again does not spend it a second time.
    already_spent: float = 0.0
    log: Callable[[str], None] | None = None
    executor_id: str = field(default_factory=lambda: f"{HOST}-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    stopping: threading.Event = field(default_factory=threading.Event)
    spent: float = 0.0
    seen: dict[str, Seen] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _active: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Task[Any]]] = field(default_factory=dict)
    _parked: threading.Event = field(default_factory=threading.Event)
    _registry: Registry | None = None
    _janitor: threading.Thread | None = None
    _janitor_stop: threading.Event = field(default_factory=threading.Event)

    @property
    def queue(self) -> str:
        return queue_name(self.workspace.name)

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        global _WORKER
        path = sqlite_path(self.url)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._registry = Registry(self.url)
            now = time.time()
            self._registry.register(
                WorkerRow(
                    self.executor_id, self.workspace.name, self.kind, HOST, os.getpid(), self.concurrency, now, now
                )
            )
            problem = self.concurrency_problem()
        except Exception as exc:
            self._leave()
            raise UsageError(
                f"cannot open the queue database {shown_url(self.url)}: {db_error(exc, self.url)}"
            ) from None
        if problem:  # refused before DBOS is launched: not one project was taken
            self._leave()
            raise UsageError(problem)
        try:
            if self.concurrency:
                self._set_limit_before_launch()
            _WORKER = self
            logging.getLogger("dbos").addFilter(_RedactingFilter(self.url))
            DBOS(
                config={
                    "name": APP_NAME,
                    "system_database_url": self.url,
                    "application_version": APP_VERSION,
                    "executor_id": self.executor_id,
                    "log_level": "ERROR",
                    "notification_listener_polling_interval_sec": min(1.0, self.settings.queue.poll_interval_s),
                }
            )
            # Concurrency 0 (`batch --concurrency 0`): enqueue and watch; the workers run it
            # all. It registers no queue: only a process that works it writes the limit
            # (enqueueing needs no row; a row of its own would have no limit).
            DBOS.listen_queues([self.queue] if self.concurrency else [])
            DBOS.launch()
            if self.concurrency:  # a database DBOS has just set up gets its row here
                DBOS.register_queue(
                    self.queue,
                    worker_concurrency=self.concurrency,
                    polling_interval_sec=self.settings.queue.poll_interval_s,
                    on_conflict="always_update",
                )
        except UsageError:  # already one line naming the database
            _WORKER = None
            self._leave()
            raise
        except Exception as exc:
            _WORKER = None
            self._leave()
            raise UsageError(
                f"cannot open the queue database {shown_url(self.url)}: {db_error(exc, self.url)}"
            ) from None
        self._reap()
        self._janitor = threading.Thread(target=self._janitor_loop, name="pensieve-janitor", daemon=True)
        self._janitor.start()

    def stop(self, grace_s: float = 20.0) -> None:
        """Stop taking work; interrupt the runs in flight (each stage in flight is marked
        interrupted and its project paused); leave their workflows to be resumed; leave
        the queue. The caller exits the process right after (os._exit)."""
        self.stopping.set()
        with self._lock:
            running = list(self._active.values())
        for loop, task in running:
            with contextlib.suppress(RuntimeError):  # a loop that has just closed
                loop.call_soon_threadsafe(task.cancel)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and any(not task.done() for _, task in running):
            time.sleep(0.05)
        self._janitor_stop.set()
        if self._registry is not None:
            with contextlib.suppress(Exception):
                self._registry.remove([self.executor_id])  # the others take our projects at once

    def close(self) -> None:
        """A normal end (nothing in flight): shut DBOS down and leave the queue."""
        global _WORKER
        self._janitor_stop.set()
        if self._janitor is not None:
            self._janitor.join(timeout=5)
        with contextlib.suppress(Exception):
            DBOS.destroy(workflow_completion_timeout_sec=0)
        self._leave()
        _WORKER = None

    def concurrency_problem(self) -> str | None:
        """Why this process may not work the queue with its --concurrency, if it may not.

        DBOS keeps a queue's worker_concurrency (projects at once per process) as one row
        of its database, which every process working the queue reads again on each poll;
        a process with another N would set it for those already working (the last to
        start would win). So N is the queue's while any other process works it: a
        different N is refused, and the first process to start on an idle queue sets it.
        Both rows are registered before either checks, so of two processes starting at
        once with different N, at least one sees the other."""
        if not self.concurrency:
            return None  # enqueues and watches only: takes no project, sets no limit
        assert self._registry is not None
        timeout = self.settings.queue.worker_timeout_s
        others = [
            r
            for r in self._registry.rows(self.workspace.name)
            if r.executor_id != self.executor_id and r.concurrency and not is_dead(r, timeout)
        ]
        other = next((r for r in others if r.concurrency != self.concurrency), None)
        if other is None:
            return None
        n = other.concurrency
        also = ", or --concurrency 0 to leave the projects to them" if self.kind == "batch" else ""
        return (
            f"queue {self.queue} runs at most {n} project(s) at once in each process (the {other.label} "
            f"works it with --concurrency {n}; DBOS keeps one such limit per queue): use --concurrency {n}{also}, "
            "or stop the queue's other processes first to change it"
        )

    def _set_limit_before_launch(self) -> None:
        """Write this process's N into the queue's row before DBOS launches. DBOS starts
        polling a queue with its row as it finds it, before register_queue can run: a row
        left with another N (an earlier run with -c 10, now resumed with -c 1) had the
        first poll take that many projects. A database DBOS never set up has no row."""
        with client(self.url) as dbos_client:
            try:
                dbos_client.register_queue(
                    self.queue,
                    worker_concurrency=self.concurrency,
                    polling_interval_sec=self.settings.queue.poll_interval_s,
                    on_conflict="always_update",
                )
            except Exception as exc:
                if not no_schema_yet(exc):
                    raise

    def _leave(self) -> None:
        """Take this process's row out of the workers table and close it."""
        if self._registry is not None:
            with contextlib.suppress(Exception):
                self._registry.remove([self.executor_id])
            self._registry.close()

    def _janitor_loop(self) -> None:
        while not self._janitor_stop.wait(self.settings.queue.poll_interval_s):
            try:
                assert self._registry is not None
                self._registry.beat(self.executor_id)
                self._reap()
            except Exception as exc:  # a database hiccup: try again next beat
                self._say(f"queue: {db_error(exc, self.url)}")

    def _reap(self) -> None:
        """Put the running workflows of dead workers back on the queue (DBOS recovery)."""
        assert self._registry is not None
        timeout = self.settings.queue.worker_timeout_s
        rows = self._registry.rows()
        live = {r.executor_id for r in rows if r.executor_id == self.executor_id or not is_dead(r, timeout)}
        pending = DBOS.list_workflows(status="PENDING", queue_name=self.queue, load_input=False, load_output=False)
        orphans = sorted({w.executor_id for w in pending if w.executor_id and w.executor_id not in live})
        if orphans:
            handles = DBOS._recover_pending_workflows(orphans)
            if handles:
                self._say(f"queue: {len(handles)} project(s) of stopped worker(s) put back on the queue")
        self._registry.remove([r.executor_id for r in rows if r.executor_id not in live])

    def _say(self, line: str) -> None:
        if self.log is not None:
            self.log(line)

    # -- the budget --------------------------------------------------------------------------
    def budget_problem(self) -> str | None:
        total = self.already_spent + self.spent
        if self.max_cost_usd is not None and total >= self.max_cost_usd:
            return (
                f"batch budget reached: the batch's projects have spent ${total:.4f} "
                f"of --max-cost-usd ${self.max_cost_usd:.4f}"
            )
        return None

    def _reporter(self, project: str) -> Callable[[Event], None]:
        seen = self.seen.setdefault(project, Seen())

        def on_event(event: Event) -> None:
            # Read typed (data_of): a call whose data is malformed counts no cost, never a KeyError.
            model = data_of(event, EventKind.MODEL)
            cost = model.get("cost_usd") if model is not None else None
            if cost is not None:
                with self._lock:
                    self.spent += float(cost)
                    seen.cost += float(cost)
            elif event.kind == EventKind.STAGE_START:
                seen.stage = event.stage
            elif event.kind == EventKind.STAGE_END:
                self._say(f"{project}: {event.stage} complete")
            elif (failed := data_of(event, EventKind.STAGE_ERROR)) is not None:
                self._say(f"{project}: {event.stage} error: {failed['error']}")

        return on_event

    # -- one step: a wave of stages -----------------------------------------------------------
    def settings_for(self, job: Job) -> Settings:
        article: dict[str, Any] = {"target_words": job.target_words, "audience": job.audience}
        return load_settings(overrides={"article": article})

    def run_wave(self, job: Job, until: str) -> dict[str, Any]:
        from pensieve.project.status import load_status
        from pensieve.run.pipeline import run_project
        from pensieve.run.preflight import RunOptions, preflight, project_settings

        self._park_if_stopping()
        try:
            workspace = open_workspace(pensieve_home(), job.workspace)
            project = workspace.existing_project(job.project)
            settings = project_settings(project, self.settings_for(job))
            options = RunOptions(until=until, model=job.model)
            env = dict(os.environ)
            selected = preflight(project, settings, options, env)
        except UsageError as exc:
            return {"status": "error", "error": scrub(str(exc))}
        if not selected:
            doc = load_status(project.status_path)
            return {"status": "complete" if doc.status == "complete" else "paused", "error": None}
        self._say(f"{project.id}: {', '.join(selected)}")
        deadline = time.monotonic() + LOCK_WAIT_S

        def loop(work: Coroutine[object, None, RunResult]) -> RunResult:
            result: RunResult = self._run(project.id, work)
            return result

        while True:
            try:
                result = run_project(
                    project, settings, options, self._reporter(project.id), env, selected=selected, loop=loop
                )
                break
            except ProjectBusy as exc:
                self._park_if_stopping()
                if time.monotonic() > deadline:
                    return {"status": "error", "error": str(exc)}
                time.sleep(1.0)
        final = result.status
        _record_wave_end(project, result)
        return {"status": final.status, "error": final.error}

    def _run(self, project: str, work: Coroutine[Any, Any, Any]) -> Any:
        """Run one pipeline coroutine on an event loop of its own in this workflow thread
        (as asyncio.run would), so one project's file syncs never hold up the others;
        stop() cancels it from another thread."""

        async def tracked() -> Any:
            task = asyncio.current_task()
            assert task is not None
            with self._lock:
                self._active[project] = (asyncio.get_running_loop(), task)
            if self.stopping.is_set():
                task.cancel()
            return await work

        try:
            with asyncio.Runner() as runner:
                return runner.run(tracked())
        except asyncio.CancelledError:
            # stop(): the stage in flight marked itself interrupted. The workflow stays
            # PENDING for DBOS, so whoever works the queue next resumes it.
            self._park_if_stopping()
            raise
        finally:
            with self._lock:
                self._active.pop(project, None)

    def _park_if_stopping(self) -> None:
        """While the process stops, a workflow thread records nothing more: it waits here
        for the exit, leaving its workflow PENDING to be resumed elsewhere."""
        if self.stopping.is_set():
            self._parked.wait()

    # -- enqueueing ---------------------------------------------------------------------------
    def history(self, project: str) -> list[Any]:
        """The project's workflows, oldest generation first."""
        found = DBOS.list_workflows(
            workflow_id_prefix=f"{self.workspace.name}/{project}/", load_input=False, load_output=True
        )
        generations = {w.workflow_id: parse_workflow_id(w.workflow_id) for w in found}
        ours = [w for w in found if generations[w.workflow_id] is not None]
        return sorted(ours, key=lambda w: generations[w.workflow_id][2])  # type: ignore[index]

    def enqueue(self, job: Job, generation: int) -> str:
        wid = workflow_id(job.workspace, job.project, generation)
        with SetWorkflowID(wid):
            DBOS.enqueue_workflow(self.queue, project_workflow, job.as_input())
        return wid

    def plan(self, items: list[BatchItem], until: str | None, model: str | None, retry_failed: bool) -> list[Planned]:
        """Enqueue what each item's project still needs; attach to what is already queued."""
        from pensieve.project.status import load_status

        planned = []
        last = STAGE_NAMES.index(until) if until else len(STAGE_NAMES) - 1
        for item in items:
            project = self.workspace.project(item.project_id)
            doc = load_status(project.status_path)
            history = self.history(item.project_id)
            latest = history[-1] if history else None
            if latest is not None and str(latest.status) in ACTIVE:
                planned.append(Planned(item.project_id, latest.workflow_id, "queued"))
                continue
            if all(doc.stages[name].status == "complete" for name in STAGE_NAMES[: last + 1]):
                planned.append(Planned(item.project_id, None, "complete"))
                continue
            if doc.status == "error" and not retry_failed:
                planned.append(Planned(item.project_id, None, "failed", doc.error))
                continue
            job = Job(
                self.workspace.name,
                item.project_id,
                until=until,
                model=item.model or model,
                target_words=item.target_words,
                audience=item.audience,
            )
            generation = (parse_workflow_id(latest.workflow_id) or ("", "", 0))[2] + 1 if latest else 1
            planned.append(Planned(item.project_id, self.enqueue(job, generation), "queued"))
        return planned


@dataclass(frozen=True)
class Planned:
    project: str
    workflow_id: str | None  # None: nothing to run (complete already, or failed and not retried)
    state: str
    error: str | None = None


_WORKER: Worker | None = None


def _current() -> Worker:
    if _WORKER is None:
        raise RuntimeError("no pensieve worker in this process")
    return _WORKER


@DBOS.workflow(name=WORKFLOW_NAME)
def project_workflow(job_input: dict[str, Any]) -> dict[str, Any]:
    """One project: its stage waves in order; stops at a failure or at the batch budget."""
    job = Job(**job_input)
    worker = _current()
    outcome: dict[str, Any] = {"status": "paused", "error": None}
    for wave in waves(job.until):
        problem = worker.budget_problem()
        if problem:
            return {"status": "stopped", "error": problem}
        outcome = stages_step(job_input, wave[-1])
        if outcome["status"] == "error":
            break
    if job.until and outcome["status"] == "paused":
        return {"status": "complete", "error": None, "until": job.until}  # done as far as asked
    return outcome


@DBOS.step(name=STEP_NAME)
def stages_step(job_input: dict[str, Any], until: str) -> dict[str, Any]:
    return _current().run_wave(Job(**job_input), until)


# -- reading the queue without working it (`pensieve queue`) ----------------------------------


@dataclass(frozen=True)
class QueueEntry:
    project: str
    workflow_id: str
    state: str  # queued | running | complete | failed | stopped | paused
    worker: str | None = None
    executor_id: str | None = None
    error: str | None = None


def state_of(status: str, output: Any) -> tuple[str, str | None]:
    """A DBOS workflow status (and its output) as Pensieve's word for it."""
    if status in ("ENQUEUED", "DELAYED"):
        return "queued", None
    if status == "PENDING":
        return "running", None
    if status == "SUCCESS" and isinstance(output, dict):
        state = str(output.get("status") or "complete")
        return ("failed" if state == "error" else state), output.get("error")
    if status == "SUCCESS":
        return "complete", None
    return "failed", f"workflow {status.lower()}"


def latest_entries(workflows: list[Any], workers: dict[str, WorkerRow]) -> list[QueueEntry]:
    """The latest workflow of each project, as entries (sorted by project)."""
    latest: dict[str, tuple[int, Any]] = {}
    for w in workflows:
        key = parse_workflow_id(w.workflow_id)
        if key is None:
            continue
        if key[1] not in latest or key[2] > latest[key[1]][0]:
            latest[key[1]] = (key[2], w)
    entries = []
    for project, (_, w) in sorted(latest.items()):
        state, error = state_of(str(w.status), w.output)
        holder = workers.get(w.executor_id or "") if state == "running" else None
        label = holder.label if holder else (w.executor_id if state == "running" else None)
        entries.append(QueueEntry(project, w.workflow_id, state, label, w.executor_id, error))
    return entries


def no_schema_yet(exc: BaseException) -> bool:
    """A database DBOS never launched on: its tables are not there yet."""
    return "no such table" in str(exc) or "does not exist" in str(exc)


@contextlib.contextmanager
def client(url: str) -> Iterator[Any]:
    from dbos import DBOSClient

    try:
        dbos_client = DBOSClient(system_database_url=url, application_name=APP_NAME, retry_connection_errors=False)
    except Exception as exc:
        raise UsageError(f"cannot open the queue database {shown_url(url)}: {db_error(exc, url)}") from None
    try:
        yield dbos_client
    finally:
        dbos_client.destroy()


def read_queue(workspace: Workspace, url: str) -> tuple[list[QueueEntry], list[WorkerRow]]:
    path = sqlite_path(url)
    if path is not None and not path.is_file():
        return [], []
    registry = Registry(url, create=False)
    try:
        rows = registry.rows(workspace.name)
    finally:
        registry.close()
    with client(url) as dbos_client:
        try:
            workflows = dbos_client.list_workflows(
                queue_name=queue_name(workspace.name), load_input=False, load_output=True
            )
        except Exception as exc:
            if no_schema_yet(exc):
                return [], rows
            raise UsageError(f"cannot read the queue {shown_url(url)}: {db_error(exc, url)}") from None
    return latest_entries(workflows, {r.executor_id: r for r in rows}), rows


GROUPS = ("queued", "running", "complete", "failed", "other")


def group_entries(entries: list[QueueEntry]) -> dict[str, list[QueueEntry]]:
    """The entries by state: queued, running, complete, failed, other (stopped, paused)."""
    groups: dict[str, list[QueueEntry]] = {name: [] for name in GROUPS}
    for e in entries:
        groups[e.state if e.state in groups else "other"].append(e)
    return groups


def queue_json(entries: list[QueueEntry], workers: list[WorkerRow]) -> dict[str, Any]:
    """What `pensieve queue --json` prints (and the studio's queue view shows)."""
    return {
        **{
            name: [
                {
                    "project": e.project,
                    "workflow_id": e.workflow_id,
                    "state": e.state,
                    **({"worker": e.worker, "executor_id": e.executor_id} if e.state == "running" else {}),
                    **({"error": e.error} if e.error else {}),
                }
                for e in group
            ]
            for name, group in group_entries(entries).items()
        },
        "workers": [
            {
                "executor_id": w.executor_id,
                "kind": w.kind,
                "host": w.host,
                "pid": w.pid,
                "concurrency": w.concurrency,
                "heartbeat_at": w.heartbeat_at,
            }
            for w in workers
        ],
    }


def _record_wave_end(project: Project, result: RunResult) -> None:
    """The run_end event a `pensieve run` writes, for a wave run by a worker: the studio
    shows a project's last ending from it, and a worker's wave is that project's last run."""
    from pensieve.project.run_outcome import RunEnd, record_run_end

    final = result.status
    if result.failed:
        end = RunEnd("failed", 1, os.getpid(), error=final.error, failed_stage=final.current_stage)
    elif final.status == "complete":
        end = RunEnd("complete", 0, os.getpid(), message="complete (batch worker)")
    else:
        end = RunEnd("paused", 0, os.getpid(), message=f"paused before {final.current_stage} (batch worker)")
    record_run_end(project, end)  # best effort: it never changes the wave's outcome
