"""text_stats: the Polisher's ruler for length targets."""

from __future__ import annotations

import re
from typing import Any

from pensieve.tools.files import read_whole_file
from pensieve.tools.registry import ToolContext, ToolError, tool

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
async def text_stats(ctx: ToolContext, text: str = "", filename: str = "") -> dict[str, Any]:
    """Count words and characters (spaces included) of a text and estimate its reading time at 200 words per minute.

    Give either the text or the name of a project file (e.g. your own 'final.md' in
    progress): measuring a file needs no copy of it in the call.

    Args:
        text: The text to measure.
        filename: A project file to measure instead, e.g. 'final.md'.
    """
    if filename.strip() and text:
        raise ToolError("give either text or filename, not both")
    if filename.strip():
        # Sending an 8,500-character article back as an argument only to count its words
        # costs a whole article of output tokens (seen by hand); the file is right here.
        return {"filename": filename.strip(), **text_stats_of(await read_whole_file(ctx, filename.strip()))}
    return text_stats_of(text)
