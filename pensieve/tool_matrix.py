"""The tool matrix as configured: canonical names, per-stage allow/deny, per-tool caps.

Every tool has a canonical name (`web.fetch_url`, `mcp.wiki.search`) and a model-facing
name (`fetch_url`, `mcp_wiki_search`). A stage's column is its row's seed (`stages.py`),
plus `agents.<stage>.tools.allow`, minus `agents.<stage>.tools.deny` (deny wins); both are
lists of canonical names or glob patterns (`mcp.wiki.*`). Patterns are checked when the
configuration loads (`check_access`); MCP tools are matched against them once their server
has listed them (`Column.admits`).

Light on purpose: the config imports it, and `pensieve list` must not import the tools.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pensieve.config import Settings


@dataclass(frozen=True)
class ToolName:
    """A built-in tool as the configuration and the contracts know it, without importing it."""

    name: str  # model-facing: what the model calls
    canonical: str  # what the configuration names (`agents.<stage>.tools`, `limits`)
    default_limit: int  # calls per stage unless `limits.<name>` says otherwise


# Every built-in tool, in catalog order: the light mirror of `@tool(canonical=...,
# default_limit=...)` on each function, read by `config` and `contracts` (which `pensieve
# list` imports) so that they never import the tool modules. `pensieve.tools` refuses to
# import when its catalog and this table disagree.
BUILTIN_TOOLS: tuple[ToolName, ...] = (
    ToolName("web_search", "web.search", 5),
    ToolName("fetch_url", "web.fetch_url", 10),
    ToolName("search_topics", "topics.search", 3),
    ToolName("read_project_file", "project.read_file", 20),
    ToolName("write_project_file", "project.write_file", 12),
    ToolName("text_stats", "text.stats", 10),
    ToolName("list_projects", "workspace.list_projects", 3),
    # The workspace library (issue 30): the researcher's and the fact checker's.
    ToolName("search_library", "library.search", 6),
    ToolName("read_library_document", "library.read_document", 8),
    ToolName("edit_project_file", "project.edit_file", 20),
)
TOOL_NAMES: tuple[str, ...] = tuple(t.name for t in BUILTIN_TOOLS)
# Model-facing name -> canonical name of every built-in tool, in catalog order.
CANONICAL: Mapping[str, str] = {t.name: t.canonical for t in BUILTIN_TOOLS}
DEFAULT_LIMITS: Mapping[str, int] = {t.name: t.default_limit for t in BUILTIN_TOOLS}
MODEL_FACING: Mapping[str, str] = {canonical: name for name, canonical in CANONICAL.items()}

MCP_PREFIX = "mcp."
SERVER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$")
_UNSAFE = re.compile(r"[^A-Za-z0-9_]")
MAX_FUNCTION_NAME = 64  # the providers' limit on a function name
_ANY = "\x01"  # stands for any tool name: only a wildcard matches it


def mcp_canonical(server: str, tool: str) -> str:
    return f"{MCP_PREFIX}{server}.{tool}"


def mcp_model_name(server: str, tool: str, taken: Iterable[str] = ()) -> str:
    """`mcp_<server>_<tool>` made safe for the providers' function-name rules (letters,
    digits, `_`, at most 64 characters) and unique among `taken`."""
    base = _UNSAFE.sub("_", f"mcp_{server}_{tool}")[:MAX_FUNCTION_NAME]
    used = set(taken)
    name, n = base, 1
    while name in used:
        n += 1
        suffix = f"_{n}"
        name = base[: MAX_FUNCTION_NAME - len(suffix)] + suffix
    return name


def canonical_of(name: str) -> str:
    """A canonical name for a built-in named either way; anything else unchanged."""
    return CANONICAL.get(name, name)


def is_pattern(text: str) -> bool:
    return any(ch in text for ch in "*?[")


def pattern_servers(pattern: str, servers: Iterable[str]) -> list[str]:
    """The configured MCP servers whose tools a name or pattern can match."""
    parts = pattern.split(".", 2)
    hits = []
    for server in servers:
        if len(parts) >= 2 and parts[0] == "mcp":
            if fnmatchcase(server, parts[1]):
                hits.append(server)
        elif fnmatchcase(mcp_canonical(server, _ANY), pattern):  # "*", "m*", ...
            hits.append(server)
    return hits


def pattern_builtins(pattern: str) -> list[str]:
    """The built-in canonical names a name or pattern matches (model-facing names accepted)."""
    canonical = canonical_of(pattern)
    return [c for c in MODEL_FACING if fnmatchcase(c, canonical)]


def _names_mcp_tools(pattern: str, servers: list[str]) -> bool:
    """Whether an `mcp.` name or pattern can match a tool of its servers: `mcp.wiki` or
    `mcp.wiki.` names the server alone, and no tool's canonical name is that."""
    _server, dot, tool = pattern.removeprefix(MCP_PREFIX).partition(".")
    if dot and tool:
        return True
    return any(fnmatchcase(mcp_canonical(s, _ANY), pattern) for s in servers)  # "mcp.*", "mcp.w*"


