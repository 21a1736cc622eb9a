"""Topic files: `workspaces/<ws>/topics/<slug>.md`, YAML front matter plus a markdown body.

The front matter needs a `title`; `tags`, `summary`, `sources` (URLs) and `updated` are
optional and other keys are kept but ignored. A file whose front matter cannot be read is
not fatal: it is reported as a problem naming the file, and the rest of the library works.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any

from pensieve.errors import UsageError
from pensieve.front_matter import FrontMatterError, parse_front_matter, render_front_matter
from pensieve.hashing import sha256_of_bytes
from pensieve.project.workspace import TMP_PREFIX, Workspace, atomic_write_text, check_name, read_file_nofollow, slugify

TOPIC_SUFFIX = ".md"
# A topic file is notes, not a book; anything bigger is almost surely a mistake and would
# make every index update slow.
MAX_TOPIC_BYTES = 1_000_000


class TopicFormatError(ValueError):
    """A topic file that cannot be used (no or bad front matter, no title...)."""


@dataclass(frozen=True)
class Topic:
    slug: str
    title: str
    body: str
    tags: tuple[str, ...] = ()
    summary: str = ""
    sources: tuple[str, ...] = ()
    updated: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Library:
    topics: list[Topic]
    # One line per unusable file, naming it (shown as warnings; never fatal).
    problems: list[str]


def _string_list(key: str, value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        items: Iterable[Any] = value.split(",")
    elif isinstance(value, list):
        items = value
    else:
        raise TopicFormatError(f"'{key}' must be a list of strings")
    out = []
    for item in items:
        if not isinstance(item, str | int | float) or isinstance(item, bool):
            raise TopicFormatError(f"'{key}' must be a list of strings")
        text = str(item).strip()
        if text:
            out.append(text)
    return tuple(out)


def parse_topic(slug: str, text: str) -> Topic:
    """Parse a topic file's text. Raises TopicFormatError saying what is wrong."""
    try:
        parsed = parse_front_matter(text.removeprefix("\ufeff"))
    except FrontMatterError as exc:
        raise TopicFormatError(str(exc)) from None
    if parsed is None:
        raise TopicFormatError("no front matter: the file must start with '---', YAML with a title, then '---'")
    data, body = parsed
    if not isinstance(data, dict):
        raise TopicFormatError("front matter must be a mapping with at least 'title'")
    title = data.get("title")
    if isinstance(title, int | float) and not isinstance(title, bool):
        title = str(title)
    if not isinstance(title, str) or not title.strip():
        raise TopicFormatError("front matter has no 'title'")
    summary = data.get("summary") or ""
    if not isinstance(summary, str):
        raise TopicFormatError("'summary' must be a string")
    updated = data.get("updated")
    if isinstance(updated, datetime | date):
        updated = updated.isoformat()
    elif updated is not None and not isinstance(updated, str):
        raise TopicFormatError("'updated' must be a date such as 2025-01-31")
    known = {"title", "tags", "summary", "sources", "updated"}
    return Topic(
        slug=slug,
        title=" ".join(title.split()),
        body=body.strip("\n"),
        tags=_string_list("tags", data.get("tags")),
        summary=summary.strip(),
        sources=_string_list("sources", data.get("sources")),
        updated=updated,
        extra={str(k): v for k, v in data.items() if k not in known},
    )


def topic_files(workspace: Workspace) -> list[Path]:
    """Every candidate topic file, sorted by name (temporary and hidden files excluded)."""
    root = workspace.topics_dir
    if not root.is_dir():
        return []
    return sorted(
        path
        for path in root.iterdir()
        if path.name.endswith(TOPIC_SUFFIX)
        and not path.name.startswith((".", TMP_PREFIX))
        and (path.is_file() or path.is_symlink())  # a link is listed, to be reported and skipped
    )


def slug_of(path: Path) -> str:
    return path.name[: -len(TOPIC_SUFFIX)]


