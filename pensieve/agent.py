"""The agent loop: model <-> tools until the model answers without a tool call.

One runner for every stage: what differs between agents is data (the stage row, its
prompt and its tools). Limits are enforced here: rounds, the budget before every model
call, and the dispatcher's caps and loop detection.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from typing import Any, Protocol

from pensieve import llm, prompts
from pensieve.config import Settings
from pensieve.context import compact
from pensieve.dispatch import LoopDetected, ToolBox
from pensieve.redact import scrub
from pensieve.tools.registry import Tool, ToolContext


class StageFailed(Exception):
    """The stage cannot finish; the message is stored in status.json as its error."""


class Reporter(Protocol):
    def stage_started(self, stage: str, model: str) -> None: ...
    def stage_finished(self, stage: str, status: str, detail: str) -> None: ...
    def tool_called(self, stage: str, name: str, summary: str, is_error: bool) -> None: ...
    def model_called(self, stage: str, prompt_tokens: int, completion_tokens: int) -> None: ...
    def note(self, message: str) -> None: ...


@dataclass
class AgentRun:
    """Everything one stage's agent needs; built by the pipeline."""

    ctx: ToolContext
    tools: list[Tool]
    missing_tools: dict[str, str]
    model: str
    reporter: Reporter
    record_usage: Callable[[llm.LLMReply], None]
    check_budget: Callable[[], None]
    extra_instructions: str = ""


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
    settings: Settings = run.ctx.settings
    stage = run.ctx.stage.name
    box = ToolBox(run.ctx, run.tools, settings.limits)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": system_prompt(run)},
        {"role": "user", "content": task_message(run)},
    ]
    policy = llm.RetryPolicy(
        retries=settings.llm.retries, base_s=settings.llm.retry_base_s, max_wait_s=settings.llm.retry_max_wait_s
    )

    def on_retry(error: llm.LLMError, wait: float) -> None:
        run.ctx.events.emit("retry", stage, error=error.message, error_kind=error.kind, wait_s=round(wait, 2))
        run.reporter.note(f"{stage}: model call failed ({error.message[:160]}); retrying in {wait:.1f}s")

    for _round in range(settings.max_rounds_for(stage)):
        run.check_budget()
        elided = compact(messages, settings.llm.max_context_chars)
        if elided:
            run.ctx.events.emit("context_compacted", stage, elided_tool_results=elided)
        started = time.monotonic()
        try:
            reply = await llm.complete(
                model=run.model,
                messages=messages,
                tools=box.schemas() or None,
                api_base=settings.llm.api_base,
                temperature=settings.temperature_for(stage),
                timeout_s=settings.llm.timeout_s,
                max_tokens=settings.llm.max_output_tokens,
                policy=policy,
                on_retry=on_retry,
            )
        except llm.LLMError as error:
            run.ctx.events.emit(
                "model",
                stage,
                model=run.model,
                error=error.message,
                error_kind=error.kind,
                attempts=error.attempts,
                duration_s=round(time.monotonic() - started, 3),
            )
            raise StageFailed(_model_failure(error, run.model)) from None
        run.record_usage(reply)
        run.ctx.events.emit(
            "model",
            stage,
            model=run.model,
            duration_s=round(time.monotonic() - started, 3),
            prompt_tokens=reply.prompt_tokens,
            completion_tokens=reply.completion_tokens,
            cost_usd=reply.cost_usd,
            tool_calls=[call.name for call in reply.tool_calls],
        )
        run.reporter.model_called(stage, reply.prompt_tokens, reply.completion_tokens)
        if not reply.tool_calls:
            return reply.text
        messages.append(
            {
                "role": "assistant",
                "content": reply.text or None,
                "tool_calls": [
                    {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                    for c in reply.tool_calls
                ],
            }
        )
        try:
            outcomes = await asyncio.gather(*(box.call(c.name, c.arguments) for c in reply.tool_calls))
        except LoopDetected as exc:
            raise StageFailed(str(exc)) from None
        for call, outcome in zip(reply.tool_calls, outcomes, strict=True):
            summary = _summary(call.arguments)
            run.ctx.events.emit(
                "tool",
                stage,
                tool=call.name,
                arguments=summary,
                duration_s=round(outcome.duration_s, 3),
                error=outcome.text[:300] if outcome.is_error else None,
                result_chars=len(outcome.text),
            )
            run.reporter.tool_called(stage, call.name, scrub(summary), outcome.is_error)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": outcome.text})
    raise StageFailed(
        f"{stage} reached llm.max_rounds ({settings.max_rounds_for(stage)}) without finishing; "
        "raise llm.max_rounds or agents.<stage>.max_rounds"
    )


def _model_failure(error: llm.LLMError, model: str) -> str:
    if error.kind == "auth":
        hint = _key_hint(model)
        return f"the model provider refused the API key for {model} ({error.status or 'auth error'}); check {hint}"
    if error.kind == "not_found":
        return f"model {model!r} was not found by its provider; check llm.model / --model ({error.message})"
    if error.attempts > 1:
        return f"model call failed after {error.attempts} attempts: {error.message}"
    return f"model call failed: {error.message}"


def _key_hint(model: str) -> str:
    provider = model.split("/", 1)[0].lower() if "/" in model else "openai"
    known = {
        "openai": "OPENAI_API_KEY",
        "anthropic": "ANTHROPIC_API_KEY",
        "gemini": "GEMINI_API_KEY",
        "mistral": "MISTRAL_API_KEY",
        "groq": "GROQ_API_KEY",
        "openrouter": "OPENROUTER_API_KEY",
        "deepseek": "DEEPSEEK_API_KEY",
        "together_ai": "TOGETHERAI_API_KEY",
        "cohere": "COHERE_API_KEY",
        "azure": "AZURE_API_KEY",
    }
    return known.get(provider, f"the API key environment variable for {provider}")
