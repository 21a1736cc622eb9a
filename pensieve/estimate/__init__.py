"""What a run will do and cost, before it spends anything (`pensieve estimate`,
`pensieve run --dry-run`, the studio's project page).

Per stage: the model, the tools, the expected model calls, input and output tokens and
cost, each as a low-expected-high range, and the basis of the figures. Needs no key, no
network and no litellm import: prompts are rendered as the agent loop renders them
(`plan`), each conversation is simulated turn by turn (`conversation`), finished projects
of the workspace correct the simulation by what they really used (`history`), and prices
come from litellm's price map file (`prices`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pensieve.config import Settings
from pensieve.estimate.conversation import simulate
from pensieve.estimate.history import History, band, project_sizes, ratios, read_history
from pensieve.estimate.plan import StagePlan, context_budget, default_size, plan_stage, shape_of
from pensieve.estimate.prices import price_of
from pensieve.project.source_archive import SourceArchive
from pensieve.project.status import load_status
from pensieve.project.workspace import BRIEF_FILE, Project
from pensieve.run.preflight import RunOptions, project_settings, select_stages
from pensieve.stages import BY_NAME, STAGE_NAMES, STAGES

__all__ = ["Estimate", "Range", "StageEstimate", "estimate_project"]

UNKNOWN_PRICE = "unknown price"


@dataclass(frozen=True)
class Range:
    low: float
    expected: float
    high: float

    def __add__(self, other: Range) -> Range:
        return Range(self.low + other.low, self.expected + other.expected, self.high + other.high)

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high

    def as_ints(self) -> dict[str, int]:
        return {"low": math.floor(self.low), "expected": round(self.expected), "high": math.ceil(self.high)}

    def as_money(self) -> dict[str, float]:
        return {"low": round(self.low, 6), "expected": round(self.expected, 6), "high": round(self.high, 6)}


@dataclass
class StageEstimate:
    stage: str
    model: str | None
    tools: list[str]
    unavailable_tools: dict[str, str]
    calls: Range
    input_tokens: Range
    output_tokens: Range
    cost_usd: Range | None  # None: litellm's price map has no price for the model
    price: str  # the price map's entry, or "unknown price"
    prompt_chars: int
    basis: str
    system_prompt: str = field(repr=False, default="")
    task: str = field(repr=False, default="")

    @property
    def total_tokens(self) -> Range:
        return self.input_tokens + self.output_tokens

    def to_json(self, *, prompts: bool = False) -> dict[str, Any]:
        data: dict[str, Any] = {
            "stage": self.stage,
            "model": self.model,
            "tools": self.tools,
            "unavailable_tools": self.unavailable_tools,
            "calls": self.calls.as_ints(),
            "input_tokens": self.input_tokens.as_ints(),
            "output_tokens": self.output_tokens.as_ints(),
            "total_tokens": self.total_tokens.as_ints(),
            "cost_usd": self.cost_usd.as_money() if self.cost_usd is not None else None,
            "price": self.price,
            "prompt_chars": self.prompt_chars,
            "basis": self.basis,
        }
        if prompts:
            data["system_prompt"], data["task"] = self.system_prompt, self.task
        return data


@dataclass
class Estimate:
    project: str
    stages: list[StageEstimate]
    basis: list[str]
    history: list[str]

    @property
    def total_tokens(self) -> Range:
        return sum((s.total_tokens for s in self.stages), Range(0, 0, 0))

    @property
    def calls(self) -> Range:
        return sum((s.calls for s in self.stages), Range(0, 0, 0))

    @property
    def cost_usd(self) -> Range | None:
        """The run's cost, or None when a stage's model has no known price."""
        if not self.stages or any(s.cost_usd is None for s in self.stages):
            return None
        return sum((s.cost_usd for s in self.stages if s.cost_usd is not None), Range(0, 0, 0))

    def to_json(self, *, prompts: bool = False) -> dict[str, Any]:
        cost = self.cost_usd
        return {
            "project": self.project,
            "stages": [s.to_json(prompts=prompts) for s in self.stages],
            "total": {
                "calls": self.calls.as_ints(),
                "total_tokens": self.total_tokens.as_ints(),
                "cost_usd": cost.as_money() if cost is not None else None,
            },
            "basis": self.basis,
            "history": self.history,
        }


def estimate_project(
    project: Project,
    settings: Settings,
    *,
    options: RunOptions | None = None,
    environ: Mapping[str, str] | None = None,
    history_from: list[Project] | None = None,
    fresh: bool = False,
) -> Estimate:
    """The estimate of the stages `pensieve run` would run with `options` (every stage when
    the project is complete). `history_from`: the projects to learn from (default: the
    workspace's others). `fresh`: as before the first run, ignoring every file but the brief
    (how the benchmark asks about a project that has run since)."""
    environ = os.environ if environ is None else environ
    options = options or RunOptions()
    # What the run would use: the workspace's config.yaml and the project's `new --no-web`.
    settings = project_settings(project, settings)

    def model_for(name: str) -> str | None:
        return options.model or settings.model_for(name)

    basis: list[str] = []
    if fresh:
        selected = list(STAGE_NAMES)
    else:
        selected = select_stages(load_status(project.status_path), options)
        if not selected:
            selected = list(STAGE_NAMES)
            basis.append("the project is complete: this is the estimate of running every stage again (--force)")
    others = (
        history_from if history_from is not None else [p for p in project.workspace.projects() if p.id != project.id]
    )
    plans: dict[str, StagePlan] = {}

    def plan_for(name: str) -> StagePlan:
        if name not in plans:
            plans[name] = plan_stage(project, BY_NAME[name], settings, environ, model_for(name))
        return plans[name]

    history = read_history(others, settings, plan_for)
    web = _web_research(settings, environ)
    sizes = _sizes(project, settings, history, web=web, fresh=fresh)
    sourced = web or (not fresh and bool(SourceArchive(project.dir).entries()))
    stages = [_stage_estimate(plan_for(name), settings, sizes, history, sourced=sourced) for name in selected]
    basis.append(
        "prompt sizes of this project (system prompt, task, tool schemas and the files each stage reads, "
        "rendered as the run would send them), ~4 characters a token"
    )
    basis.append(
        f"budgets: llm.max_rounds {settings.llm.max_rounds}, a context budget of {context_budget(settings):,} "
        f"characters, article.target_words {settings.article.target_words:,}, the tool caps (limits.*)"
    )
    if history.projects:
        basis.append(f"what {len(history.projects)} finished project(s) of the workspace actually used per stage")
    else:
        basis.append("no finished project in the workspace to learn from yet: ranges are the prediction / 1.7 to x 1.7")
    if any(s.cost_usd is None for s in stages):
        basis.append(f"cost: litellm's price map has no price for some models ({UNKNOWN_PRICE})")
    else:
        basis.append("cost: litellm's price map (input and output price per token)")
    if settings.llm.retries:
        basis.append("not counted: retried calls, fetch_url summaries and the evidence judge")
    return Estimate(project.id, stages, basis, history.projects)


def _sizes(project: Project, settings: Settings, history: History, *, web: bool, fresh: bool) -> dict[str, int]:
    """Each file's size: on disk, else the median of the finished projects', else a default."""
    on_disk = project_sizes(project)
    sizes: dict[str, int] = {}
    for name in (BRIEF_FILE, *(stage.writes for stage in STAGES)):
        if name in on_disk and (name == BRIEF_FILE or not fresh):
            sizes[name] = on_disk[name]
        elif name != BRIEF_FILE:
            sizes[name] = history.expected_size(name) or default_size(name, settings, web)
    return sizes


def _web_research(settings: Settings, environ: Mapping[str, str]) -> bool:
    """Whether web search is offered now (research notes are longer with sources)."""
    from pensieve.tools import offered_tools

    tools, _missing = offered_tools(("web_search",), settings, environ)
    return bool(tools)


def _stage_estimate(
    plan: StagePlan, settings: Settings, sizes: dict[str, int], history: History, *, sourced: bool
) -> StageEstimate:
    stage, model = plan.stage, plan.model
    shape = shape_of(plan, sizes, settings, sourced=sourced)
    predicted = simulate(shape)
    seen = history.by_stage.get(stage.name, [])
    calls = Range(*band(predicted.calls, ratios(seen, lambda f: f.calls)))
    calls = Range(max(1.0, calls.low), max(1.0, calls.expected), max(1.0, calls.high))
    inp = Range(*band(predicted.input_tokens, ratios(seen, lambda f: f.input_tokens)))
    out = Range(*band(predicted.output_tokens, ratios(seen, lambda f: f.output_tokens)))
    price = price_of(model)
    cost = (
        Range(price.cost(inp.low, out.low), price.cost(inp.expected, out.expected), price.cost(inp.high, out.high))
        if price is not None
        else None
    )
    parts = [f"prompt {len(plan.system) + len(plan.task):,} chars + tool schemas {plan.schema_chars:,}"]
    read = [f"{n} {sizes[n]:,}" for n in stage.reads if n in sizes]
    if read:
        parts.append(f"reads {', '.join(read)} chars")
    parts.append(f"writes {stage.writes} ~{sizes.get(stage.writes, 0):,} chars")
    if shape.research_turns:
        parts.append(f"{shape.research_turns} search/fetch turns")
    if plan.mcp_servers:
        parts.append(f"MCP tools of {', '.join(plan.mcp_servers)} not counted")
    if seen:
        r = ratios(seen, lambda f: f.total_tokens)
        parts.append(
            f"corrected by {len(seen)} finished project(s) (actual/predicted tokens {min(r):.2f}-{max(r):.2f})"
        )
    return StageEstimate(
        stage=stage.name,
        model=model,
        tools=plan.tools + [f"mcp:{s}" for s in plan.mcp_servers],
        unavailable_tools=plan.unavailable,
        calls=calls,
        input_tokens=inp,
        output_tokens=out,
        cost_usd=cost,
        price=price.entry if price is not None else UNKNOWN_PRICE,
        prompt_chars=len(plan.system) + len(plan.task),
        basis="; ".join(parts),
        system_prompt=plan.system,
        task=plan.task,
    )
