"""`pensieve tools`: the effective tool matrix, per stage, as the dispatcher enforces it.

Built-in tools need nothing started. When the configuration names MCP servers that the
shown stages may use, the command starts them (as a run would), lists their tools and
shuts them down; a server that fails to start is shown with its error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from pensieve.cli.support import JsonOpt, guarded, out
from pensieve.json_text import print_json

if TYPE_CHECKING:
    from pensieve.config import Settings

StageOpt = Annotated[str | None, typer.Option("--stage", "-s", help="Show only this stage's column.")]


def _rows(settings: Settings, stage_names: list[str], environ: dict[str, str]) -> dict[str, Any]:
    """{"stages": [{"stage", "tools": [{canonical, name, origin, cap, available, why}]}], "servers": {...}}"""
    import asyncio

    from pensieve.run.agent import tool_cap
    from pensieve.stages import BY_NAME
    from pensieve.tool_matrix import resolve_column
    from pensieve.tools import catalog

    columns = [resolve_column(name, BY_NAME[name].tools, settings) for name in stage_names]
    wanted: list[str] = []
    for column in columns:
        wanted.extend(s for s in column.servers(settings.mcp.servers) if s not in wanted)
    servers: dict[str, dict[str, Any]] = {}
    mcp_tools: dict[str, list[dict[str, Any]]] = {c.stage: [] for c in columns}

    async def list_servers() -> None:
        from pensieve.tools.mcp import McpServers

        manager = McpServers(settings, environ)
        try:
            await manager.ensure(wanted)
            for name in wanted:
                server = manager.servers[name]
                servers[name] = {"ok": server.error is None, "error": server.error, "tools": len(server.tools)}
            for column in columns:
                for found in manager.tools_for(column):
                    mcp_tools[column.stage].append(
                        _entry(found.canonical, found.name, found.origin, found.default_limit)
                    )
        finally:
            await manager.aclose()
            manager.kill_leftovers()

    if wanted:
        asyncio.run(list_servers())
    table = catalog()
    stages = []
    for column in columns:
        tools = []
        for name in column.builtins:
            found = table[name]
            why = found.unavailable(settings, environ)
            origin = "built-in" if column.sources[name] == "seed" else "built-in (allow)"
            tools.append(_entry(found.canonical, name, origin, tool_cap(found, settings), why))
        tools.extend(mcp_tools[column.stage])
        for server in column.servers(settings.mcp.servers):
            if not servers.get(server, {}).get("ok", True):
                tools.append(_entry(f"mcp.{server}.*", "", f"mcp:{server}", 0, servers[server]["error"]))
        stages.append({"stage": column.stage, "tools": tools})
    return {"stages": stages, "servers": servers}


def _entry(canonical: str, name: str, origin: str, cap: int, why: str | None = None) -> dict[str, Any]:
    return {"canonical": canonical, "name": name, "origin": origin, "cap": cap, "available": not why, "why": why}


def tools_command(stage: StageOpt = None, as_json: JsonOpt = False) -> None:
    """Show each stage's tools: canonical name, model-facing name, where it comes from, its cap.

    The default matrix plus agents.<stage>.tools.allow, minus agents.<stage>.tools.deny.
    MCP servers the shown stages may use are started to list their tools, then stopped.

    Example: pensieve tools --stage researcher
    """

    def action() -> dict[str, Any]:
        import os

        from pensieve.config import load_settings
        from pensieve.stages import STAGE_NAMES, get_stage

        settings = load_settings()
        names = [get_stage(stage).name] if stage else list(STAGE_NAMES)
        return _rows(settings, names, dict(os.environ))

    data = guarded(action)
    if as_json:
        print_json(data)
        return
    for name, server in data["servers"].items():
        if not server["ok"]:
            out.print(f"mcp server {name!r} is not available: {server['error']}", markup=False)
    for entry in data["stages"]:
        table = Table(title=entry["stage"], title_justify="left")
        for column in ("canonical name", "model-facing name", "from", "cap per stage"):
            table.add_column(column)
        for tool in entry["tools"]:
            origin = tool["origin"] + ("" if tool["available"] else " (not available)")
            # Names come from MCP servers: plain text, never rich markup.
            table.add_row(*(Text(cell) for cell in (tool["canonical"], tool["name"] or "-", origin, str(tool["cap"]))))
        out.print(table)
        for tool in entry["tools"]:
            if not tool["available"]:
                out.print(f"  {tool['canonical']} is not available: {tool['why']}", markup=False)
