"""The one seam to language models. Only this module imports litellm, and lazily.

`complete` sends messages and tool schemas, and returns text, tool calls and usage. It is
the only layer that retries: litellm's and the OpenAI client's own retries are switched
off so attempts never multiply. Provider errors are scrubbed of secrets before they are
raised, stored or shown.
"""

from __future__ import annotations

import asyncio
import importlib
import ipaddress
import json
import math
import os
import random
import re
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from pensieve.errors import PensieveError
from pensieve.redact import scrub


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # raw JSON text as the model sent it: parsed and validated by the dispatcher


@dataclass(frozen=True)
class LLMReply:
    text: str
    tool_calls: list[ToolCall]
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None
    model: str
    # Why the model stopped: "stop", "tool_calls", "length" (cut off by max_tokens), ...
    finish_reason: str | None = None
    # The provider's usage figures were negative or not numbers and were counted as 0.
    usage_clamped: bool = False


@dataclass
class LLMError(Exception):
    """A model call that failed for good (after any retries)."""

    # auth | rate_limit | timeout | connection | server | bad_request | not_found | too_large | other
    kind: str
    message: str
    status: int | None = None
    retry_after_s: float | None = None
    attempts: int = 1
    # The whole exception chain as the libraries said it (class names included, secrets
    # scrubbed): kept in events.jsonl and shown by `pensieve run --verbose` for bug reports.
    detail: str = ""
    # Nothing listens at the address (connection refused): a stopped server, a wrong port.
    refused: bool = False

    def __str__(self) -> str:
        return self.message

    @property
    def retryable(self) -> bool:
        return self.kind in {"rate_limit", "timeout", "connection", "server"}


@dataclass(frozen=True)
class RetryPolicy:
    retries: int = 4
    base_s: float = 1.0
    max_wait_s: float = 60.0
    jitter: float = 0.25
    sleep: Callable[[float], Any] = field(default=asyncio.sleep)

    def delay(self, attempt: int, retry_after_s: float | None) -> float:
        """Exponential backoff with jitter; a server's Retry-After wins, up to the cap."""
        if retry_after_s is not None and retry_after_s >= 0:
            return min(retry_after_s, self.max_wait_s)
        backoff: float = self.base_s * 2.0 ** (attempt - 1)
        backoff *= 1 + random.uniform(-self.jitter, self.jitter)  # noqa: S311 - jitter, not crypto
        return min(backoff, self.max_wait_s)


