"""Prompts are markdown files shipped with the package, rendered so a missing variable raises.

Two forms, nothing more: `{{name}}` is replaced by a text variable, and
`{{#if flag}} ... {{else}} ... {{/if}}` (or `{{#if not flag}}`; `{{else}}` optional; blocks
may nest) keeps one branch according to a yes/no variable, so one prompt file holds its
instructions for both cases (e.g. with or without web sources) instead of code pasting
sentences together. A tag alone on its line takes its line break with it. A missing
variable, a text used as a flag or a flag used as text, and an unbalanced block all raise
PromptError, whichever branch they are in. Values are inserted last and never rendered
again: a value holding `{{...}}` (an audience typed by the user, say) stays text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from importlib import resources

_VARIABLE = re.compile(r"\{\{\s*([a-z_][a-z0-9_]*)\s*\}\}")
# A block tag alone on its line: the line goes, not just the tag (no stray blank lines).
_TAG_LINE = re.compile(r"^[ \t]*(\{\{(?:#if\s+(?:not\s+)?[a-z_][a-z0-9_]*\s*|else|/if)\}\})[ \t]*\n", re.M)
# An innermost block: no `{{#if` inside it. Replaced repeatedly, inner blocks first.
_NO_OPEN = r"(?:(?!\{\{#if\b).)*?"
_BLOCK = re.compile(
    r"\{\{#if\s+(not\s+)?([a-z_][a-z0-9_]*)\s*\}\}(" + _NO_OPEN + r")(?:\{\{else\}\}(" + _NO_OPEN + r"))?\{\{/if\}\}",
    re.S,
)
_STRAY_TAG = re.compile(r"\{\{\s*(?:#if\b|else\b|/if\b)[^}]*\}\}")

Value = str | bool

__all__ = ["PromptError", "Value", "load", "render", "render_file"]


class PromptError(Exception):
    pass


def load(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def _flag(variables: Mapping[str, Value], key: str) -> bool:
    if key not in variables:
        raise PromptError(f"prompt flag {{{{#if {key}}}}} has no value")
    value = variables[key]
    if not isinstance(value, bool):
        raise PromptError(f"prompt variable {{{{{key}}}}} is text, not a yes/no flag")
    return value


def render(template: str, variables: Mapping[str, Value]) -> str:
    def branch(match: re.Match[str]) -> str:
        wanted = _flag(variables, match.group(2)) != bool(match.group(1))  # `not` inverts
        return match.group(3) if wanted else (match.group(4) or "")

    def substitute(match: re.Match[str]) -> str:
        key = match.group(1)
        if key not in variables:
            raise PromptError(f"prompt variable {{{{{key}}}}} has no value")
        value = variables[key]
        if isinstance(value, bool):
            raise PromptError(f"prompt variable {{{{{key}}}}} is a yes/no flag: use it as {{{{#if {key}}}}}")
        return value

    for match in _VARIABLE.finditer(template):
        if match.group(1) != "else":
            substitute(match)  # every variable, in the branch kept or not: a typo raises either way
    text = _TAG_LINE.sub(r"\1", template)
    while True:
        text, replaced = _BLOCK.subn(branch, text)
        if not replaced:
            break
    stray = _STRAY_TAG.search(text)
    if stray:
        raise PromptError(f"unbalanced {stray.group(0)}: every {{{{#if x}}}} needs its {{{{/if}}}}")
    return _VARIABLE.sub(substitute, text)


def render_file(name: str, variables: Mapping[str, Value]) -> str:
    return render(load(name), variables)
