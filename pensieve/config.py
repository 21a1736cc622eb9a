"""Configuration: built-in defaults < YAML file < environment < command-line flags.

One typed `Settings` object comes out. Unknown keys and wrong types are errors that name
the key, so a typo in a config file never silently falls back to a default. API keys are
never read from here: they come only from the environment.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from pensieve.config_files import _ENV_OVERRIDES, config_path, pensieve_home
from pensieve.errors import UsageError, format_validation_error
from pensieve.stages import BY_NAME, STAGE_NAMES

SearchProvider = Literal["", "tavily", "serpapi", "brave"]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, validate_assignment=True)


class LLMSettings(_Section):
    model: str | None = None
    api_base: str | None = None
    temperature: float = 0.7
    max_rounds: int = Field(default=24, ge=1)
    timeout_s: float = Field(default=180.0, gt=0)
    retries: int = Field(default=4, ge=0)
    retry_base_s: float = Field(default=1.0, ge=0)  # first backoff; doubles on each retry
    retry_max_wait_s: float = Field(default=60.0, ge=0)
    # A cap on every reply. Without one a local server generates until its context is full
    # (one refiner call on a small model ran 180 s into the timeout, then was retried).
    # 4096 tokens is ~3,000 words, more than a whole article. null: no cap.
    max_output_tokens: int | None = Field(default=4096, ge=1)
    # Past this many characters of conversation, the oldest tool results are elided
    # (about 4 characters a token: 240,000 is ~60k tokens). It is lowered further to fit the
    # model's window (see context_window), so a small local model needs no change here.
    max_context_chars: int = Field(default=240_000, ge=10_000)
    # The model's context window in tokens, for a model litellm does not know (a server of
    # one's own: llama-server's -c, vLLM's --max-model-len, Ollama's num_ctx, which Pensieve
    # then sets). Unset: litellm's figure where it has one, else max_context_chars alone.
    context_window: int | None = Field(default=None, ge=1_024)
    # Turns that tell the model exactly what is wrong with its artifact (its contract)
    # before the stage fails; a reminder to write the file at all comes on top, once.
    repair_turns: int = Field(default=2, ge=0)


class AgentSettings(_Section):
    model: str | None = None
    temperature: float | None = None
    max_rounds: int | None = Field(default=None, ge=1)


class ArticleSettings(_Section):
    target_words: int = Field(default=1500, ge=100)
    audience: str = "curious, technically literate readers"
    style: str = "clear, concrete, well-sourced prose"
    # The article and its reviews are written in it (the headings and phrases Pensieve
    # itself reads, such as "## Open questions", stay as the prompts give them).
    language: str = Field(default="English", min_length=1, max_length=40)


class SearchSettings(_Section):
    provider: SearchProvider = ""
    endpoint: str | None = None
    max_results_per_query: int = Field(default=5, ge=1, le=50)
    min_interval_s: float = Field(default=1.0, ge=0)
    timeout_s: float = Field(default=15.0, gt=0)


class FetchSettings(_Section):
    timeout_s: float = Field(default=10.0, gt=0)
    max_chars: int = Field(default=50_000, ge=100)
    max_bytes: int = Field(default=5_000_000, ge=1_000)
    allow_private_hosts: bool = False
    max_redirects: int = Field(default=5, ge=0, le=20)
    # Extra certificate authorities (PEM) trusted for HTTPS fetches, beside the usual ones.
    ca_file: str | None = None

    @field_validator("ca_file")
    @classmethod
    def _readable_certificates(cls, value: str | None) -> str | None:
        if value:
            import ssl

            try:
                ssl.create_default_context().load_verify_locations(cafile=value)
            except (OSError, ssl.SSLError) as exc:
                raise ValueError(f"cannot load certificates from {value!r} ({exc})") from None
        return value


class TopicsSettings(_Section):
    # Cosine floor for search_topics. Measured on tests/topic_library.py: paraphrases of a
    # topic score 0.37-0.85 against it, unrelated questions at most 0.25 against anything.
    min_score: float = 0.3
    capture: bool = True
    max_results: int = Field(default=5, ge=1)


class BudgetSettings(_Section):
    max_tokens: int | None = Field(default=None, ge=1)
    max_cost_usd: float | None = Field(default=None, gt=0)


class RunSettings(_Section):
    deadline_s: float | None = Field(default=None, gt=0)


class CheckSettings(_Section):
    min_cited_paragraph_share: float = Field(default=0.5, ge=0, le=1)
    repolish_on_failure: bool = True


class ContractsSettings(_Section):
    """What a stage's artifact must be before it is committed (pensieve/contracts/)."""

    enabled: bool = True
    # Drafts and the final article must reach this share of article.target_words.
    draft_min_share: float = Field(default=0.6, gt=0, le=1)
    final_min_share: float = Field(default=0.7, gt=0, le=1)
    min_article_sections: int = Field(default=2, ge=0)  # ## sections of a draft or the final article
    min_outline_sections: int = Field(default=3, ge=1)  # ## sections with a word budget in outline.md
    # topic_brief.md is about the brief when it holds this share of the brief's key terms ...
    topic_min_term_share: float = Field(default=0.5, ge=0, le=1)
    # ... or else when its MiniLM cosine similarity to the brief reaches this floor. Measured:
    # topic briefs on the brief's subject 0.36-0.64 (a neighbouring subject, B-tree indexes for
    # "vector databases", 0.40); other subjects -0.02-0.14; the fake model's old placeholder 0.05.
    topic_min_similarity: float = Field(default=0.3, ge=-1, le=1)
    topic_semantic: bool = True  # false: judge on key terms alone (never loads the model)
    # Past this share of 8-word sequences copied from the system prompt or task message, the
    # artifact is an echo of the instructions (real artifacts quote a heading or two: < 10%).
    echo_max_overlap: float = Field(default=0.5, gt=0, le=1)


