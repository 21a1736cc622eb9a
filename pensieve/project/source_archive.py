"""The source archive: every page a fetch returned, kept in the project under `sources/`.

One markdown file per URL (`sources/S1.md`, `S2.md`, ... numbered in order of first
archiving, and an id never changes) with front matter (id, url, final_url, title,
fetched_at, sha256 and size of the fetched body, content_type) and the extracted text;
the body as fetched beside it under `sources/raw/`; and an index (`index.json` for code,
`index.md` for people and agents). Later stages cite these ids, and citation checks
verify quotes against these files.

Writes are atomic and made by code, never by an agent. Within one run all writes happen
on one event loop without an await in between, and a project has one run at a time (the
run lock), so id assignment needs no further locking.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from pensieve.clock import fetched_at_stamp
from pensieve.front_matter import render_front_matter, split_front_matter
from pensieve.hashing import sha256_of_bytes
from pensieve.project.workspace import atomic_write_bytes, atomic_write_text

SOURCES_DIR = "sources"
RAW_DIR = "raw"
INDEX_JSON = "index.json"
INDEX_MD = "index.md"
_ID = re.compile(r"S(\d+)")  # matched whole (fullmatch): "S1\n" is no id
_RAW_SUFFIX = {
    "text/html": ".html",
    "application/xhtml+xml": ".xhtml",
    "text/plain": ".txt",
    # Library documents (pensieve/library/): the file as it was added.
    "text/markdown": ".md",
    "application/pdf": ".pdf",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": ".docx",
}


def normalize_url(url: str) -> str:
    """The archive key: scheme and host lower-cased, default port and fragment dropped."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = host if port is None or port == {"http": 80, "https": 443}.get(scheme) else f"{host}:{port}"
    return urlunsplit((scheme, netloc, parts.path or "/", parts.query, ""))


@dataclass(frozen=True, kw_only=True)
class WorkFields:
    """What is known of a source as a work, the one list of these fields: every record of a
    source (the archive's, the citation check's, a search result) adds them after its own,
    keyword-only. Empty strings and None where unknown."""

    authors: tuple[str, ...] = ()
    year: int | None = None
    venue: str = ""  # journal, conference or series
    doi: str = ""
    publisher: str = ""
    published: str = ""  # ISO date, or its year-month / year prefix
    arxiv_id: str = ""
    pmid: str = ""


META_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(WorkFields))


@dataclass(frozen=True, kw_only=True)
class SourceMeta(WorkFields):
    """A source's metadata alone: from the search result that led to it, or from the page's
    own citation meta tags."""

    def filled_from(self, other: SourceMeta) -> SourceMeta:
        """This metadata with its gaps filled from `other`."""
        gaps = {f.name: getattr(other, f.name) for f in fields(self) if not getattr(self, f.name)}
        return replace(self, **{k: v for k, v in gaps.items() if v})

    def __bool__(self) -> bool:
        return any(getattr(self, f.name) for f in fields(self))

    def as_fields(self) -> dict[str, Any]:
        """The metadata as keyword arguments of a source record (ArchivedSource, CitedSource)."""
        return {name: getattr(self, name) for name in META_FIELDS}


@dataclass(frozen=True)
class ArchivedSource(WorkFields):
    id: str
    url: str
    final_url: str
    title: str
    fetched_at: str
    sha256: str
    size: int
    content_type: str
    file: str  # relative to the project directory, e.g. "sources/S1.md"
    raw_file: str
    # Other URLs that led to this same page (a redirect to it, or the page asked for directly).
    also: tuple[str, ...] = ()
    # The work's metadata (WorkFields) follow here in the record: from the search result
    # that led here or the page's tags.
    # Where the text came from: "" for a fetched web page, "mcp:<server>/<tool>" for the
    # result of an MCP tool (whose url is mcp://<server>/<tool>?<arguments>).
    origin: str = ""
    # A library document's map: (offset in the archived text, page label or heading), in
    # order, so a passage found at an offset is cited with its page ("p. 12").
    pages: tuple[tuple[int, str], ...] = ()

    def record(self) -> dict[str, Any]:
        """The fields as index.json, a source file's front matter and `sources --json` list
        them: the source's own up to `also`, the work's metadata, then origin and pages."""
        values = asdict(self)
        return {name: values[name] for name in _RECORD_ORDER}

    @property
    def number(self) -> int:
        match = _ID.fullmatch(self.id)
        return int(match.group(1)) if match else 0

    @property
    def meta(self) -> SourceMeta:
        return SourceMeta(**{name: getattr(self, name) for name in META_FIELDS})


