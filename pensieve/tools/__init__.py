"""The tool catalog: every tool Pensieve has, by name.

A family of tools slots in by adding its module to `_FAMILIES`; a module that defines
no tool of a matrix name simply leaves that tool unavailable (never offered).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping

from pensieve.config import Settings
from pensieve.tools.registry import Tool

TOOL_NAMES: tuple[str, ...] = (
    "web_search",
    "fetch_url",
    "search_topics",
    "read_project_file",
    "write_project_file",
    "text_stats",
    "list_projects",
)

_FAMILIES = (
    "pensieve.tools.files",
    "pensieve.tools.stats",
    "pensieve.tools.projects",
    "pensieve.tools.web",
    "pensieve.tools.topics",
)

_catalog: dict[str, Tool] | None = None


def catalog() -> dict[str, Tool]:
    global _catalog
    if _catalog is None:
        found: dict[str, Tool] = {}
        for module_name in _FAMILIES:
            module = importlib.import_module(module_name)
            for value in vars(module).values():
                if isinstance(value, Tool) and value.name in TOOL_NAMES:
                    found[value.name] = value
        _catalog = found
    return _catalog


def offered_tools(
    names: tuple[str, ...], settings: Settings, environ: Mapping[str, str]
) -> tuple[list[Tool], dict[str, str]]:
    """The tools of a stage's column that are usable now, and why the others are not."""
    tools = catalog()
    offered: list[Tool] = []
    missing: dict[str, str] = {}
    for name in names:
        found = tools.get(name)
        if found is None:
            missing[name] = "not installed in this version"
            continue
        reason = found.unavailable(settings, environ)
        if reason:
            missing[name] = reason
        else:
            offered.append(found)
    return offered, missing