def default_tool_limits() -> dict[str, int]:
    """Each tool's own per-stage call cap (`@tool(default_limit=...)`), in catalog order.

    Imported when settings are built, not when this module is: `pensieve list` and
    `status` import config without paying for the tool modules (httpx, the web code)."""
    from pensieve.tools import CATALOG

    return {tool.name: tool.default_limit for tool in CATALOG}


class Settings(_Section):
    llm: LLMSettings = Field(default_factory=LLMSettings)
    agents: dict[str, AgentSettings] = Field(default_factory=dict)
    article: ArticleSettings = Field(default_factory=ArticleSettings)
    search: SearchSettings = Field(default_factory=SearchSettings)
    fetch: FetchSettings = Field(default_factory=FetchSettings)
    topics: TopicsSettings = Field(default_factory=TopicsSettings)
    budget: BudgetSettings = Field(default_factory=BudgetSettings)
    run: RunSettings = Field(default_factory=RunSettings)
    limits: dict[str, int] = Field(default_factory=default_tool_limits)
    check: CheckSettings = Field(default_factory=CheckSettings)
    contracts: ContractsSettings = Field(default_factory=ContractsSettings)

    @field_validator("agents")
    @classmethod
    def _known_stages(cls, value: dict[str, AgentSettings]) -> dict[str, AgentSettings]:
        for name in value:
            if name not in STAGE_NAMES:
                raise ValueError(f"unknown stage {name!r}; stages are: {', '.join(STAGE_NAMES)}")
        return value

    @field_validator("limits")
    @classmethod
    def _known_tools(cls, value: dict[str, int]) -> dict[str, int]:
        merged = default_tool_limits()
        for name, cap in value.items():
            if name not in merged:
                raise ValueError(f"unknown tool {name!r}; tools are: {', '.join(merged)}")
            if cap < 0:
                raise ValueError(f"limit for {name} must be >= 0")
            merged[name] = cap
        return merged

    def model_for(self, stage: str) -> str | None:
        agent = self.agents.get(stage)
        return (agent.model if agent and agent.model else None) or self.llm.model

    def temperature_for(self, stage: str) -> float:
        """agents.<stage>.temperature, else the stage row's default, else llm.temperature."""
        agent = self.agents.get(stage)
        if agent and agent.temperature is not None:
            return agent.temperature
        row = BY_NAME.get(stage)
        return row.temperature if row and row.temperature is not None else self.llm.temperature

    def max_rounds_for(self, stage: str) -> int:
        agent = self.agents.get(stage)
        return agent.max_rounds if agent and agent.max_rounds else self.llm.max_rounds


def _read_yaml(path: Path) -> dict[str, Any]:
    import yaml  # local: only commands that load config pay for it

    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not UTF-8 text; save the config file as UTF-8") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read config file ({exc.strerror})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise UsageError(f"{path}: bad YAML{where}: {problem}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UsageError(f"{path}: the top level must be a mapping of sections (llm:, search:, ...)")
    # A section whose keys are all commented out parses as null: treat it as empty.
    return {key: ({} if value is None else value) for key, value in data.items()}


def load_settings(
    home: Path | None = None,
    environ: dict[str, str] | None = None,
    overrides: dict[str, dict[str, Any]] | None = None,
) -> Settings:
    """Build Settings from the layers. Raises UsageError naming the bad key."""
    env = dict(os.environ if environ is None else environ)
    home = home or pensieve_home(env)
    path = config_path(home, env)
    data: dict[str, Any] = _read_yaml(path) if path else {}
    source = str(path) if path else "built-in defaults"
    try:
        settings = Settings.model_validate(data)
    except ValidationError as exc:
        raise UsageError(f"{source}: {format_validation_error(exc, noun='key', limit=1)}") from None
    layered: dict[str, dict[str, Any]] = {}
    for var, (section, key, _kind) in _ENV_OVERRIDES.items():
        if env.get(var):
            layered.setdefault(section, {})[key] = env[var]
    for section, values in (overrides or {}).items():
        for key, value in values.items():
            if value is not None:
                layered.setdefault(section, {})[key] = value
    for section, values in layered.items():
        part = getattr(settings, section)
        for key, value in values.items():
            try:
                setattr(part, key, value)
            except ValidationError as exc:
                problem = format_validation_error(exc, noun="key", limit=1)
                raise UsageError(f"override {section}.{key}: {problem}") from None
    return settings
