"""text_stats: the Polisher's ruler for length targets."""

from __future__ import annotations

import re
from typing import Any

from pensieve.tools.registry import ToolContext, tool

WORDS_PER_MINUTE = 200
_WORD = re.compile(r"\S+")


def text_stats_of(text: str) -> dict[str, Any]:
    words = len(_WORD.findall(text))
    return {
        "word_count": words,
        "char_count": len(text),
        "reading_time_minutes": round(words / WORDS_PER_MINUTE, 2),
    }


@tool(canonical="text.stats", default_limit=10)
async def text_stats(ctx: ToolContext, text: str) -> dict[str, Any]:
    """Count words and characters (spaces included) of a text and estimate its reading time at 200 words per minute.

    Args:
        text: The text to measure.
    """
    return text_stats_of(text)