class CallGate:
    """A counting semaphore shared by every thread and event loop of the process: each
    project of a batch runs its own loop in its own thread, and all of them wait here for
    one of a provider's `llm.max_concurrent_calls` slots. Waiters are served in order."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._in_use = 0
        self._waiters: deque[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = deque()

    @property
    def in_use(self) -> int:
        return self._in_use

    async def acquire(self) -> None:
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._in_use < self.limit and not self._waiters:
                self._in_use += 1
                return
            future: asyncio.Future[None] = loop.create_future()
            self._waiters.append((loop, future))
        try:
            await future  # the releaser counted the slot as ours before waking us
        except asyncio.CancelledError:
            with self._lock:
                if (loop, future) in self._waiters:
                    self._waiters.remove((loop, future))
                    raise
            self.release()  # woken and cancelled at once: hand the slot on
            raise

    def release(self) -> None:
        with self._lock:
            while self._waiters:
                loop, future = self._waiters.popleft()
                if loop.is_closed():
                    continue
                # The slot passes straight to the waiter (in_use unchanged).
                loop.call_soon_threadsafe(_wake, future)
                return
            self._in_use -= 1


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
    # A future cancelled just before it is woken gives its slot back in acquire().


_gates: dict[tuple[str, str, int], CallGate] = {}
_gates_lock = threading.Lock()


def provider_of(model: str) -> str:
    return model.split("/", 1)[0].lower() if "/" in model else "openai"


def call_gate(model: str, api_base: str | None, limit: int) -> CallGate:
    """The process-wide gate of a provider (and api_base) for `llm.max_concurrent_calls`."""
    key = (provider_of(model), (api_base or "").rstrip("/"), limit)
    with _gates_lock:
        gate = _gates.get(key)
        if gate is None:
            gate = _gates[key] = CallGate(limit)
        return gate


_litellm: Any = None
_import_lock = threading.Lock()
_import_thread: threading.Thread | None = None
# Modules litellm imports on its first call (the OpenAI client's resources, ~0.4 s):
# imported by the background import too, so the first request does not wait for them.
_FIRST_CALL_MODULES = ("openai.resources",)


class ModelLibraryError(PensieveError):
    """litellm cannot be imported: the installation is broken (exit 2)."""

    exit_code = 2


def _import_litellm() -> Any:
    """litellm, imported once (waiting for the background import if one is under way)."""
    global _litellm
    with _import_lock:
        if _litellm is None:
            # Without this litellm fetches its price list from the network at import time.
            os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
            import logging

            try:
                import litellm
            except Exception as exc:  # a missing or broken installation, not a bug of ours
                raise ModelLibraryError(
                    f"cannot import litellm ({type(exc).__name__}: {scrub(str(exc))[:200]}); "
                    "reinstall Pensieve's dependencies (pip install -e . or pip install litellm)"
                ) from None

            litellm.suppress_debug_info = True
            # Not drop_params: on a 422 it re-sends the call itself, a second retry layer. The
            # parameters a model does not support are left out in `complete` instead.
            litellm.drop_params = False
            litellm.num_retries = 0
            litellm.telemetry = False
            for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "httpx", "httpcore", "openai"):
                logging.getLogger(name).setLevel(logging.CRITICAL)
            _one_logging_worker_per_loop()
            _bound_answers()
            _litellm = litellm
    return _litellm


class _PerLoopLoggingWorker:
    """litellm queues its success logging on one global worker whose asyncio queue belongs
    to one event loop; projects of a batch run on their own loops in their own threads, and
    would fight over it ("bound to a different event loop"). This stands in for the global
    worker and gives each running loop a worker of its own."""

    def __init__(self, factory: Callable[[], Any], default: Any) -> None:
        import weakref

        self._factory = factory
        self._default = default
        self._workers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def _current(self) -> Any:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return self._default
        with self._lock:
            worker = self._workers.get(loop)
            if worker is None:
                worker = self._workers[loop] = self._factory()
            return worker

    def __getattr__(self, name: str) -> Any:
        return getattr(self._current(), name)


def _one_logging_worker_per_loop() -> None:
    try:
        from litellm.litellm_core_utils import logging_worker
    except ImportError:  # another litellm layout: nothing to adapt
        return
    current = getattr(logging_worker, "GLOBAL_LOGGING_WORKER", None)
    factory = getattr(logging_worker, "LoggingWorker", None)
    if current is None or factory is None or isinstance(current, _PerLoopLoggingWorker):
        return
    setattr(logging_worker, "GLOBAL_LOGGING_WORKER", _PerLoopLoggingWorker(factory, current))  # noqa: B010


# A provider's answer larger than this once decoded is refused (LLMError "too_large", not
# retried): a few KB of stacked gzip would otherwise decode to gigabytes inside httpx.
MAX_ANSWER_BYTES = 32_000_000


def _bound_answers() -> None:
    """Every transport litellm makes for its httpx clients (the OpenAI SDK's and its own
    handler's, for every provider) is wrapped in a BoundedTransport: the answer is decoded
    layer by layer, at most MAX_ANSWER_BYTES. litellm picks the transport in this one
    factory, so it is wrapped there."""
    from litellm.llms.custom_httpx.http_handler import AsyncHTTPHandler, http2_enabled

    from pensieve.web.bounded_http import BoundedTransport

    make = AsyncHTTPHandler.create_async_transport

    def bounded(
        ssl_context: Any = None, ssl_verify: bool | None = None, shared_session: Any = None
    ) -> BoundedTransport:
        inner = make(ssl_context=ssl_context, ssl_verify=ssl_verify, shared_session=shared_session)
        if inner is None:
            # litellm leaves this case (aiohttp turned off) to httpx's default transport; the
            # same one, made here. (Unlike httpx's, it reads no proxy variables.)
            import httpx

            verify = ssl_context if ssl_context is not None else (True if ssl_verify is None else ssl_verify)
            inner = httpx.AsyncHTTPTransport(verify=verify, http2=http2_enabled())
        return BoundedTransport(inner, MAX_ANSWER_BYTES)

    AsyncHTTPHandler.create_async_transport = staticmethod(bounded)  # type: ignore[method-assign, assignment]


def _import_in_background() -> None:
    try:
        _import_litellm()
        for name in _FIRST_CALL_MODULES:
            importlib.import_module(name)
    except Exception:  # noqa: S110 - the first real use imports again and reports it
        pass


def start_import() -> None:
    """Start importing litellm in a background thread (once): a run calls this as soon as it
    knows it needs a model, so the import overlaps the work before the first request
    (preflight, the lock, recovery). A failure is not reported here: the first use of
    litellm imports again and raises ModelLibraryError with the reason."""
    global _import_thread
    if _litellm is not None or _import_thread is not None:
        return
    # Not a daemon: the interpreter freezes daemon threads where they stand when it exits, and
    # one frozen in the middle of an import holds the import lock; litellm's HTTP handlers
    # import in their __del__ during finalization, so an early exit (a 401, a failed
    # preflight) hung forever. A non-daemon thread is joined first: exit waits for the import.
    _import_thread = threading.Thread(target=_import_in_background, name="pensieve-import-litellm", daemon=False)
    _import_thread.start()


# Sent as the API key to a server of one's own (llama.cpp's llama-server, vLLM, LM Studio,
# Ollama) when the environment has none: litellm's OpenAI client refuses to start without a
# key, and such a server does not check it. Only ever sent to a self-hosted api_base.
PLACEHOLDER_API_KEY = "sk-no-key-required"
OLLAMA_PREFIXES = ("ollama/", "ollama_chat/")
OLLAMA_DEFAULT_BASE = "http://localhost:11434"  # litellm's default for Ollama models
# Host names that only resolve on one's own machine or network.
_LOCAL_SUFFIXES = (".localhost", ".local", ".internal", ".lan", ".home.arpa")


def is_self_hosted(api_base: str | None) -> bool:
    """True when api_base is on a loopback or private address (127.0.0.1, 10.x, 192.168.x,
    fd00::/8, Tailscale's 100.64/10, localhost, *.local, a single-label name such as a
    compose service); False for anything else, public names included."""
    if not api_base or not api_base.strip():
        return False
    text = api_base.strip()
    if "://" not in text:
        text = f"http://{text}"
    try:
        host = urlsplit(text).hostname
    except ValueError:
        return False
    if not host:
        return False
    host = host.rstrip(".").lower()
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return host == "localhost" or host.endswith(_LOCAL_SUFFIXES) or "." not in host
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return not ip.is_global and not ip.is_multicast


def _effective_base(model: str, api_base: str | None) -> str | None:
    """Where the calls go: api_base, or litellm's default for a provider that has one locally."""
    if api_base:
        return api_base
    if model.startswith(OLLAMA_PREFIXES):
        return os.environ.get("OLLAMA_API_BASE") or OLLAMA_DEFAULT_BASE
    return None


def key_problem(model: str, api_base: str | None) -> str | None:
    """Say which environment variable is missing for this model, or None if all is set.

    A server of one's own (a loopback or private api_base) needs no key: `complete` sends a
    placeholder. A public api_base still needs the provider's variable."""
    if is_self_hosted(_effective_base(model, api_base)):
        return None
    litellm = _import_litellm()
    try:
        found = litellm.validate_environment(model=model, api_base=api_base)
    except Exception:  # unknown provider strings: let the first call report it
        return None
    missing = [str(name) for name in found.get("missing_keys") or []]
    if not missing or found.get("keys_in_environment"):
        return None
    return (
        f"model {model!r} needs {', '.join(missing)} in the environment; export it "
        f"(e.g. `export {missing[0]}=...`) or choose another model with --model / PENSIEVE_MODEL"
    )


def _placeholder_key(litellm: Any, model: str, api_base: str | None) -> str | None:
    """PLACEHOLDER_API_KEY when a self-hosted server is called and no key is in the environment."""
    if not is_self_hosted(_effective_base(model, api_base)):
        return None
    try:
        found = litellm.validate_environment(model=model, api_base=api_base)
    except Exception:  # unknown provider strings: nothing to stand in for
        return None
    # Only keys: Ollama's "missing" OLLAMA_API_BASE is a default, not a credential.
    missing = [str(name) for name in found.get("missing_keys") or [] if "KEY" in str(name).upper()]
    if not missing or found.get("keys_in_environment"):
        return None
    return PLACEHOLDER_API_KEY


# Context windows. A token is about 3.5 characters of English prose and markdown (a little
# less than the usual 4: tool results carry markup, numbers and URLs).
CHARS_PER_TOKEN = 3.5
MIN_CONTEXT_CHARS = 10_000  # the floor of llm.max_context_chars: below it every turn elides
# An Ollama model's own window can be 128k tokens; asking Ollama for all of it (num_ctx)
# makes it allocate a KV cache of many gigabytes. Unless llm.context_window says otherwise,
# a window learnt from litellm is capped here for Ollama (about 115,000 characters).
OLLAMA_AUTO_WINDOW_CAP = 32_768

_windows: dict[tuple[str, str | None], int | None] = {}


def model_window(model: str, api_base: str | None = None) -> int | None:
    """The model's context window in tokens as litellm knows it (`max_input_tokens`), or None.

    Cached per model. litellm answers from its bundled table; for an Ollama model missing
    from it, litellm asks the server (/api/show) once."""
    key = (model, api_base)
    if key not in _windows:
        _windows[key] = _lookup_window(_import_litellm(), model, api_base)
    return _windows[key]


def _lookup_window(litellm: Any, model: str, api_base: str | None) -> int | None:
    names = [model]
    if model.startswith("ollama_chat/"):  # litellm's table lists Ollama models as ollama/...
        names.append("ollama/" + model.split("/", 1)[1])
    for name in names:
        try:
            info = litellm.get_model_info(name, api_base=api_base)
        except Exception:  # ModelNotMappedError and friends: unknown here
            info = None
        value = info.get("max_input_tokens") if isinstance(info, dict) else None
        if isinstance(value, int) and value > 0:
            return value
    return None


def context_window(model: str, api_base: str | None, configured: int | None) -> int | None:
    """The window Pensieve plans for, in tokens: `llm.context_window` when set (the user knows
    their server: a llama-server started with -c 8192 may serve a model litellm thinks has
    128k), else litellm's model info (capped for Ollama), else None (unknown)."""
    if configured:
        return configured
    window = model_window(model, api_base)
    if window and model.startswith(OLLAMA_PREFIXES):
        window = min(window, OLLAMA_AUTO_WINDOW_CAP)
    return window


DEFAULT_CONTEXT_CHARS = 240_000  # the budget when neither llm.max_context_chars nor the window is known


def context_chars(max_chars: int | None, window: int | None, max_output_tokens: int | None) -> int:
    """The conversation's character budget.

    It follows the model's `window` (tokens): what is left after a share kept for the
    reply (`max_output_tokens`, never more than half the window; a quarter when replies are
    uncapped), at CHARS_PER_TOKEN characters a token. `llm.max_context_chars`, when set, is a
    ceiling on top (a cost cap); with neither a window nor a setting, 240,000 characters."""
    if not window:
        return max_chars or DEFAULT_CONTEXT_CHARS
    reserve = min(max_output_tokens, window // 2) if max_output_tokens else window // 4
    fits = int((window - reserve) * CHARS_PER_TOKEN)
    return max(min(max_chars, fits) if max_chars else fits, MIN_CONTEXT_CHARS)


# A refused connection to a loopback or private address: retried once, soon.
REFUSED_LOCAL_RETRIES = 1
REFUSED_WAIT_S = 1.0


def _retry_after(exc: Exception) -> float | None:
    # litellm keeps the provider's headers in `litellm_response_headers`; its exception's
    # `response` is a stand-in whose headers are empty.
    headers = getattr(exc, "litellm_response_headers", None) or getattr(getattr(exc, "response", None), "headers", None)
    if not headers:
        return None
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return float(millis) / 1000.0
        except ValueError:
            pass
    value = headers.get("retry-after") or headers.get("Retry-After")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        from email.utils import parsedate_to_datetime

        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        import time

        return max(0.0, when.timestamp() - time.time())


def _refused_body(exc: BaseException) -> BaseException | None:
    """The BodyRefused under the SDK's and litellm's wrappers, if the answer was refused."""
    from pensieve.web.bounded_http import BodyRefused

    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, BodyRefused):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def classify(exc: Exception) -> LLMError:
    refused = _refused_body(exc)
    if refused is not None:
        # Not retried: the same answer would be refused again.
        return LLMError("too_large", f"the model provider's answer was refused: {refused}")
    litellm = _import_litellm()
    status = getattr(exc, "status_code", None)
    status = status if isinstance(status, int) else None
    kinds: list[tuple[type[BaseException], str]] = [
        (litellm.AuthenticationError, "auth"),
        (litellm.PermissionDeniedError, "auth"),
        (litellm.RateLimitError, "rate_limit"),
        (litellm.Timeout, "timeout"),
        (litellm.APIConnectionError, "connection"),
        (litellm.NotFoundError, "not_found"),
        (litellm.BadRequestError, "bad_request"),
        (litellm.InternalServerError, "server"),
        (litellm.ServiceUnavailableError, "server"),
    ]
    kind = "other"
    for cls, name in kinds:
        if isinstance(exc, cls):
            kind = name
            break
    if kind == "other" and status is not None:
        if status in (401, 403):
            kind = "auth"
        elif status == 429:
            kind = "rate_limit"
        elif status >= 500:
            kind = "server"
        elif status >= 400:
            kind = "bad_request"
    elif kind == "other" and isinstance(exc, asyncio.TimeoutError | TimeoutError):
        kind = "timeout"
    if kind == "server" and "Connection error" in str(exc):
        # litellm reports a refused or dropped connection as a 500 "Connection error."
        kind, status = "connection", None
    detail = " ".join(scrub(_chain(exc)).split())[:2000]
    nobody_listens = kind == "connection" and _is_refused(exc)
    return LLMError(kind, plain_reason(str(exc)), status, _retry_after(exc), detail=detail, refused=nobody_listens)


# What libraries put in front of a provider's words ("litellm.InternalServerError:
# InternalServerError: OpenAIException - ") and object reprs ("<ssl.SSLContext object at
# 0x7f...>"): nothing a person can act on, so never in the one line they are shown.
_CLASS_PREFIX = re.compile(r"(?:\b(?:litellm\.)?[A-Z]\w*(?:Error|Exception)\b\s*(?::|-)\s*)+")
_OBJECT_REPR = re.compile(r"<[\w.]+ object at 0x[0-9a-fA-F]+>")


def plain_reason(text: str) -> str:
    """A provider's error text without library class names or object reprs, on one line."""
    text = _OBJECT_REPR.sub("", scrub(text))
    text = _CLASS_PREFIX.sub("", text)
    text = " ".join(text.split()).strip(" .:-")
    return text[:300]


def _chain(exc: BaseException) -> str:
    """Every exception of the chain, outermost first: `Class: message <- Class: message`."""
    parts: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(parts) < 8:
        seen.add(id(current))
        parts.append(f"{type(current).__module__}.{type(current).__qualname__}: {current}")
        current = current.__cause__ or current.__context__
    return " <- ".join(parts)


_REFUSED_WORDS = ("connection refused", "connect call failed", "errno 111", "econnrefused")


def _is_refused(exc: BaseException) -> bool:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ConnectionRefusedError):
            return True
        if any(word in str(current).lower() for word in _REFUSED_WORDS):
            return True
        current = current.__cause__ or current.__context__
    return False


