"""The agent loop: model <-> tools until the model answers without a tool call.

One runner for every stage: what differs between agents is data (the stage row, its
prompt and its tools). Limits are enforced here: rounds, and the dispatcher's caps and
loop detection; the budget is checked by the model client before every call.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pensieve import prompts
from pensieve.article.summary import document_title
from pensieve.errors import StageFailed
from pensieve.model.client import ModelClient
from pensieve.model.llm import LLMReply, ToolCall
from pensieve.model.textcalls import parse_text_tool_calls
from pensieve.project.events import EventKind
from pensieve.project.source_archive import SourceArchive
from pensieve.project.status import ContextStats
from pensieve.run.budget import describe as budget_text
from pensieve.run.budget import shared_cap
from pensieve.run.context import compact
from pensieve.run.dispatch import LoopDetected, ToolBox
from pensieve.run.finishing import Finisher
from pensieve.stages import STAGES, TITLE_ARTIFACTS, Artifact, writer_of
from pensieve.tool_matrix import cap_for
from pensieve.tools import TOOL_NAMES, offered_tools
from pensieve.tools.files import MAX_WRITE_CHARS
from pensieve.tools.registry import Tool, ToolContext
from pensieve.web.catalog import CATALOG

if TYPE_CHECKING:
    from pensieve.config import Settings

__all__ = ["AgentRun", "StageFailed", "run_agent", "system_prompt", "task_message"]


@dataclass
class AgentRun:
    """Everything one stage's agent needs; built by the pipeline."""

    ctx: ToolContext
    tools: list[Tool]
    missing_tools: dict[str, str]
    client: ModelClient
    # The output-file rule and the stage's contract; its `asked` lists the turns that asked
    # for a better artifact.
    finisher: Finisher
    extra_instructions: str = ""
    # Filled in by run_agent, recorded in status.json: calls the dispatcher ran, by tool;
    # tool calls found in the text of replies.
    tool_calls: Counter[str] = field(default_factory=Counter)
    text_tool_calls: int = 0
    # What the conversation cost in context (status.json's `context` of the stage).
    context: ContextStats = field(default_factory=ContextStats)


def _filename(arguments: str) -> str:
    try:
        data = json.loads(arguments)
    except (json.JSONDecodeError, TypeError, RecursionError):
        return ""
    return str(data.get("filename", "")) if isinstance(data, dict) else ""


def _summary(arguments: str, limit: int = 120) -> str:
    try:
        data = json.loads(arguments)
    except (json.JSONDecodeError, TypeError, RecursionError):
        return arguments[:limit]
    if isinstance(data, dict):
        parts = []
        for key, value in data.items():
            try:
                text = value if isinstance(value, str) else json.dumps(value)
            except (RecursionError, ValueError):
                text = "<nested too deeply>"
            text = " ".join(str(text).split())
            parts.append(f"{key}={text[:60]!r}" if key != "content" else f"content=<{len(str(value))} chars>")
        return ", ".join(parts)[:limit]
    return str(data)[:limit]


def has_sources(run: AgentRun) -> bool:
    """Whether this stage can cite sources: pages are archived, or it comes before the
    research is done and web search is configured (the Researcher will fetch them).

    The workspace library counts as sources when its tools are offered and it has documents.
    Without sources no stage is asked to cite: the prompts switch to their unsourced
    instructions (`{{#if sourced}}`), so a model never invents ids for pages nobody fetched.
    """
    ctx = run.ctx
    if SourceArchive(ctx.project.dir).entries():
        return True
    if any(t.origin.startswith("mcp:") for t in run.tools):
        return True  # what an MCP tool returns is archived as a source
    if Artifact.RESEARCH_NOTES in ctx.stage.reads:
        return False  # the research is done and fetched nothing
    search, _missing = offered_tools(("web_search",), ctx.settings, ctx.environ)
    return bool(search) or _library_offered(run)


def _library_offered(run: AgentRun) -> bool:
    """search_library is offered and the workspace's library has documents to cite (reading
    one archives it as a source, so a library-only run cites like a web one)."""
    if not any(t.name == "search_library" for t in run.tools):
        return False
    from pensieve.library.store import Library

    return bool(Library(run.ctx.project.workspace).documents())


def academic_configured(settings: Settings) -> bool:
    return any(CATALOG[name].kind == "academic" for name in settings.search.configured())


def tool_cap(found: Tool, settings: Settings) -> int:
    """A tool's per-stage call cap (pensieve.tool_matrix.cap_for)."""
    return cap_for(found.name, found.canonical or found.name, found.default_limit, settings)