def read_topic_bytes(path: Path, data: bytes) -> Topic:
    """Parse a file's bytes; raises TopicFormatError with the reason (the caller names the file)."""
    slug = slug_of(path)
    try:
        check_name("topic slug", slug)
    except UsageError:
        raise TopicFormatError("file name is not a valid slug (letters, digits, '.', '_', '-')") from None
    if len(data) > MAX_TOPIC_BYTES:
        raise TopicFormatError(f"file is larger than the limit of {MAX_TOPIC_BYTES:,} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise TopicFormatError("not UTF-8 text") from None
    return parse_topic(slug, text)


def problem_line(workspace: Workspace, path: Path, reason: str) -> str:
    return f"topic file {path.relative_to(workspace.home)}: {reason}; skipped"


def load_library(workspace: Workspace) -> Library:
    topics: list[Topic] = []
    problems: list[str] = []
    for path in topic_files(workspace):
        try:
            # Never through a link, and never more than the size limit (plus one byte to see it).
            topics.append(read_topic_bytes(path, read_file_nofollow(path, MAX_TOPIC_BYTES + 1)))
        except TopicFormatError as exc:
            problems.append(problem_line(workspace, path, str(exc)))
        except OSError as exc:
            reason = "is a symbolic link (not followed)" if path.is_symlink() else f"cannot read ({exc.strerror})"
            problems.append(problem_line(workspace, path, reason))
    return Library(topics, problems)


def topic_path(workspace: Workspace, slug: str) -> Path:
    check_name("topic slug", slug)
    return workspace.topics_dir / f"{slug}{TOPIC_SUFFIX}"


def existing_topic_path(workspace: Workspace, slug: str) -> Path:
    path = topic_path(workspace, slug)
    if not path.is_file():
        known = [slug_of(p) for p in topic_files(workspace)]
        hint = f"; topics here: {', '.join(known[:8])}" if known else "; add one with `pensieve topics add TITLE`"
        raise UsageError(f"unknown topic {slug!r} in workspace {workspace.name!r}{hint}")
    return path


def render_topic(
    title: str,
    body: str,
    *,
    tags: Iterable[str] = (),
    summary: str = "",
    sources: Iterable[str] = (),
    updated: str | None = None,
    extra: dict[str, Any] | None = None,
) -> str:
    """The text of a topic file."""
    front: dict[str, Any] = {"title": title}
    if summary:
        front["summary"] = summary
    if tags := list(tags):
        front["tags"] = tags
    if sources := list(sources):
        front["sources"] = sources
    if updated:
        front["updated"] = updated
    front.update(extra or {})
    return render_front_matter(front, body, width=100)


def parse_tags(tags: str | None) -> list[str]:
    return [t.strip() for t in (tags or "").split(",") if t.strip()]


def topic_slug(title: str) -> str:
    """The file name for a title; a title with no ASCII letters or digits gets a stable hash."""
    if not re.search(r"[A-Za-z0-9]", title):
        return "topic-" + sha256_of_bytes(title.encode("utf-8"))[:10]
    return slugify(title, max_len=60)


def add_topic(workspace: Workspace, title: str, body: str, *, tags: Iterable[str] = (), force: bool = False) -> Path:
    """Write a new topic file; refuses to replace an existing slug unless force."""
    title = " ".join(title.split())
    if not title:
        raise UsageError("the topic title is empty; give one, e.g. pensieve topics add 'Raft consensus'")
    slug = topic_slug(title)
    path = topic_path(workspace, slug)
    taken = UsageError(f"topic {slug!r} already exists ({path}); use --force to replace it")
    if os.path.lexists(path) and not force:
        raise taken
    text = render_topic(title, body, tags=tags, updated=date.today().isoformat())
    try:
        # Without --force the file is created, never replaced: of concurrent `topics add`s
        # of one title, one writes it and the others are told it exists.
        atomic_write_text(path, text, replace=force)
    except FileExistsError:
        raise taken from None
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror}") from None
    return path
