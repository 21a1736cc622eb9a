"""Tool calls that a model wrote as message text instead of sending them as tool calls.

Small local models (Qwen2.5-Coder-0.5B behind llama.cpp, models behind Ollama) often answer
a tool-calling request with the call as JSON in the message content. Seen in the field:

    {"name": "write_project_file", "arguments": {"filename": "outline.md", "content": "..."}}
    ```json\\n{"name": ..., "arguments": ...}\\n```           (in a fence, any language tag)
    <tool_call>\\n{"name": ..., "arguments": ...}\\n</tool_call>    (Qwen/Hermes chat templates)
    [{"name": ...}, {"name": ...}]  or one object per line      (several calls)
    {"name": ..., "parameters": {...}}, arguments as a JSON string,
    {"type": "function", "function": {"name": ..., "arguments": ...}}  (OpenAI's wire shape)

`parse_text_tool_calls` finds them by running a JSON decoder from every `{` and `[` (so
prose, braces inside strings and newlines inside content do not matter) and keeps only
objects that name a tool we know. It is deliberately strict about what a call is: the
same model also echoes the tool *schemas* from its prompt (`{"type": "function",
"function": {"name": "write_project_file", "description": ..., "parameters": {"type":
"object", ...}}}`), and executing an echoed schema would be wrong. It never raises.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from typing import Any

from pensieve.model.llm import ToolCall

# Lenient: raw newlines and tabs inside strings are accepted (small models write them).
_DECODER = json.JSONDecoder(strict=False)

_NAME_KEYS = ("name", "tool_name", "tool")
_ARGUMENT_KEYS = ("arguments", "parameters", "args", "input")
# Keys a call object may carry besides its name and arguments. Anything else (notably
# "description") means the object is something else, such as an echoed tool schema.
_EXTRA_KEYS = frozenset({"type", "id", "index", "call_id"})
_SCHEMA_KEYS = frozenset({"type", "properties", "required", "additionalProperties", "title", "description", "$defs"})

# Wrappers that become empty once the calls inside them are taken out.
_EMPTY_FENCE = re.compile(r"```[\w+.-]*[ \t]*\n?\s*```")
_OPEN_FENCE_AT_END = re.compile(r"```[\w+.-]*\s*\Z")
_TAG = re.compile(r"</?(?:tool_calls?|function_calls?|functioncall)>", re.IGNORECASE)
_MARKERS = ("[TOOL_CALLS]", "<|python_tag|>", "<|tool_call|>")
# Where a call may start: an object with a key, or a list of objects.
_OPENER = re.compile(r'\{\s*"|\[\s*\{')
_ESCAPE = re.compile(r"\\(.?)", re.DOTALL)
_VALID_ESCAPES = frozenset('"\\/bfnrtu')
_BLANK_LINES = re.compile(r"\n[ \t]*\n(?:[ \t]*\n)+")
# Bounds on the work for one reply, so that degenerate text stays cheap (well under a
# second): characters the decoder may scan in all, and escape repairs (each copies the
# rest of the text).
_MAX_SCANNED = 5_000_000
_MAX_REPAIRS = 20
_DEEP_NESTING_COST = 2000


def parse_text_tool_calls(
    text: str,
    offered: Collection[str],
    known: Collection[str],
    *,
    start: int = 1,
) -> tuple[list[ToolCall], str]:
    """The tool calls written in `text`, and the text that is left once they are taken out.

    A call counts only if it names a tool in `known` (the full catalog; `offered` is added
    to it). A call to a known tool the agent was not offered is returned all the same: the
    dispatcher answers it like any refused call, which tells the model what it may use.
    Names are matched exactly, then loosely ("Write Project File", "functions.web_search").
    Arguments come back as JSON text; arguments that are not valid JSON are passed on as
    written so the dispatcher's error tells the model what was wrong. Ids are
    `text_call_<n>` counting from `start` (pass a running count to keep ids unique across
    a conversation). With no call found, the text comes back unchanged.
    """
    try:
        return _parse(text, set(known) | set(offered), start)
    except Exception:  # a parser of untrusted text must never take the agent loop down
        return [], text


def _parse(text: str, names: set[str], start: int) -> tuple[list[ToolCall], str]:
    if not text or not names or ("{" not in text):
        return [], text
    loose = {_loose(name): name for name in names}
    flat = _loose(text)
    if not any(name in flat for name in loose):  # no tool is named at all: the usual case
        return [], text
    found: list[tuple[str, str]] = []
    spans: list[tuple[int, int]] = []
    position = 0
    length = len(text)
    budget = _Budget()
    while position < length and budget.scanned < _MAX_SCANNED:
        opener = _OPENER.search(text, position)
        if opener is None:
            break
        begin = opener.start()
        decoded = _decode_at(text, begin, budget)
        if decoded is None:
            position = begin + 1
            continue
        value, end = decoded
        here = _calls_in(value, names, loose)
        if here:
            found.extend(here)
            spans.append((begin, end))
            position = end
        elif isinstance(value, dict):
            # Some other JSON object (an example in prose, an echoed schema): skip it whole,
            # never looking for calls inside it.
            position = end
        else:
            # A list that is not a list of calls may still hold call objects, or be a
            # citation like [S1]: look inside it.
            position = begin + 1
    if not found:
        return [], text
    calls: list[ToolCall] = []
    seen: set[tuple[str, str]] = set()
    for name, arguments in found:
        if (name, arguments) in seen:  # the same call shown twice (bare, then fenced)
            continue
        seen.add((name, arguments))
        calls.append(ToolCall(id=f"text_call_{start + len(calls)}", name=name, arguments=arguments))
    return calls, _remainder(text, spans)


class _Budget:
    def __init__(self) -> None:
        self.scanned = 0
        self.repairs = 0


def _decode_at(text: str, begin: int, budget: _Budget | None = None) -> tuple[Any, int] | None:
    """The JSON value starting at `begin` and where it ends, or None."""
    budget = budget or _Budget()
    try:
        value, end = _DECODER.raw_decode(text, begin)
        budget.scanned += end - begin
        return value, end
    except RecursionError:  # absurdly deep nesting
        budget.scanned += _DEEP_NESTING_COST
        return None
    except json.JSONDecodeError as exc:
        # A decode error also costs a count of the lines before it (for its message).
        budget.scanned += max(1, exc.pos - begin) + exc.pos // 8
        if "escape" not in exc.msg or budget.repairs >= _MAX_REPAIRS:
            return None
    budget.repairs += 1
    budget.scanned += len(text) - begin
    # Invalid escapes (Python and markdown habits): \' means a quote; in \_ or \* the
    # backslash is kept as a character. The end is mapped back onto the original text.
    segment = text[begin:]
    shifts: list[tuple[int, int]] = []  # (position in the repaired text, characters added)
    offset = 0

    def fix(match: re.Match[str]) -> str:
        nonlocal offset
        char = match.group(1)
        if char and char in _VALID_ESCAPES:
            return match.group(0)
        delta = -1 if char == "'" else 1
        shifts.append((match.start() + offset, delta))
        offset += delta
        return char if delta < 0 else "\\\\" + char

    repaired = _ESCAPE.sub(fix, segment)
    try:
        value, end = _DECODER.raw_decode(repaired, 0)
    except (json.JSONDecodeError, RecursionError):
        return None
    return value, begin + end - sum(delta for at, delta in shifts if at < end)


def _loose(name: str) -> str:
    name = name.strip().lower()
    for prefix in ("functions.", "function.", "tools.", "tool."):
        name = name.removeprefix(prefix)
    return re.sub(r"[^a-z0-9]+", "_", name).strip("_")


def _calls_in(value: Any, names: set[str], loose: dict[str, str]) -> list[tuple[str, str]]:
    """The calls `value` stands for: one object, a list of them, or {"tool_calls": [...]}.

    All or nothing: a list counts only if every element is a call.
    """
    if isinstance(value, list):
        if not value:
            return []
        out: list[tuple[str, str]] = []
        for item in value:
            one = _calls_in(item, names, loose) if isinstance(item, dict) else []
            if not one:
                return []
            out.extend(one)
        return out
    if not isinstance(value, dict):
        return []
    if set(value) <= {"tool_calls", "role", "content"} and isinstance(value.get("tool_calls"), list):
        return _calls_in(value["tool_calls"], names, loose)
    call = _one_call(value, names, loose)
    return [call] if call else []


def _one_call(value: dict[str, Any], names: set[str], loose: dict[str, str]) -> tuple[str, str] | None:
    inner = value.get("function")
    if isinstance(inner, dict):  # {"type": "function", "function": {"name": ..., "arguments": ...}}
        if not set(value) <= _EXTRA_KEYS | {"function"}:
            return None
        value = inner
    name_key = next((key for key in _NAME_KEYS if isinstance(value.get(key), str)), None)
    if name_key is None and isinstance(value.get("function"), str):
        name_key = "function"
    if name_key is None:
        return None
    argument_keys = [key for key in _ARGUMENT_KEYS if key in value]
    if len(argument_keys) > 1:
        return None
    if not set(value) <= _EXTRA_KEYS | {name_key, *argument_keys}:
        return None
    written = str(value[name_key])
    name = written if written in names else loose.get(_loose(written))
    if name is None:
        return None
    raw = value[argument_keys[0]] if argument_keys else {}
    if argument_keys and argument_keys[0] == "parameters" and _looks_like_schema(raw):
        return None  # an echoed tool definition, not a call
    return name, _arguments(raw)


def _looks_like_schema(raw: Any) -> bool:
    return (
        isinstance(raw, dict)
        and isinstance(raw.get("properties"), dict)
        and raw.get("type") == "object"
        and set(raw) <= _SCHEMA_KEYS
    )


def _arguments(raw: Any) -> str:
    if raw is None:
        return "{}"
    if isinstance(raw, str):
        # Arguments given as a JSON string (OpenAI's own wire shape): normalise if it parses,
        # else hand it on as written so the dispatcher can say what is wrong with it.
        decoded = _decode_at(raw.strip(), 0) if raw.strip() else ({}, 0)
        if decoded is not None and decoded[1] == len(raw.strip()):
            return json.dumps(decoded[0], ensure_ascii=False)
        return raw
    return json.dumps(raw, ensure_ascii=False)


def _remainder(text: str, spans: list[tuple[int, int]]) -> str:
    """The text without the calls and without the fences, tags and markers that held them."""
    pieces = []
    last = 0
    for begin, end in spans:
        pieces.append(text[last:begin])
        last = end
    pieces.append(text[last:])
    rest = "".join(pieces)
    rest = _EMPTY_FENCE.sub("", rest)
    rest = _OPEN_FENCE_AT_END.sub("", rest)
    rest = _TAG.sub("", rest)
    for marker in _MARKERS:
        rest = rest.replace(marker, "")
    rest = _BLANK_LINES.sub("\n\n", rest)
    return rest.strip()
