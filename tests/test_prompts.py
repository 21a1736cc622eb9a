"""Prompts a real model can follow: the right instructions with or without web sources,
the budgets, the language, the brief's title, and what the consistency checker can compare."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pensieve import prompts
from pensieve.article.summary import document_title, opening_paragraph
from pensieve.config import AgentSettings, Settings
from pensieve.model.client import StageModelClient
from pensieve.project.events import EventLog
from pensieve.project.listing import new_project
from pensieve.project.source_archive import SourceArchive
from pensieve.project.status import load_status
from pensieve.project.workspace import Project, Workspace, atomic_write_text
from pensieve.run.agent import AgentRun, has_sources, system_prompt, task_message
from pensieve.run.commit import staged_artifact
from pensieve.run.finishing import Finisher
from pensieve.stages import BY_NAME, STAGE_NAMES, STAGES
from pensieve.tools import offered_tools
from pensieve.tools.registry import ToolContext
from pensieve.tools.workspace import earlier_articles, list_projects
from tests.conftest import Home

SEARCH_ON = {"SEARCH_API_KEY": "test-key"}


def agent_run(project: Project, stage: str, settings: Settings, environ: dict[str, str]) -> AgentRun:
    row = BY_NAME[stage]
    ctx = ToolContext(project, row, settings, EventLog(project.events_path), environ)
    tools, missing = offered_tools(row.tools, settings, environ)
    client = StageModelClient(stage, "openai/x", settings, ctx.events, print, lambda: None)
    return AgentRun(ctx, tools, missing, client, Finisher.for_stage(ctx, tools, staged_artifact(project, row)))


def settings_with_search(on: bool) -> Settings:
    settings = Settings()
    if on:
        settings.search.provider = "brave"
    return settings


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return new_project(Workspace(tmp_path, "default"), "# How vector databases index embeddings\nSome detail", "vec")


def archive_a_page(project: Project) -> None:
    SourceArchive(project.dir).add(
        url="https://example.org/hnsw",
        final_url="https://example.org/hnsw",
        title="HNSW",
        content_type="text/html",
        body=b"<p>layers</p>",
        text="Each layer is a proximity graph.",
    )


# ---------------------------------------------------------------- the template language


def test_blocks_keep_one_branch_nest_and_raise_on_mistakes() -> None:
    template = "a\n{{#if s}}\nS {{x}}\n{{#if not w}}\nno web\n{{/if}}\n{{else}}\nnone\n{{/if}}\nb {{#if w}}web{{/if}}."
    assert prompts.render(template, {"s": True, "w": False, "x": "X"}) == "a\nS X\nno web\nb ."
    assert prompts.render(template, {"s": False, "w": True, "x": "X"}) == "a\nnone\nb web."
    mistakes: list[tuple[str, dict[str, prompts.Value]]] = [
        ("{{#if s}}open", {"s": True}),
        ("stray {{/if}}", {}),
        ("{{#if s}}x{{/if}}", {}),  # a missing flag
        ("{{s}}", {"s": True}),  # a flag used as text
        ("{{#if s}}x{{/if}}", {"s": "yes"}),  # text used as a flag
        ("{{#if s}}{{typo}}{{/if}}", {"s": False}),  # a missing variable in the branch not taken
    ]
    for bad, variables in mistakes:
        with pytest.raises(prompts.PromptError):
            prompts.render(bad, variables)
    # A value is never rendered again: a user's audience cannot inject a block or a variable.
    assert prompts.render("{{a}}", {"a": "{{#if b}}{{c}}"}) == "{{#if b}}{{c}}"


# ---------------------------------------------------------------- with and without sources


def test_without_web_search_no_stage_is_asked_to_cite(project: Project) -> None:
    settings = settings_with_search(False)
    for name in STAGE_NAMES:
        run = agent_run(project, name, settings, {})
        assert not has_sources(run), name
        rendered = system_prompt(run)
        assert "{{" not in rendered
        assert "`[S3]`" not in rendered and "sources/S3.md" not in rendered, name
        # The refiner's topic brief cites nothing either way: no citation rules at all.
        assert ("This article has no sources" in rendered) == BY_NAME[name].cites, name
    reviser = system_prompt(agent_run(project, "reviser", settings, {}))
    assert "never remove a claim or a section only because" in reviser and "Claim 4: kept; unsourced" in reviser
    assert "The article is unsourced" in system_prompt(agent_run(project, "content_reviewer", settings, {}))
    researcher = system_prompt(agent_run(project, "researcher", settings, {}))
    assert '"(unsourced)"' in researcher and "web_search is not available in this run" in researcher
    fact_check = system_prompt(agent_run(project, "fact_checker", settings, {}))
    assert "| 1 | HNSW builds a layered graph | | uncited | - |" in fact_check


def test_the_library_tools_are_in_the_prompts_when_offered_with_documents(project: Project) -> None:
    from pensieve.library.extract import Limits
    from pensieve.library.store import Library

    settings = settings_with_search(False)  # library only: no web search
    marker = {"researcher": "The writer's own library", "fact_checker": "A source from the writer's library"}
    for stage, text in marker.items():
        assert text not in system_prompt(agent_run(project, stage, settings, {})), stage  # the library is empty
    Library(project.workspace).add_bytes("raft.md", b"# Raft\n\nFollowers start elections.\n", Limits())
    researcher = system_prompt(agent_run(project, "researcher", settings, {}))
    assert marker["researcher"] in researcher and "read_library_document (the id" in researcher
    # The library is a source: the researcher cites, and is not told to write "(unsourced)".
    assert "Cite every finding by the id of the page or document" in researcher
    assert '"(unsourced)"' not in researcher
    archive_a_page(project)  # the fact checker checks what the research archived
    fact_checker = system_prompt(agent_run(project, "fact_checker", settings, {}))
    assert marker["fact_checker"] in fact_checker and "search_library finds the passage" in fact_checker
    # Not offered (a deny profile, a stage without them): not mentioned.
    for stage, text in marker.items():
        row = BY_NAME[stage]
        names = tuple(n for n in row.tools if n not in ("search_library", "read_library_document"))
        ctx = ToolContext(project, row, settings, EventLog(project.events_path), {})
        tools, missing = offered_tools(names, settings, {})
        client = StageModelClient(stage, "openai/x", settings, ctx.events, print, lambda: None)
        run = AgentRun(ctx, tools, missing, client, Finisher.for_stage(ctx, tools, staged_artifact(project, row)))
        assert text not in system_prompt(run) and "search_library" not in system_prompt(run), stage


def test_prompts_state_only_what_applies_to_the_stage(project: Project) -> None:
    """Seen by hand: every prompt said "Tools you do not have: - none", the refiner got the
    rule about citing [S3], the scope was chosen blind to the research budget."""
    settings = settings_with_search(True)
    settings.limits["fetch_url"] = 9
    for name in STAGE_NAMES:
        rendered = system_prompt(agent_run(project, name, settings, SEARCH_ON))
        assert "Tools you do not have" not in rendered, name
        budget = "the Researcher can fetch at most 9 pages and run"
        assert (budget in rendered) == (name in ("refiner", "outliner")), name
    refiner = system_prompt(agent_run(project, "refiner", settings, SEARCH_ON))
    assert "`[S3]`" not in refiner and "Cite by id" not in refiner
    assert "Cite by id" in system_prompt(agent_run(project, "researcher", settings, SEARCH_ON))
    # A tool that could not be offered is still named, with why.
    researcher = system_prompt(agent_run(project, "researcher", settings_with_search(True), {}))
    assert "Tools you do not have:\n- web_search is not available in this run" in researcher
    # Without web search there is no budget to state.
    assert "Researcher can fetch" not in system_prompt(agent_run(project, "refiner", settings_with_search(False), {}))


def test_the_title_follows_the_latest_artifact_that_set_it(project: Project) -> None:
    settings = settings_with_search(False)
    atomic_write_text(project.file("topic_brief.md"), "# The brief's working title\n\n## Angle\nx\n")
    assert "Title: The brief's working title" in task_message(agent_run(project, "outliner", settings, {}))
    atomic_write_text(project.file("outline.md"), "# How `try_trait_v2` changed ?\n\n## One (~300 words)\n")
    assert "Title: How try_trait_v2 changed ?" in task_message(agent_run(project, "drafter", settings, {}))
    atomic_write_text(project.file("draft_v1.md"), "# A draft's sharper title\n\nBody.\n")
    for stage in ("content_reviewer", "fact_checker", "reviser"):
        assert "Title: A draft's sharper title" in task_message(agent_run(project, stage, settings, {})), stage
    # A stage is never told the title of an artifact written after it (a re-run outliner).
    assert "Title: The brief's working title" in task_message(agent_run(project, "outliner", settings, {}))


def test_with_web_search_the_researcher_cites_and_later_stages_cite_what_was_archived(project: Project) -> None:
    settings = settings_with_search(True)
    researcher = agent_run(project, "researcher", settings, SEARCH_ON)
    assert has_sources(researcher)
    text = system_prompt(researcher)
    assert "Search with web_search" in text and "Cite every finding by the id" in text
    # The research is done and fetched nothing: the drafter is not asked to cite pages nobody fetched.
    assert not has_sources(agent_run(project, "drafter", settings, SEARCH_ON))
    archive_a_page(project)
    for name in STAGE_NAMES:
        assert has_sources(agent_run(project, name, settings, {})), name  # archived pages count even offline
    drafter = system_prompt(agent_run(project, "drafter", settings, SEARCH_ON))
    assert "Cite as you write" in drafter and "This article has no sources" not in drafter
    reviser = system_prompt(agent_run(project, "reviser", settings, SEARCH_ON))
    assert "cite a source id that supports it, or remove it" in reviser


# ---------------------------------------------------------------- the artifact formats


def test_prompts_state_the_formats_the_contracts_check(project: Project) -> None:
    settings = Settings()
    rendered = {name: system_prompt(agent_run(project, name, settings, {})) for name in STAGE_NAMES}
    for section in ("Angle", "Audience", "Scope", "Key questions", "Prior knowledge", "Length and form"):
        assert f"`## {section}`" in rendered["refiner"]
    assert "`## Open questions`" in rendered["researcher"]
    assert "At least three `##` sections" in rendered["outliner"] and "(~300 words)" in rendered["outliner"]
    for name in ("content_reviewer", "style_reviewer"):
        assert '"No changes needed"' in rendered[name] and "numbered findings" in rendered[name]
    assert "| # | claim | cited id | verdict | evidence |" in rendered["fact_checker"]
    assert '"No earlier articles to compare."' in rendered["consistency_checker"]
    assert "`vec`" in rendered["consistency_checker"]  # told which row is its own project
    assert "`## Revision notes`" in rendered["reviser"]


# ---------------------------------------------------------------- budgets, language, title


def test_every_prompt_states_its_round_budget_and_tool_caps(project: Project) -> None:
    settings = settings_with_search(True)
    settings.agents["researcher"] = AgentSettings(max_rounds=12)
    settings.limits["fetch_url"] = 7
    for stage in STAGES:
        run = agent_run(project, stage.name, settings, SEARCH_ON)
        rendered = system_prompt(run)
        rounds = settings.max_rounds_for(stage.name)
        assert f"- {rounds} rounds." in rendered, stage.name
        for tool in run.tools:
            assert f"{tool.name} {settings.limits[tool.name]}" in rendered, (stage.name, tool.name)
    researcher = system_prompt(agent_run(project, "researcher", settings, SEARCH_ON))
    assert "Your budget: 12 rounds; tool calls web_search 5, fetch_url 7," in researcher
    # Web and library offered: one budget for both, the larger of their totals (library 6 + 8).
    assert "search_library 6, read_library_document 8" in researcher
    assert (
        "web_search, fetch_url, search_library and read_library_document together at most 14 calls "
        "(one budget for the web and the library)" in researcher
    )
    assert "by round 9 at the latest" in researcher  # a quarter of the rounds in reserve


def test_language_reaches_the_article_and_review_prompts(project: Project) -> None:
    english = system_prompt(agent_run(project, "drafter", Settings(), {}))
    assert "in English" in english and "stay exactly as written here" not in english
    settings = Settings()
    settings.article.language = "French"
    for name in ("drafter", "reviser", "polisher", "content_reviewer", "style_reviewer", "consistency_checker"):
        rendered = system_prompt(agent_run(project, name, settings, {}))
        assert "in French" in rendered, name
        assert "Write in French. Only the fixed headings" in rendered, name


def test_task_message_carries_the_brief_title(project: Project) -> None:
    settings = Settings()
    refiner = task_message(agent_run(project, "refiner", settings, {}))
    assert refiner.splitlines()[:2] == [
        "Project: vec. Your stage: refiner (Topic Refiner).",
        "Title: How vector databases index embeddings",
    ]
    # After the refiner, the working title of topic_brief.md.
    atomic_write_text(project.file("topic_brief.md"), "# Vector indexes, \u200bexplained\n\n## Angle\nx\n")
    assert "Title: Vector indexes, explained" in task_message(agent_run(project, "drafter", settings, {}))
    # ... but the refiner itself always reads the user's brief.
    assert "Title: How vector databases index embeddings" in task_message(agent_run(project, "refiner", settings, {}))
    # No heading in topic_brief.md: back to the brief's first line.
    atomic_write_text(project.file("topic_brief.md"), "## Angle\nx\n")
    assert "Title: How vector databases index embeddings" in task_message(agent_run(project, "drafter", settings, {}))


def test_document_title_and_opening_paragraph() -> None:
    assert document_title("intro\n# **The** title #\n") == "The title"
    assert document_title("no heading here\n") == ""
    assert document_title("\n\nA plain brief\nmore", first_line=True) == "A plain brief"
    text = "# T\n\n<!-- c -->\n\n## Intro\n\nVector   databases *store* embeddings [1] in indexes [2, 3][S4].\n\nMore."
    assert opening_paragraph(text) == "Vector databases store embeddings in indexes."
    assert opening_paragraph("# T\n\n" + "word " * 200).endswith("\u2026")
    assert len(opening_paragraph("# T\n\n" + "word " * 200)) <= 301


# ---------------------------------------------------------------- per-stage temperature


def test_temperature_defaults_per_stage_and_overrides() -> None:
    settings = Settings()
    assert BY_NAME["fact_checker"].temperature == 0.2 and BY_NAME["consistency_checker"].temperature == 0.2
    assert settings.temperature_for("fact_checker") == 0.2
    assert settings.temperature_for("consistency_checker") == 0.2
    assert settings.temperature_for("drafter") == settings.llm.temperature == 0.7
    settings.llm.temperature = 0.5
    assert settings.temperature_for("drafter") == 0.5 and settings.temperature_for("fact_checker") == 0.2
    settings.agents["fact_checker"] = AgentSettings(temperature=0.9)
    settings.agents["drafter"] = AgentSettings(temperature=0.0)
    assert settings.temperature_for("fact_checker") == 0.9 and settings.temperature_for("drafter") == 0.0
    assert settings.temperature_for("consistency_checker") == 0.2


# ---------------------------------------------------------------- list_projects


async def test_list_projects_shows_title_and_summary_of_complete_projects(project: Project) -> None:
    workspace = project.workspace
    done = new_project(workspace, "Background on B-trees", "btrees")
    status = load_status(done.status_path)
    status.status = "complete"
    atomic_write_text(done.status_path, status.to_json())
    final = (
        "# B-trees, \u202eexplained\n\n## Why\n\nB-trees keep sorted data balanced [1], so every lookup touches "
        + "few pages. " * 60
        + "\n\n## References\n1. x\n"
    )
    atomic_write_text(done.file("final.md"), final)
    ctx = ToolContext(project, BY_NAME["consistency_checker"], Settings(), EventLog(project.events_path), {})
    rows = {row["id"]: row for row in await list_projects.function(ctx)}
    assert rows["vec"] == {
        "id": "vec",
        "brief": "# How vector databases index embeddings\nSome detail",
        "status": "pending",
    }
    complete = rows["btrees"]
    assert complete["title"] == "B-trees, explained"  # the bidi override is stripped
    assert complete["summary"].startswith("B-trees keep sorted data balanced, so every lookup touches few pages.")
    assert len(complete["summary"]) <= 301 and complete["summary"].endswith("\u2026")
    assert earlier_articles(ctx) == {"btrees": "B-trees, explained"}
    json.dumps(complete)  # a plain JSON row
    # A complete project whose final.md is gone: the brief's first line, no summary.
    done.file("final.md").unlink()
    row = next(r for r in await list_projects.function(ctx) if r["id"] == "btrees")
    assert row["title"] == "Background on B-trees" and row["summary"] == ""


# ---------------------------------------------------------------- through the pipeline


def test_a_run_sends_the_title_the_language_and_the_stage_temperatures(home: Home) -> None:
    home.configure(article={"language": "German"})
    pid = home.new()
    assert home.run("run", pid).exit_code == 0
    for name in STAGE_NAMES:
        first = home.model.for_stage(name)[0]
        assert "Title: How vector databases index embeddings" in first.messages[1]["content"], name
        expected = 0.2 if name in ("fact_checker", "consistency_checker") else 0.7
        assert first.body["temperature"] == expected, name
    assert "Write in German." in home.model.for_stage("drafter")[0].messages[0]["content"]