_OWN = [f.name for f in fields(ArchivedSource) if f.name not in META_FIELDS]
_AFTER_ALSO = _OWN.index("also") + 1
_RECORD_ORDER = (*_OWN[:_AFTER_ALSO], *META_FIELDS, *_OWN[_AFTER_ALSO:])
_SOURCE_FIELDS = frozenset(_RECORD_ORDER)


def _source_from(values: dict[str, Any], **overrides: Any) -> ArchivedSource:
    """An ArchivedSource from index.json or front matter: lists made tuples, a year made an
    int, keys this version does not know ignored."""
    data = {k: v for k, v in values.items() if k in _SOURCE_FIELDS}
    data.update(overrides)
    for name in ("also", "authors"):
        value = data.get(name)
        data[name] = tuple(str(v) for v in value) if isinstance(value, list | tuple) else ()
    pages = data.get("pages")
    data["pages"] = _page_map(pages)
    year = data.get("year")
    data["year"] = year if isinstance(year, int) and not isinstance(year, bool) else None
    for name in ("venue", "doi", "publisher", "published", "arxiv_id", "pmid", "origin"):
        data[name] = str(data.get(name) or "")
    # An index edited by hand (a list as a title, a number as fetched_at) is read as text:
    # every page and command slices and formats these fields as the strings they should be.
    for name in ("id", "url", "final_url", "title", "fetched_at", "sha256", "content_type", "file", "raw_file"):
        value = data.get(name)
        data[name] = value if isinstance(value, str) else "" if value is None else str(value)
    size = data.get("size")
    data["size"] = size if isinstance(size, int) and not isinstance(size, bool) and size >= 0 else 0
    return ArchivedSource(**data)


def _page_map(value: Any) -> tuple[tuple[int, str], ...]:
    """A stored page map, as pairs; anything malformed (a hand edit) is no map at all."""
    if not isinstance(value, list | tuple):
        return ()
    pairs: list[tuple[int, str]] = []
    for item in value:
        if not isinstance(item, list | tuple) or len(item) != 2 or not isinstance(item[0], int):
            return ()
        pairs.append((int(item[0]), str(item[1])))
    return tuple(pairs)


def label_at(pages: tuple[tuple[int, str], ...], offset: int) -> str:
    """The page (or heading) at an offset of a library document's text, by its map; ''
    for no map or an offset before the first mark."""
    found = ""
    for start, label in pages:
        if start > offset:
            break
        found = label
    return found


def page_at(source: ArchivedSource, offset: int) -> str:
    """The page of a library source at an offset of its archived text ('' for a web page)."""
    return label_at(source.pages, offset)


