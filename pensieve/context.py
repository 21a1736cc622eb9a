"""Keeping an agent's conversation inside the model's context window.

Fetched pages and files are large, and an agent may read dozens of them. When the
conversation grows past `llm.max_context_chars`, the oldest tool results are replaced by
a short stub that says what was there and how to get it back (every fetched page is in
the project's archive, every file can be read again). The system prompt, the task and
the model's own messages are never touched, and neither are the latest results.
"""

from __future__ import annotations

from typing import Any

STUB_PREVIEW = 200
KEEP_LATEST = 2  # the most recent tool results are what the model is working on


def _size(messages: list[dict[str, Any]]) -> int:
    return sum(len(str(m.get("content") or "")) + len(str(m.get("tool_calls") or "")) for m in messages)


def compact(messages: list[dict[str, Any]], max_chars: int) -> int:
    """Elide old tool results in place until the conversation fits; returns how many."""
    if _size(messages) <= max_chars:
        return 0
    tool_indexes = [i for i, m in enumerate(messages) if m.get("role") == "tool"]
    elided = 0
    for index in tool_indexes[:-KEEP_LATEST] if len(tool_indexes) > KEEP_LATEST else []:
        content = str(messages[index].get("content") or "")
        if content.startswith("[elided"):
            continue
        preview = " ".join(content[:STUB_PREVIEW].split())
        messages[index]["content"] = (
            f"[elided to save context: {len(content):,} characters. It began: {preview!r}. "
            "Fetched pages are in sources/ (read them with read_project_file), files can be read again.]"
        )
        elided += 1
        if _size(messages) <= max_chars:
            break
    return elided