def _write_by_round(max_rounds: int) -> int:
    """The round by which a first version of the artifact should exist (a quarter in reserve)."""
    return max(1, max_rounds - max(2, max_rounds // 4))


def research_budget(settings: Settings, environ: Mapping[str, str]) -> str:
    """What the Researcher can read, for the stages that choose the scope; "" without web search."""
    offered, _missing = offered_tools(("web_search", "fetch_url"), settings, environ)
    tools = {t.name: t for t in offered}
    if "web_search" not in tools or "fetch_url" not in tools:
        return ""
    fetches, searches = (tool_cap(tools[name], settings) for name in ("fetch_url", "web_search"))
    rounds = settings.max_rounds_for(writer_of(Artifact.RESEARCH_NOTES).name)
    return (
        f"The research is bounded: the Researcher can fetch at most {fetches} pages and run {searches} "
        f"searches, in {rounds} rounds. Scope the article so that about {fetches} sources can carry it."
    )


def system_prompt(run: AgentRun) -> str:
    settings = run.ctx.settings
    stage = run.ctx.stage
    reads = list(stage.reads) + [f"{name} (only if the first is missing)" for name in stage.optional_reads]
    offered = ", ".join(t.name for t in run.tools)
    missing = "".join(f"\n- {name} is not available in this run: {why}" for name, why in run.missing_tools.items())
    names = {t.name for t in run.tools}
    max_rounds = settings.max_rounds_for(stage.name)
    own = {t.name: tool_cap(t, settings) for t in run.tools}
    caps = ", ".join(f"{name} {cap}" for name, cap in own.items()) + budget_text(shared_cap(own))
    budget = research_budget(settings, run.ctx.environ) if stage.scopes else ""
    variables: dict[str, str | bool] = {
        "stage": stage.name,
        "project": run.ctx.project.id,
        "title": stage.title,
        "reads": ", ".join(reads),
        "writes": stage.writes,
        "tools": offered or "none",
        "unavailable": bool(missing),
        "unavailable_tools": missing,
        "target_words": str(settings.article.target_words),
        "audience": settings.article.audience,
        "style": settings.article.style,
        "language": settings.article.language,
        "english": settings.article.language.strip().lower() in {"english", "en"},
        "today": date.today().isoformat(),
        "max_rounds": str(max_rounds),
        "write_by_round": str(_write_by_round(max_rounds)),
        "tool_caps": caps or "none",
        "cites": stage.cites,
        "sourced": stage.cites and has_sources(run),
        "web_search": "web_search" in names,
        "academic_search": "web_search" in names and academic_configured(settings),
        "topic_memory": "search_topics" in names,
        "library": _library_offered(run),
        "research_budget": budget,
        "has_research_budget": bool(budget),
    }
    common = prompts.render_file("_common.md", variables)
    body = prompts.render_file(stage.prompt, variables)
    return f"{body.strip()}\n\n{common.strip()}\n"


def _title_of(path: Path) -> str:
    try:
        return document_title(path.read_text(encoding="utf-8", errors="replace")) if path.is_file() else ""
    except OSError:
        return ""


def brief_title(run: AgentRun) -> str:
    """The article's title as far as the project knows it: the `# Title` of the latest
    artifact that sets one (topic brief, outline, drafts, final; stages.TITLE_ARTIFACTS)
    written before this stage, else the first heading or first line of the user's brief.md.
    (An outliner that chose a better title than the brief's is followed by every later stage.)"""
    project = run.ctx.project
    position = next(i for i, row in enumerate(STAGES) if row.name == run.ctx.stage.name)
    earlier = {row.writes for row in STAGES[:position]}
    for artifact in reversed(TITLE_ARTIFACTS):
        title = _title_of(project.file(artifact)) if artifact in earlier else ""
        if title:
            return title
    return document_title(project.read_brief(), first_line=True)


def task_message(run: AgentRun) -> str:
    stage = run.ctx.stage
    title = brief_title(run)
    lines = [
        f"Project: {run.ctx.project.id}. Your stage: {stage.name} ({stage.title}).",
        *([f"Title: {title}"] if title else []),
        f"Read: {', '.join(stage.reads)}.",
        f"When you are done, write {stage.writes} with write_project_file, then reply with a one-line summary.",
    ]
    if run.extra_instructions:
        lines.append(run.extra_instructions)
    return "\n".join(lines)


async def run_agent(run: AgentRun) -> str:
    """Drive the conversation until the stage's artifact is accepted (see
    pensieve.run.finishing); returns the model's final text (may be empty)."""
    settings = run.ctx.settings
    stage = run.ctx.stage.name
    caps = {t.name: tool_cap(t, settings) for t in run.tools}
    box = ToolBox(run.ctx, run.tools, caps, run.missing_tools, shared_cap(caps))
    finisher = run.finisher
    system, task = system_prompt(run), task_message(run)
    finisher.prompts = (system, task)
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}, {"role": "user", "content": task}]
    rounds = settings.max_rounds_for(stage)
    try:
        for round_no in range(rounds):
            if round_no == rounds - 2 and round_no > 0 and not finisher.staged.is_file():
                messages.append({"role": "user", "content": _last_rounds_warning(run)})
            reply = await _model_turn(run, box, messages)
            calls = reply.tool_calls or _calls_in_text(run, box, reply)
            if calls:
                messages.append(_assistant_message(reply.text, calls))
                messages.extend(await _run_tools(run, box, calls))
                continue
            text = _capped_final(run, reply.text)
            follow_up = finisher.review(text, cut_off=reply.finish_reason == "length")
            if follow_up is None:
                return text
            run.ctx.events.emit(EventKind.REPAIR, stage, reason=finisher.asked[-1], message=follow_up)
            messages.append({"role": "assistant", "content": text or ""})
            messages.append({"role": "user", "content": follow_up})
        reason = (
            f"{stage} reached llm.max_rounds ({rounds}) without finishing; "
            "raise llm.max_rounds or agents.<stage>.max_rounds"
        )
    except LoopDetected as exc:
        reason = str(exc)
    finally:
        run.tool_calls.update(box.calls)
        run.context.rereads = box.rereads
    run.ctx.events.emit(EventKind.NOTE, stage, message=finisher.accept_staged(reason))
    return ""


