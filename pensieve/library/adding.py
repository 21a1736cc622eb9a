"""What `library add`, `new --source`, batch `sources:` and the studio's upload share:
files and whole folders read safely, URLs fetched once through fetch_url's safe fetch.

A path is never followed through a symbolic link, a FIFO or device is never opened for
reading (it could block forever), and a file larger than `library.max_file_bytes` is
refused from its size before a byte is read. Each refusal is one line naming the path.
"""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

from pensieve.library.extract import SUFFIXES, ExtractionError, Limits
from pensieve.library.store import Document, Library
from pensieve.project.workspace import read_file_nofollow

if TYPE_CHECKING:
    from pensieve.config import Settings

# What a fetch may bring back to be added: pages, text, PDF and Word documents.
DOCUMENT_TYPES = frozenset(
    {
        "text/html",
        "application/xhtml+xml",
        "text/plain",
        "text/markdown",
        "application/pdf",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    }
)
MAX_FOLDER_FILES = 10_000


@dataclass(frozen=True)
class Outcome:
    """One thing asked to be added: the document it became, or why it was not added."""

    given: str  # the path or URL as named
    document: Document | None = None
    new: bool = False
    reason: str = ""

    @property
    def line(self) -> str:
        return f"{self.given}: {self.reason}"


def is_url(text: str) -> bool:
    return text.strip().lower().startswith(("http://", "https://"))


def limits_of(settings: Settings) -> Limits:
    lib = settings.library
    return Limits(
        max_pages=lib.max_pages,
        max_unpacked_bytes=lib.max_unpacked_bytes,
        max_text_chars=lib.max_text_chars,
        timeout_s=lib.extract_timeout_s,
        memory_mb=lib.extract_memory_mb,
    )