def check_pattern(pattern: str, servers: Iterable[str], key: str) -> None:
    """Raise ValueError naming `key` if the pattern can match no tool at all."""
    if not isinstance(pattern, str) or not pattern.strip():
        raise ValueError(f"{key}: an empty tool name")
    if pattern_builtins(pattern):
        return
    hits = pattern_servers(pattern, servers)
    if hits and pattern.startswith(MCP_PREFIX) and not _names_mcp_tools(pattern, hits):
        wanted = pattern.rstrip(".")
        raise ValueError(
            f"{key}: {pattern!r} names a server, not its tools (mcp.<server>.<tool> or a pattern); "
            f"did you mean {wanted}.*?"
        )
    if hits:
        return
    if pattern.startswith(MCP_PREFIX):
        server = pattern.split(".", 2)[1] if pattern.count(".") >= 1 else ""
        configured = ", ".join(servers) or "none"
        raise ValueError(
            f"{key}: unknown MCP server {server!r} in {pattern!r}; configured servers (mcp.servers): {configured}"
        )
    raise ValueError(f"{key}: unknown tool {pattern!r}; tools are: {', '.join(MODEL_FACING)}, mcp.<server>.<tool>")


def check_model_name(name: str, servers: Iterable[str], key: str) -> None:
    """Raise ValueError naming `key` unless an `mcp_...` name can be a tool of a configured
    server (it starts with that server's `mcp_<server>_`); patterns are for canonical names."""
    configured = list(servers)
    if is_pattern(name):
        hint = next((mcp_canonical(s, "*") for s in configured if name.startswith(mcp_model_name(s, ""))), "")
        raise ValueError(
            f"{key}: a pattern matches canonical names (mcp.<server>.<tool>), not {name!r}"
            + (f"; did you mean {hint}?" if hint else "")
        )
    if not any(name.startswith(mcp_model_name(s, "")) for s in configured):
        raise ValueError(
            f"{key}: {name!r} is no tool of a configured MCP server (model-facing names start "
            f"mcp_<server>_); configured servers (mcp.servers): {', '.join(configured) or 'none'}"
        )


@dataclass(frozen=True)
class Column:
    """One stage's resolved column: its built-in tools (model-facing names, catalog order)
    and the patterns its MCP tools must match (allowed and not denied)."""

    stage: str
    builtins: tuple[str, ...]
    allow: tuple[str, ...]
    deny: tuple[str, ...]
    # Where each built-in comes from: "seed" (the default matrix) or "allow".
    sources: Mapping[str, str]

    def admits(self, canonical: str) -> bool:
        """Whether an MCP tool (by canonical name) belongs to this column."""
        if any(fnmatchcase(canonical, p) for p in self.deny):
            return False
        return any(fnmatchcase(canonical, p) for p in self.allow)

    def servers(self, configured: Iterable[str]) -> list[str]:
        """The configured servers this stage may use a tool of (they must be started)."""
        names = list(configured)
        wanted: list[str] = []
        for pattern in self.allow:
            wanted.extend(s for s in pattern_servers(pattern, names) if s not in wanted)
        # A server whose every tool is denied (`mcp.wiki.*`) is not needed.
        return [s for s in wanted if not any(fnmatchcase(mcp_canonical(s, _ANY), p) for p in self.deny)]


def resolve_column(stage: str, seed: Iterable[str], settings: Settings) -> Column:
    agent = settings.agents.get(stage)
    access = agent.tools if agent is not None else None
    allow = tuple(access.allow) if access is not None else ()
    deny = tuple(canonical_of(p) for p in access.deny) if access is not None else ()
    chosen: dict[str, str] = {name: "seed" for name in seed}
    for pattern in allow:
        for canonical in pattern_builtins(pattern):
            chosen.setdefault(MODEL_FACING[canonical], "allow")
    kept = {name: origin for name, origin in chosen.items() if not any(fnmatchcase(CANONICAL[name], p) for p in deny)}
    ordered = tuple(name for name in CANONICAL if name in kept)
    mcp_allow = tuple(canonical_of(p) for p in allow)
    return Column(stage, ordered, mcp_allow, deny, {n: kept[n] for n in ordered})


def cap_for(model_name: str, canonical: str, default: int, settings: Settings) -> int:
    """A tool's per-stage call cap: `limits.<model-facing name>`, else `limits.<canonical
    name>`, else the first pattern in `limits` that matches, else the tool's own default
    (for MCP tools `mcp.default_limit`)."""
    limits = settings.limits
    if model_name in limits:
        return limits[model_name]
    if canonical in limits:
        return limits[canonical]
    for key, value in limits.items():
        if is_pattern(key) and fnmatchcase(canonical, key):
            return value
    return default
