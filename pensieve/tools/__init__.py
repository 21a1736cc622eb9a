"""The tool catalog: every tool Pensieve has, in the order of the spec's tool matrix.

Adding a tool: write it as one typed async function in its family's module, decorated with
`@tool(canonical="family.name", default_limit=N)` (plus `unavailable=` if it depends on
configuration); add it to `CATALOG` and its row to `tool_matrix.BUILTIN_TOOLS` (the light
mirror that the configuration and the contracts read without importing any tool: this
package refuses to import while the two disagree); name it in the `tools` column of the
stages that may use it (`pensieve/stages.py`).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING

from pensieve.tool_matrix import BUILTIN_TOOLS
from pensieve.tools.files import edit_project_file, read_project_file, write_project_file
from pensieve.tools.library import read_library_document, search_library
from pensieve.tools.registry import Tool
from pensieve.tools.stats import text_stats
from pensieve.tools.topics import search_topics
from pensieve.tools.web import fetch_url, web_search
from pensieve.tools.workspace import list_projects

if TYPE_CHECKING:
    from pensieve.config import Settings

CATALOG: tuple[Tool, ...] = (
    web_search,
    fetch_url,
    search_topics,
    read_project_file,
    write_project_file,
    text_stats,
    list_projects,
    # The workspace library (issue 30): the researcher's and the fact checker's.
    search_library,
    read_library_document,
    # Not in the default matrix: given with agents.<stage>.tools.allow (project.edit_file).
    edit_project_file,
)
TOOL_NAMES: tuple[str, ...] = tuple(t.name for t in CATALOG)


def _mirror_problem() -> str | None:
    """What differs between the catalog and its light mirror (tool_matrix.BUILTIN_TOOLS)."""
    declared = [(t.name, t.canonical, t.default_limit) for t in CATALOG]
    mirrored = [(t.name, t.canonical, t.default_limit) for t in BUILTIN_TOOLS]
    if declared == mirrored:
        return None
    return f"tools.CATALOG {declared} and tool_matrix.BUILTIN_TOOLS {mirrored} disagree"


# A tool added to one and not the other would be offered without a `limits` default, or
# checked in the configuration under a name no tool has: refuse at once, in every test.
if (_problem := _mirror_problem()) is not None:
    raise RuntimeError(_problem)
_BY_NAME: Mapping[str, Tool] = MappingProxyType({t.name: t for t in CATALOG})


__all__ = [
    "CATALOG",
    "TOOL_NAMES",
    "catalog",
    "files",
    "mcp",
    "offered_tools",
    "registry",
    "stats",
    "topics",
    "web",
    "workspace",
]


def catalog() -> Mapping[str, Tool]:
    """Every tool by name, in catalog order."""
    return _BY_NAME


def offered_tools(
    names: tuple[str, ...], settings: Settings, environ: Mapping[str, str]
) -> tuple[list[Tool], dict[str, str]]:
    """The tools of a stage's column that are usable now, and why the others are not."""
    offered: list[Tool] = []
    missing: dict[str, str] = {}
    for name in names:
        found = _BY_NAME[name]  # a stage's column names only catalog tools (tests/test_tool_catalog.py)
        reason = found.unavailable(settings, environ)
        if reason:
            missing[name] = reason
        else:
            offered.append(found)
    return offered, missing