def _kind_of_entry(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "is a symbolic link (not followed); add the file it points to"
    if stat.S_ISFIFO(mode):
        return "is a FIFO, not a file; not read"
    if stat.S_ISSOCK(mode):
        return "is a socket, not a file; not read"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "is a device, not a file; not read"
    return "is not a regular file; not read"


def add_file(library: Library, path: Path, settings: Settings, tags: Iterable[str] = ()) -> Outcome:
    given = str(path)
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return Outcome(given, reason="no such file or folder")
    except OSError as exc:
        return Outcome(given, reason=f"cannot be read ({exc.strerror})")
    if not stat.S_ISREG(info.st_mode):
        return Outcome(given, reason=_kind_of_entry(info.st_mode))
    limit = settings.library.max_file_bytes
    if info.st_size > limit:
        return Outcome(
            given,
            reason=f"is {info.st_size:,} bytes, more than library.max_file_bytes ({limit:,}); "
            "split it or raise the limit",
        )
    try:
        data = read_file_nofollow(path, max_size=limit)
    except OSError as exc:
        return Outcome(given, reason=f"cannot be read ({exc.strerror})")
    try:
        doc, new = library.add_bytes(path.name, data, limits_of(settings), tags=tags)
    except ExtractionError as exc:
        return Outcome(given, reason=str(exc))
    return Outcome(given, doc, new)


def folder_files(folder: Path) -> tuple[list[Path], list[Outcome]]:
    """The files of a folder the library reads (by suffix), in name order, links and
    special files reported, never followed; hidden files and folders skipped."""
    found: list[Path] = []
    refused: list[Outcome] = []
    stack = [folder]
    while stack:
        current = stack.pop()
        try:
            entries = sorted(os.scandir(current), key=lambda e: e.name)
        except OSError as exc:
            refused.append(Outcome(str(current), reason=f"cannot be listed ({exc.strerror})"))
            continue
        subfolders = []
        for entry in entries:
            if entry.name.startswith("."):
                continue
            path = Path(entry.path)
            if entry.is_dir(follow_symlinks=False):
                subfolders.append(path)
            elif PurePosixPath(entry.name).suffix.lower() in SUFFIXES:
                if entry.is_file(follow_symlinks=False):
                    found.append(path)
                else:
                    refused.append(Outcome(str(path), reason=_kind_of_entry(entry.stat(follow_symlinks=False).st_mode)))
            if len(found) > MAX_FOLDER_FILES:
                refused.append(
                    Outcome(str(folder), reason=f"holds more than {MAX_FOLDER_FILES:,} documents; add it in parts")
                )
                return [], refused
        stack.extend(reversed(subfolders))
    return found, refused


def add_paths(
    library: Library,
    paths: Iterable[Path],
    settings: Settings,
    tags: Iterable[str] = (),
    each: Callable[[Outcome], None] | None = None,
) -> list[Outcome]:
    """Every path (a file, or a folder whose readable files are all added), one outcome each;
    `each` is told every outcome as it happens (a folder of books takes seconds)."""
    tags = tuple(tags)
    outcomes: list[Outcome] = []

    def done(outcome: Outcome) -> None:
        outcomes.append(outcome)
        if each is not None:
            each(outcome)

    for path in paths:
        try:
            is_folder = stat.S_ISDIR(os.lstat(path).st_mode)
        except OSError:
            is_folder = False
        if not is_folder:
            done(add_file(library, path, settings, tags))
            continue
        files, refused = folder_files(path)
        for outcome in refused:
            done(outcome)
        if not files and not refused:
            done(Outcome(str(path), reason="holds no .pdf, .docx, .html, .md or .txt file"))
        for file in files:
            done(add_file(library, file, settings, tags))
    return outcomes


def _name_from_url(url: str, media_type: str) -> str:
    segment = unquote(PurePosixPath(urlsplit(url).path).name) or "page"
    suffix = {
        "application/pdf": ".pdf",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document": ".docx",
        "text/html": ".html",
        "application/xhtml+xml": ".html",
        "text/markdown": ".md",
        "text/plain": ".txt",
    }.get(media_type, "")
    return segment if PurePosixPath(segment).suffix.lower() == suffix else segment + suffix


async def fetch_document(library: Library, url: str, settings: Settings, tags: Iterable[str] = ()) -> Outcome:
    """Fetch a URL once, through the same guard, robots.txt check and limits as fetch_url,
    and add what came back."""
    from pensieve.web.fetcher import Fetcher, FetchError
    from pensieve.web.guard import GuardError
    from pensieve.web.robots import RobotsCache, RobotsRefusal

    fetch = settings.fetch
    fetcher = Fetcher.for_settings(fetch)
    robots = RobotsCache(fetcher, fetch.timeout_s)
    limit = settings.library.max_file_bytes
    try:
        async with asyncio.timeout(max(fetch.timeout_s, 60.0)):
            response = await fetcher.get(url, max_bytes=limit, allowed_types=DOCUMENT_TYPES, before_hop=robots.check)
    except TimeoutError:
        return Outcome(url, reason="the fetch took too long; try again later")
    except (GuardError, RobotsRefusal, FetchError) as exc:
        return Outcome(url, reason=str(exc))
    finally:
        robots.close()
        await fetcher.aclose()
    if not 200 <= response.status < 300:
        return Outcome(url, reason=f"{response.final_url} answered HTTP {response.status}")
    if response.truncated:
        return Outcome(url, reason=f"is larger than library.max_file_bytes ({limit:,}); not added")
    name = _name_from_url(response.final_url, response.media_type)
    try:
        doc, new = await asyncio.to_thread(
            library.add_bytes,
            name,
            response.body,
            limits_of(settings),
            url=response.final_url,
            media_type=response.media_type,
            tags=tuple(tags),
        )
    except ExtractionError as exc:
        return Outcome(url, reason=str(exc))
    return Outcome(url, doc, new)


def add_anything(
    library: Library,
    items: Iterable[str],
    settings: Settings,
    tags: Iterable[str] = (),
    each: Callable[[Outcome], None] | None = None,
) -> list[Outcome]:
    """Paths and URLs, in the order given (URLs fetched one after the other); `each` is told
    every outcome as it happens."""
    outcomes: list[Outcome] = []
    for item in items:
        if is_url(item):
            outcome = asyncio.run(fetch_document(library, item.strip(), settings, tags))
            outcomes.append(outcome)
            if each is not None:
                each(outcome)
        else:
            outcomes.extend(add_paths(library, [Path(item).expanduser()], settings, tags, each))
    return outcomes
