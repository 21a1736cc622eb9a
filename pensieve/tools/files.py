"""read_project_file and write_project_file: confined to the project, least privilege.

A name is refused unless it is a plain relative path inside the project directory that
does not touch the reserved files; symlinks are resolved first, so a link that leads out
is refused too. An agent may write only its own artifact and files under scratch/; its
artifact goes to the stage's staging area and is committed only when the stage succeeds,
so a failing stage never damages a finished artifact.
"""

from __future__ import annotations

import asyncio
import codecs
import errno
import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from pensieve.project.source_archive import SOURCES_DIR
from pensieve.project.workspace import (
    RESERVED,
    RESERVED_DIRS,
    SCRATCH_DIR,
    STAGING_DIR,
    TMP_PREFIX,
    atomic_write_text,
    open_regular_nofollow,
    read_file_nofollow,
)
from pensieve.tools.registry import ToolContext, ToolError, tool
from pensieve.untrusted import sanitize, wrap

MAX_READ_CHARS = 200_000  # per call; an archived page (sources/) gets fetch.max_chars, as fetch_url does
MAX_WRITE_CHARS = 1_000_000
MAX_EDIT_BYTES = MAX_WRITE_CHARS * 4  # a character is at most 4 bytes of UTF-8
# A name the file system cannot hold is refused before it is used: no component longer
# than NAME_MAX bytes, no path nested deeper than MAX_DEPTH or longer than MAX_PATH_BYTES.
NAME_MAX = 255
MAX_DEPTH = 16
MAX_PATH_BYTES = 1024
# read_project_file counts offsets in characters, which takes decoding a file from its start:
# it decodes at most this many bytes (8 times the largest file Pensieve writes), a chunk at a
# time, so a planted 1 GB file costs neither memory nor more than a moment.
MAX_SCAN_BYTES = 32_000_000
_SCAN_CHUNK_BYTES = 1 << 20


def staged_path(ctx: ToolContext, name: str) -> Path:
    return ctx.project.dir / STAGING_DIR / ctx.stage.name / name


def check_relative_name(filename: str) -> PurePosixPath:
    """Refuse anything but a plain relative path; returns the normalised path."""
    if not filename or not filename.strip():
        raise ToolError("filename is empty; give a name such as 'outline.md'")
    if "\x00" in filename:
        raise ToolError("filename contains a NUL byte")
    if any(ord(ch) < 32 or ord(ch) == 127 or 0xD800 <= ord(ch) <= 0xDFFF for ch in filename):
        raise ToolError("filename contains control or invalid characters; use a plain name such as 'outline.md'")
    if "\\" in filename:
        raise ToolError(f"{filename!r}: backslashes are not allowed; use a plain name such as 'outline.md'")
    if filename.startswith(("/", "~")) or (len(filename) > 1 and filename[1] == ":"):
        raise ToolError(f"{filename!r}: only names relative to the project directory are allowed")
    path = PurePosixPath(filename)
    for part in path.parts:
        if part == "..":
            raise ToolError(f"{filename!r}: '..' is not allowed; files outside the project cannot be reached")
        if part.startswith(".") and part != ".":
            raise ToolError(f"{filename!r}: hidden files are not accessible")
    parts = [p for p in path.parts if p != "."]
    if not parts:
        raise ToolError(f"{filename!r} is not a file name")
    if len(parts) > MAX_DEPTH:
        raise ToolError(f"the path is {len(parts)} levels deep; at most {MAX_DEPTH} are allowed")
    if len(filename.encode("utf-8", "replace")) > MAX_PATH_BYTES:
        raise ToolError(f"the path is longer than {MAX_PATH_BYTES} bytes; use a shorter name")
    for part in parts:
        if len(part.encode("utf-8", "replace")) > NAME_MAX:
            raise ToolError(f"a name in the path is longer than {NAME_MAX} bytes; use a shorter name")
    clean = PurePosixPath(*parts)
    if clean.name in RESERVED or parts[0] in RESERVED or parts[0] in RESERVED_DIRS or clean.name.startswith(TMP_PREFIX):
        raise ToolError(f"{filename!r} is reserved for Pensieve and cannot be read or written by agents")
    return clean


def resolve_inside(root: Path, relative: PurePosixPath) -> Path:
    """Resolve symlinks and refuse a result outside root (prefix-sharing siblings too)."""
    real_root = root.resolve()
    try:
        target = (root / relative).resolve()
    except (OSError, RuntimeError) as exc:  # symlink loops, names too long
        raise ToolError(f"{relative}: cannot be resolved ({exc.__class__.__name__}); refused") from None
    if target != real_root and real_root not in target.parents:
        raise ToolError(f"{relative}: resolves outside the project directory; refused")
    if target != real_root:
        # A link inside the project may still lead to a reserved or hidden file.
        inner = target.relative_to(real_root).as_posix()
        if inner != relative.as_posix():
            try:
                check_relative_name(inner)
            except ToolError:
                raise ToolError(f"{relative}: leads to a file agents cannot use; refused") from None
    return target


