"""The scheduler: which stages run, in what order, concurrently where they can, and how a
run resumes after anything (a failure, Ctrl-C, SIGKILL, a deadline).

A stage's artifact is committed in two steps that survive a crash between any two
instructions: the agent writes into `.staging/<stage>/`; on success a COMMIT marker is
written there, the previous artifact is copied to `history/`, the new one renamed into
place, and status.json updated. A run that finds a COMMIT marker finishes that commit
instead of running the stage again, so a finished stage is never paid for twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pensieve import llm
from pensieve.agent import AgentRun, Reporter, StageFailed, run_agent
from pensieve.citations import hooks as citation_hooks
from pensieve.config import Settings
from pensieve.errors import UsageError
from pensieve.events import EventLog
from pensieve.stages import BY_NAME, STAGE_NAMES, STAGES, Stage, downstream_of
from pensieve.staleness import input_hashes, sha256_of
from pensieve.status import Status, Usage, load_status, now_iso, save_status
from pensieve.tools import offered_tools
from pensieve.tools.registry import ToolContext
from pensieve.topics.capture import capture_on_complete
from pensieve.workspace import (
    Project,
    atomic_copy,
    atomic_move,
    atomic_write_text,
    remove_stale_temporaries,
)

COMMIT_MARKER = "COMMIT.json"

# Hooks run once when a project completes (e.g. capturing it into the topic library).
CompleteHook = Callable[[Project, Settings], Awaitable[None]]
COMPLETE_HOOKS: list[CompleteHook] = [capture_on_complete]


@dataclass(frozen=True)
class RunOptions:
    stage: str | None = None
    until: str | None = None
    force: bool = False
    model: str | None = None
    from_stage: str | None = None


@dataclass
class RunResult:
    status: Status
    failed: list[str] = field(default_factory=list)
    # What this run alone spent (status.usage counts every run of the project).
    spent: Usage = field(default_factory=Usage)


_FENCED = re.compile(r"^```(?:markdown|md)?[ \t]*\n(.*)\n```$", re.S | re.I)


def unfence(text: str) -> str:
    """A final message used as the artifact: models often wrap a whole document in a
    ```markdown fence, which would end up in the file."""
    text = text.strip()
    match = _FENCED.match(text)
    return match.group(1).strip() if match and "\n```" not in match.group(1) else text


def select_stages(status: Status, options: RunOptions) -> list[str]:
    if options.stage:
        return [options.stage]
    names = list(STAGE_NAMES)
    if options.until:
        names = names[: names.index(options.until) + 1]
    if options.force:
        return names
    again = set(downstream_of(options.from_stage)) if options.from_stage else set()
    return [name for name in names if status.stages[name].status != "complete" or name in again]


def _missing_inputs(project: Project, stage: Stage) -> list[str]:
    missing = [name for name in stage.reads if not project.file(name).is_file()]
    if missing and stage.optional_reads and any(project.file(n).is_file() for n in stage.optional_reads):
        return []
    return missing


def preflight(project: Project, settings: Settings, options: RunOptions, environ: Mapping[str, str]) -> list[str]:
    """Everything that can be refused before the run changes anything (exit 2)."""
    status = load_status(project.status_path)
    selected = select_stages(status, options)
    if options.stage:
        stage = BY_NAME[options.stage]
        blocked = [dep for dep in stage.after if status.stages[dep].status != "complete"]
        missing = _missing_inputs(project, stage)
        if blocked and missing:
            raise UsageError(
                f"stage {stage.name} needs {', '.join(missing)}; "
                f"run the earlier stages first (pensieve run {project.id})"
            )
    models = {options.model or settings.model_for(name) for name in selected}
    if None in models:
        raise UsageError(
            "no model configured: set llm.model in configs/pensieve.yaml, or PENSIEVE_MODEL, or pass --model "
            "(e.g. openai/gpt-4o-mini or ollama/llama3.1)"
        )
    for model in sorted(m for m in models if m):
        problem = llm.key_problem(model, settings.llm.api_base)
        if problem:
            raise UsageError(problem)
    return selected