def where_calls_go(model: str, api_base: str | None) -> str:
    """The address a model's calls go to, as a person would type it: scheme, host, port and
    path of api_base (never its user, password or query), or the provider's name."""
    base = _effective_base(model, api_base)
    if not base:
        return f"{model.split('/', 1)[0] if '/' in model else 'openai'}'s API"
    try:
        parts = urlsplit(base if "://" in base else f"http://{base}")
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return "the configured api_base"
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{port}" if port else host
    return f"{parts.scheme}://{netloc}{parts.path}".rstrip("/")


def describe(error: LLMError, model: str, api_base: str | None) -> str:
    """One line a person can act on: what happened, to which model at which address, what to do."""
    where = where_calls_go(model, api_base)
    reason = f" ({error.message})" if error.message else ""
    if error.kind == "connection" and error.refused:
        return f"nothing answers at {where} ({model}): is the server running? Check llm.api_base"
    if error.kind == "connection":
        return f"cannot reach {where} ({model}){reason}: check the address and the network"
    if error.kind == "timeout":
        return f"{where} ({model}) did not answer in time{reason}: raise llm.timeout_s or check the server"
    if error.kind == "rate_limit":
        return f"{where} ({model}) is rate-limiting the calls{reason}: wait, or lower llm.max_concurrent_calls"
    if error.kind == "server":
        code = f" {error.status}" if error.status else ""
        return f"{where} ({model}) answered with a server error{code}{reason}"
    return f"{where} ({model}) refused the call{reason}"


