"""`pensieve estimate` and `pensieve run --dry-run`: what a run will do and cost, before it
spends anything. No key, no network, no model (pensieve/estimate/)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from pensieve.cli.support import JsonOpt, WorkspaceOpt, check_text, err, guarded, out, plain_table, workspace_of
from pensieve.errors import UsageError
from pensieve.json_text import print_json

if TYPE_CHECKING:
    from pensieve.config import Settings
    from pensieve.estimate import Estimate, Range
    from pensieve.project.workspace import Project
    from pensieve.run.preflight import RunOptions


def _tokens(r: Range) -> str:
    return f"{int(r.low):,}-{int(r.high) + 1:,}"


def _money(r: Range | None) -> str:
    return "unknown price" if r is None else f"${r.low:.4f}-{r.high:.4f}"


def _calls(r: Range) -> str:
    low, high = int(r.low), -int(-r.high // 1)
    return f"{low}" if low == high else f"{low}-{high}"


def print_estimate(estimate: Estimate) -> None:
    """The estimate as a table on stdout, its basis on stderr-free lines below it."""
    table = plain_table("stage", "model", "tools", "calls", "input tokens", "output tokens", "cost", fold=("tools",))
    for s in estimate.stages:
        table.add_row(
            s.stage,
            s.model or "(no model)",
            ", ".join(s.tools) or "none",
            _calls(s.calls),
            _tokens(s.input_tokens),
            _tokens(s.output_tokens),
            _money(s.cost_usd),
        )
    out.print(table)
    total = estimate.total_tokens
    out.print(
        f"total: {_calls(estimate.calls)} model calls, {_tokens(total)} tokens (expected ~{int(total.expected):,}), "
        f"{_money(estimate.cost_usd)}",
        markup=False,
    )
    for line in estimate.basis:
        out.print(f"basis: {line}", markup=False)


def estimate(
    project_id: Annotated[str, typer.Argument(metavar="ID", help="The project to estimate.")],
    workspace: WorkspaceOpt = "default",
    model: Annotated[str | None, typer.Option("--model", help="Estimate with this model (as run --model).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Per stage: model, tools, expected model calls, tokens and cost (low-high), before a run.

    Needs no key and no network. Example: pensieve estimate btrees --model openai/gpt-4o-mini
    """

    def action() -> Estimate:
        from pensieve.config import load_settings
        from pensieve.estimate import estimate_project
        from pensieve.run.preflight import RunOptions

        check_text(model, "--model")
        if model is not None and not model.strip():
            raise UsageError("--model is empty; give a litellm model string such as openai/gpt-4o-mini")
        settings = load_settings()
        project = workspace_of(workspace).existing_project(project_id)
        return estimate_project(project, settings, options=RunOptions(model=model))

    result = guarded(action)
    if as_json:
        print_json(result.to_json(prompts=True))  # the prompts each stage would be sent
        return
    out.print(f"{result.project}: estimate before running", markup=False)
    print_estimate(result)
    if any(s.model is None for s in result.stages):
        err.print("note: no model configured; set llm.model or PENSIEVE_MODEL, or pass --model", markup=False)


def dry_run(project: Project, settings: Settings, options: RunOptions) -> int:
    """`pensieve run --dry-run`: the stages the run would take, each one's model, inputs,
    output and tools, the estimate, and whether the run would start. Returns the exit code
    the run would be refused with (2), else 0. Nothing is written, no model is asked."""
    import os

    from pensieve.errors import PensieveError
    from pensieve.estimate import estimate_project
    from pensieve.run.preflight import preflight, preflight_warnings
    from pensieve.stages import BY_NAME

    try:
        refusal = None
        preflight(project, settings, options, os.environ)
    except PensieveError as exc:
        refusal = exc
    result = estimate_project(project, settings, options=options)
    names = [s.stage for s in result.stages]
    out.print(f"plan for {project.id}: {len(names)} stage(s) to run: {', '.join(names)}", markup=False)
    for s in result.stages:
        stage = BY_NAME[s.stage]
        out.print(
            f"  {s.stage} ({stage.title}): model {s.model or '(none)'}; reads {', '.join(stage.reads)}; "
            f"writes {stage.writes}; tools {', '.join(s.tools) or 'none'}",
            markup=False,
        )
        for tool, why in s.unavailable_tools.items():
            out.print(f"    {tool} not available: {why}", markup=False)
    print_estimate(result)
    for warning in preflight_warnings(settings, options):
        err.print(warning, markup=False)
    if refusal is not None:
        err.print(f"a run would be refused: {refusal}", markup=False)
        return refusal.exit_code
    err.print(f"dry run: no model was called and nothing changed; `pensieve run {project.id}` starts it", markup=False)
    return 0
