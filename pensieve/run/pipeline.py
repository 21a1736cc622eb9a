"""The scheduler: which stages run, in what order, concurrently where they can, and how a
run resumes after anything (a failure, Ctrl-C, SIGKILL, a deadline).

`Runner.run_stage` takes one stage row from start to a committed artifact in named steps
(begin, build the agent run, run it, stage the artifact, commit, check); the commit
protocol that survives a crash is in pensieve.run.commit. Everything stage-specific comes
from the row (pensieve.stages); nothing here tests a stage's name.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

from pensieve.citations import hooks as citation_hooks
from pensieve.clock import now_iso
from pensieve.config import Settings
from pensieve.errors import PensieveError, StageFailed
from pensieve.model import llm
from pensieve.model.client import StageModelClient
from pensieve.project.events import Event, EventBus, EventKind, EventLog, EventSink, Subscriber, data_of
from pensieve.project.staleness import demote_missing, input_hashes
from pensieve.project.status import Status, Usage, load_status, save_status
from pensieve.project.workspace import Project, atomic_copy, atomic_write_text, remove_stale_temporaries
from pensieve.run import findings
from pensieve.run.agent import AgentRun, run_agent
from pensieve.run.commit import (
    COMMIT_MARKER,
    CommitMarker,
    clear_staging,
    mark_committed,
    move_into_place,
    pending_commit,
    staged_artifact,
)
from pensieve.run.finishing import ContractFailed, Finisher, unfence
from pensieve.run.preflight import RunOptions, preflight, preflight_warnings, project_settings, select_stages
from pensieve.stages import BY_NAME, EVIDENCE_JUDGE, STAGE_NAMES, STAGES, Artifact, Stage
from pensieve.tool_matrix import Column, resolve_column
from pensieve.tools import offered_tools
from pensieve.tools.registry import RunResources, Tool, ToolContext
from pensieve.topics.capture import capture_on_complete

if TYPE_CHECKING:
    from pensieve.evidence.schema import ArtifactEvidence
    from pensieve.tools.mcp import McpServers

# Hooks run once when a project completes (e.g. capturing it into the topic library).
CompleteHook = Callable[[Project, Settings, EventSink], Awaitable[None]]
COMPLETE_HOOKS: list[CompleteHook] = [capture_on_complete]


@dataclass
class RunResult:
    status: Status
    failed: list[str] = field(default_factory=list)
    # What this run alone spent (status.usage counts every run of the project).
    spent: Usage = field(default_factory=Usage)


class Runner:
    def __init__(
        self,
        project: Project,
        settings: Settings,
        options: RunOptions,
        reporter: Subscriber,
        environ: Mapping[str, str],
    ) -> None:
        self.project = project
        self.settings = settings
        self.options = options
        self.environ = environ
        # One stream: events.jsonl and the progress display are both subscribers.
        self.events = EventBus(EventLog(project.events_path), reporter)
        self.status = load_status(project.status_path)
        self.resources = RunResources()  # web clients and one-time notes, shared by the stages
        self.mcp: McpServers | None = None  # kept for the last-resort kill after the loop ends
        self.spent = Usage()  # this run alone
        # Stages whose citation check, finished by recover(), failed: sent back once.
        self.resend_after_recovery: dict[str, str] = {}
        # The evidence check's model and sources, made ready while a stage waits for its model.
        self._evidence_warm_up: asyncio.Future[None] | None = None
        self._looking_elsewhere: asyncio.Future[None] | None = None
        # Set when a check begins: the warm-up stops embedding ahead and leaves the rest to it;
        # once a draft was checked, its sentences (not the notes') say what the next one needs.
        self._warm_up_stop = threading.Event()
        self._anticipate = True
        self._warmed_on_archiving = False
        # Checks of artifacts nothing is sent back for, running beside the next stages; the
        # stage that revises the artifact waits for its check (`_checked`).
        self._checks: dict[str, asyncio.Future[str | None]] = {}
        self.events.subscribe(self._warm_up_on_first_source)

    # -- status bookkeeping -------------------------------------------------------------
    def save(self) -> None:
        save_status(self.project.status_path, self.status)

    def _budget_problem(self) -> str | None:
        budget = self.settings.budget
        used = self.status.usage
        if budget.max_tokens is not None and used.total_tokens >= budget.max_tokens:
            return f"budget exceeded: {used.total_tokens:,} tokens used of budget.max_tokens {budget.max_tokens:,}"
        if budget.max_cost_usd is not None and (used.cost_usd or 0.0) >= budget.max_cost_usd:
            return f"budget exceeded: ${used.cost_usd:.4f} spent of budget.max_cost_usd ${budget.max_cost_usd:.4f}"
        return None

    def check_budget(self) -> None:
        problem = self._budget_problem()
        if problem:
            raise StageFailed(problem)

    # -- recovery -----------------------------------------------------------------------
    def recover(self) -> None:
        """Finish commits a crash interrupted; demote stages a dead process left running;
        remove temporary files a killed writer left (we hold the lock: none is in use)."""
        remove_stale_temporaries(self.project.dir)
        for name, artifact in demote_missing(self.project, self.status).items():
            self.events.note(f"{artifact} is missing: {name} runs again", name)
        for stage in STAGES:
            marker = pending_commit(self.project, stage)
            entry = self.status.stages[stage.name]
            if marker is not None:
                self._finish_commit(stage, marker)
            elif entry.status == "running":
                entry.status = "interrupted"
                entry.error = "the process running this stage stopped before it finished"
            if entry.status == "complete" and entry.check_pending:
                # The crash came between the commit and the citation check: run it now,
                # and send the stage back if it would have been (see run()).
                instructions = self.check_citations(stage)
                if instructions and self.settings.check.repolish_on_failure and self._in_scope(stage.name):
                    self.resend_after_recovery[stage.name] = instructions
        if self.status.status == "running":
            self.status.status = "paused"
        self.save()

    def _in_scope(self, name: str) -> bool:
        """Whether this run's flags (--stage, --until) reach the stage."""
        options = self.options
        if options.stage:
            return name == options.stage
        return not options.until or STAGE_NAMES.index(name) <= STAGE_NAMES.index(options.until)

    def _finish_commit(self, stage: Stage, marker: CommitMarker) -> None:
        move_into_place(self.project, stage, marker, self.status.stages[stage.name])
        self.save()
        clear_staging(self.project, stage)

    # -- one stage, in named steps ---------------------------------------------------------
    async def run_stage(self, stage: Stage, extra_instructions: str = "", *, feedback: bool = True) -> str | None:
        """Run one stage to a committed artifact. Returns what to tell the stage if its
        citation check failed in a way it can fix by running again, else None. Without
        `feedback` (a fix turn with one list of its own), no evidence list is added."""
        column = resolve_column(stage.name, stage.tools, self.settings)
        if stage.revises is not None:
            await self._checked(stage.revises)  # its evidence list comes from that check
        # The MCP servers it may use start first, so a failure is said before the stage begins.
        mcp = await self._mcp_tools(column)
        reading = await self._reading_list(stage, column)
        if extra_instructions and feedback and stage.resend_on_failed_check:
            # Sent back: one list (its own artifact's), and what its first pass did.
            extra = "\n\n".join(t for t in (self.first_pass_note(stage), extra_instructions) if t)
        else:
            evidence = self.evidence_feedback(stage) if feedback else ""
            extra = "\n\n".join(t for t in (reading, extra_instructions, evidence) if t)
        run = self._build_agent_run(stage, self._begin(stage), extra, column, mcp)
        self._warm_up_evidence()
        try:
            await self._produce(stage, run)
        except StageFailed as exc:
            self._fail(stage, self._failure_message(stage, exc))
            raise
        except asyncio.CancelledError:
            self._interrupted(stage)
            raise
        except PensieveError as exc:  # e.g. litellm cannot be imported: the run stops, cleanly
            self._fail(stage, str(exc))
            raise
        except Exception as exc:  # a bug in our code: record it, then let it propagate
            self._fail(stage, f"internal error: {type(exc).__name__}: {exc}")
            raise
        self.events.emit(EventKind.STAGE_END, stage.name, usage=self.status.stages[stage.name].usage.model_dump())
        self._record_lost_facts(stage)
        fix = self.check_citations(stage) if stage.citation_check else None
        unsupported = None
        if stage.evidence and not stage.resend_on_failed_check:
            # Nothing is sent back for this artifact: its check (a cold one embeds for seconds)
            # runs beside the stages after it; the stage that revises it waits for it.
            self._checks[stage.writes] = asyncio.ensure_future(self.check_evidence(stage))
        elif stage.evidence:
            unsupported = await self.check_evidence(stage)
        return "\n\n".join(t for t in (fix, unsupported) if t) or None

    async def _checked(self, name: str) -> None:
        """Wait for the running evidence check of `name`, if there is one."""
        check = self._checks.pop(name, None)
        if check is not None:
            await check

    async def _all_checked(self, *, cancel: bool = False) -> None:
        """Every running check done (or cancelled) before the run settles: evidence.json
        and its event are written before the run ends."""
        checks, self._checks = list(self._checks.values()), {}
        for check in checks:
            if cancel:
                check.cancel()
        results = await asyncio.gather(*checks, return_exceptions=True)
        if self._looking_elsewhere is not None:  # (started by a check above)
            if cancel:
                self._looking_elsewhere.cancel()
            await asyncio.gather(self._looking_elsewhere, return_exceptions=True)
        bugs = [r for r in results if isinstance(r, Exception) and not isinstance(r, asyncio.CancelledError)]
        if bugs and not cancel:
            raise bugs[0]

    async def _reading_list(self, stage: Stage, column: Column) -> str:
        """The researcher's reading list (`new --source`, batch `sources:`): archived as
        sources before it starts, and named in its instructions."""
        if stage.writes != Artifact.RESEARCH_NOTES:
            return ""  # the reading list is the research stage's
        from pensieve.library.sources import load_plan, reading_list_instructions

        if not load_plan(self.project.dir).reading_list:
            return ""
        return await asyncio.to_thread(
            reading_list_instructions, self.project, "read_library_document" in column.builtins
        )

    def _begin(self, stage: Stage) -> str:
        """Mark the stage running (with the inputs it starts from); returns its model."""
        entry = self.status.stages[stage.name]
        model = self.options.model or self.settings.model_for(stage.name)
        assert model is not None  # preflight refused a run without one
        clear_staging(self.project, stage)  # leftovers of an attempt that died
        entry.status, entry.started_at, entry.finished_at, entry.error = "running", now_iso(), None, None
        entry.attempts += 1
        entry.model = model
        entry.inputs = input_hashes(self.project, stage)
        self.status.current_stage = stage.name
        self.save()
        self.events.emit(EventKind.STAGE_START, stage.name, model=model, attempt=entry.attempts)
        return model

    def _mcp_servers(self) -> McpServers:
        if self.resources.mcp is None:
            from pensieve.tools.mcp import McpServers

            self.resources.mcp = self.mcp = McpServers(self.settings, self.environ)
        return self.resources.mcp

    def _check_mcp_servers(self, selected: list[str]) -> None:
        """Before the first stage: which MCP servers the selected stages may use cannot run."""
        if self.settings.mcp.servers:
            columns = [resolve_column(name, BY_NAME[name].tools, self.settings) for name in selected]
            self._mcp_servers().precheck(columns, self.events)

    async def _mcp_tools(self, column: Column) -> tuple[list[Tool], dict[str, str]]:
        """The MCP tools of the stage's column, starting the servers it may use (once per
        run); and, for each server that is not available, why."""
        if not column.servers(self.settings.mcp.servers):
            return [], {}
        return await self._mcp_servers().open_for(column, self.events)

    def _build_agent_run(
        self,
        stage: Stage,
        model: str,
        extra_instructions: str,
        column: Column,
        mcp: tuple[list[Tool], dict[str, str]],
    ) -> AgentRun:
        client = StageModelClient(
            stage=stage.name,
            model=model,
            settings=self.settings,
            events=self.events,
            record_usage=lambda reply: self._record_usage(stage.name, reply),
            check_budget=self.check_budget,
        )
        ctx = ToolContext(
            project=self.project,
            stage=stage,
            settings=self.settings,
            events=self.events,
            environ=self.environ,
            force=self.options.force,
            summarize=client.summarize,
            resources=self.resources,
        )
        tools, missing = offered_tools(column.builtins, self.settings, self.environ)
        for name, why in missing.items():
            if name not in self.resources.noted:
                self.resources.noted.add(name)
                self.events.note(f"{name} is not available: {why}")
        tools.extend(mcp[0])
        missing.update(mcp[1])
        return AgentRun(
            ctx=ctx,
            tools=tools,
            missing_tools=missing,
            client=client,
            extra_instructions=extra_instructions,
            finisher=Finisher.for_stage(ctx, tools, staged_artifact(self.project, stage)),
        )

    def _record_usage(self, stage: str, reply: llm.LLMReply) -> None:
        for usage in (self.status.stages[stage].usage, self.status.usage, self.spent):
            usage.add(reply.prompt_tokens, reply.completion_tokens, reply.cost_usd)
        self.save()

    async def _produce(self, stage: Stage, run: AgentRun) -> None:
        """Run the agent, turn what it left into the staged artifact, commit it."""
        entry = self.status.stages[stage.name]
        try:
            await run_agent(run)
        except ContractFailed as exc:
            entry.violations = [str(v) for v in exc.violations]
            raise
        finally:
            entry.tool_calls, entry.repairs = dict(run.tool_calls), list(run.finisher.asked)
            entry.text_tool_calls = run.text_tool_calls
            entry.context = entry.context.plus(run.context)
        entry.violations = []
        self._transform_staged(stage)
        self._finish_commit(stage, mark_committed(self.project, stage))

    def _transform_staged(self, stage: Stage) -> None:
        """The artifact the agent loop accepted, with the row's transform applied."""
        staged = staged_artifact(self.project, stage)
        text = staged.read_text(encoding="utf-8", errors="replace")
        rewritten = citation_hooks.transform_artifact(self.project, stage, text, self.settings)
        if rewritten != text:
            atomic_write_text(staged, rewritten)
            if stage.resend_on_failed_check:
                # Sent back, the stage starts from its own text with source ids, not from
                # the committed file renumbered for the reader.
                atomic_write_text(self.project.scratch_dir / stage.writes, text)

    def check_citations(self, stage: Stage) -> str | None:
        """Record the check's figures and problems; say what to fix if the stage is resent."""
        report = citation_hooks.check_project(self.project, self.settings, stage.writes)
        self.status.check = report.summary()
        # The consistency checker's problems are its own: a citation check does not clear them.
        kept = [p for p in self.status.problems if findings.is_problem(p)]
        self.status.problems = [*(str(p) for p in report.problems), *kept]
        self.status.stages[stage.name].check_pending = False
        self.save()
        self.events.emit(
            EventKind.CITATION_CHECK,
            stage.name,
            ok=report.ok,
            problems=self.status.problems[:20],
            problem_count=len(report.problems),
            citations_checked=report.citations_checked,
        )
        return citation_hooks.resend_instructions(report, stage) if stage.resend_on_failed_check else None

    def _record_lost_facts(self, stage: Stage) -> None:
        """The sourced sentences of the version this stage rewrote that its artifact lacks."""
        if stage.revises is None:
            return
        from pensieve.evidence.lost_facts import stage_lost_facts

        found = stage_lost_facts(self.project, stage)
        if found is None:
            return
        before = found[0].draft if found else stage.revises
        self.status.stages[stage.name].lost_facts = [fact.line() for fact in found]
        self.save()
        if found:
            self.events.note(
                f"{len(found)} sourced sentence(s) of {before} are no longer in {stage.writes} "
                f"(lost facts; `pensieve check {self.project.id}` lists them)",
                stage.name,
            )

    # -- findings that act (pensieve/run/findings.py) -----------------------------------------
    def _findings_fix(self, stage: Stage, acted: set[str]) -> tuple[Stage, str] | None:
        """After a checking stage: record what its report still finds as problems; the stage
        to send the findings to, with what to tell it, when one fix turn is due."""
        if stage.findings_to is None:
            return None
        path = self.project.file(stage.writes)
        report = path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""
        found = findings.parse_findings(report)
        self.status.problems = [
            *(p for p in self.status.problems if not findings.is_problem(p)),
            *(str(problem) for problem in findings.problems(found, stage.writes)),
        ]
        self.save()
        target = BY_NAME[stage.findings_to]
        due = (
            found.actionable
            and stage.name not in acted
            and self.settings.check.fix_findings
            and self._in_scope(target.name)
        )
        if not due:
            return None
        acted.add(stage.name)
        self.events.note(
            f"{stage.name}: {len(found.items)} finding(s) in {target.writes}; sending them to {target.name} "
            f"for one fix, then checking again"
        )
        own = self.project.scratch_dir / target.writes  # its text with source ids, if renumbered
        start_from = f"scratch/{target.writes}" if target.transform is not None and own.is_file() else None
        return target, findings.fix_instructions(found, stage.writes, target.writes, start_from)

    # -- claim-level evidence (pensieve/evidence/): one hook, these three methods ------------
    def evidence_feedback(self, stage: Stage) -> str:
        """The unsupported sentences of the artifact this stage revises, to fix."""
        settings = self.settings.evidence
        if stage.revises is None or not (settings.enabled and settings.repair):
            return ""
        from pensieve.evidence.hooks import repair_instructions

        entry = self._evidence_entry(stage.revises)
        if entry is None:
            return ""
        return (
            repair_instructions(entry, stage.revises, settings.max_listed, own=False, project_dir=self.project.dir)
            or ""
        )

    def first_pass_note(self, stage: Stage) -> str:
        """What a stage sent back did the first time: the conversation is new, its work is not."""
        first = self._evidence_entry(stage.revises) if stage.revises is not None else None
        listed = ""
        if first is not None and self.settings.evidence.enabled and self.settings.evidence.repair:
            from pensieve.evidence.hooks import confident_sentences

            count = len(confident_sentences(first))
            if count:
                listed = f" You were given {count} sentence(s) of {stage.revises} that the evidence check flagged."
        return (
            f"This is your second pass. In your first pass you wrote {stage.writes} (it is on disk; scratch/"
            f"{stage.writes} has your text with source ids).{listed} The checks of your {stage.writes} found "
            "only what is listed below: fix those sentences and keep the rest of your first pass as it is."
        )

    def _warm_up_on_first_source(self, event: Event) -> None:
        """The first source archived in this run starts the warm-up at once: loading the model
        takes about 10 s, and waiting for the next stage to start put it on the critical path
        whenever the research stage ended soon after its last fetch."""
        data = data_of(event, EventKind.FETCH) or data_of(event, EventKind.MCP_CALL)
        archived = data is not None and data.get("new_source", False)
        if self._warmed_on_archiving or not archived:
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # emitted off the event loop: the next stage's start warms up
            return
        self._warmed_on_archiving = True
        self._warm_up_evidence()

    def _warm_up_evidence(self) -> None:
        """Once sources are archived, load the embedding model and cut the sources into windows
        in a thread while the stages wait for their model: the check after a draft then only
        embeds what its sentences need. One warm-up after another; it never fails the run."""
        if not self.settings.evidence.enabled or self._checks:
            return  # a running check prepares what a warm-up would, and shares its caches
        if not any(
            self.status.stages[s.name].status != "complete" and self._in_scope(s.name) for s in STAGES if s.evidence
        ):
            return  # no check is left for this run (the running stage is not complete yet)
        from pensieve.evidence.hooks import warm_up

        previous, stop, anticipate = self._evidence_warm_up, self._warm_up_stop, self._anticipate

        async def after_previous() -> None:
            if previous is not None:
                await asyncio.wait([previous])
            await asyncio.to_thread(warm_up, self.project, stop=stop, anticipate=anticipate)

        self._evidence_warm_up = asyncio.ensure_future(after_previous())

    async def check_evidence(self, stage: Stage, *, resend: bool = True) -> str | None:
        """Align the stage's artifact with its sources (off the event loop), judge the doubtful
        pairs if asked, store evidence.json; for final.md, unsupported sentences stay on the
        project as problems, and the instructions to fix them are returned to resend it."""
        settings = self.settings.evidence
        if not settings.enabled:
            return None
        from pensieve.evidence import hooks as evidence_hooks

        self._anticipate = False
        if self._evidence_warm_up is not None:
            # What it prepared is not done twice; what it would still embed ahead, the check
            # embeds itself if its sentences need it (the next warm-ups get a fresh flag).
            self._warm_up_stop.set()
            self._warm_up_stop = threading.Event()
            await asyncio.wait([self._evidence_warm_up])
        if self._looking_elsewhere is not None:
            await asyncio.wait([self._looking_elsewhere])  # one writer of evidence.json at a time
        try:
            alignment = await asyncio.to_thread(
                evidence_hooks.align_file, self.project, stage.writes, self.settings, look_elsewhere=False
            )
        except PensieveError as exc:  # the embedding model is missing or damaged: say so, go on
            self.events.note(f"evidence check after {stage.name} skipped: {exc}")
            return None
        if alignment is None:
            return None
        judge_calls = 0
        if (
            settings.judge
            and settings.max_judge_calls
            and any(s["verdict"] != "supported" for s in alignment.sentences)
        ):
            from pensieve.evidence.judge import judge

            client = StageModelClient(
                stage=stage.name,
                model=self.options.model or self.settings.model_for(EVIDENCE_JUDGE.name) or "",
                settings=self.settings,
                events=self.events,
                record_usage=lambda reply: self._record_usage(stage.name, reply),
                check_budget=self.check_budget,
            )
            try:
                judge_calls = await judge(alignment, client, settings.max_judge_calls)
            except StageFailed as exc:
                self.events.note(f"evidence judge after {stage.name} stopped: {exc}")
            evidence_hooks.store(self.project, alignment, self.settings)
        entry = alignment.entry()
        self.events.emit(
            EventKind.EVIDENCE, stage.name, file=stage.writes, summary=entry["summary"], judge_calls=judge_calls
        )
        self._look_elsewhere(stage, partial(evidence_hooks.look_elsewhere, self.project, alignment, self.settings))
        if not stage.resend_on_failed_check:
            return None
        self.status.problems = [
            *(p for p in self.status.problems if ": unsupported_citation: " not in p),
            *evidence_hooks.problems_of(entry, stage.writes),
        ]
        self.save()
        if not (resend and settings.repair):
            return None
        return evidence_hooks.repair_instructions(
            entry, stage.writes, settings.max_listed, own=True, project_dir=self.project.dir
        )

    def _look_elsewhere(self, stage: Stage, look_elsewhere: Callable[[], int]) -> None:
        """The wrong-source look (`evidence.hooks.look_elsewhere`: a doubtful citation another
        source says much more closely is made weak) beside the next stage: no stage is sent a
        weak citation, and its embedding was a second of the first check's critical path. The
        next check and the run's end wait for it; it never fails the run."""

        async def look() -> None:
            try:
                lowered = await asyncio.to_thread(look_elsewhere)
            except Exception as exc:  # evidence.json keeps the check's verdicts
                self.events.note(f"evidence after {stage.name}: the look at the other sources failed: {exc}")
                return
            if lowered:
                self.events.note(
                    f"evidence after {stage.name}: {lowered} citation(s) another source says more closely (weak)"
                )

        self._looking_elsewhere = asyncio.ensure_future(look())

    async def _catch_up_evidence(self) -> None:
        """Evidence a crash (or a hand edit) left missing or stale for a complete stage."""
        if not self.settings.evidence.enabled:
            return
        from pensieve.evidence.hooks import stale_artifacts

        stale = set(await asyncio.to_thread(stale_artifacts, self.project))
        for stage in STAGES:
            if not (stage.evidence and self.status.stages[stage.name].status == "complete"):
                continue
            if stage.writes in stale:
                await self.check_evidence(stage, resend=False)
            elif stage.resend_on_failed_check:
                self._keep_evidence_problems(stage)  # a recovered citation check reset the list

    def _evidence_entry(self, name: str) -> ArtifactEvidence | None:
        """The stored evidence of one artifact; None when there is none (or it is unreadable)."""
        from pensieve.evidence.store import artifact_entry, readable_evidence

        return artifact_entry(self.project.dir, name, readable_evidence(self.project.dir))[0]

    def _keep_evidence_problems(self, stage: Stage) -> None:
        from pensieve.evidence.hooks import problems_of

        entry = self._evidence_entry(stage.writes)
        if entry is not None:
            kept = [p for p in self.status.problems if ": unsupported_citation: " not in p]
            self.status.problems = [*kept, *problems_of(entry, stage.writes)]
            self.save()

    def _failure_message(self, stage: Stage, exc: StageFailed) -> str:
        """The reason, and where the work the stage did is kept for the user to read."""
        staged = staged_artifact(self.project, stage)
        if not staged.is_file():
            return str(exc)
        kept = self.project.rejected_dir / stage.writes
        atomic_copy(staged, kept)  # staging is cleared when the stage runs again
        where = kept.relative_to(self.project.dir).as_posix()
        if isinstance(exc, ContractFailed):
            return exc.with_kept(where)
        return f"{str(exc).rstrip('.')}. The {stage.writes} it wrote is kept in {where}."

    def _fail(self, stage: Stage, reason: str) -> None:
        from pensieve.redact import scrub

        entry = self.status.stages[stage.name]
        entry.status, entry.finished_at, entry.error = "error", now_iso(), scrub(reason)
        self.save()
        self.events.emit(EventKind.STAGE_ERROR, stage.name, error=reason)

    def _interrupted(self, stage: Stage) -> None:
        entry = self.status.stages[stage.name]
        entry.status, entry.finished_at = "interrupted", now_iso()
        entry.error = "interrupted before it finished; it will run again"
        self.save()
        self.events.emit(EventKind.STAGE_INTERRUPTED, stage.name)

    # -- the whole run ----------------------------------------------------------------------
    async def run(self, selected: list[str]) -> RunResult:
        self.recover()
        await self._catch_up_evidence()
        # Selected before the lock was taken: a commit that recover() just finished, or a
        # run that ended in between, may have completed some of these stages since.
        still = set(select_stages(self.status, self.options))
        selected = [name for name in selected if name in still]
        for name in self.resend_after_recovery:
            if name not in selected:
                selected.append(name)
                self.events.note(
                    f"{name}: its citation check, finished after an interrupted run, failed; sending it back once"
                )
        self.status.status, self.status.error = "running", None
        self.save()
        result = RunResult(self.status)
        self._check_mcp_servers(selected)
        try:
            await self._schedule(selected, result)
            await self._all_checked()
        except BaseException:
            await self._all_checked(cancel=True)
            raise
        finally:
            await self._close_resources()
        if self._settle(result) == "complete":
            for complete_hook in COMPLETE_HOOKS:
                await complete_hook(self.project, self.settings, self.events)
        result.spent = self.spent
        return result

    async def _schedule(self, selected: list[str], result: RunResult) -> None:
        """Start each stage once its dependencies are done; a stage whose citation check
        failed is sent back once (check.repolish_on_failure) before its dependents start."""
        pending = [name for name in STAGE_NAMES if name in selected]
        running: dict[asyncio.Task[str | None], str] = {}
        resent: set[str] = set(self.resend_after_recovery)
        first_instructions = dict(self.resend_after_recovery)
        acted: set[str] = set()  # checking stages whose findings had their fix turn
        recheck: dict[str, str] = {}  # a stage fixing findings -> the checker to run after it

        def start(name: str, instructions: str = "", *, feedback: bool = True) -> None:
            running[asyncio.create_task(self.run_stage(BY_NAME[name], instructions, feedback=feedback))] = name

        def ready(name: str) -> bool:
            # Selection already holds every unfinished dependency, so waiting for the
            # selected ones is enough (with --stage, preflight checked the inputs exist).
            return all(dep not in pending and dep not in running.values() for dep in BY_NAME[name].after)

        deadline = self.settings.run.deadline_s
        try:
            async with asyncio.timeout(deadline):
                while pending or running:
                    if not result.failed:
                        for name in [n for n in pending if ready(n)]:
                            pending.remove(name)
                            extra = first_instructions.pop(name, "")
                            running[asyncio.create_task(self.run_stage(BY_NAME[name], extra))] = name
                    if not running:
                        break
                    done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
                    for task in done:
                        name, exc = running.pop(task), task.exception()
                        if isinstance(exc, StageFailed):
                            result.failed.append(name)
                        elif exc is not None:
                            raise exc
                        elif self._resend(name, task.result(), resent):
                            start(name, task.result() or "")
                        elif name in recheck:
                            start(recheck.pop(name))
                        elif (fix := self._findings_fix(BY_NAME[name], acted)) is not None:
                            recheck[fix[0].name] = name
                            start(fix[0].name, fix[1], feedback=False)
        except TimeoutError:
            await self._fail_running(running, f"run deadline of {deadline:g}s (run.deadline_s) exceeded", result)
        except BaseException:
            await self._abandon(running)
            raise

    def _resend(self, name: str, instructions: str | None, resent: set[str]) -> bool:
        """Whether a stage goes back once more, with the citation check's list to fix."""
        if not instructions or name in resent or not self.settings.check.repolish_on_failure:
            return False
        resent.add(name)
        self.events.note(f"{name}: the citation or evidence check failed; sending it back once to fix")
        return True

    async def _fail_running(self, running: dict[asyncio.Task[str | None], str], reason: str, result: RunResult) -> None:
        for task, name in running.items():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, StageFailed):
                await task
            self._fail(BY_NAME[name], reason)
            result.failed.append(name)

    async def _abandon(self, running: dict[asyncio.Task[str | None], str]) -> None:
        """Ctrl-C or a bug: cancel what runs (each marks itself interrupted), pause the project."""
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
        self.status.status = "paused"
        self.status.current_stage = None
        self.save()

    def _settle(self, result: RunResult) -> str:
        stages = self.status.stages
        if result.failed:
            self.status.status = "error"
            first = next(n for n in STAGE_NAMES if n in result.failed)
            self.status.current_stage = first
            self.status.error = f"{first}: {stages[first].error}"
        elif all(stages[n].status == "complete" for n in STAGE_NAMES):
            self.status.status, self.status.current_stage = "complete", None
        else:
            self.status.status = "paused"
            self.status.current_stage = self.status.first_unfinished()
        self.save()
        return self.status.status

    async def _close_resources(self) -> None:
        with contextlib.suppress(Exception):
            await self.resources.aclose()