class SourceArchive:
    def __init__(self, project_dir: Path) -> None:
        self.project_dir = project_dir
        self.dir = project_dir / SOURCES_DIR

    # -- reading ------------------------------------------------------------------------
    def entries(self) -> list[ArchivedSource]:
        """Every archived source, in id order; rebuilt from the files if the index is lost."""
        index = self.dir / INDEX_JSON
        if index.is_file():
            try:
                data = json.loads(index.read_text(encoding="utf-8"))
                loaded = (_source_from(item) for item in data["sources"])
                return sorted(loaded, key=lambda s: s.number)
            except (ValueError, KeyError, TypeError, RecursionError):
                pass  # damaged by hand: fall back to the files, which carry the same fields
        return self._scan()

    def _scan(self) -> list[ArchivedSource]:
        found: list[ArchivedSource] = []
        if not self.dir.is_dir():
            return found
        for path in self.dir.glob("S*.md"):
            if not _ID.fullmatch(path.stem):
                continue
            meta, _ = split_front_matter(path.read_text(encoding="utf-8", errors="replace"))
            try:
                size = int(meta.get("size") or 0)
            except (TypeError, ValueError):
                size = 0
            found.append(
                _source_from(
                    meta,
                    id=path.stem,
                    url=str(meta.get("url") or ""),
                    final_url=str(meta.get("final_url") or meta.get("url") or ""),
                    title=str(meta.get("title") or ""),
                    fetched_at=str(meta.get("fetched_at") or ""),
                    sha256=str(meta.get("sha256") or ""),
                    size=size,
                    content_type=str(meta.get("content_type") or ""),
                    file=f"{SOURCES_DIR}/{path.name}",
                    raw_file=str(meta.get("raw_file") or ""),
                )
            )
        return sorted(found, key=lambda s: s.number)

    def find(self, url: str) -> ArchivedSource | None:
        key = normalize_url(url)
        for source in self.entries():
            if key in {normalize_url(u) for u in (source.url, source.final_url, *source.also)}:
                return source
        return None

    def text(self, source: ArchivedSource) -> str:
        raw = (self.project_dir / source.file).read_text(encoding="utf-8", errors="replace")
        return split_front_matter(raw)[1]

    def raw(self, source: ArchivedSource) -> bytes | None:
        path = self.project_dir / source.raw_file if source.raw_file else None
        return path.read_bytes() if path is not None and path.is_file() else None

    # -- writing --------------------------------------------------------------------------
    def add(
        self,
        *,
        url: str,
        final_url: str,
        title: str,
        content_type: str,
        body: bytes,
        text: str,
        meta: SourceMeta | None = None,
        origin: str = "",
        pages: tuple[tuple[int, str], ...] = (),
    ) -> tuple[ArchivedSource, bool]:
        """Archive a fetch; a URL already archived keeps its id, and so does a page already
        archived under another URL (one id per page, whichever way it was reached first).
        Metadata known before (an earlier fetch) fills what this fetch did not find.
        Returns (source, is_new)."""
        entries = self.entries()
        existing = self.find(url) or self.find(final_url)
        next_id = f"S{max((s.number for s in entries), default=0) + 1}"
        source_id = existing.id if existing is not None else next_id
        raw_file = f"{SOURCES_DIR}/{RAW_DIR}/{source_id}{_RAW_SUFFIX.get(content_type, '.bin')}"
        source = ArchivedSource(
            id=source_id,
            # The URL first asked for stays; every other way to the page is kept in `also`,
            # so a later fetch through any of them is served from the archive.
            url=existing.url if existing is not None else url,
            final_url=final_url,
            title=title,
            fetched_at=fetched_at_stamp(),
            sha256=sha256_of_bytes(body),
            size=len(body),
            content_type=content_type,
            file=f"{SOURCES_DIR}/{source_id}.md",
            raw_file=raw_file,
            also=_other_urls(existing, url, final_url),
            origin=origin,
            pages=pages,
            **(meta or SourceMeta()).filled_from(existing.meta if existing else SourceMeta()).as_fields(),
        )
        atomic_write_bytes(self.project_dir / raw_file, body)
        header = {
            k: [list(p) for p in v] if k == "pages" else list(v) if isinstance(v, tuple) else v
            for k, v in source.record().items()
            # Metadata only where known; an MCP result's origin and a library document's page
            # map likewise (a web page's front matter is unchanged).
            if k != "file" and (k not in (*META_FIELDS, "origin", "pages") or v)
        }
        atomic_write_text(self.project_dir / source.file, render_front_matter(header, text, width=1_000_000))
        # The index is written last: a crash before it leaves files the next add overwrites.
        others = [s for s in entries if s.id != source_id]
        self._write_index(sorted([*others, source], key=lambda s: s.number))
        return source, existing is None

    def _write_index(self, sources: list[ArchivedSource]) -> None:
        atomic_write_text(
            self.dir / INDEX_JSON,
            json.dumps({"sources": [s.record() for s in sources]}, indent=1, ensure_ascii=False) + "\n",
        )
        lines = [
            "# Sources",
            "",
            "Pages fetched for this project, archived by Pensieve. Cite them by id.",
            "",
            "| id | title | url | fetched |",
            "|---|---|---|---|",
        ]
        for s in sources:
            title = (s.title or "(untitled)").replace("|", "\\|")
            lines.append(f"| {s.id} | {title} | {s.final_url.replace('|', '%7C')} | {s.fetched_at[:10]} |")
        atomic_write_text(self.dir / INDEX_MD, "\n".join(lines) + "\n")


def _other_urls(existing: ArchivedSource | None, url: str, final_url: str) -> tuple[str, ...]:
    if existing is None:
        return ()
    first = normalize_url(existing.url)
    seen = {first, normalize_url(final_url)}
    others: list[str] = []
    for candidate in (*existing.also, existing.final_url, url):
        key = normalize_url(candidate)
        if key not in seen:
            seen.add(key)
            others.append(candidate)
    return tuple(others)


def list_sources(project_dir: Path) -> list[ArchivedSource]:
    return SourceArchive(project_dir).entries()
