"""Tools beyond the seven: canonical names, per-stage allow/deny resolved at config load,
limits by any name or pattern, `pensieve tools`, and `edit_project_file`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pensieve.config import Settings
from pensieve.project.events import EventLog
from pensieve.project.listing import new_project
from pensieve.project.workspace import Workspace
from pensieve.run.dispatch import ToolBox
from pensieve.stages import BY_NAME, STAGES
from pensieve.tool_matrix import CANONICAL, cap_for, mcp_model_name, resolve_column
from pensieve.tools import catalog
from pensieve.tools.files import edit_project_file
from pensieve.tools.registry import ToolContext, ToolError
from tests.conftest import Home
from tests.fakes.model_server import call, text

WIKI = {"wiki": {"command": ["wiki-server"]}}


def settings(**data: Any) -> Settings:
    return Settings.model_validate(data)


# -- names and columns -------------------------------------------------------------------------


def test_every_tool_has_a_canonical_name_and_the_seven_keep_theirs() -> None:
    assert {name: tool.canonical for name, tool in catalog().items()} == dict(CANONICAL)
    assert CANONICAL["fetch_url"] == "web.fetch_url" and CANONICAL["edit_project_file"] == "project.edit_file"
    assert len(set(CANONICAL.values())) == len(CANONICAL)


def test_mcp_model_names_are_safe_short_and_unique() -> None:
    assert mcp_model_name("wiki", "search") == "mcp_wiki_search"
    assert mcp_model_name("my-wiki", "find.page v2") == "mcp_my_wiki_find_page_v2"
    long = mcp_model_name("wiki", "x" * 100)
    assert len(long) == 64 and long.startswith("mcp_wiki_x")
    taken = {long}
    second = mcp_model_name("wiki", "x" * 101, taken)
    assert len(second) == 64 and second != long and second.endswith("_2")
    assert mcp_model_name("a", "b_c", {"mcp_a_b_c"}) == "mcp_a_b_c_2"


def test_the_default_column_is_the_seed_matrix() -> None:
    for stage in STAGES:
        column = resolve_column(stage.name, stage.tools, Settings())
        assert column.builtins == tuple(n for n in CANONICAL if n in stage.tools)
        assert column.allow == () and not column.admits("mcp.wiki.search")


def test_allow_adds_deny_removes_and_deny_wins() -> None:
    given = settings(
        mcp={"servers": WIKI},
        agents={
            "reviser": {"tools": {"allow": ["project.edit_file", "text_stats"]}},
            "researcher": {"tools": {"allow": ["mcp.wiki.*", "web.*"], "deny": ["mcp.wiki.delete*", "web.fetch_url"]}},
            "polisher": {"tools": {"allow": ["project.*"], "deny": ["project.edit_file"]}},
        },
    )
    reviser = resolve_column("reviser", BY_NAME["reviser"].tools, given)
    assert reviser.builtins == ("read_project_file", "write_project_file", "text_stats", "edit_project_file")
    assert reviser.sources["edit_project_file"] == "allow" and reviser.sources["read_project_file"] == "seed"
    researcher = resolve_column("researcher", BY_NAME["researcher"].tools, given)
    assert "fetch_url" not in researcher.builtins and "web_search" in researcher.builtins
    assert researcher.admits("mcp.wiki.search") and not researcher.admits("mcp.wiki.delete_page")
    assert researcher.servers(["wiki", "other"]) == ["wiki"]
    polisher = resolve_column("polisher", BY_NAME["polisher"].tools, given)
    assert "edit_project_file" not in polisher.builtins
    assert resolve_column("drafter", BY_NAME["drafter"].tools, given).servers(["wiki"]) == []


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (
            {"agents": {"reviser": {"tools": {"allow": ["project.edit_fil"]}}}},
            "agents.reviser.tools.allow[0]: unknown tool",
        ),
        (
            {"agents": {"reviser": {"tools": {"deny": ["mcp.wikki.*"]}}}},
            "agents.reviser.tools.deny[0]: unknown MCP server 'wikki'",
        ),
        ({"agents": {"revisor": {"tools": {"allow": ["web.search"]}}}}, "unknown stage 'revisor'"),
        ({"agents": {"reviser": {"tools": {"allow": "web.search"}}}}, "agents.reviser.tools.allow"),
        ({"agents": {"reviser": {"tools": {"permit": []}}}}, "agents.reviser.tools.permit: unknown key"),
        ({"limits": {"web.serch": 3}}, "unknown tool 'web.serch'"),
        ({"limits": {"mcp.nope.*": 3}}, "limits.mcp.nope.*: unknown MCP server 'nope'"),
        # A server without a tool part matches no tool: said, with what was meant.
        (
            {"mcp": {"servers": WIKI}, "agents": {"researcher": {"tools": {"allow": ["mcp.wiki"]}}}},
            "agents.researcher.tools.allow[0]: 'mcp.wiki' names a server, not its tools",
        ),
        (
            {"mcp": {"servers": WIKI}, "agents": {"researcher": {"tools": {"deny": ["mcp.wiki."]}}}},
            "agents.researcher.tools.deny[0]: 'mcp.wiki.' names a server, not its tools",
        ),
        ({"mcp": {"servers": WIKI}, "limits": {"mcp.wiki": 3}}, "limits.mcp.wiki: 'mcp.wiki' names a server"),
        ({"mcp": {"servers": WIKI}, "limits": {"mcp.wiki": 3}}, "did you mean mcp.wiki.*?"),
        # A model-facing name must belong to a configured server; patterns take canonical names.
        (
            {"mcp": {"servers": WIKI}, "limits": {"mcp_nope_search": 3}},
            "limits.mcp_nope_search: 'mcp_nope_search' is no tool of a configured MCP server",
        ),
        ({"mcp": {"servers": WIKI}, "limits": {"mcp_wiki_*": 3}}, "did you mean mcp.wiki.*?"),
        ({"mcp": {"servers": {"wiki": {}}}}, "give either command"),
        ({"mcp": {"servers": {"wiki": {"command": ["x"], "url": "http://h/mcp"}}}}, "give either command"),
        ({"mcp": {"servers": {"wiki": {"url": "ftp://h/mcp"}}}}, "must start with http"),
        ({"mcp": {"servers": {"a.b": {"command": ["x"]}}}}, "server name 'a.b'"),
        ({"mcp": {"servers": {"wiki": {"command": ["x"], "env": {"TOKEN": "secret"}}}}}, "mcp.servers.wiki.env"),
        # Values where names belong: refused, and never echoed (the values say hunter2).
        (
            {"mcp": {"servers": {"wiki": {"command": ["x"], "env": ["PATH", "TOKEN=hunter2"]}}}},
            "mcp.servers.wiki.env: item 2 is not the name of an environment variable; give names",
        ),
        (
            {"mcp": {"servers": {"wiki": {"url": "http://h/mcp", "headers_env": {"Authorization": "Bearer hunter2"}}}}},
            "mcp.servers.wiki.headers_env: header 'Authorization' is not given the name of an environment variable",
        ),
        ({"mcp": {"servers": {"wiki": {"command": ["x"], "env": ["hunter2 x"]}}}}, "values come from the environment"),
        ({"mcp": {"servers": {"wiki": {"url": "http://h/mcp", "env": ["TOKEN"]}}}}, "env is for command servers"),
        (
            {"mcp": {"servers": {"wiki": {"command": ["x"], "headers_env": {"Authorization": "TOKEN"}}}}},
            "headers_env is for url servers",
        ),
        # `$` matches before a final newline: names are matched whole.
        ({"mcp": {"servers": {"wiki\n": {"command": ["x"]}}}}, "server name 'wiki\\n'"),
        ({"mcp": {"servers": {"wiki": {"command": ["x"], "env": ["TOKEN\n"]}}}}, "item 1 is not the name"),
    ],
)
def test_bad_tool_configuration_is_an_error_naming_the_key(home: Home, data: dict[str, Any], expected: str) -> None:
    home.config_path.write_text(json.dumps(data))  # JSON is YAML
    result = home.run("tools")
    assert result.exit_code == 2
    assert expected in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "hunter2" not in result.stderr


def test_limits_accept_model_facing_canonical_names_and_patterns() -> None:
    given = settings(
        mcp={"servers": WIKI}, limits={"web.*": 2, "fetch_url": 4, "project.edit_file": 7, "mcp.wiki.*": 3}
    )
    assert given.limits["web_search"] == 2 and given.limits["fetch_url"] == 4  # a name wins over a pattern
    assert given.limits["edit_project_file"] == 7 and given.limits["read_project_file"] == 20
    assert cap_for("mcp_wiki_search", "mcp.wiki.search", 5, given) == 3
    assert cap_for("mcp_other_x", "mcp.other.x", given.mcp.default_limit, given) == 5
    exact = settings(mcp={"servers": WIKI}, limits={"mcp.wiki.*": 3, "mcp_wiki_search": 1})
    assert cap_for("mcp_wiki_search", "mcp.wiki.search", 5, exact) == 1


# -- pensieve tools --------------------------------------------------------------------------------


def test_tools_command_shows_the_effective_matrix(home: Home) -> None:
    home.configure(agents={"reviser": {"tools": {"allow": ["project.edit_file"]}}}, limits={"project.*": 9})
    shown = home.run("tools", "--stage", "reviser")
    assert shown.exit_code == 0, shown.stderr
    assert (
        "project.edit_file" in shown.stdout
        and "edit_project_file" in shown.stdout
        and "built-in (allow)" in shown.stdout
    )
    data = json.loads(home.run("tools", "--json").stdout)
    columns = {entry["stage"]: entry["tools"] for entry in data["stages"]}
    assert list(columns) == [s.name for s in STAGES]
    reviser = {t["name"]: t for t in columns["reviser"]}
    assert reviser["edit_project_file"] == {
        "canonical": "project.edit_file",
        "name": "edit_project_file",
        "origin": "built-in (allow)",
        "cap": 9,
        "available": True,
        "why": None,
    }
    assert "edit_project_file" not in {t["name"] for t in columns["polisher"]}
    researcher = {t["name"]: t for t in columns["researcher"]}
    assert researcher["web_search"]["available"] is False and "search provider" in researcher["web_search"]["why"]
    assert home.run("tools", "--stage", "nope").exit_code == 2


def test_tools_command_imports_no_model_and_no_mcp_without_servers(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from pensieve.cli.main import app\n"
        "r = CliRunner().invoke(app, ['tools', '--json'])\n"
        "assert r.exit_code == 0, r.output\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'litellm', 'torch', 'mcp', 'sentence_transformers'}))"
    )
    env = {"PENSIEVE_HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "PYTHONPATH": str(Path(__file__).parent.parent)}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


# -- edit_project_file -------------------------------------------------------------------------------

DRAFT = "# Title\n\nThe first claim [S1].\n\nA repeated line.\n\nA repeated line.\n"


def ctx_for(tmp_path: Path, stage: str = "reviser") -> ToolContext:
    project = new_project(Workspace(tmp_path, "default"), "A brief about edits", "edits")
    return ToolContext(project, BY_NAME[stage], Settings(), EventLog(project.events_path), {})


def staged(ctx: ToolContext, name: str = "draft_v2.md") -> Path:
    path = ctx.project.dir / ".staging" / ctx.stage.name / name
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


async def test_edit_replaces_exactly_one_occurrence(tmp_path: Path) -> None:
    ctx = ctx_for(tmp_path)
    staged(ctx).write_text(DRAFT)
    answer = await edit_project_file.function(
        ctx, filename="draft_v2.md", old_text="first claim", new_text="main claim"
    )
    assert answer.startswith("Edited draft_v2.md")
    assert staged(ctx).read_text() == DRAFT.replace("first claim", "main claim")


async def test_edit_with_no_or_several_occurrences_is_a_recoverable_error(tmp_path: Path) -> None:
    ctx = ctx_for(tmp_path)
    staged(ctx).write_text(DRAFT)
    with pytest.raises(ToolError, match=r"found 0 occurrences; exactly one is needed\); copy the passage exactly"):
        await edit_project_file.function(ctx, filename="draft_v2.md", old_text="no such text", new_text="x")
    with pytest.raises(ToolError, match=r"occurs 2 times .*found 2 occurrences.*include more of the surrounding text"):
        await edit_project_file.function(ctx, filename="draft_v2.md", old_text="A repeated line.", new_text="x")
    assert staged(ctx).read_text() == DRAFT  # nothing changed
    # The dispatcher answers it as a tool error the model can act on; the stage goes on.
    box = ToolBox(ctx, [edit_project_file], {"edit_project_file": 5})
    outcome = await box.call(
        "edit_project_file", json.dumps({"filename": "draft_v2.md", "old_text": "A repeated line.", "new_text": "x"})
    )
    assert outcome.is_error and "found 2 occurrences" in outcome.text
    fixed = await box.call(
        "edit_project_file",
        json.dumps(
            {"filename": "draft_v2.md", "old_text": "A repeated line.\n\nA repeated line.", "new_text": "One line."}
        ),
    )
    assert not fixed.is_error and staged(ctx).read_text().endswith("One line.\n")


async def test_edit_is_confined_like_write(tmp_path: Path) -> None:
    ctx = ctx_for(tmp_path)
    project = ctx.project.dir
    (project / "draft_v1.md").write_text(DRAFT)
    (tmp_path / "outside.md").write_text(DRAFT)
    (project / "scratch").mkdir(exist_ok=True)
    (project / "scratch" / "link.md").symlink_to(tmp_path / "outside.md")
    for name in (
        "../outside.md",
        "/etc/passwd",
        "draft_v1.md",
        "status.json",
        "brief.md",
        ".run.lock",
        "scratch/link.md",
    ):
        with pytest.raises(ToolError):
            await edit_project_file.function(ctx, filename=name, old_text="first claim", new_text="pwned")
    assert (project / "draft_v1.md").read_text() == DRAFT and (tmp_path / "outside.md").read_text() == DRAFT
    with pytest.raises(ToolError, match="does not exist yet; write it first"):
        await edit_project_file.function(ctx, filename="draft_v2.md", old_text="a", new_text="b")
    (project / "scratch" / "notes.md").write_text("keep this, fix that")
    await edit_project_file.function(ctx, filename="scratch/notes.md", old_text="fix that", new_text="fixed")
    assert (project / "scratch" / "notes.md").read_text() == "keep this, fixed"


def test_edit_project_file_is_in_no_default_column_and_refused_there(home: Home) -> None:
    assert all("edit_project_file" not in stage.tools for stage in STAGES)
    pid = home.new()
    home.model.script(
        "refiner", call("edit_project_file", {"filename": "topic_brief.md", "old_text": "a", "new_text": "b"})
    )
    assert home.run("run", pid, "--until", "refiner", "--quiet").exit_code == 0
    (answer,) = home.model.for_stage("refiner")[1].last_tool_results
    assert answer.startswith("Error: tool 'edit_project_file' is not available to refiner")


def test_a_reviser_edits_draft_v2_in_a_pipeline_run(home: Home) -> None:
    home.configure(agents={"reviser": {"tools": {"allow": ["project.edit_file"]}}}, contracts={"enabled": False})
    pid = home.new()
    draft = (
        "# Vector search\n\nHNSW builds a layered graph.\n\nIt is teh fastest index.\n\n"
        "## Revision notes\n\n- Tightened.\n"
    )
    home.model.script(
        "reviser",
        call("write_project_file", {"filename": "draft_v2.md", "content": draft}),
        call(
            "edit_project_file", {"filename": "draft_v2.md", "old_text": "teh fastest", "new_text": "often the fastest"}
        ),
        call("edit_project_file", {"filename": "draft_v2.md", "old_text": "missing passage", "new_text": "x"}),
        text("Revised."),
    )
    result = home.run("run", pid, "--quiet")
    assert result.exit_code == 0, result.stderr
    requests = home.model.for_stage("reviser")
    assert "edit_project_file" in requests[0].tool_names
    assert "edit_project_file" not in home.model.for_stage("polisher")[0].tool_names
    edited, missing = requests[2].last_tool_results[0], requests[3].last_tool_results[0]
    assert edited.startswith("Edited draft_v2.md")
    assert missing.startswith("Error: old_text is not in 'draft_v2.md' (found 0 occurrences")
    committed = (home.project_dir(pid) / "draft_v2.md").read_text()
    assert "It is often the fastest index." in committed and "teh" not in committed
    status = json.loads((home.project_dir(pid) / "status.json").read_text())
    assert status["stages"]["reviser"]["tool_calls"]["edit_project_file"] == 2


def test_a_repair_turn_suggests_edit_project_file_when_the_stage_has_it(home: Home) -> None:
    home.configure(agents={"reviser": {"tools": {"allow": ["project.edit_file"]}}})
    pid = home.new()
    home.model.script(
        "reviser",
        call("write_project_file", {"filename": "draft_v2.md", "content": "# Too short\n\nOne line.\n"}),
        text("Done."),
    )
    home.run("run", pid, "--quiet")
    repair = home.model.for_stage("reviser")[2].messages[-1]["content"]
    assert "edit_project_file" in repair and 'filename "draft_v2.md"' in repair


def test_mcp_arguments_are_checked_against_the_servers_schema() -> None:
    from pensieve.tools.mcp import McpServer, RemoteTool, _as_tool

    given = settings(mcp={"servers": WIKI}, limits={"mcp.wiki.*": 3})
    server = McpServer("wiki", given.mcp.servers["wiki"], {}, 1.0)
    schema = {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}
    found = _as_tool(
        server, RemoteTool("wiki", "search", "mcp.wiki.search", "Search", schema), "mcp_wiki_search", given
    )
    assert (found.canonical, found.origin, found.default_limit) == ("mcp.wiki.search", "mcp:wiki", 3)
    assert found.validate({"query": "x"}) == {"query": "x"}
    with pytest.raises(ToolError, match="'query' is a required property"):
        found.validate({})
    broken = {"type": "object", "properties": {"q": {"$ref": "#/$defs/missing"}}}
    odd = _as_tool(server, RemoteTool("wiki", "odd", "mcp.wiki.odd", "Odd", broken), "mcp_wiki_odd", given)
    assert odd.validate({"q": 1}) == {"q": 1}  # a broken schema of the server's: the server judges


async def test_web_and_library_share_one_budget_that_fits_the_rounds(tmp_path: Path) -> None:
    """Offered both the web and the library, the researcher is told one budget for their
    gathering tools, the larger of the two totals (web 5 + 10 = 15, library 6 + 8 = 14),
    and the dispatcher keeps to it: using both, the 16th call is refused (with topic
    memory's 3 it fits the 18 rounds before the notes are due), while a researcher using
    one of them keeps every call its own caps give it."""
    from pensieve.run.budget import shared_cap

    ctx = ctx_for(tmp_path, "researcher")
    tools = [catalog()[name] for name in ("fetch_url", "search_library", "read_library_document")]
    caps = {"web_search": 5, "fetch_url": 10, "search_library": 6, "read_library_document": 8}
    shared = shared_cap(caps)
    assert shared is not None and shared.cap == 15
    assert shared_cap({"fetch_url": 10, "search_topics": 3}) is None  # one gathering: its own caps
    box = ToolBox(ctx, tools, caps, shared=shared)
    answers = []
    for n in range(8):  # unknown ids: refused by the tool, but each is a call
        answers.append(await box.call("read_library_document", json.dumps({"id": f"{n:012x}"})))
    for n in range(6):  # an empty library: no hits
        answers.append(await box.call("search_library", json.dumps({"query": f"consensus {n}"})))
    # A loopback address is refused by the fetcher's guard before any request.
    answers.append(await box.call("fetch_url", json.dumps({"url": "http://127.0.0.1:9/one"})))
    assert not any("together have reached" in a.text for a in answers)
    refused = await box.call("fetch_url", json.dumps({"url": "http://127.0.0.1:9/two"}))
    assert refused.is_error and "together have reached their limit of 15 calls for the researcher stage" in refused.text
    assert sum(box.calls.values()) == 15
    # Using the web alone, all its calls go through the shared budget.
    web_only = ToolBox(ctx, tools, caps, shared=shared)
    for n in range(10):
        outcome = await web_only.call("fetch_url", json.dumps({"url": f"http://127.0.0.1:9/{n}"}))
        assert "together have reached" not in outcome.text and "has reached its limit" not in outcome.text
    assert web_only.calls["fetch_url"] == 10
