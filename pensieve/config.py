"""Configuration: built-in defaults < YAML file < environment < command-line flags.

One typed `Settings` object comes out. Unknown keys and wrong types are errors that name
the key, so a typo in a config file never silently falls back to a default. API keys are
never read from here: they come only from the environment.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from pensieve.config_files import ENV_OVERRIDES, config_path
from pensieve.config_files import pensieve_home as pensieve_home  # re-exported: callers import it from here
from pensieve.errors import UsageError, format_validation_error
from pensieve.stages import BY_NAME, STAGE_NAMES

SearchProvider = Literal[
    "", "tavily", "serpapi", "brave", "searxng", "arxiv", "semantic_scholar", "pubmed", "openalex", "crossref"
]
ProviderName = Literal[
    "tavily", "serpapi", "brave", "searxng", "arxiv", "semantic_scholar", "pubmed", "openalex", "crossref"
]
ReferenceStyle = Literal["numbered", "author-year"]


class _Section(BaseModel):
    # allow_inf_nan=False: `.nan` or `.inf` in YAML is no temperature, timeout or budget.
    model_config = ConfigDict(extra="forbid", strict=True, validate_assignment=True, allow_inf_nan=False)


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
    # A ceiling on the conversation, in characters (a cost cap). Unset, the budget follows
    # the model's window (context_window, or litellm's figure) less a share kept for the
    # reply (max_output_tokens, at most half the window), at ~3.5 characters a token; with no
    # window known, 240,000 characters (~70k tokens). Past the budget, tool results are
    # elided by priority: source pages first, then other results; the stage's own inputs never.
    max_context_chars: int | None = Field(default=None, ge=10_000)
    # The model's context window in tokens, for a model litellm does not know (a server of
    # one's own: llama-server's -c, vLLM's --max-model-len, Ollama's num_ctx, which Pensieve
    # then sets). Unset: litellm's figure where it has one, else max_context_chars alone.
    context_window: int | None = Field(default=None, ge=1_024)
    # Turns that tell the model exactly what is wrong with its artifact (its contract)
    # before the stage fails; a reminder to write the file at all comes on top, once.
    repair_turns: int = Field(default=2, ge=0)
    # At most this many model calls in flight at once per provider (and api_base), shared by
    # every project one process runs (`pensieve batch`, `pensieve worker`). null: no limit.
    max_concurrent_calls: int | None = Field(default=None, ge=1)


class ToolAccess(_Section):
    """agents.<stage>.tools: canonical tool names or glob patterns (`mcp.wiki.*`) added to
    the stage's default column (allow) or taken from it (deny; deny wins)."""

    allow: list[str] = Field(default_factory=list)
    deny: list[str] = Field(default_factory=list)


class AgentSettings(_Section):
    model: str | None = None
    temperature: float | None = None
    max_rounds: int | None = Field(default=None, ge=1)
    # The window of this stage's model, in tokens, when it is not the one llm.context_window
    # describes (a stage on another model or server).
    context_window: int | None = Field(default=None, ge=1_024)
    tools: ToolAccess | None = None


# What `env` and `headers_env` hold: names of environment variables, never their values.
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_NAMES_ONLY = (
    "give names (letters, digits and _, not starting with a digit): "
    "their values come from the environment, never from this file"
)


class McpServerSettings(_Section):
    """mcp.servers.<name>: a stdio server (`command`) or a streamable HTTP one (`url`)."""

    command: list[str] | None = None  # the program and its arguments
    # Names of environment variables passed through to the server (values never in the file).
    env: list[str] = Field(default_factory=list)
    url: str | None = None
    # HTTP header name -> the environment variable holding its value.
    headers_env: dict[str, str] = Field(default_factory=dict)
    timeout_s: float = Field(default=30.0, gt=0)  # per call
    max_result_chars: int = Field(default=50_000, ge=100)

    @field_validator("env")
    @classmethod
    def _env_names(cls, value: list[str]) -> list[str]:
        for i, name in enumerate(value):
            if not _ENV_NAME.fullmatch(name):
                # Never echoed: what was written where a name belongs may well be a secret.
                raise ValueError(f"item {i + 1} is not the name of an environment variable; {_NAMES_ONLY}")
        return value

    @field_validator("headers_env")
    @classmethod
    def _header_variables(cls, value: dict[str, str]) -> dict[str, str]:
        for header, name in value.items():
            if not _ENV_NAME.fullmatch(name):
                raise ValueError(
                    f"header {header[:60]!r} is not given the name of an environment variable; {_NAMES_ONLY}"
                )
        return value

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerSettings:
        if bool(self.command) == bool(self.url):
            raise ValueError("give either command (a list: program and arguments) or url, not both or neither")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError(f"url {self.url!r} must start with http:// or https://")
        if self.headers_env and self.url is None:
            raise ValueError("headers_env is for url servers (a command server takes env)")
        if self.env and self.command is None:
            raise ValueError("env is for command servers (a url server takes headers_env)")
        return self


