"""What a run will do, and everything refused before it changes anything.

`select_stages` turns the flags (--stage, --until, --from, --force) and the project's status
into the stages to run; `preflight` refuses a run that cannot start (a missing input, no
model, a missing key: exit 2, nothing touched); `preflight_warnings` is advice for a run
that may still work.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from pensieve.config import Settings
from pensieve.errors import UsageError
from pensieve.model import llm
from pensieve.project.staleness import demote_missing
from pensieve.project.status import Status, load_status
from pensieve.project.workspace import Project
from pensieve.stages import BY_NAME, STAGE_NAMES, Stage, downstream_of


@dataclass(frozen=True)
class RunOptions:
    """What one run is asked to do: the flags of `pensieve run`, a batch's `--until` and
    `--model`, the studio's Run button. Checked when made (UsageError), so every way to start
    a run refuses the same things in the same words; `as_api` names the options as the
    studio's JSON does (`until: ...`) instead of as flags (`--until ...`)."""

    stage: str | None = None
    until: str | None = None
    force: bool = False
    model: str | None = None
    from_stage: str | None = None
    as_api: bool = field(default=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        for key, value in (("stage", self.stage), ("until", self.until), ("from", self.from_stage)):
            if value is not None and value not in BY_NAME:
                named = f"{key}: " if self.as_api else ""
                raise UsageError(f"{named}unknown stage {value!r}; stages are: {', '.join(STAGE_NAMES)}")
        if self.stage and (self.until or self.from_stage):
            raise UsageError("--stage runs one stage; it cannot be combined with --until or --from")
        if self.until and self.from_stage and STAGE_NAMES.index(self.from_stage) > STAGE_NAMES.index(self.until):
            dash = "" if self.as_api else "--"
            raise UsageError(f"{dash}from {self.from_stage} comes after {dash}until {self.until}; nothing would run")
        if self.model is not None and not self.model.strip():
            raise UsageError("--model is empty; give a litellm model string such as openai/gpt-4o-mini")

    @classmethod
    def from_api(cls, until: object, from_stage: object, model: str | None) -> RunOptions:
        """The options of a studio run from its JSON body, where "" means not given."""
        given: dict[str, str | None] = {}
        for key, value in (("until", until), ("from", from_stage)):
            if value is not None and value != "" and not isinstance(value, str):
                raise UsageError(f"{key}: unknown stage {value!r}; stages are: {', '.join(STAGE_NAMES)}")
            given[key] = value or None
        return cls(until=given["until"], from_stage=given["from"], model=model or None, as_api=True)

    def as_args(self) -> list[str]:
        """The same options as `pensieve run` flags (the studio starts its runs so)."""
        args: list[str] = []
        for flag, value in (("--stage", self.stage), ("--until", self.until), ("--from", self.from_stage)):
            if value:
                args += [flag, value]
        if self.force:
            args.append("--force")
        if self.model:
            args += ["--model", self.model]
        return args


def select_stages(status: Status, options: RunOptions) -> list[str]:
    if options.stage:
        return [options.stage]
    names = list(STAGE_NAMES)
    if options.until:
        names = names[: names.index(options.until) + 1]
    if options.force:
        return names
    again = set(downstream_of(options.from_stage)) if options.from_stage else set()
    return [name for name in names if status.stages[name].status != "complete" or name in again]


def _missing_inputs(project: Project, stage: Stage) -> list[str]:
    missing = [str(name) for name in stage.reads if not project.file(name).is_file()]
    if missing and stage.optional_reads and any(project.file(n).is_file() for n in stage.optional_reads):
        return []
    return missing


def preflight(project: Project, settings: Settings, options: RunOptions, environ: Mapping[str, str]) -> list[str]:
    """Everything that can be refused before the run changes anything (exit 2)."""
    status = load_status(project.status_path)
    demote_missing(project, status)  # in memory: recover() records it under the lock
    selected = select_stages(status, options)
    if options.stage:
        stage = BY_NAME[options.stage]
        blocked = [dep for dep in stage.after if status.stages[dep].status != "complete"]
        missing = _missing_inputs(project, stage)
        if blocked and missing:
            raise UsageError(
                f"stage {stage.name} needs {', '.join(missing)}; "
                f"run the earlier stages first (pensieve run {project.id})"
            )
    check_models({options.model or settings.model_for(name) for name in selected}, settings)
    return selected


def check_models(
    models: set[str | None],
    settings: Settings,
    *,
    also: str = "",
    config: str = "configs/pensieve.yaml",
    choose: str = "pass --model",
) -> None:
    """Refuse a run with a stage that has no model, or a model whose provider key is missing
    (`also` names one more way to give a model, e.g. a batch item's own; `config` and
    `choose` say where to set one in the caller's terms, e.g. the studio's form)."""
    if None in models:
        raise UsageError(
            f"no model configured: set llm.model in {config}, or PENSIEVE_MODEL, or {choose}"
            f"{also} (e.g. openai/gpt-4o-mini, or ollama_chat/llama3.1 for a local model through Ollama)"
        )
    for model in sorted(m for m in models if m):
        problem = llm.key_problem(model, settings.llm.api_base)
        if problem:
            raise UsageError(problem)


def preflight_warnings(settings: Settings, options: RunOptions) -> list[str]:
    """Advice worth one line before a run that may still work (the CLI prints it on stderr)."""
    names = [options.stage] if options.stage else STAGE_NAMES
    models = sorted({m for m in (options.model or settings.model_for(name) for name in names) if m})
    # litellm's ollama/ provider sends Ollama `format: json` whenever tools are given, so the
    # model answers every turn with a JSON object instead of calling tools or writing prose.
    return [
        f"warning: {model}: litellm's ollama/ provider forces JSON output when tools are given; "
        f"use ollama_chat/{model.split('/', 1)[1]} instead"
        for model in models
        if model.startswith("ollama/")
    ]


def project_settings(project: Project, settings: Settings) -> Settings:
    """The settings with the workspace's config.yaml (`research`, `library`) and then the
    project's own research plan applied (`new --no-web`: research.web false for it alone);
    a copy, so a batch worker's other projects keep theirs."""
    from pensieve.config import workspace_settings
    from pensieve.library.sources import load_plan

    settings = workspace_settings(settings, project.workspace.root)
    if load_plan(project.dir).web is False and settings.research.web:
        settings = settings.model_copy(deep=True)
        settings.research.web = False
    return settings
