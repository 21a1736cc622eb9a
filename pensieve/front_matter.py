"""Markdown files with YAML front matter: topic files and archived sources.

One reader and one writer for both. PyYAML is imported when a file is read or written,
so commands that touch neither do not pay for it.
"""

from __future__ import annotations

import re
from typing import Any

# `---`, the YAML, then `---` (or YAML's `...`) on a line of its own.
_FENCE = re.compile(r"\A---[ \t]*\r?\n(.*?)^(?:---|\.\.\.)[ \t]*\r?$\n?", re.DOTALL | re.MULTILINE)


class FrontMatterError(ValueError):
    """The front matter is not valid YAML; the message says where."""


def parse_front_matter(text: str) -> tuple[Any, str] | None:
    """(the front matter's YAML value, the text after it), or None if there is none.

    Raises FrontMatterError for YAML that cannot be read, with its line in the file."""
    import yaml

    match = _FENCE.match(text)
    if not match:
        return None
    try:
        data = yaml.safe_load(match.group(1))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 2}" if mark is not None else ""
        raise FrontMatterError(f"bad YAML in front matter{where}: {getattr(exc, 'problem', None) or exc}") from None
    except RecursionError:
        data = None
        too_deep = True
    else:
        too_deep = nesting_depth(data) > MAX_DEPTH
    if too_deep:
        # Nothing Pensieve writes is more than a few levels deep; deeper data would break
        # whatever reads it next (a RecursionError far from here).
        raise FrontMatterError(f"bad YAML in front matter: nested more than {MAX_DEPTH} levels deep")
    return data, text[match.end() :]


MAX_DEPTH = 32


def nesting_depth(value: Any, limit: int = MAX_DEPTH + 1) -> int:
    """How deeply lists and mappings nest in value (counted iteratively, up to limit; a
    container YAML aliases many times is visited once, so an alias bomb costs nothing)."""
    deepest = 0
    seen: set[int] = set()
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list | tuple):
            if id(item) in seen:
                continue
            seen.add(id(item))
            deepest = max(deepest, depth)
            if deepest >= limit:
                return deepest
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return deepest


def split_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """(front matter as a mapping, body): {} and the whole text when there is none, {} when
    it is not a mapping; the body without its leading blank lines."""
    parsed = parse_front_matter(text)
    if parsed is None:
        return {}, text
    data, body = parsed
    return (data if isinstance(data, dict) else {}), body.lstrip("\n")


def render_front_matter(values: dict[str, Any], body: str, *, width: int) -> str:
    """`---`, the values as YAML (dumped, so no value can break out), `---`, then the body.

    `width` is where YAML folds long values; each kind of file keeps its own."""
    import yaml

    header = yaml.safe_dump(values, sort_keys=False, allow_unicode=True, width=width)
    return f"---\n{header}---\n\n{body.strip()}\n"
