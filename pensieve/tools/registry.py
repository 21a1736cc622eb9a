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
from typing import TYPE_CHECKING, Any, get_type_hints

from pydantic import BaseModel, ConfigDict, Field, create_model

if TYPE_CHECKING:
    from pensieve.config import Settings
    from pensieve.project.events import EventSink
    from pensieve.project.workspace import Project
    from pensieve.stages import Stage
    from pensieve.tools.mcp import McpServers
    from pensieve.tools.web import WebState


class ToolError(Exception):
    """An expected failure the model can act on (bad path, HTTP error, refusal...)."""


@dataclass
class RunResources:
    """What every stage of one run shares; the runner closes it once when the run ends."""

    # HTTP clients, robots.txt cache and fetch bookkeeping: opened by the first web tool call.
    web: WebState | None = None
    # Tools the run has already told the user are unavailable (said once, not per stage).
    noted: set[str] = field(default_factory=set)
    # The run's MCP servers: each started by the first stage that may use it.
    mcp: McpServers | None = None

    async def aclose(self) -> None:
        web, self.web = self.web, None
        mcp, self.mcp = self.mcp, None
        try:
            if web is not None:
                await web.aclose()
        finally:
            if mcp is not None:
                await mcp.aclose()


@dataclass
class ToolContext:
    """What a tool may use. Injected by the runner, never shown to the model."""

    project: Project
    stage: Stage
    settings: Settings
    events: EventSink
    environ: Mapping[str, str]
    force: bool = False
    # One extra model call with the stage's model, counted in its usage (fetch_url summary).
    summarize: Callable[[str, str], Awaitable[str]] | None = None
    resources: RunResources = field(default_factory=RunResources)
    # id -> title of the complete projects list_projects has answered with in this stage:
    # what the model was shown, which its consistency report is judged against.
    shown_projects: dict[str, str] | None = None


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
    # Calls allowed per stage unless the config's `limits.<name>` says otherwise.
    default_limit: int
    # Returns None when usable, else the reason it is not offered.
    unavailable: Availability = _always
    # `web.fetch_url`, `mcp.wiki.search` (pensieve.tool_matrix); empty: the catalog's.
    canonical: str = ""
    # "built-in", or "mcp:<server>" for a tool an MCP server provides.
    origin: str = "built-in"
    # Checks arguments instead of `arguments` (MCP tools: their server's JSON schema);
    # raises ToolError saying what is wrong.
    check: Callable[[dict[str, Any]], dict[str, Any]] | None = None

    async def __call__(self, ctx: ToolContext, /, **arguments: Any) -> Any:
        """Run the function itself, as a test does: no validation, no cap, no error wrapping."""
        return await self.function(ctx, **arguments)

    def openai_schema(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.schema},
        }

    def validate(self, arguments: Any) -> dict[str, Any]:
        if self.check is not None:
            return self.check(arguments)
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


def tool(*, canonical: str, default_limit: int, unavailable: Availability = _always) -> Callable[[ToolFunction], Tool]:
    """Decorate `async def name(ctx: ToolContext, arg: type, ...) -> result` to make it a Tool.

    `canonical` is the name the configuration uses (`web.fetch_url`, pensieve.tool_matrix);
    `default_limit` is the tool's per-stage call cap; `unavailable` says why the tool cannot
    be offered in this configuration (None when it can).
    """

    def build(fn: ToolFunction) -> Tool:
        description, param_docs = _parse_docstring(fn.__doc__ or "")
        hints = get_type_hints(fn)
        params = list(inspect.signature(fn).parameters.values())[1:]  # drop ctx
        fields: dict[str, Any] = {}
        for param in params:
            default = ... if param.default is inspect.Parameter.empty else param.default
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
        return Tool(fn.__name__, fn, description, schema, model, default_limit, unavailable, canonical)

    return build


def render_result(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, indent=1)
