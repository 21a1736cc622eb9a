"""Prompts are markdown files shipped with the package, rendered so a missing variable raises."""

from __future__ import annotations

import re
from importlib import resources

_VARIABLE = re.compile(r"\{\{\s*([a-z_][a-z0-9_]*)\s*\}\}")


class PromptError(Exception):
    pass


def load(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def render(template: str, variables: dict[str, str]) -> str:
    def substitute(match: re.Match[str]) -> str:
        key = match.group(1)
        if key not in variables:
            raise PromptError(f"prompt variable {{{{{key}}}}} has no value")
        return variables[key]

    return _VARIABLE.sub(substitute, template)


def render_file(name: str, variables: dict[str, str]) -> str:
    return render(load(name), variables)
