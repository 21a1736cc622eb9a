"""Checks every artifact gets: not a tool call written as text, not a refusal, not an echo
of the prompt or the task message, no <think> block."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pensieve.contracts.reading import LazyPattern, tool_names, word_count
from pensieve.contracts.requirements import Inputs, Violation

if TYPE_CHECKING:
    pass

ECHO_SHINGLE_WORDS = 8  # sequences this long rarely repeat by chance, but do when a prompt is copied


# ---------------------------------------------------------------- checks for every artifact

_THINK = LazyPattern(r"</?think(?:ing)?\s*>", re.I)
_TOOL_TAG = LazyPattern(r"<\s*/?\s*tool_call\s*>|<\|tool_call|<function=", re.I)
_TOOL_TAG_BODY = LazyPattern(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.I | re.S)
_FENCED = LazyPattern(r"^\s*```[\w-]*[ \t]*\n(.*?)^\s*```", re.S | re.M)
_JSON_START = LazyPattern(r"[\[{]\s*\"(?:name|tool|tool_name|function|tool_calls|type)\"")
_ARGUMENT_KEYS = ("arguments", "parameters", "args", "input")


def _tool_named(value: Any) -> str | None:
    """The tool a decoded JSON value calls, if it is shaped like a tool call."""
    if isinstance(value, list):
        for item in value[:5]:
            called = _tool_named(item)
            if called:
                return called
        return None
    if not isinstance(value, dict):
        return None
    if "tool_calls" in value:
        return _tool_named(value["tool_calls"])
    name: Any = value.get("name") or value.get("tool") or value.get("tool_name")
    has_arguments = any(key in value for key in _ARGUMENT_KEYS)
    function = value.get("function")
    if isinstance(function, dict):
        name = function.get("name") or name
        has_arguments = has_arguments or any(key in function for key in _ARGUMENT_KEYS)
    elif isinstance(function, str):
        name = name or function
    if isinstance(name, str) and name and (has_arguments or name in tool_names()):
        return name
    return None


def _decode(text: str) -> Any:
    try:
        return json.loads(text, strict=False)  # strict=False: raw newlines inside strings, as models write them
    except (ValueError, RecursionError):
        return None


# A call in function syntax, opening the text (after a fence, if any).
_CALL_SYNTAX = LazyPattern(r"^(?:```[\w-]*\s*)?`?(\w+)\s*\(")


def tool_call_in(text: str) -> str | None:
    """The tool named by a tool call written as text: tagged, bare or fenced JSON; else None.

    JSON that names one of Pensieve's tools counts anywhere; JSON naming some other function
    counts only when it is most of the text (an article may show a JSON example).
    """
    stripped = text.strip()
    called = _CALL_SYNTAX.match(stripped)
    if called and called.group(1) in tool_names():
        return called.group(1)  # write_project_file(style_review.md, "...") as the whole reply
    if _TOOL_TAG.search(text):
        for body in _TOOL_TAG_BODY.findall(text):
            tagged = _tool_named(_decode(body.strip()))
            if tagged:
                return tagged
        return "a tool"
    name = _tool_named(_decode(stripped))
    if name:
        return name
    size = max(len(stripped), 1)
    for match in _FENCED.finditer(text):
        name = _tool_named(_decode(match.group(1).strip()))
        if name and (name in tool_names() or len(match.group(0).strip()) >= size / 2):
            return name
    decoder = json.JSONDecoder(strict=False)
    for match in _JSON_START.finditer(text):
        try:
            value, end = decoder.raw_decode(text, match.start())
        except ValueError:
            continue
        name = _tool_named(value)
        if name and (name in tool_names() or end - match.start() >= size / 2):
            return name
    return None


_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'"})
# An apology or "as an AI" where the document should begin: never part of an artifact.
_APOLOGY_START = LazyPattern(
    r"^(?:(?:i'?m|i am)\s+(?:so\s+|very\s+|really\s+)?(?:sorry|afraid)\b|sorry\b|i apologi[sz]e\b|as an ai\b|"
    r"i must decline\b)",
    re.I,
)
# Saying it cannot do the task: a refusal only in a short text without findings or lists
# (a review may well say it could not reach the sources, then give its findings).
_CANNOT = LazyPattern(
    r"^(?:unfortunately,?\s+i\b|i\s+(?:can ?not|can't|won't|will not|am unable|am not able)\b|"
    r"i'm\s+(?:unable|not able)\b|i\s+(?:do not|don't)\s+have\s+(?:access|the ability)\b)"
    r"|\b(?:i'?m sorry|i am sorry|i apologi[sz]e)\b[^.]{0,40}\b(?:can ?not|can't|unable|not able)\b"
    r"|\bi\s+(?:can ?not|can't|am unable to|am not able to)\s+(?:help|assist|comply|fulfil|fulfill|complete|"
    r"write|create|provide|do that|access|browse)\b",
    re.I | re.M,
)
_STRUCTURE = LazyPattern(r"^\s*(?:[-*+]\s|\d+[.)]\s|\|)", re.M)
_SHORT_TEXT_WORDS = 60  # a refusal is a sentence or three


def refusal_in(text: str) -> str | None:
    """The refusing sentence, if the artifact is a refusal rather than a document."""
    lines = [line for line in text.translate(_APOSTROPHES).splitlines() if not line.lstrip().startswith("#")]
    body = "\n".join(lines).strip().lstrip("*_> ").strip()
    match = _APOLOGY_START.match(body)
    if match is None and word_count(body) < _SHORT_TEXT_WORDS and not _STRUCTURE.search(body):
        match = _CANNOT.search(body)
    if match is None:
        return None
    start = body.rfind("\n", 0, match.start()) + 1
    sentence = re.split(r"(?<=[.!?])\s|\n", body[start:], maxsplit=1)[0]
    return sentence[:100]


def _shingles(text: str, size: int = ECHO_SHINGLE_WORDS) -> set[tuple[str, ...]]:
    words = re.findall(r"[^\W_]+", text.lower())
    return {tuple(words[i : i + size]) for i in range(len(words) - size + 1)}


def echo_overlap(text: str, *sources: str, own: Sequence[str] = ()) -> float:
    """Share of the text's 8-word sequences that also occur in the sources (0 for short texts),
    leaving out those of `own`: text the sources quote from the project itself."""
    mine = _shingles(text)
    if not mine:
        return 0.0
    theirs: set[tuple[str, ...]] = set().union(*(_shingles(s) for s in sources if s))
    shared = mine & theirs
    if shared and own:
        shared -= set().union(*(_shingles(o) & shared for o in own if o))
    return len(shared) / len(mine)


def universal_checks(text: str, given: Inputs) -> tuple[list[Violation], bool]:
    """Checks every artifact gets; the flag says the text is not a document at all."""
    found: list[Violation] = []
    kind = given.kind
    name = tool_call_in(text)
    if name:
        found.append(
            Violation(
                "not_tool_call",
                f"it is a tool call written as text ({name}), not the {kind}",
                f"call {name} through the tool interface, with the whole markdown document as its content"
                if name == "write_project_file"
                else "call tools through the tool interface, never as JSON in the reply",
            )
        )
    refusal = refusal_in(text)
    if refusal:
        found.append(
            Violation("not_refusal", f'it is a refusal ("{refusal}"), not the {kind}', f"write the {kind} as asked")
        )
    sources = {"system prompt": given.prompt or "", "task message": given.task_message or ""}
    overlap = echo_overlap(text, *sources.values())
    limit = given.limits.echo_max_overlap
    own: Sequence[str] = ()
    if overlap > limit and given.own_text is not None:
        own = given.own_text()
        overlap = echo_overlap(text, *sources.values(), own=own)
    if overlap > limit:
        echoed = [label for label, source in sources.items() if source and echo_overlap(text, source, own=own) > 0]
        found.append(
            Violation(
                "not_echo",
                f"{overlap:.0%} of its {ECHO_SHINGLE_WORDS}-word sequences repeat the {' and '.join(echoed)} "
                f"(contracts.echo_max_overlap is {limit:.0%})",
                f"write the {kind} itself, not the instructions",
            )
        )
    not_a_document = bool(found)
    if _THINK.search(text):
        found.append(
            Violation("no_think", "it contains a <think> block", f"write only the {kind}, without your reasoning")
        )
    return found, not_a_document


def strip_think(text: str) -> str:
    """The text without <think>...</think> blocks (an unclosed one runs to the end)."""
    return re.sub(r"<think(?:ing)?\s*>.*?(?:</think(?:ing)?\s*>|\Z)", "", text, flags=re.S | re.I)