def run_project(
    project: Project,
    settings: Settings,
    options: RunOptions,
    reporter: Subscriber,
    environ: Mapping[str, str] | None = None,
    *,
    selected: list[str] | None = None,
    loop: Callable[[Coroutine[object, None, RunResult]], RunResult] = asyncio.run,
) -> RunResult:
    """Preflight, lock, run: the one way a project is run (`pensieve run`, the batch worker,
    the studio's child runs). Raises UsageError before touching anything if it cannot start,
    ProjectBusy if another process runs the project.

    - selected: the stages `preflight` chose, when the caller ran it already (the batch
      worker does, to pass over a project with nothing to do without taking its lock);
    - loop: runs the pipeline's coroutine to its end (the worker's own loop, which it can
      cancel from another thread); `asyncio.run` by default.
    """
    env = dict(os.environ if environ is None else environ)
    settings = project_settings(project, settings)  # idempotent: the worker applied it already
    if selected is None:
        selected = preflight(project, settings, options, env)
    llm.start_import()  # the first request leaves as soon as litellm is importable
    with project.run_lock():
        project.refuse_links()  # again under the lock: nothing Pensieve writes may be a link
        runner = Runner(project, settings, options, reporter, env)
        try:
            return loop(runner.run(selected))
        finally:
            if runner.mcp is not None:
                runner.mcp.kill_leftovers()  # whatever the loop could not close (no orphans)


__all__ = [
    "COMMIT_MARKER",
    "STAGES",
    "RunOptions",
    "RunResult",
    "Runner",
    "preflight_warnings",
    "run_project",
    "unfence",
]