@dataclass(frozen=True)
class _Window:
    """What read_project_file read of a file."""

    text: str  # the file's characters [offset, offset + len(text))
    total: int  # the file's characters counted: all of them unless unread_bytes
    unread_bytes: int  # bytes past MAX_SCAN_BYTES, never read


def _read_window(path: Path, offset: int, limit: int) -> _Window:
    """The characters [offset, offset + limit) of a regular file (never through a link),
    decoded chunk by chunk: memory is a chunk plus the window, and characters are counted
    to the end of the file or to MAX_SCAN_BYTES. Blocking: run it in a thread."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    pieces: list[str] = []
    counted = scanned = 0

    def take(text: str) -> None:
        nonlocal counted
        start, stop = max(offset - counted, 0), offset + limit - counted
        if stop > 0 and start < len(text):
            pieces.append(text[start:stop])
        counted += len(text)

    with open(open_regular_nofollow(path), "rb") as handle:
        while scanned < MAX_SCAN_BYTES and (chunk := handle.read(min(_SCAN_CHUNK_BYTES, MAX_SCAN_BYTES - scanned))):
            scanned += len(chunk)
            take(decoder.decode(chunk))
        complete = scanned < MAX_SCAN_BYTES or not handle.read(1)
        if complete:
            take(decoder.decode(b"", final=True))  # a character cut at the end of the file
        unread = 0 if complete else max(os.fstat(handle.fileno()).st_size - scanned, 1)
    return _Window("".join(pieces), counted, unread)


def _part(name: str, window: _Window, offset: int) -> tuple[str, str]:
    """A header when the part is not the start, and a footer saying how much is left and the
    call that reads it (truncate visibly)."""
    total, end = window.total, offset + len(window.text)
    if offset and offset >= total:
        if window.unread_bytes:
            raise ToolError(
                f"offset {offset:,} is past what read_project_file reads of {name!r}: its first "
                f"{MAX_SCAN_BYTES:,} bytes ({total:,} characters); read from a smaller offset"
            )
        raise ToolError(f"offset {offset:,} is past the end of {name!r} ({total:,} characters); read from offset 0")
    shown_total = f"{total:,}" if not window.unread_bytes else f"more than {total:,}"
    header = f"{name}: characters {offset:,} to {end:,} of {shown_total}.\n" if offset else ""
    footer = ""
    if end < total:
        footer = f"\n[... {total - end:,} more characters: read_project_file(filename={name!r}, offset={end}) reads on]"
    if window.unread_bytes:
        footer += (
            f"\n[... the file goes on for {window.unread_bytes:,} more bytes, past the first {MAX_SCAN_BYTES:,} "
            "that read_project_file reads]"
        )
    return header, footer


@tool(canonical="project.read_file", default_limit=20)
async def read_project_file(ctx: ToolContext, filename: str, offset: int = 0) -> str:
    """Read a file from the current project directory (for example an earlier stage's artifact).

    A long file is returned in parts: the result then ends with the call that reads on.
    Only a file's first 32,000,000 bytes can be read.

    Args:
        filename: Name of the file relative to the project directory, e.g. 'draft_v1.md'.
        offset: The character to start from, to read on in a long file (default 0, the start).
    """
    if offset < 0:
        raise ToolError(f"offset must be 0 or more, not {offset}")
    relative = check_relative_name(filename)
    name = str(relative)
    target = resolve_inside(ctx.project.dir, relative)
    staged = staged_path(ctx, name)
    if name == ctx.stage.writes and staged.is_file():
        target = staged  # the agent's own work in progress
    if not target.is_file():
        existing = sorted(p.name for p in ctx.project.dir.glob("*.md"))
        raise ToolError(f"file {name!r} does not exist; files here: {', '.join(existing) or 'none'}")
    limit = ctx.settings.fetch.max_chars if relative.parts[0] == SOURCES_DIR else MAX_READ_CHARS
    try:
        # In a thread: counting characters up to a far offset takes a moment.
        window = await asyncio.to_thread(_read_window, target, offset, limit)
    except OSError as exc:
        raise ToolError(f"cannot read {name!r}: {exc.strerror}") from None
    header, footer = _part(name, window, offset)
    part = await _sanitized(window.text)
    return f"{header}{wrap(name, part)}{footer}"


async def _sanitized(text: str) -> str:
    """sanitize, in a thread when the text is large (it is linear, but megabytes take a
    while, and the event loop carries the other stages' calls and deadlines)."""
    if len(text) < 200_000:
        return sanitize(text, collapse_whitespace=False)
    return await asyncio.to_thread(sanitize, text, collapse_whitespace=False)


async def read_whole_file(ctx: ToolContext, filename: str, limit: int = MAX_READ_CHARS) -> str:
    """Up to `limit` characters of a project file, as read_project_file finds it (the stage's
    own artifact in progress, never through a link), for tools that take a file by name."""
    relative = check_relative_name(filename)
    name = str(relative)
    target = resolve_inside(ctx.project.dir, relative)
    staged = staged_path(ctx, name)
    if name == ctx.stage.writes and staged.is_file():
        target = staged
    if not target.is_file():
        raise ToolError(f"file {name!r} does not exist; pass the text itself, or the name of a project file")
    try:
        window = await asyncio.to_thread(_read_window, target, 0, limit)
    except OSError as exc:
        raise ToolError(f"cannot read {name!r}: {exc.strerror}") from None
    return window.text


@tool(canonical="project.write_file", default_limit=12)
async def write_project_file(ctx: ToolContext, filename: str, content: str) -> str:
    """Write a file in the current project directory, replacing it if it exists.

    Use it to write your stage's designated output file when your work is done. You may
    also keep working notes under 'scratch/'. Other files cannot be written.

    Args:
        filename: Your output file (named in your instructions) or 'scratch/<name>'.
        content: The complete file content, in markdown.
    """
    relative = check_relative_name(filename)
    name = str(relative)
    if len(content) > MAX_WRITE_CHARS:
        raise ToolError(f"content is {len(content):,} characters; the limit is {MAX_WRITE_CHARS:,}")
    if name == ctx.stage.writes:
        target = staged_path(ctx, name)
    elif relative.parts[0] == SCRATCH_DIR and len(relative.parts) > 1:
        target = ctx.project.dir / relative
    else:
        raise ToolError(
            f"{ctx.stage.name} may write only {ctx.stage.writes!r} or files under 'scratch/'; {name!r} refused"
        )
    resolve_inside(ctx.project.dir, relative)
    try:
        atomic_write_text(target, content)
    except OSError as exc:
        raise ToolError(f"cannot write {name!r}: {exc.strerror}") from None
    return f"Wrote {name} ({len(content):,} characters)."


@tool(canonical="project.edit_file", default_limit=20)
async def edit_project_file(ctx: ToolContext, filename: str, old_text: str, new_text: str) -> str:
    """Replace one passage of a file you may write: old_text must occur exactly once.

    For small fixes to a long document (a sentence, a citation, a heading) without writing
    it all again. Give enough of the surrounding text to make old_text unique.

    Args:
        filename: Your output file (named in your instructions) or 'scratch/<name>'.
        old_text: The exact text to replace, as it is in the file now.
        new_text: The text to put in its place (may be empty to delete the passage).
    """
    relative = check_relative_name(filename)
    name = str(relative)
    if not old_text:
        raise ToolError("old_text is empty; copy the exact passage to replace from the file")
    if name == ctx.stage.writes:
        target = staged_path(ctx, name)
        # Before the stage has written its artifact, an edit starts from the committed one.
        source = target if target.is_file() else ctx.project.dir / relative
    elif relative.parts[0] == SCRATCH_DIR and len(relative.parts) > 1:
        target = source = ctx.project.dir / relative
    else:
        raise ToolError(
            f"{ctx.stage.name} may edit only {ctx.stage.writes!r} or files under 'scratch/'; {name!r} refused"
        )
    resolve_inside(ctx.project.dir, relative)
    if not source.is_file():
        raise ToolError(f"{name!r} does not exist yet; write it first with write_project_file")
    try:
        # Never more than write_project_file could have written (a planted 1 GB file is
        # refused from its size), never through a link, and off the event loop.
        raw = await asyncio.to_thread(read_file_nofollow, source, None, MAX_EDIT_BYTES)
    except OSError as exc:
        if exc.errno == errno.EFBIG:
            raise ToolError(
                f"{name!r} is larger than {MAX_EDIT_BYTES:,} bytes, more than write_project_file can write; "
                "it cannot be edited"
            ) from None
        raise ToolError(f"cannot read {name!r}: {exc.strerror}") from None
    text = raw.decode("utf-8", errors="replace")
    found = text.count(old_text)
    if found != 1:
        where = "is not in" if found == 0 else f"occurs {found} times in"
        raise ToolError(
            f"old_text {where} {name!r} (found {found} occurrences; exactly one is needed); "
            + (
                "copy the passage exactly as the file has it (read_project_file shows it)"
                if found == 0
                else "include more of the surrounding text so that it matches only once"
            )
        )
    updated = text.replace(old_text, new_text, 1)
    if len(updated) > MAX_WRITE_CHARS:
        raise ToolError(f"the edited file would be {len(updated):,} characters; the limit is {MAX_WRITE_CHARS:,}")
    try:
        atomic_write_text(target, updated)
    except OSError as exc:
        raise ToolError(f"cannot write {name!r}: {exc.strerror}") from None
    return f"Edited {name}: replaced {len(old_text):,} characters with {len(new_text):,} ({len(updated):,} in all)."
