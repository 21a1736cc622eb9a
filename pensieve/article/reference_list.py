"""The entries of an article's own reference list: what each line labels (a source id
`[S3]`, a reader number `1.` / `[1]`, or a bullet), how the list numbers them, and
final.md's reader numbers mapped back to source ids. The list itself is
`blocks.split_references` / `blocks.reference_section`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from pensieve.article.blocks import reference_section
from pensieve.article.citations import URL_START

_REF_ENTRY = re.compile(rf"^\s*(\d{{1,3}})[.)]\s+.*?({URL_START}\S+)\s*$", re.M)


def reader_numbers(text: str, url_to_id: dict[str, str]) -> dict[str, str]:
    """final.md's reader numbers -> source ids, read from its generated reference list."""
    section = reference_section(text)
    if section is None:
        return {}
    mapping: dict[str, str] = {}
    for match in _REF_ENTRY.finditer(section):
        url = match.group(2).rstrip(".,;")
        sid = url_to_id.get(url.rstrip("/"))
        if sid:
            mapping[match.group(1)] = sid
    return mapping


_REF_LINE = re.compile(r"^\s*(?:[-*]|\d+[.)])?\s*\[?(S\d+|\d+)\]?[.:)]?\s+(.*)$")


def labelled_entries(section: str) -> list[tuple[str, str]]:
    """(label, rest of line) for each entry of a reference list (its heading line first);
    label is 'S3' or '3', or '?' for a list line that names neither."""
    entries = []
    for line in section.splitlines()[1:]:
        if not line.strip():
            continue
        match = _REF_LINE.match(line)
        if match:
            entries.append((match.group(1), match.group(2)))
        elif line.strip().startswith(("-", "*")) or line.strip()[:1].isdigit():
            entries.append(("?", line.strip()))
    return entries


_NUMBERED_LINE = re.compile(r"^\[?\d+[.)\]]")
_BULLET_WITH_ID = re.compile(r"^[-*]\s*\[(S?\d+)\]")


def numbered_list(section: str) -> bool | None:
    """Whether a reference list (its heading line first) numbers its entries: True for
    numbered entries or bullets led by a `[n]`/`[Sn]`, False for plain bullets (an
    author-year list), None when no entry says."""
    for line in section.splitlines()[1:]:
        stripped = line.strip()
        if _NUMBERED_LINE.match(stripped):
            return True
        if stripped.startswith(("-", "*")):
            return _BULLET_WITH_ID.match(stripped) is not None
    return None


_NUMBERED_ENTRY = re.compile(r"^\s*(?:[-*]\s*)?\[?(\d{1,3})\]?[.):]?\s+(.*)$")
_ID_ENTRY = re.compile(r"^\s*(?:[-*]|\d+[.)])?\s*\[(S\d+)\]")
_BULLET_ENTRY = re.compile(r"^\s*[-*]\s+(.*)$")


@dataclass(frozen=True)
class Entry:
    """One line of a reference list as the export resolves it to an archived source."""

    kind: Literal["id", "number", "bullet"]
    label: str  # "S3" for an id entry, "3" for a numbered one, "" for a bullet
    text: str  # the rest of the line, to match against the archive ("" for an id entry)


def entries(section: str) -> list[Entry]:
    """The entries of a reference list (its heading line first), in order: lines led by a
    source id, numbered lines, bullets; other lines are not entries."""
    found: list[Entry] = []
    for line in section.splitlines()[1:]:
        by_id = _ID_ENTRY.match(line)
        if by_id:
            found.append(Entry("id", by_id.group(1), ""))
            continue
        entry = _NUMBERED_ENTRY.match(line)
        bullet = _BULLET_ENTRY.match(line)
        if entry:
            found.append(Entry("number", entry.group(1), entry.group(2)))
        elif bullet:
            found.append(Entry("bullet", "", bullet.group(1)))
    return found
