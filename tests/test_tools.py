"""The local tools as plain functions, their derived schemas, and prompt rendering."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pensieve import prompts
from pensieve.config import Settings
from pensieve.project.events import EventLog
from pensieve.project.listing import new_project
from pensieve.project.workspace import Workspace, atomic_write_text
from pensieve.stages import BY_NAME, STAGES
from pensieve.tools import catalog
from pensieve.tools.files import staged_path
from pensieve.tools.registry import ToolContext, ToolError
from pensieve.tools.stats import text_stats
from pensieve.tools.workspace import list_projects

SNAPSHOT = Path(__file__).parent / "snapshots" / "tool_schemas.json"


def test_every_tool_schema_matches_the_snapshot() -> None:
    """Schemas are derived from signatures and docstrings; a change must be deliberate.

    Update with: PENSIEVE_UPDATE_SNAPSHOTS=1 python -m pytest tests/test_tools.py
    """
    schemas = {name: tool.openai_schema() for name, tool in sorted(catalog().items())}
    if os.environ.get("PENSIEVE_UPDATE_SNAPSHOTS"):
        SNAPSHOT.write_text(json.dumps(schemas, indent=2, sort_keys=True) + "\n")
    assert schemas == json.loads(SNAPSHOT.read_text())


def test_schemas_have_descriptions_and_required_fields() -> None:
    for name, tool in catalog().items():
        function = tool.openai_schema()["function"]
        assert function["description"], name
        params = function["parameters"]
        assert params["type"] == "object" and params["additionalProperties"] is False
        for prop, spec in params["properties"].items():
            assert spec.get("description"), (name, prop)
    assert catalog()["write_project_file"].schema["required"] == ["filename", "content"]
    assert catalog()["list_projects"].schema["properties"] == {}


def ctx_for(tmp_path: Path, stage: str = "polisher") -> ToolContext:
    workspace = Workspace(tmp_path, "default")
    project = new_project(workspace, "A brief about tools", "tools")
    return ToolContext(project, BY_NAME[stage], Settings(), EventLog(project.events_path), {})


async def test_text_stats(tmp_path: Path) -> None:
    ctx = ctx_for(tmp_path)
    words = " ".join(["word"] * 400)
    assert await text_stats.function(ctx, text=words) == {
        "word_count": 400,
        "char_count": len(words),
        "reading_time_minutes": 2.0,
    }
    assert await text_stats.function(ctx, text="Two  words\n") == {
        "word_count": 2,
        "char_count": 11,
        "reading_time_minutes": 0.01,
    }
    assert (await text_stats.function(ctx, text=""))["word_count"] == 0


async def test_text_stats_measures_a_project_file_by_name(tmp_path: Path) -> None:
    """The polisher measured its 8,500-character article by sending all of it back as an
    argument (seen by hand); a file name does the same without echoing the text."""
    ctx = ctx_for(tmp_path)
    atomic_write_text(ctx.project.file("draft_v2.md"), "# Title\n\n" + " ".join(["word"] * 300))
    assert await text_stats.function(ctx, filename="draft_v2.md") == {
        "filename": "draft_v2.md",
        "word_count": 302,
        "char_count": 9 + 300 * 5 - 1,
        "reading_time_minutes": 1.51,
    }
    # The polisher's own final.md in progress is what it measures, as read_project_file reads it.
    staged = staged_path(ctx, "final.md")
    staged.parent.mkdir(parents=True, exist_ok=True)
    staged.write_text("# Final\n\nOne two three.\n")
    assert (await text_stats.function(ctx, filename="final.md"))["word_count"] == 5
    for bad, message in [
        ({"filename": "missing.md"}, "file 'missing.md' does not exist"),
        ({"filename": "../outside.md"}, r"\.\."),
        ({"filename": "final.md", "text": "x"}, "give either text or filename, not both"),
    ]:
        with pytest.raises(ToolError, match=message):
            await text_stats.function(ctx, **bad)


async def test_list_projects_omits_projects_without_brief_or_status(tmp_path: Path) -> None:
    ctx = ctx_for(tmp_path, "consistency_checker")
    workspace = ctx.project.workspace
    new_project(workspace, "Second article\nwith detail", "second")
    (workspace.projects_dir / "no-status").mkdir()
    (workspace.projects_dir / "no-status" / "brief.md").write_text("orphan")
    (workspace.projects_dir / "no-brief").mkdir()
    (workspace.projects_dir / "no-brief" / "status.json").write_text(
        (workspace.projects_dir / "second" / "status.json").read_text()
    )
    rows = await list_projects.function(ctx)
    assert rows == [
        {"id": "second", "brief": "Second article\nwith detail", "status": "pending"},
        {"id": "tools", "brief": "A brief about tools", "status": "pending"},
    ]


def test_every_prompt_renders_and_a_missing_variable_raises(tmp_path: Path) -> None:
    from pensieve.model.client import StageModelClient
    from pensieve.run.agent import AgentRun, system_prompt
    from pensieve.run.commit import staged_artifact
    from pensieve.run.finishing import Finisher

    base = ctx_for(tmp_path)
    for stage in STAGES:
        ctx = ToolContext(base.project, stage, Settings(), base.events, {})
        client = StageModelClient(stage.name, "openai/x", Settings(), base.events, print, lambda: None)
        finisher = Finisher.for_stage(ctx, [], staged_artifact(base.project, stage))
        run = AgentRun(ctx, [], {"web_search": "no provider"}, client, finisher)
        rendered = system_prompt(run)
        assert "{{" not in rendered and stage.writes in rendered and f"`{stage.name}`" in rendered
        assert "web_search is not available in this run: no provider" in rendered
    with pytest.raises(prompts.PromptError, match="nope"):
        prompts.render("Hello {{nope}}", {})
