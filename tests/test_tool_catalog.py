"""The tool catalog: the one list of tools, their declared caps, and the per-run resources."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from pensieve.config import Settings, default_tool_limits
from pensieve.project.events import EventLog
from pensieve.project.listing import new_project
from pensieve.project.workspace import Workspace
from pensieve.stages import BY_NAME, STAGES
from pensieve.tools import CATALOG, TOOL_NAMES, catalog, offered_tools
from pensieve.tools.registry import RunResources, ToolContext
from pensieve.tools.web import WebState, web_state

# The rows of the spec's tool assignment matrix, top to bottom (spec/agent-tools.md).
SPEC_TOOLS = (
    "web_search",
    "fetch_url",
    "search_topics",
    "read_project_file",
    "write_project_file",
    "text_stats",
    "list_projects",
)
# The workspace library (issue 30): the researcher's and the fact checker's.
LIBRARY_TOOLS = ("search_library", "read_library_document")
# Beyond the spec's seven (issue 19): in the catalog, in no stage's default column.
EXTRA_TOOLS = ("edit_project_file",)


def test_the_catalog_lists_the_spec_tools_in_matrix_order() -> None:
    assert TOOL_NAMES == SPEC_TOOLS + LIBRARY_TOOLS + EXTRA_TOOLS
    assert tuple(t.name for t in CATALOG) == SPEC_TOOLS + LIBRARY_TOOLS + EXTRA_TOOLS
    assert tuple(catalog()) == SPEC_TOOLS + LIBRARY_TOOLS + EXTRA_TOOLS
    assert [s.name for s in STAGES if set(LIBRARY_TOOLS) <= set(s.tools)] == ["researcher", "fact_checker"]
    assert all(set(EXTRA_TOOLS).isdisjoint(stage.tools) for stage in STAGES)
    assert all(catalog()[t.name] is t for t in CATALOG)


def test_default_limits_are_the_caps_the_tools_declare() -> None:
    declared = {t.name: t.default_limit for t in CATALOG}
    assert declared == default_tool_limits()
    assert list(default_tool_limits()) == list(TOOL_NAMES)  # the config error lists them in this order
    assert Settings().limits == declared
    assert all(cap > 0 for cap in declared.values())


def test_every_stage_column_names_only_catalog_tools() -> None:
    for stage in STAGES:
        assert set(stage.tools) <= set(TOOL_NAMES), stage.name
        offered, missing = offered_tools(stage.tools, Settings(), {})
        assert {t.name for t in offered} | set(missing) == set(stage.tools), stage.name


def test_config_does_not_import_the_tools() -> None:
    """`pensieve list` reads config; the catalog (httpx, the web machinery) must stay out of it."""
    code = (
        "import sys, pensieve.config\n"
        "print(sorted(m for m in sys.modules if m.startswith(('pensieve.tools', 'httpx'))))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert proc.stdout.strip() == "[]"


async def test_run_resources_open_the_web_state_once_and_close_it(tmp_path: Path) -> None:
    project = new_project(Workspace(tmp_path, "default"), "A brief about resources", "res")
    resources = RunResources()
    contexts = [
        ToolContext(project, BY_NAME[name], Settings(), EventLog(project.events_path), {}, resources=resources)
        for name in ("researcher", "fact_checker")
    ]
    assert resources.web is None  # nothing is opened until a web tool needs it
    first = web_state(contexts[0])
    assert isinstance(first, WebState)
    assert web_state(contexts[1]) is first  # shared by every stage of the run
    await resources.aclose()
    assert resources.web is None and first.search_client.is_closed
    await resources.aclose()  # closing twice is harmless
    assert ToolContext(project, BY_NAME["researcher"], Settings(), contexts[0].events, {}).resources is not resources


def test_default_caps_agree_with_the_default_round_budget() -> None:
    """A model that makes one call a round can spend a stage's whole gathering budget (web
    and library together, as told) before the round its file is due, and any one tool's
    cap still leaves two rounds to write and answer."""
    from pensieve.run.agent import _write_by_round
    from pensieve.run.budget import shared_cap
    from pensieve.stages import STAGES

    settings = Settings()
    rounds = settings.llm.max_rounds
    web = ["web_search", "fetch_url"]
    library = ["search_library", "read_library_document"]
    for stage in STAGES:
        # Offered the web only, the library only (research.web false), or both.
        for gathering in (web, library, web + library):
            offered = [name for name in stage.tools if name in gathering or name == "search_topics"]
            caps = {name: settings.limits[name] for name in offered}
            shared = shared_cap(caps)
            gathered = sum(caps[name] for name in caps if shared is None or name not in shared.tools)
            spent = gathered + (shared.cap if shared else 0)
            assert spent <= _write_by_round(rounds), (stage.name, gathering, spent)
        for name in stage.tools:
            assert settings.limits[name] <= rounds - 2, (stage.name, name)
    for name in ("researcher", "fact_checker"):  # the stages offered the library
        assert {"search_library", "read_library_document"} <= set(BY_NAME[name].tools), name
