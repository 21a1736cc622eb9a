"""Keeping an agent's conversation inside the model's context window, by priority.

Fetched pages and files are large, and an agent may read dozens of them. When the
conversation grows past its budget (`llm.context_chars`: the model's window less the share
kept for the reply), tool results are replaced by a short stub that says what was there and
the exact call that reads it again (every fetched page is in the project's archive, every
file can be read again). What goes first:

1. source pages (fetched pages, pages read back from `sources/`, MCP and library results),
2. then every other tool result (searches, listings, statistics),
oldest first and, among those, the large ones before the small ones.

The stage's own inputs (the artifacts it reviews, revises or builds on, as named by its
stage row) are never elided, except a copy superseded by a later read of the same file.
Neither are the system prompt, the task, the model's own messages or the latest results.

A call whose result was elided is reported (`forget`), so that making it again to get the
text back is a re-read, not a loop (the dispatcher's repeat detection).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

STUB_PREVIEW = 200
KEEP_LATEST = 2  # the most recent tool results are what the model is working on
# Once over budget, elide down to this share of it: the next turns then fit as they are, and
# the conversation's prefix stays the same for a while (a provider's prompt cache keeps
# working; eliding just enough rewrote the history on every turn, as seen by hand).
LOW_WATER = 0.8
LARGE = 2_000  # a result this long is elided before shorter ones of the same rank

# Ranks: lower goes first.
PAGE, RESULT, INPUT = 0, 1, 2
_PAGE_TOOLS = frozenset({"fetch_url", "read_library_document"})
SOURCES_PREFIX = "sources/"


@dataclass(frozen=True)
class _Call:
    name: str
    arguments: str

    def argument(self, key: str) -> str:
        try:
            data = json.loads(self.arguments)
        except (json.JSONDecodeError, TypeError, RecursionError):
            return ""
        value = data.get(key) if isinstance(data, dict) else None
        return value if isinstance(value, str) else ""


def conversation_chars(messages: list[dict[str, Any]]) -> int:
    return sum(len(str(m.get("content") or "")) + len(str(m.get("tool_calls") or "")) for m in messages)


def _calls_by_id(messages: list[dict[str, Any]]) -> dict[str, _Call]:
    """The assistant's tool calls, by id."""
    found: dict[str, _Call] = {}
    for message in messages:
        for call in message.get("tool_calls") or []:
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict) and call.get("id"):
                found[str(call["id"])] = _Call(str(function.get("name") or ""), str(function.get("arguments") or ""))
    return found


def _rank(call: _Call | None, inputs: Collection[str]) -> int:
    if call is None:
        return RESULT
    if call.name in _PAGE_TOOLS or call.name.startswith("mcp_"):
        return PAGE
    if call.name == "read_project_file":
        filename = call.argument("filename").strip().lstrip("./")
        if filename.startswith(SOURCES_PREFIX):
            return PAGE
        if filename in inputs:
            return INPUT
    return RESULT


def _how_to_read_again(call: _Call | None) -> str:
    if call is not None and call.name == "fetch_url" and call.argument("url"):
        return (
            f"fetch_url(url={call.argument('url')!r}) returns it again from the project's archive "
            "(no new download; the page is also sources/<id>.md for read_project_file)"
        )
    if call is not None and call.name == "read_project_file" and call.argument("filename"):
        return f"read_project_file(filename={call.argument('filename')!r}) reads it again"
    if call is not None and call.name == "web_search" and call.argument("query"):
        return f"web_search(query={call.argument('query')!r}) runs the search again"
    if call is not None and call.name:
        return f"calling {call.name} again with the same arguments returns it"
    return "fetched pages are in sources/ (read them with read_project_file), files can be read again"


def _stub(content: str, call: _Call | None) -> str:
    preview = " ".join(content[:STUB_PREVIEW].split())
    return f"[elided to save context: {len(content):,} characters. It began: {preview!r}. {_how_to_read_again(call)}.]"


def _superseded(index: int, call: _Call | None, later_reads: dict[str, int]) -> bool:
    """Whether an input read at `index` was read again later (the newer copy stays)."""
    if call is None or call.name != "read_project_file":
        return False
    key = call.arguments
    return later_reads.get(key, -1) > index


def compact(
    messages: list[dict[str, Any]],
    max_chars: int,
    forget: Callable[[str, str], None] | None = None,
    inputs: Collection[str] = (),
) -> int:
    """Elide tool results in place, by priority, until the conversation fits with room to
    spare (LOW_WATER); returns how many.

    `inputs` are the project files the stage must keep (its reads and its own artifact).
    `forget(name, arguments)` is told of each call whose result was elided."""
    if conversation_chars(messages) <= max_chars:
        return 0
    calls = _calls_by_id(messages)
    tool_indexes = [i for i, m in enumerate(messages) if m.get("role") == "tool"]
    candidates = tool_indexes[:-KEEP_LATEST] if len(tool_indexes) > KEEP_LATEST else []
    call_at = {i: calls.get(str(messages[i].get("tool_call_id") or "")) for i in tool_indexes}
    last_read: dict[str, int] = {}
    for i in tool_indexes:
        found = call_at[i]
        if found is not None and found.name == "read_project_file":
            last_read[found.arguments] = i

    def order(index: int) -> tuple[int, int, int]:
        call = call_at[index]
        rank = _rank(call, inputs)
        if rank == INPUT and _superseded(index, call, last_read):
            rank = PAGE  # an older copy of a file read again: the newer one stays
        small = int(len(str(messages[index].get("content") or "")) < LARGE)
        return (rank, small, index)

    target = int(max_chars * LOW_WATER)
    elided = 0
    for index in sorted(candidates, key=order):
        call = call_at[index]
        if order(index)[0] == INPUT:
            break  # everything elidable is gone; the stage's inputs stay whatever the size
        content = str(messages[index].get("content") or "")
        if content.startswith("[elided"):
            continue
        stub = _stub(content, call)
        if len(stub) >= len(content):
            continue  # a stub is never longer than what it replaces: compaction only shrinks
        messages[index]["content"] = stub
        elided += 1
        if forget is not None and call is not None:
            forget(call.name, call.arguments)
        if conversation_chars(messages) <= target:
            break
    return elided