class Runner:
    def __init__(
        self,
        project: Project,
        settings: Settings,
        options: RunOptions,
        reporter: Reporter,
        environ: Mapping[str, str],
    ) -> None:
        self.project = project
        self.settings = settings
        self.options = options
        self.reporter = reporter
        self.environ = environ
        self.events = EventLog(project.events_path)
        self.status = load_status(project.status_path)
        self.run_state: dict[str, Any] = {}
        self.spent = Usage()  # this run alone

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
        for name in STAGE_NAMES:
            marker = self.project.staging_dir / name / COMMIT_MARKER
            if marker.is_file():
                self._finish_commit(BY_NAME[name], json.loads(marker.read_text(encoding="utf-8")))
                if name in citation_hooks.CHECKED_AFTER:
                    self.check_citations(BY_NAME[name])  # the crash may have come before it
            elif self.status.stages[name].status == "running":
                self.status.stages[name].status = "interrupted"
                self.status.stages[name].error = "the process running this stage stopped before it finished"
        if self.status.status == "running":
            self.status.status = "paused"
        self.save()

    def _finish_commit(self, stage: Stage, marker: dict[str, Any]) -> None:
        staged = self.project.staging_dir / stage.name / stage.writes
        target = self.project.file(stage.writes)
        if staged.is_file():
            if target.is_file() and sha256_of(target) != marker["sha256"]:
                self._keep_history(stage, target)
            atomic_move(staged, target)
        entry = self.status.stages[stage.name]
        entry.status = "complete"
        entry.error = None
        entry.finished_at = marker["finished_at"]
        entry.artifact = stage.writes
        entry.artifact_sha256 = marker["sha256"]
        self.save()
        shutil.rmtree(self.project.staging_dir / stage.name, ignore_errors=True)

    def _keep_history(self, stage: Stage, target: Path) -> None:
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
        kept = self.project.history_dir / f"{target.stem}.{stamp}{target.suffix}"
        # Atomic too: a crash mid-copy must not leave a truncated "kept" version behind.
        atomic_copy(target, kept)

    # -- one stage ------------------------------------------------------------------------
    def _record_usage(self, stage: str) -> Callable[[llm.LLMReply], None]:
        def record(reply: llm.LLMReply) -> None:
            for usage in (self.status.stages[stage].usage, self.status.usage, self.spent):
                usage.add(reply.prompt_tokens, reply.completion_tokens, reply.cost_usd)
            self.save()

        return record

    async def run_stage(self, stage: Stage, extra_instructions: str = "") -> None:
        entry = self.status.stages[stage.name]
        model = self.options.model or self.settings.model_for(stage.name)
        assert model is not None  # preflight refused a run without one
        staging = self.project.staging_dir / stage.name
        shutil.rmtree(staging, ignore_errors=True)  # leftovers of an attempt that died
        entry.status, entry.started_at, entry.finished_at, entry.error = "running", now_iso(), None, None
        entry.attempts += 1
        entry.model = model
        entry.inputs = input_hashes(self.project, stage)
        self.status.current_stage = stage.name
        self.save()
        self.reporter.stage_started(stage.name, model)
        self.events.emit("stage_start", stage.name, model=model, attempt=entry.attempts)
        record = self._record_usage(stage.name)

        async def summarize(instructions: str, text: str) -> str:
            self.check_budget()
            reply = await llm.complete(
                model=model,
                messages=[{"role": "system", "content": instructions}, {"role": "user", "content": text}],
                api_base=self.settings.llm.api_base,
                temperature=0.2,
                timeout_s=self.settings.llm.timeout_s,
                policy=llm.RetryPolicy(
                    retries=self.settings.llm.retries,
                    base_s=self.settings.llm.retry_base_s,
                    max_wait_s=self.settings.llm.retry_max_wait_s,
                ),
            )
            record(reply)
            self.events.emit(
                "model",
                stage.name,
                model=model,
                purpose="summary",
                prompt_tokens=reply.prompt_tokens,
                completion_tokens=reply.completion_tokens,
            )
            return reply.text

        ctx = ToolContext(
            project=self.project,
            stage=stage,
            settings=self.settings,
            events=self.events,
            environ=self.environ,
            force=self.options.force,
            summarize=summarize,
            run_state=self.run_state,
        )
        tools, missing = offered_tools(stage.tools, self.settings, self.environ)
        for name, why in missing.items():
            note_key = f"noted:{name}"
            if note_key not in self.run_state:
                self.run_state[note_key] = True
                self.reporter.note(f"{name} is not available: {why}")
        run = AgentRun(
            ctx=ctx,
            tools=tools,
            missing_tools=missing,
            model=model,
            reporter=self.reporter,
            record_usage=record,
            check_budget=self.check_budget,
            extra_instructions=extra_instructions,
        )
        try:
            final_text = await run_agent(run)
            staged = staging / stage.writes
            if not (staged.is_file() and staged.read_text(encoding="utf-8", errors="replace").strip()):
                if not final_text.strip():
                    raise StageFailed(
                        f"{stage.name} finished without writing {stage.writes} and without a final message"
                    )
                atomic_write_text(staged, unfence(final_text) + "\n")
            # Reference lists are generated by code from the archive, never by the model.
            text = staged.read_text(encoding="utf-8", errors="replace")
            rewritten = citation_hooks.transform_artifact(self.project, stage.name, text)
            if rewritten != text:
                atomic_write_text(staged, rewritten)
            marker = {"artifact": stage.writes, "sha256": sha256_of(staged), "finished_at": now_iso()}
            atomic_write_text(staging / COMMIT_MARKER, json.dumps(marker))
            self._finish_commit(stage, marker)
        except StageFailed as exc:
            self._fail(stage, str(exc))
            raise
        except asyncio.CancelledError:
            entry.status, entry.finished_at = "interrupted", now_iso()
            entry.error = "interrupted before it finished; it will run again"
            self.save()
            self.events.emit("stage_interrupted", stage.name)
            self.reporter.stage_finished(stage.name, "interrupted", "")
            raise
        except Exception as exc:  # a bug in our code: record it, then let it propagate
            self._fail(stage, f"internal error: {type(exc).__name__}: {exc}")
            raise
        self.events.emit("stage_end", stage.name, usage=entry.usage.model_dump())
        self.reporter.stage_finished(stage.name, "complete", f"{entry.usage.total_tokens:,} tokens")
        if stage.name in citation_hooks.CHECKED_AFTER:
            retry_with = self.check_citations(stage)
            if retry_with and not extra_instructions and self.settings.check.repolish_on_failure:
                self.reporter.note(f"{stage.name}: the citation check failed; sending it back once to fix")
                await self.run_stage(stage, retry_with)

    def check_citations(self, stage: Stage) -> str | None:
        """Record the check's figures and problems; for the Polisher, say what to fix."""
        report = citation_hooks.check_project(self.project, self.settings, citation_hooks.CHECKED_AFTER[stage.name])
        self.status.check = report.to_json()
        self.status.problems = [str(p) for p in report.problems]
        self.save()
        self.events.emit(
            "citation_check",
            stage.name,
            ok=report.ok,
            problems=self.status.problems[:20],
            citations_checked=report.citations_checked,
        )
        if not report.ok:
            self.reporter.note(f"citation check after {stage.name}: {len(report.problems)} problem(s)")
        return citation_hooks.repolish_instructions(report) if stage.name == "polisher" else None

    def _fail(self, stage: Stage, reason: str) -> None:
        from pensieve.redact import scrub

        entry = self.status.stages[stage.name]
        entry.status, entry.finished_at, entry.error = "error", now_iso(), scrub(reason)
        self.save()
        self.events.emit("stage_error", stage.name, error=reason)
        self.reporter.stage_finished(stage.name, "error", scrub(reason))

    # -- the whole run ----------------------------------------------------------------------
    async def run(self, selected: list[str]) -> RunResult:
        self.recover()
        # Selected before the lock was taken: a commit that recover() just finished, or a
        # run that ended in between, may have completed some of these stages since.
        still = set(select_stages(self.status, self.options))
        selected = [name for name in selected if name in still]
        self.status.status, self.status.error = "running", None
        self.save()
        result = RunResult(self.status)
        pending = [name for name in STAGE_NAMES if name in selected]
        running: dict[asyncio.Task[None], str] = {}

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
                            running[asyncio.create_task(self.run_stage(BY_NAME[name]))] = name
                    if not running:
                        break
                    done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
                    for task in done:
                        name = running.pop(task)
                        exc = task.exception()
                        if isinstance(exc, StageFailed):
                            result.failed.append(name)
                        elif exc is not None:
                            raise exc
        except TimeoutError:
            for task, name in running.items():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, StageFailed):
                    await task
                self._fail(BY_NAME[name], f"run deadline of {deadline:g}s (run.deadline_s) exceeded")
                result.failed.append(name)
        except BaseException:
            for task in running:
                task.cancel()
            await asyncio.gather(*running, return_exceptions=True)
            self.status.status = "paused"
            self.status.current_stage = None
            self.save()
            raise
        finally:
            await self._close_run_state()

        if self._settle(result) == "complete":
            for complete_hook in COMPLETE_HOOKS:
                await complete_hook(self.project, self.settings)
        result.spent = self.spent
        return result

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

    async def _close_run_state(self) -> None:
        for value in list(self.run_state.values()):
            close = getattr(value, "aclose", None)
            if close is not None:
                with contextlib.suppress(Exception):
                    await close()


def run_project(
    project: Project,
    settings: Settings,
    options: RunOptions,
    reporter: Reporter,
    environ: Mapping[str, str] | None = None,
) -> RunResult:
    """Preflight, lock, run. Raises UsageError before touching anything if it cannot start."""
    env = dict(os.environ if environ is None else environ)
    selected = preflight(project, settings, options, env)
    with project.run_lock():
        runner = Runner(project, settings, options, reporter, env)
        return asyncio.run(runner.run(selected))


__all__ = ["STAGES", "RunOptions", "RunResult", "Runner", "run_project"]
