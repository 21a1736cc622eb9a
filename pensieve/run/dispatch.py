"""The dispatcher: the tool matrix, argument validation, per-stage caps and loop detection.

An agent is offered only its column's available tools, and visibility is checked again at
dispatch because models invent tool names. Nothing is ever run on guessed arguments: a
call whose arguments are not a JSON object matching the schema is answered with an error
that includes the schema.
"""

from __future__ import annotations

import json
import time
import zlib
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from pensieve.errors import StageFailed, format_validation_error
from pensieve.redact import scrub
from pensieve.tool_matrix import mcp_model_name
from pensieve.tools.registry import Tool, ToolContext, ToolError, render_result

REPEAT_WARN = 3  # the third identical call is answered with a warning instead of a result
REPEAT_STOP = 4  # the fourth ends the stage
# (Counted over the calls whose results the model still has: see ToolBox.forget.)


def _raw_repeat_key(name: str, raw_arguments: str) -> str:
    """Identical calls share a key: JSON arguments compared as values (key order and
    spacing aside), anything else as written."""
    try:
        arguments = json.loads(raw_arguments) if raw_arguments.strip() else {}
        return f"{name}:{json.dumps(arguments, sort_keys=True, ensure_ascii=False)}"
    except (json.JSONDecodeError, RecursionError):
        return f"{name}:raw:{raw_arguments.strip()}"


class LoopDetected(Exception):
    """The agent kept making the same call: the stage ends with this reason."""


class ToolCrashed(StageFailed):
    """A bug in a tool's own code: the stage fails with the reason (the run goes on)."""


@dataclass(frozen=True)
class SharedCap:
    """One budget for several tools on top of their own caps: the web's and the library's
    gathering tools when a stage is offered both (pensieve.run.budget)."""

    tools: frozenset[str]
    cap: int
    what: str  # how the refusal names the budget


@dataclass(frozen=True)
class ToolOutcome:
    text: str
    is_error: bool
    duration_s: float