async def _model_turn(run: AgentRun, box: ToolBox, messages: list[dict[str, Any]]) -> LLMReply:
    row = run.ctx.stage
    inputs = {*row.reads, *row.optional_reads, row.writes}
    elided = compact(messages, run.client.context_chars, forget=box.forget, inputs=inputs)
    if elided:
        run.ctx.events.emit(EventKind.CONTEXT_COMPACTED, row.name, elided_tool_results=elided)
    run.context.requests += 1
    run.context.elided += elided
    run.context.chars_sent += sum(
        len(str(m.get("content") or "")) + len(str(m.get("tool_calls") or "")) for m in messages
    )
    return await run.client.complete(messages, tools=box.schemas() or None)


def _calls_in_text(run: AgentRun, box: ToolBox, reply: LLMReply) -> list[ToolCall]:
    """Tool calls a model wrote as text (JSON, fenced or in <tool_call> tags) are run like
    real ones; one naming a tool this agent lacks is refused by the dispatcher as usual."""
    if reply.finish_reason == "length" or not reply.text.strip():
        return []  # a cut-off call is not run half-written
    calls, _prose = parse_text_tool_calls(reply.text, box.tools, TOOL_NAMES, start=run.text_tool_calls + 1)
    if calls:
        run.text_tool_calls += len(calls)
        run.ctx.events.emit(EventKind.TEXT_TOOL_CALLS, run.ctx.stage.name, tools=[c.name for c in calls])
    return calls


def _capped_final(run: AgentRun, text: str) -> str:
    """A final message is cut at what write_project_file accepts (it may become the
    artifact); the cut is said in the run's events."""
    if len(text) <= MAX_WRITE_CHARS:
        return text
    run.ctx.events.emit(
        EventKind.NOTE,
        run.ctx.stage.name,
        message=f"the model's final message of {len(text):,} characters was cut to {MAX_WRITE_CHARS:,}",
    )
    return text[:MAX_WRITE_CHARS]


def _last_rounds_warning(run: AgentRun) -> str:
    writes = run.ctx.stage.writes
    return (
        f"Only two model turns are left before this stage's round limit. Write `{writes}` now with "
        "write_project_file, with what you have."
    )


def _assistant_message(text: str, calls: list[ToolCall]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": text or None,
        "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}} for c in calls
        ],
    }


async def _run_tools(run: AgentRun, box: ToolBox, calls: list[ToolCall]) -> list[dict[str, Any]]:
    """Run one turn's tool calls concurrently; returns the tool messages, in call order."""
    stage = run.ctx.stage.name
    outcomes = await asyncio.gather(*(box.call(c.name, c.arguments) for c in calls))
    results = []
    for call, outcome in zip(calls, outcomes, strict=True):
        run.ctx.events.emit(
            EventKind.TOOL,
            stage,
            tool=call.name,
            arguments=_summary(call.arguments),
            duration_s=round(outcome.duration_s, 3),
            error=outcome.text[:300] if outcome.is_error else None,
            result_chars=len(outcome.text),
        )
        results.append({"role": "tool", "tool_call_id": call.id, "content": outcome.text})
        if call.name == "read_project_file" and not outcome.is_error:
            run.finisher.files_read.add(_filename(call.arguments))
    return results