class McpSettings(_Section):
    servers: dict[str, McpServerSettings] = Field(default_factory=dict)
    # The per-stage call cap of an MCP tool that no `limits` entry names.
    default_limit: int = Field(default=5, ge=0)
    # How long a server has to start and list its tools.
    startup_timeout_s: float = Field(default=20.0, gt=0)

    @field_validator("servers")
    @classmethod
    def _server_names(cls, value: dict[str, McpServerSettings]) -> dict[str, McpServerSettings]:
        from pensieve.tool_matrix import SERVER_NAME

        for name in value:
            if not SERVER_NAME.fullmatch(name):
                raise ValueError(f"server name {name!r}: use letters, digits, '-' and '_' (at most 32)")
        return value


class ArticleSettings(_Section):
    target_words: int = Field(default=1500, ge=100)
    audience: str = "curious, technically literate readers"
    style: str = "clear, concrete, well-sourced prose"
    # The article and its reviews are written in it (the headings and phrases Pensieve
    # itself reads, such as "## Open questions", stay as the prompts give them).
    language: str = Field(default="English", min_length=1, max_length=40)
    # numbered: [1] in the text, references in order of first use; author-year:
    # (Malkov & Yashunin, 2018) in the text, references in alphabetical order.
    reference_style: ReferenceStyle = "numbered"


class SearchSettings(_Section):
    provider: SearchProvider = ""
    # Several at once (web and academic); `provider`, when set, is used too.
    providers: list[ProviderName] = Field(default_factory=list)
    endpoint: str | None = None  # replaces `provider`'s base URL
    endpoints: dict[ProviderName, str] = Field(default_factory=dict)  # per provider
    max_results_per_query: int = Field(default=5, ge=1, le=50)  # per provider queried
    min_interval_s: float = Field(default=1.0, ge=0)  # web providers
    # Per provider; academic providers default to their APIs' published limits.
    min_intervals_s: dict[ProviderName, float] = Field(default_factory=dict)
    timeout_s: float = Field(default=15.0, gt=0)
    # A 429 whose Retry-After is at most this long is waited out and retried once.
    max_retry_wait_s: float = Field(default=5.0, ge=0)
    # Sent to OpenAlex, Crossref and NCBI so they can reach you (their "polite pool").
    contact_email: str | None = None

    @field_validator("min_intervals_s")
    @classmethod
    def _non_negative(cls, value: dict[str, float]) -> dict[str, float]:
        for name, seconds in value.items():
            if seconds < 0:
                raise ValueError(f"the interval for {name} must be >= 0 seconds, not {seconds}")
        return value

    @field_validator("contact_email")
    @classmethod
    def _an_address(cls, value: str | None) -> str | None:
        if value is not None and (value.count("@") != 1 or any(c.isspace() for c in value)):
            raise ValueError(f"{value!r} is not an email address (providers use it to reach you)")
        return value

    def configured(self) -> list[str]:
        """Every provider to query, `provider` first, each once."""
        return list(dict.fromkeys([*([self.provider] if self.provider else []), *self.providers]))

    def endpoint_for(self, name: str) -> str | None:
        if name in self.endpoints:
            return self.endpoints[name]
        return self.endpoint if name == self.provider else None

    def problem(self) -> str | None:
        """A combination of keys no single key's type can rule out."""
        if self.endpoint and not self.provider and self.providers:
            # It names search.provider's address; with a list, it would be unclear whose.
            return "search.endpoint is set but search.provider is empty; use search.endpoints.<provider> instead"
        for name in self.configured():
            if name == "searxng" and not self.endpoint_for(name):
                return (
                    "searxng needs the address of an instance: set search.endpoints.searxng "
                    "(or search.endpoint with search.provider: searxng), e.g. http://localhost:8888"
                )
        for name, url in [*self.endpoints.items(), *([("endpoint", self.endpoint)] if self.endpoint else [])]:
            where = "search.endpoint" if name == "endpoint" else f"search.endpoints.{name}"
            if not str(url).startswith(("http://", "https://")):
                return f"search endpoint for {name} must be an http(s) URL, not {url!r}"
            why = _endpoint_problem(str(url))
            if why:
                return f"{where} is not a usable URL ({why}): {url!r}"
        return None


