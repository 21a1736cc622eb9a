"""What a stage will be sent, built from the project as it is: the real system prompt and
task (rendered exactly as the agent loop renders them), the tools its column offers now,
and the files it reads (their size on disk, or the size such a file is expected to have).

No model is called and no key is needed: the agent's model client here refuses any call.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from pensieve.config import Settings
from pensieve.estimate.conversation import Shape
from pensieve.model.llm import LLMReply, Messages, Tools, context_chars
from pensieve.project.events import EventBus
from pensieve.project.workspace import Project
from pensieve.run.agent import AgentRun, system_prompt, task_message, tool_cap
from pensieve.run.commit import staged_artifact
from pensieve.run.finishing import Finisher
from pensieve.stages import ARTICLE_VERSIONS, Artifact, Stage
from pensieve.tool_matrix import resolve_column
from pensieve.tools import offered_tools
from pensieve.tools.registry import ToolContext

# Expected sizes (characters) of the files a stage writes, when neither the project nor a
# finished project of the workspace has one: typical of the artifacts capable models write
# for a 1,500-word article (topic briefs and reviews of 2-3k characters, research notes
# several times that with sources). Drafts follow article.target_words.
_CHARS_PER_WORD = 6.3  # words, spaces and markdown of English prose
_DEFAULT_SIZES: dict[str, int] = {
    Artifact.TOPIC_BRIEF: 2_800,
    Artifact.OUTLINE: 3_000,
    Artifact.CONTENT_REVIEW: 2_800,
    Artifact.FACT_CHECK: 3_500,
    Artifact.STYLE_REVIEW: 2_800,
    Artifact.CONSISTENCY_REPORT: 1_200,
}
_RESEARCH_NOTES = {True: 10_000, False: 4_500}  # with and without web search
_ARTICLES = ARTICLE_VERSIONS
# What the first turn's other tools answer: search_topics' hits, list_projects' rows,
# text_stats' figures.
_FIRST_TURN_TOOLS = {"search_topics": 1_500, "list_projects": 600, "text_stats": 300}
# Research turns: searches and fetches a researcher makes, each at most its cap; a result
# list is ~450 characters a hit, a fetched page up to fetch.max_chars. A checker reads the
# pages fetched in this many turns.
_SEARCHES = 4
_FETCHES = 6
_CHECK_TURNS = 2
# A stage sent back once when its artifact fails the citation or evidence check (the
# polisher) does so often when there are sources to check: 1.5 attempts expected, so the
# range spans one attempt and two.
_RESENT_ATTEMPTS = 1.5
_HIT_CHARS = 450
_PAGE_CHARS = 20_000


class _NoModel:
    """The model client of an estimate: it has a model name and refuses every call."""

    def __init__(self, model: str) -> None:
        self.model = model

    @property
    def context_chars(self) -> int:
        return 0

    async def complete(
        self, messages: Messages, *, tools: Tools = None, temperature: float | None = None, purpose: str = "agent"
    ) -> LLMReply:
        raise RuntimeError("an estimate never calls a model")


@dataclass(frozen=True)
class StagePlan:
    """What one stage would be sent and may use."""

    stage: Stage
    model: str | None
    tools: list[str]  # model-facing names offered now
    unavailable: dict[str, str]  # tool -> why it is not offered
    mcp_servers: list[str]  # servers whose tools it may use (not started by an estimate)
    system: str
    task: str
    schema_chars: int
    caps: dict[str, int]


def plan_stage(
    project: Project, stage: Stage, settings: Settings, environ: Mapping[str, str], model: str | None
) -> StagePlan:
    column = resolve_column(stage.name, stage.tools, settings)
    tools, missing = offered_tools(column.builtins, settings, environ)
    ctx = ToolContext(project=project, stage=stage, settings=settings, events=EventBus(), environ=environ)
    run = AgentRun(
        ctx=ctx,
        tools=tools,
        missing_tools=missing,
        client=_NoModel(model or ""),
        finisher=Finisher(stage, staged_artifact(project, stage), check=lambda *_: [], repair_turns=0),
    )
    schemas = [t.openai_schema() for t in tools]
    return StagePlan(
        stage=stage,
        model=model,
        tools=[t.name for t in tools],
        unavailable=dict(missing),
        mcp_servers=column.servers(settings.mcp.servers),
        system=system_prompt(run),
        task=task_message(run),
        schema_chars=len(json.dumps(schemas)),
        caps={t.name: tool_cap(t, settings) for t in tools},
    )


def default_size(name: str, settings: Settings, web: bool) -> int:
    if name in _ARTICLES:
        return int(settings.article.target_words * _CHARS_PER_WORD)
    if name == Artifact.RESEARCH_NOTES:
        return _RESEARCH_NOTES[web]
    return _DEFAULT_SIZES.get(name, 2_500)


def file_size(project: Project, name: str) -> int | None:
    path = project.file(name)
    try:
        return path.stat().st_size if path.is_file() and not path.is_symlink() else None
    except OSError:
        return None


def context_budget(settings: Settings) -> int:
    """The conversation's character budget as the run computes it from the configuration
    (llm.max_context_chars, llm.context_window; litellm's own window figures are not looked
    up: that would import litellm)."""
    llm_settings = settings.llm
    return context_chars(llm_settings.max_context_chars, llm_settings.context_window, llm_settings.max_output_tokens)


def shape_of(plan: StagePlan, sizes: Mapping[str, int], settings: Settings, *, sourced: bool = False) -> Shape:
    """The stage's conversation, given the size of each file it reads and writes, and
    whether the article has sources (a stage resent on a failed check then often is)."""
    stage = plan.stage
    reads = [n for n in stage.reads if n in sizes] or [n for n in stage.optional_reads if n in sizes]
    others = [name for name in plan.tools if name in _FIRST_TURN_TOOLS]
    research_turns, research_chars = _research(plan, settings)
    return Shape(
        base=len(plan.system) + len(plan.task) + plan.schema_chars,
        reads=sum(sizes[n] for n in reads),
        first_calls=len(reads) + len(others),
        extra_results=sum(_FIRST_TURN_TOOLS[name] for name in others),
        research_turns=research_turns,
        research_chars=research_chars,
        artifact=sizes.get(stage.writes, 0),
        context_cap=context_budget(settings),
        max_rounds=settings.max_rounds_for(stage.name),
        attempts=_RESENT_ATTEMPTS if sourced and stage.resend_on_failed_check else 1.0,
    )


def _research(plan: StagePlan, settings: Settings) -> tuple[int, int]:
    """(turns, characters a turn returns) of web research; none without web_search."""
    if "web_search" not in plan.tools:
        return 0, 0
    page = min(settings.fetch.max_chars, _PAGE_CHARS)
    fetches = min(plan.caps.get("fetch_url", 0), _FETCHES)
    if Artifact.RESEARCH_NOTES in plan.stage.reads:
        # The stage that reads the research notes checks them: it reads the archived pages
        # the researcher fetched (sources/S1.md ...) to find each claim's passage, a few at
        # a time, rather than searching again.
        read = min(plan.caps.get("read_project_file", 0), fetches)
        return _CHECK_TURNS, read * page // _CHECK_TURNS
    searches = min(plan.caps.get("web_search", 0), _SEARCHES)
    providers = max(1, len(settings.search.configured()))
    hits = settings.search.max_results_per_query * providers * _HIT_CHARS
    turns = searches + fetches
    return turns, (searches * hits + fetches * page) // turns if turns else 0
