"""Tools are plain typed async functions; this module turns them into model-facing tools.

The JSON schema comes from the function's signature and docstring. The first parameter
is always the `ToolContext` (project, settings, clients), which the model never sees.
Expected failures raise `ToolError` and go back to the model as `Error: ...`; anything
else is a bug in our code and propagates to fail the stage.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, get_type_hints, overload

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

if TYPE_CHECKING:
    from pensieve.config import Settings
    from pensieve.events import EventLog
    from pensieve.stages import Stage
    from pensieve.workspace import Project


class ToolError(Exception):
    """An expected failure the model can act on (bad path, HTTP error, refusal...)."""


@dataclass
class ToolContext:
    """What a tool may use. Injected by the runner, never shown to the model."""

    project: Project
    stage: Stage
    settings: Settings
    events: EventLog
    environ: Mapping[str, str]
    force: bool = False
    # One extra model call with the stage's model, counted in its usage (fetch_url summary).
    summarize: Callable[[str, str], Awaitable[str]] | None = None
    # State shared by every stage of one run (HTTP clients, robots.txt cache, rate limiter).
    run_state: dict[str, Any] = field(default_factory=dict)


ToolFunction = Callable[..., Awaitable[Any]]
Availability = Callable[["Settings", Mapping[str, str]], str | None]


def _always(_settings: Settings, _environ: Mapping[str, str]) -> str | None:
    return None


@dataclass(frozen=True)
class Tool:
    name: str
    function: ToolFunction
    description: str
    schema: dict[str, Any]
    arguments: type[BaseModel]
    # Returns None when usable, else the reason it is not offered.
    unavailable: Availability = _always

    def openai_schema(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.schema},
        }

    def validate(self, arguments: Any) -> dict[str, Any]:
        model = self.arguments.model_validate(arguments)
        return {name: getattr(model, name) for name in type(model).model_fields}


_ARGS_HEADER = re.compile(r"^\s*(Args|Arguments|Parameters):\s*$")
_ARG_LINE = re.compile(r"^\s+(\w+)\s*(?:\([^)]*\))?:\s*(.+)$")


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    lines = inspect.cleandoc(doc).splitlines()
    summary: list[str] = []
    params: dict[str, str] = {}
    in_args = False
    current: str | None = None
    for line in lines:
        if _ARGS_HEADER.match(line):
            in_args = True
            continue
        if in_args:
            match = _ARG_LINE.match("    " + line if not line.startswith(" ") else line)
            if match and not line.startswith("        "):
                current = match.group(1)
                params[current] = match.group(2).strip()
            elif current and line.strip():
                params[current] += " " + line.strip()
            elif not line.strip():
                current = None
        else:
            summary.append(line)
    return "\n".join(summary).strip(), params


@overload
def tool(function: ToolFunction, *, unavailable: Availability = ...) -> Tool: ...


@overload
def tool(function: None = None, *, unavailable: Availability = ...) -> Callable[[ToolFunction], Tool]: ...


def tool(
    function: ToolFunction | None = None, *, unavailable: Availability = _always
) -> Tool | Callable[[ToolFunction], Tool]:
    """Make a Tool from `async def name(ctx: ToolContext, arg: type, ...) -> result`."""

    def build(fn: ToolFunction) -> Tool:
        description, param_docs = _parse_docstring(fn.__doc__ or "")
        hints = get_type_hints(fn)
        params = list(inspect.signature(fn).parameters.values())[1:]  # drop ctx
        fields: dict[str, Any] = {}
        for param in params:
            default = ... if param.default is inspect.Parameter.empty else param.default
            from pydantic import Field

            fields[param.name] = (hints[param.name], Field(default, description=param_docs.get(param.name)))
        model = create_model(
            f"{fn.__name__}_arguments",
            __config__=ConfigDict(extra="forbid", strict=True),
            **fields,
        )
        schema = model.model_json_schema()
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
        schema.setdefault("properties", {})
        schema["additionalProperties"] = False
        return Tool(fn.__name__, fn, description, schema, model, unavailable)

    if function is not None:
        return build(function)
    return build


def format_validation_error(error: ValidationError) -> str:
    parts = []
    for item in error.errors()[:5]:
        where = ".".join(str(p) for p in item["loc"]) or "arguments"
        msg = "unknown argument" if item["type"] == "extra_forbidden" else item["msg"]
        parts.append(f"{where}: {msg}")
    return "; ".join(parts)


def render_result(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, indent=1)
