"""The agent loop: model <-> tools until the model answers without a tool call.

One runner for every stage: what differs between agents is data (the stage row, its
prompt and its tools). Limits are enforced here: rounds, and the dispatcher's caps and
loop detection; the budget is checked by the model client before every call.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from pensieve import prompts
from pensieve.context import compact
from pensieve.dispatch import LoopDetected, ToolBox
from pensieve.errors import StageFailed
from pensieve.events import EventKind
from pensieve.llm import LLMReply, ToolCall
from pensieve.model_client import ModelClient
from pensieve.tools.registry import Tool, ToolContext

__all__ = ["AgentRun", "StageFailed", "run_agent", "system_prompt", "task_message"]


@dataclass
class AgentRun:
    """Everything one stage's agent needs; built by the pipeline."""

    ctx: ToolContext
    tools: list[Tool]
    missing_tools: dict[str, str]
    client: ModelClient
    extra_instructions: str = ""
    # Calls the dispatcher ran, by tool: filled in by run_agent, recorded in status.json.
    tool_calls: Counter[str] = field(default_factory=Counter)


def _summary(arguments: str, limit: int = 120) -> str:
    try:
        data = json.loads(arguments)
    except (json.JSONDecodeError, TypeError):
        return arguments[:limit]
    if isinstance(data, dict):
        parts = []
        for key, value in data.items():
            text = value if isinstance(value, str) else json.dumps(value)
            text = " ".join(str(text).split())
            parts.append(f"{key}={text[:60]!r}" if key != "content" else f"content=<{len(str(value))} chars>")
        return ", ".join(parts)[:limit]
    return str(data)[:limit]


def system_prompt(run: AgentRun) -> str:
    settings = run.ctx.settings
    stage = run.ctx.stage
    reads = list(stage.reads) + [f"{name} (only if the first is missing)" for name in stage.optional_reads]
    offered = ", ".join(t.name for t in run.tools)
    missing = "".join(f"\n- {name} is not available in this run: {why}" for name, why in run.missing_tools.items())
    variables = {
        "stage": stage.name,
        "title": stage.title,
        "reads": ", ".join(reads),
        "writes": stage.writes,
        "tools": offered,
        "unavailable_tools": missing or "\n- none",
        "target_words": str(settings.article.target_words),
        "audience": settings.article.audience,
        "style": settings.article.style,
        "today": date.today().isoformat(),
    }
    common = prompts.render_file("_common.md", variables)
    body = prompts.render_file(stage.prompt, variables)
    return f"{body.strip()}\n\n{common.strip()}\n"


def task_message(run: AgentRun) -> str:
    stage = run.ctx.stage
    lines = [
        f"Project: {run.ctx.project.id}. Your stage: {stage.name} ({stage.title}).",
        f"Read: {', '.join(stage.reads)}.",
        f"When you are done, write {stage.writes} with write_project_file, then reply with a one-line summary.",
    ]
    if run.extra_instructions:
        lines.append(run.extra_instructions)
    return "\n".join(lines)


async def run_agent(run: AgentRun) -> str:
    """Drive the conversation; returns the model's final text (may be empty)."""
    settings = run.ctx.settings
    stage = run.ctx.stage.name
    box = ToolBox(run.ctx, run.tools, settings.limits)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": system_prompt(run)},
        {"role": "user", "content": task_message(run)},
    ]
    try:
        for _round in range(settings.max_rounds_for(stage)):
            elided = compact(messages, settings.llm.max_context_chars)
            if elided:
                run.ctx.events.emit(EventKind.CONTEXT_COMPACTED, stage, elided_tool_results=elided)
            reply = await run.client.complete(messages, tools=box.schemas() or None)
            if not reply.tool_calls:
                return reply.text
            messages.append(_assistant_message(reply))
            messages.extend(await _run_tools(run, box, reply.tool_calls))
    finally:
        run.tool_calls.update(box.calls)
    raise StageFailed(
        f"{stage} reached llm.max_rounds ({settings.max_rounds_for(stage)}) without finishing; "
        "raise llm.max_rounds or agents.<stage>.max_rounds"
    )


def _assistant_message(reply: LLMReply) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": reply.text or None,
        "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in reply.tool_calls
        ],
    }


async def _run_tools(run: AgentRun, box: ToolBox, calls: list[ToolCall]) -> list[dict[str, Any]]:
    """Run one turn's tool calls concurrently; returns the tool messages, in call order."""
    stage = run.ctx.stage.name
    try:
        outcomes = await asyncio.gather(*(box.call(c.name, c.arguments) for c in calls))
    except LoopDetected as exc:
        raise StageFailed(str(exc)) from None
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
    return results
