"""Imported by the forkserver of tests/fakes/cli_process.py: makes one real model call
through Pensieve's seam against a throwaway fake model, so the lazy first-call set-up of
litellm and the OpenAI client (about a second of CPU) is paid once, not in every child."""

from __future__ import annotations

import asyncio
import os

from pensieve.model import llm
from tests.fakes.model_server import FakeModel


def _warm() -> None:
    fake = FakeModel().start()
    saved = os.environ.get("OPENAI_API_KEY")
    os.environ["OPENAI_API_KEY"] = "sk-warm-up-only"
    try:
        asyncio.run(
            llm.complete(
                model="openai/gpt-4o-mini",
                messages=[{"role": "user", "content": "warm up"}],
                api_base=fake.base_url,
                policy=llm.RetryPolicy(retries=0),
            )
        )
    finally:
        if saved is None:
            del os.environ["OPENAI_API_KEY"]
        else:
            os.environ["OPENAI_API_KEY"] = saved
        fake.stop()


_warm()