def _endpoint_problem(url: str) -> str | None:
    """Why an http(s) URL cannot be requested (read as the search client will read it)."""
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in url):
        return "it contains a space or a control character"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:  # "Port out of range 0-65535", "Invalid IPv6 URL", ...
        return str(exc)
    if not parts.hostname:
        return "it names no host"
    if port == 0:
        return "port 0 cannot be connected to"
    if parts.query or parts.fragment:
        return "a base URL takes no query or fragment"
    import httpx  # the search client's own reading, for what urlsplit lets through

    try:
        httpx.URL(url)
    except httpx.InvalidURL as exc:
        return str(exc)
    return None


class FetchSettings(_Section):
    timeout_s: float = Field(default=10.0, gt=0)
    max_chars: int = Field(default=50_000, ge=100)
    max_bytes: int = Field(default=5_000_000, ge=1_000)
    allow_private_hosts: bool = False
    max_redirects: int = Field(default=5, ge=0, le=20)
    # Extra certificate authorities (PEM) trusted for HTTPS fetches, beside the usual ones.
    ca_file: str | None = None
    # known: fetch_url fetches only URLs from search results, the brief, topic files, links
    # on pages already fetched and the source archive (pensieve.web.url_policy); any: all.
    url_policy: Literal["known", "any"] = "known"

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


class LibrarySettings(_Section):
    """The workspace library (pensieve/library/): what a document may be, what a search returns."""

    # A file (or a fetched document) larger than this is refused before it is read.
    max_file_bytes: int = Field(default=200_000_000, ge=1_000)
    # A PDF with more pages is refused (split it); bounds the time one file can take.
    max_pages: int = Field(default=2_000, ge=1)
    # What the entries of a Word file (a zip) may unpack to in all: a zip bomb is refused.
    max_unpacked_bytes: int = Field(default=200_000_000, ge=1_000)
    # Extracted text beyond this is refused rather than cut silently.
    max_text_chars: int = Field(default=5_000_000, ge=1_000)
    # A PDF is read by a child process: killed past this many seconds, and allowed this many
    # MB of memory for the PDF (a crash, hang or blow-up in PDFium refuses the file only).
    extract_timeout_s: float = Field(default=120.0, gt=0)
    extract_memory_mb: int = Field(default=2_048, ge=64)
    # Passages search_library returns, and characters read_library_document returns per call.
    max_results: int = Field(default=8, ge=1, le=50)
    read_chars: int = Field(default=20_000, ge=1_000)


class ResearchSettings(_Section):
    # false: the researcher and the fact checker get no web search and no fetch at all
    # (library and topic memory only); `pensieve new --no-web` sets it for one project.
    web: bool = True


class BudgetSettings(_Section):
    max_tokens: int | None = Field(default=None, ge=1)
    max_cost_usd: float | None = Field(default=None, gt=0)


class RunSettings(_Section):
    deadline_s: float | None = Field(default=None, gt=0)


class QueueSettings(_Section):
    """The durable queue of `pensieve batch` / `pensieve worker` (pensieve/batch/queue.py)."""

    # sqlite:///path or postgresql://host/db. Unset: a SQLite file in the workspace. A URL
    # with a password belongs in PENSIEVE_QUEUE_URL, never here.
    url: str | None = None
    # A worker whose heartbeat is older than this is dead; its projects go back on the queue.
    worker_timeout_s: float = Field(default=15.0, ge=1)
    # How often workers look for work, beat their heartbeat and check for dead workers.
    poll_interval_s: float = Field(default=0.5, gt=0, le=30)

    @field_validator("url")
    @classmethod
    def _no_password(cls, value: str | None) -> str | None:
        if value is None:
            return None
        from urllib.parse import urlsplit

        try:
            password = urlsplit(value).password
        except ValueError:
            raise ValueError("not a database URL (sqlite:///path or postgresql://host/db)") from None
        if password:
            raise ValueError("holds a password; put the whole URL in the PENSIEVE_QUEUE_URL environment variable")
        if not value.startswith(("sqlite:///", "postgresql://", "postgres://", "postgresql+psycopg://")):
            raise ValueError("must be sqlite:///path or postgresql://host/db")
        return value


class CheckSettings(_Section):
    min_cited_paragraph_share: float = Field(default=0.5, ge=0, le=1)
    repolish_on_failure: bool = True
    # `pensieve check` exits 1 when fewer cited sentences of the article are supported by
    # the passages of their sources (pensieve/evidence/); 0: report the share only.
    min_supported_share: float = Field(default=0.0, ge=0, le=1)
    # A consistency report whose verdict is "needs attention" sends its findings to the
    # polisher for one fix turn, then the checker runs again; what it still finds stays on
    # the project as problems. false: the findings only become problems.
    fix_findings: bool = True


