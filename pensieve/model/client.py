"""The one client every model call of a stage goes through: the agent's turns and the
extra calls its tools make (fetch_url's summary).

It owns what each call needs and records what each call cost: the model, the llm
settings, the retry policy (with a note for every retry), the budget check before the
call, usage recording after it, and a `model` event either way. A failure for good
becomes `StageFailed` with a message saying what to do. It is also the seam where a test
could put a model in-process (anything with the same `complete`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from pensieve.config import Settings
from pensieve.errors import StageFailed
from pensieve.model import llm
from pensieve.model.llm import Messages, Tools
from pensieve.project.events import EventKind, EventSink


class ModelClient(Protocol):
    model: str

    @property
    def context_chars(self) -> int: ...

    async def complete(
        self, messages: Messages, *, tools: Tools = None, temperature: float | None = None, purpose: str = "agent"
    ) -> llm.LLMReply: ...


@dataclass
class StageModelClient:
    stage: str
    model: str
    settings: Settings
    events: EventSink
    record_usage: Callable[[llm.LLMReply], None]
    check_budget: Callable[[], None]

    def _policy(self) -> llm.RetryPolicy:
        llm_settings = self.settings.llm
        return llm.RetryPolicy(
            retries=llm_settings.retries, base_s=llm_settings.retry_base_s, max_wait_s=llm_settings.retry_max_wait_s
        )

    @property
    def context_window(self) -> int | None:
        """The model's window in tokens: agents.<stage>.context_window or llm.context_window
        (Settings.context_window_for), else litellm's model info, else None."""
        configured = self.settings.context_window_for(self.stage)
        return llm.context_window(self.model, self.settings.llm.api_base, configured)

    @property
    def context_chars(self) -> int:
        """The conversation's character budget: the window less the reply's share, under
        llm.max_context_chars when set (llm.context_chars)."""
        llm_settings = self.settings.llm
        return llm.context_chars(llm_settings.max_context_chars, self.context_window, llm_settings.max_output_tokens)

    def _on_retry(self, error: llm.LLMError, wait: float) -> None:
        self.events.emit(
            EventKind.RETRY,
            self.stage,
            error=error.message,
            error_kind=error.kind,
            detail=error.detail,
            wait_s=round(wait, 2),
        )

    async def complete(
        self, messages: Messages, *, tools: Tools = None, temperature: float | None = None, purpose: str = "agent"
    ) -> llm.LLMReply:
        """One model call (retried as the policy says); `temperature` defaults to the stage's."""
        self.check_budget()
        started = time.monotonic()
        try:
            reply = await llm.complete(
                model=self.model,
                messages=messages,
                tools=tools,
                api_base=self.settings.llm.api_base,
                temperature=self.settings.temperature_for(self.stage) if temperature is None else temperature,
                timeout_s=self.settings.llm.timeout_s,
                max_tokens=self.settings.llm.max_output_tokens,
                context_window=self.context_window,
                policy=self._policy(),
                on_retry=self._on_retry,
                max_concurrent=self.settings.llm.max_concurrent_calls,
            )
        except llm.LLMError as error:
            self.events.emit(
                EventKind.MODEL,
                self.stage,
                model=self.model,
                purpose=purpose,
                error=error.message,
                error_kind=error.kind,
                detail=error.detail,
                attempts=error.attempts,
                duration_s=round(time.monotonic() - started, 3),
            )
            raise StageFailed(model_failure(error, self.model, self.settings.llm.api_base)) from None
        self.record_usage(reply)
        if reply.usage_clamped:
            self.events.emit(
                EventKind.NOTE,
                self.stage,
                message=f"{self.model} reported usage that is negative or not a number; it was counted as 0",
            )
        self.events.emit(
            EventKind.MODEL,
            self.stage,
            model=self.model,
            purpose=purpose,
            duration_s=round(time.monotonic() - started, 3),
            prompt_tokens=reply.prompt_tokens,
            completion_tokens=reply.completion_tokens,
            cost_usd=reply.cost_usd,
            tool_calls=[call.name for call in reply.tool_calls],
        )
        return reply

    async def summarize(self, instructions: str, text: str) -> str:
        """fetch_url's `summary` mode: one extra call, counted in the stage's usage."""
        messages = [{"role": "system", "content": instructions}, {"role": "user", "content": text}]
        reply = await self.complete(messages, temperature=0.2, purpose="summary")
        return reply.text


def model_failure(error: llm.LLMError, model: str, api_base: str | None = None) -> str:
    """One line naming the model, where its calls go and what to do; never a class name."""
    if error.kind == "auth":
        hint = _key_hint(model)
        return f"the model provider refused the API key for {model} ({error.status or 'auth error'}); check {hint}"
    if error.kind == "not_found":
        return f"model {model!r} was not found by its provider; check llm.model / --model ({error.message})"
    if error.kind in ("too_large", "other") and not error.detail:
        line = error.message  # our own words (a refused answer, an empty response)
    else:
        line = llm.describe(error, model, api_base)
    if error.attempts > 1:
        return f"model call failed after {error.attempts} attempts: {line}"
    return f"model call failed: {line}"


def _key_hint(model: str) -> str:
    provider = model.split("/", 1)[0].lower() if "/" in model else "openai"
    known = {
        "openai": "OPENAI_API_KEY",
        "anthropic": "ANTHROPIC_API_KEY",
        "gemini": "GEMINI_API_KEY",
        "mistral": "MISTRAL_API_KEY",
        "groq": "GROQ_API_KEY",
        "openrouter": "OPENROUTER_API_KEY",
        "deepseek": "DEEPSEEK_API_KEY",
        "together_ai": "TOGETHERAI_API_KEY",
        "cohere": "COHERE_API_KEY",
        "azure": "AZURE_API_KEY",
    }
    return known.get(provider, f"the API key environment variable for {provider}")