class ToolBox:
    def __init__(
        self,
        ctx: ToolContext,
        tools: list[Tool],
        limits: Mapping[str, int],
        missing: Mapping[str, str] | None = None,
        shared: SharedCap | None = None,
    ) -> None:
        self.ctx = ctx
        self.tools = {t.name: t for t in tools}
        self.limits = limits
        self.shared = shared
        # Tools of the column that could not be offered, and why ("mcp.wiki.*": the server's failure).
        self.missing = dict(missing or {})
        self.calls: Counter[str] = Counter()
        self.repeats: Counter[str] = Counter()
        # Calls whose results were elided, and how many of them the model made again.
        self.forgotten: set[str] = set()
        self.rereads = 0

    def forget(self, name: str, raw_arguments: str) -> None:
        """The result of this call was elided from the context (pensieve.run.context): the model no
        longer has it, so making the call again is a re-read, not a repeat."""
        key = _raw_repeat_key(name, raw_arguments)
        self.forgotten.add(key)
        if self.repeats[key] > 0:
            self.repeats[key] -= 1

    def schemas(self) -> list[dict[str, Any]]:
        return [t.openai_schema() for t in self.tools.values()]

    def _error(self, message: str, started: float) -> ToolOutcome:
        return ToolOutcome(f"Error: {message}", True, time.monotonic() - started)

    def _repeat(self, name: str, raw_arguments: str) -> str | None:
        """Count an identical call; the warning to answer instead, or LoopDetected. Refused
        calls count too: a model repeating an invalid call is in a loop just the same."""
        key = _raw_repeat_key(name, raw_arguments)
        self.repeats[key] += 1
        if self.repeats[key] >= REPEAT_STOP:
            stage = self.ctx.stage.name
            raise LoopDetected(f"{stage} repeated the same {name} call {REPEAT_STOP} times; stopped to save budget")
        if self.repeats[key] == REPEAT_WARN:
            return (
                f"you have made this exact {name} call {REPEAT_WARN} times with the same arguments; use the "
                "earlier result or change approach. One more identical call ends this stage."
            )
        return None

    def _missing_reason(self, name: str) -> str | None:
        """Why a tool of this stage's column is not offered: a built-in by name, an MCP
        tool by its server (`mcp_wiki_...` when the server 'wiki' is not available)."""
        for key, why in self.missing.items():
            if key == name:
                return f"{name} is not available: {why}"
            if key.startswith("mcp.") and key.endswith(".*") and name.startswith(mcp_model_name(key[4:-2], "")):
                return why
        return None

    def _over_cap(self, name: str, found: Tool) -> str | None:
        """Why one more call of this tool is refused (its own cap, or the budget it shares), or None."""
        stage = self.ctx.stage.name
        cap = self.limits.get(name, found.default_limit if found.origin != "built-in" else None)
        if cap is not None and self.calls[name] >= cap:
            return (
                f"{name} has reached its limit of {cap} calls for the {stage} stage (limits.{name}); "
                "finish with what you have"
            )
        shared = self.shared
        if shared is not None and name in shared.tools and sum(self.calls[t] for t in shared.tools) >= shared.cap:
            return (
                f"{name} refused: {shared.what} together have reached their limit of {shared.cap} calls for the "
                f"{stage} stage; finish with what you have"
            )
        return None

    async def call(self, name: str, raw_arguments: str) -> ToolOutcome:
        started = time.monotonic()
        stage = self.ctx.stage.name
        key = _raw_repeat_key(name, raw_arguments)
        if key in self.forgotten:
            self.forgotten.discard(key)
            self.rereads += 1
        warning = self._repeat(name, raw_arguments)
        if warning:
            return self._error(warning, started)
        found = self.tools.get(name)
        if found is None:
            available = ", ".join(self.tools) or "none"
            reason = self._missing_reason(name)
            if reason:
                return self._error(f"{reason}; available: {available}", started)
            return self._error(f"tool {name!r} is not available to {stage}; available: {available}", started)
        schema = json.dumps(found.schema, separators=(",", ":"))
        try:
            arguments = json.loads(raw_arguments) if raw_arguments.strip() else {}
        except json.JSONDecodeError as exc:
            return self._error(f"arguments for {name} are not valid JSON ({exc.msg}); schema: {schema}", started)
        except RecursionError:
            return self._error(f"arguments for {name} are nested too deeply; schema: {schema}", started)
        if not isinstance(arguments, dict):
            kind = type(arguments).__name__
            return self._error(f"arguments for {name} must be a JSON object, not {kind}; schema: {schema}", started)
        try:
            values = found.validate(arguments)
        except ValidationError as exc:
            problem = format_validation_error(exc)
            return self._error(f"invalid arguments for {name}: {problem}; schema: {schema}", started)
        except RecursionError:
            return self._error(f"arguments for {name} are nested too deeply; schema: {schema}", started)
        except ToolError as exc:
            return self._error(f"invalid arguments for {name}: {exc}; schema: {schema}", started)

        refusal = self._over_cap(name, found)
        if refusal:
            return self._error(refusal, started)
        self.calls[name] += 1
        try:
            result = await found.function(self.ctx, **values)
        except ToolError as exc:
            return self._error(scrub(str(exc)), started)
        except Exception as exc:
            if is_environment_failure(exc):
                # The tool's own work failed on what it was given or found (a name the file
                # system refuses, data nested too deep, a codec that is no text codec, a
                # full disk): the agent reads it like any other tool error.
                return self._error(scrub(f"{name} failed: {describe_failure(exc)}"), started)
            raise ToolCrashed(f"internal error in {name}: {type(exc).__name__}: {scrub(str(exc))[:300]}") from exc
        return ToolOutcome(render_result(result), False, time.monotonic() - started)


# Failures that come from the input or the machine, not from a bug in the tool.
ENVIRONMENT_FAILURES: tuple[type[BaseException], ...] = (OSError, RecursionError, MemoryError, UnicodeError, zlib.error)


def is_environment_failure(exc: BaseException) -> bool:
    # A bare LookupError is an unknown codec; its subclasses KeyError and IndexError are bugs.
    return isinstance(exc, ENVIRONMENT_FAILURES) or type(exc) is LookupError


def describe_failure(exc: BaseException) -> str:
    if isinstance(exc, OSError):
        where = f" ({Path(exc.filename).name[:80]})" if isinstance(exc.filename, str) else ""
        return f"{exc.strerror or type(exc).__name__}{where}"
    if isinstance(exc, RecursionError):
        return "the data is nested too deeply to process"
    if isinstance(exc, MemoryError):
        return "the data is too large to process"
    return f"{type(exc).__name__}: {str(exc)[:200]}"