class EvidenceSettings(_Section):
    """Claim-level evidence: each cited sentence aligned with its sources (pensieve/evidence/)."""

    enabled: bool = True
    # MiniLM similarity of a sentence to its best passage: at least supported_score (and no
    # lexical problem) is `supported`, at least weak_score `weak`, else `unsupported`.
    supported_score: float = Field(default=0.55, ge=-1, le=1)
    weak_score: float = Field(default=0.40, ge=-1, le=1)
    # Unsupported sentences of a draft go to the next stage to fix; a final article that
    # still has some sends the polisher back once (with check.repolish_on_failure).
    repair: bool = True
    max_listed: int = Field(default=15, ge=1)  # sentences listed to a stage at most
    # Ask the fact checker's model about weak and unsupported pairs (yes / partly / no).
    # Off: measured, a capable judge clears 10-20% of the false alarms at ~25 calls an
    # article, a 0.5B model none (docs/evidence.md). 40 covers every article measured (11-33).
    judge: bool = False
    max_judge_calls: int = Field(default=40, ge=0)


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

    Read from the light name table (`tool_matrix.BUILTIN_TOOLS`): `pensieve list` and
    `status` import config without paying for the tool modules (httpx, the web code)."""
    from pensieve.tool_matrix import DEFAULT_LIMITS

    return dict(DEFAULT_LIMITS)


def _check_limit_key(name: str) -> str:
    """A `limits` key as stored: a built-in's model-facing name for either of its names;
    MCP names and patterns as written (matched when a tool's cap is looked up)."""
    from pensieve.tool_matrix import CANONICAL, MODEL_FACING, pattern_builtins

    if name in CANONICAL:
        return name
    if name in MODEL_FACING:
        return MODEL_FACING[name]
    if name.startswith(("mcp.", "mcp_")) or pattern_builtins(name):
        return name
    raise ValueError(f"unknown tool {name!r}; tools are: {', '.join(CANONICAL)}, mcp.<server>.<tool>, or a pattern")


class Settings(_Section):
    llm: LLMSettings = Field(default_factory=LLMSettings)
    agents: dict[str, AgentSettings] = Field(default_factory=dict)
    article: ArticleSettings = Field(default_factory=ArticleSettings)
    search: SearchSettings = Field(default_factory=SearchSettings)
    fetch: FetchSettings = Field(default_factory=FetchSettings)
    topics: TopicsSettings = Field(default_factory=TopicsSettings)
    library: LibrarySettings = Field(default_factory=LibrarySettings)
    research: ResearchSettings = Field(default_factory=ResearchSettings)
    budget: BudgetSettings = Field(default_factory=BudgetSettings)
    run: RunSettings = Field(default_factory=RunSettings)
    queue: QueueSettings = Field(default_factory=QueueSettings)
    limits: dict[str, int] = Field(default_factory=default_tool_limits)
    check: CheckSettings = Field(default_factory=CheckSettings)
    contracts: ContractsSettings = Field(default_factory=ContractsSettings)
    evidence: EvidenceSettings = Field(default_factory=EvidenceSettings)
    mcp: McpSettings = Field(default_factory=McpSettings)

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
        from fnmatch import fnmatchcase

        from pensieve.tool_matrix import CANONICAL, is_pattern

        merged = default_tool_limits()
        given = {_check_limit_key(name): cap for name, cap in value.items()}
        for name, cap in given.items():
            if cap < 0:
                raise ValueError(f"limit for {name} must be >= 0")
        # A pattern sets the built-ins it matches; a name of its own wins over a pattern.
        for key, cap in given.items():
            if is_pattern(key):
                for name, canonical in CANONICAL.items():
                    if name in merged and name not in given and fnmatchcase(canonical, key):
                        merged[name] = cap
        merged.update(given)
        return merged

    @model_validator(mode="after")
    def _known_servers(self) -> Settings:
        """agents.<stage>.tools and MCP names in limits must name something that exists."""
        from pensieve.tool_matrix import check_model_name, check_pattern

        servers = list(self.mcp.servers)
        for stage, agent in self.agents.items():
            if agent.tools is None:
                continue
            for kind in ("allow", "deny"):
                for i, pattern in enumerate(getattr(agent.tools, kind)):
                    check_pattern(pattern, servers, f"agents.{stage}.tools.{kind}[{i}]")
        for key in self.limits:
            if key.startswith("mcp."):
                check_pattern(key, servers, f"limits.{key}")
            elif key.startswith("mcp_"):
                check_model_name(key, servers, f"limits.{key}")
        return self

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

    def context_window_for(self, stage: str) -> int | None:
        """agents.<stage>.context_window; else llm.context_window when the stage runs the main
        model (a stage on another model gets litellm's figure for that model, not this one)."""
        agent = self.agents.get(stage)
        if agent and agent.context_window:
            return agent.context_window
        if agent and agent.model and agent.model != self.llm.model:
            return None
        return self.llm.context_window

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
    except RecursionError:
        raise UsageError(f"{path}: bad YAML: nested too deeply; a config file is a few levels of sections") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UsageError(f"{path}: the top level must be a mapping of sections (llm:, search:, ...)")
    # A section whose keys are all commented out parses as null: treat it as empty.
    return {key: ({} if value is None else value) for key, value in data.items()}


def validate_config(home: Path, env: dict[str, str]) -> None:
    """Validate the configuration as `load_settings` would (raises the same UsageError)
    without building what only a run needs; `cli.config_check.check_config` calls it."""
    path = config_path(home, env)
    data = _read_yaml(path) if path else {}
    _build(Settings, path, data, env, None)


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
    return _build(Settings, path, data, env, overrides)


def _build(
    cls: type[Settings],
    path: Path | None,
    data: dict[str, Any],
    env: dict[str, str],
    overrides: dict[str, dict[str, Any]] | None,
) -> Settings:
    source = str(path) if path else "built-in defaults"
    try:
        settings = cls.model_validate(data)
    except ValidationError as exc:
        raise UsageError(f"{source}: {format_validation_error(exc, noun='key', limit=1)}") from None
    except RecursionError:
        raise UsageError(f"{source}: nested too deeply; a config file is a few levels of sections") from None
    layered: dict[str, dict[str, Any]] = {}
    for var, (section, key, _kind) in ENV_OVERRIDES.items():
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
    search_problem = settings.search.problem()
    if search_problem:
        raise UsageError(f"{source}: {search_problem}")
    _remember_secrets(settings)
    return settings


# A workspace's own configuration file, workspaces/<ws>/config.yaml, may set only these
# sections: what a workspace's research may use (research.web false: library only) and its
# library's limits. Models, search providers, MCP servers and queues stay in the user's own
# file, so nothing inside a workspace can add a server or point a run at another endpoint.
WORKSPACE_CONFIG = "config.yaml"
WORKSPACE_SECTIONS = ("research", "library")


def workspace_settings(settings: Settings, workspace_root: Path) -> Settings:
    """`settings` with the workspace's config.yaml applied on top (a copy; the same object
    when the workspace has none). A key there replaces the same key of the user's file; the
    project's own plan (`new --no-web`) is applied after it. Raises UsageError naming the key."""
    path = workspace_root / WORKSPACE_CONFIG
    if path.is_symlink() or (path.exists() and not path.is_file()):
        raise UsageError(f"{path}: not a regular file (a link?); a workspace's config.yaml is a YAML file or absent")
    if not path.exists():
        return settings
    data = _read_yaml(path)
    unknown = [name for name in data if name not in WORKSPACE_SECTIONS]
    if unknown:
        raise UsageError(
            f"{path}: section {unknown[0]!r} cannot be set per workspace; a workspace's config.yaml sets only "
            f"{' and '.join(WORKSPACE_SECTIONS)} (the rest belongs in your own configs/pensieve.yaml "
            "or PENSIEVE_CONFIG file)"
        )
    layered = settings.model_copy(deep=True)
    for name, values in data.items():
        if not isinstance(values, dict):
            raise UsageError(f"{path}: {name} must be a mapping of keys, e.g. {name}: {{web: false}}")
        part = getattr(settings, name)
        try:
            setattr(layered, name, type(part).model_validate({**part.model_dump(), **values}))
        except ValidationError as exc:
            problem = format_validation_error(exc, noun="key", limit=1)
            raise UsageError(f"{path}: {name}: {problem}") from None
    return layered


def _remember_secrets(settings: Settings) -> None:
    """The variables an MCP server is given hold its credentials, whatever their names
    (GITHUB_PAT): every value is scrubbed from what Pensieve writes (pensieve.redact)."""
    from pensieve.redact import remember_secret_names

    servers = settings.mcp.servers.values()
    remember_secret_names(name for server in servers for name in (*server.env, *server.headers_env.values()))
