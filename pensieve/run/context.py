"""Keeping an agent's conversation inside the model's context window.

Fetched pages and files are large, and an agent may read dozens of them. When the
conversation grows past `llm.max_context_chars`, the oldest tool results are replaced by
a short stub that says what was there and how to get it back (every fetched page is in
the project's archive, every file can be read again). The system prompt, the task and
the model's own messages are never touched, and neither are the latest results.

A call whose result was elided is reported (`forget`), so that making it again to get the
text back is a re-read, not a loop (the dispatcher's repeat detection).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

STUB_PREVIEW = 200
KEEP_LATEST = 2  # the most recent tool results are what the model is working on


def _size(messages: list[dict[str, Any]]) -> int:
    return sum(len(str(m.get("content") or "")) + len(str(m.get("tool_calls") or "")) for m in messages)


def _calls_by_id(messages: list[dict[str, Any]]) -> dict[str, tuple[str, str]]:
    """The assistant's tool calls, by id: (name, raw arguments)."""
    found: dict[str, tuple[str, str]] = {}
    for message in messages:
        for call in message.get("tool_calls") or []:
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict) and call.get("id"):
                found[str(call["id"])] = (str(function.get("name") or ""), str(function.get("arguments") or ""))
    return found


def compact(
    messages: list[dict[str, Any]],
    max_chars: int,
    forget: Callable[[str, str], None] | None = None,
) -> int:
    """Elide old tool results in place until the conversation fits; returns how many.

    `forget(name, arguments)` is told of each call whose result was elided."""
    if _size(messages) <= max_chars:
        return 0
    calls = _calls_by_id(messages) if forget is not None else {}
    tool_indexes = [i for i, m in enumerate(messages) if m.get("role") == "tool"]
    elided = 0
    for index in tool_indexes[:-KEEP_LATEST] if len(tool_indexes) > KEEP_LATEST else []:
        content = str(messages[index].get("content") or "")
        if content.startswith("[elided"):
            continue
        preview = " ".join(content[:STUB_PREVIEW].split())
        stub = (
            f"[elided to save context: {len(content):,} characters. It began: {preview!r}. "
            "Fetched pages are in sources/ (read them with read_project_file), files can be read again.]"
        )
        if len(stub) >= len(content):
            continue  # a stub is never longer than what it replaces: compaction only shrinks
        messages[index]["content"] = stub
        elided += 1
        call = calls.get(str(messages[index].get("tool_call_id") or ""))
        if forget is not None and call is not None:
            forget(*call)
        if _size(messages) <= max_chars:
            break
    return elided