def _supported_params(litellm: Any, model: str) -> set[str] | None:
    """The OpenAI parameters litellm knows this model accepts; None when it cannot say."""
    try:
        params = litellm.get_supported_openai_params(model=model)
    except Exception:  # unknown provider strings: send what we have
        return None
    return {str(p) for p in params} if params else None


def _cost(litellm: Any, response: Any) -> float | None:
    try:
        value = litellm.completion_cost(completion_response=response)
    except Exception:  # ModelNotMappedError and friends: the price is unknown
        return None
    return float(value) if value else None


def _arguments(value: Any) -> str:
    """Tool-call arguments as JSON text: some providers (Ollama among them) send an object."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict | list):
        return json.dumps(value)
    return ""


def _parse(litellm: Any, response: Any, model: str) -> LLMReply:
    choices = getattr(response, "choices", None) or []
    message = getattr(choices[0], "message", None) if choices else None
    if message is None:
        # Seen from overloaded providers; worth another try like a 5xx.
        raise LLMError("server", "the model provider returned an empty response (no choices)")
    calls = []
    for index, call in enumerate(getattr(message, "tool_calls", None) or []):
        function = call.function
        calls.append(
            ToolCall(
                id=call.id or f"call_{index}",
                name=function.name or "",
                arguments=_arguments(function.arguments),
            )
        )
    usage = getattr(response, "usage", None)
    prompt_tokens, bad_prompt = _token_count(getattr(usage, "prompt_tokens", 0))
    completion_tokens, bad_completion = _token_count(getattr(usage, "completion_tokens", 0))
    cost = _cost(litellm, response)
    bad_cost = cost is not None and not (math.isfinite(cost) and cost >= 0)
    return LLMReply(
        text=message.content or "",
        tool_calls=calls,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        cost_usd=None if bad_cost else cost,
        model=model,
        finish_reason=str(getattr(choices[0], "finish_reason", None) or "") or None,
        usage_clamped=bad_prompt or bad_completion or bad_cost,
    )


def _token_count(value: Any) -> tuple[int, bool]:
    """A usage figure as a count >= 0, and whether the provider's figure had to be changed:
    a negative or non-numeric count would let a run slip past budget.max_tokens."""
    if value is None:
        return 0, False
    try:
        number = float(value)
    except (TypeError, ValueError):
        return 0, True
    if not math.isfinite(number) or number < 0:
        return 0, True
    return int(number), number != int(number)


# A conversation as the OpenAI wire format has it, and the tool schemas offered with it (None: none).
Messages = list[dict[str, Any]]
Tools = list[dict[str, Any]] | None


async def complete(
    *,
    model: str,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None = None,
    api_base: str | None = None,
    temperature: float | None = None,
    timeout_s: float = 180.0,
    max_tokens: int | None = None,
    context_window: int | None = None,
    policy: RetryPolicy | None = None,
    on_retry: Callable[[LLMError, float], None] | None = None,
    max_concurrent: int | None = None,
) -> LLMReply:
    """One model turn. Retries 429, 5xx, timeouts and connection errors; never 4xx.

    `max_concurrent` (llm.max_concurrent_calls): each attempt first takes a slot of the
    provider's process-wide gate, so a batch of projects never has more calls in flight.

    `context_window` (tokens) is sent to Ollama as `num_ctx`: without it Ollama runs the
    model with its own small default and silently drops the start of a long conversation."""
    litellm = _import_litellm()
    policy = policy or RetryPolicy()
    kwargs: dict[str, Any] = {
        "model": model,
        "messages": messages,
        "timeout": timeout_s,
        "num_retries": 0,
        "max_retries": 0,
    }
    if tools:
        kwargs["tools"] = tools
        # Our tools are plain functions, never litellm-proxy MCP tools: without this flag
        # litellm imports its MCP gateway (the mcp SDK and the proxy's catalog, ~0.8 s
        # here) on the first call that offers tools, and the first request waits for it.
        # (A private keyword of the exactly pinned litellm; tests/test_speed_paths.py.)
        kwargs["_skip_mcp_handler"] = True
    if api_base:
        kwargs["api_base"] = api_base
    placeholder = _placeholder_key(litellm, model, api_base)
    if placeholder:
        kwargs["api_key"] = placeholder
    if context_window and model.startswith(OLLAMA_PREFIXES):
        kwargs["num_ctx"] = context_window  # litellm puts it in Ollama's request options
    supported = _supported_params(litellm, model)
    if temperature is not None and (supported is None or "temperature" in supported):
        kwargs["temperature"] = temperature
    if max_tokens is not None and (supported is None or "max_tokens" in supported):
        kwargs["max_tokens"] = max_tokens
    gate = call_gate(model, api_base, max_concurrent) if max_concurrent else None
    attempt = 0
    while True:
        attempt += 1
        try:
            # The outer deadline catches a server that accepts the call and never answers.
            if gate is None:
                response = await asyncio.wait_for(litellm.acompletion(**kwargs), timeout=timeout_s + 5)
            else:
                await gate.acquire()
                try:
                    response = await asyncio.wait_for(litellm.acompletion(**kwargs), timeout=timeout_s + 5)
                finally:
                    gate.release()
            return _parse(litellm, response, model)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            error = exc if isinstance(exc, LLMError) else classify(exc)
            error.attempts = attempt
            retries = policy.retries
            if error.refused and is_self_hosted(_effective_base(model, api_base)):
                # Nothing listens on a machine of one's own: five tries over 20 s will not
                # change that. One short retry covers a server that is still starting.
                retries = min(retries, REFUSED_LOCAL_RETRIES)
            if not error.retryable or attempt > retries:
                raise error from None
            wait = policy.delay(attempt, error.retry_after_s)
            if error.refused:
                wait = min(wait, REFUSED_WAIT_S)
            if on_retry is not None:
                on_retry(error, wait)
            await policy.sleep(wait)
