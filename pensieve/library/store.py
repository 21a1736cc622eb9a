"""The library on disk: `workspaces/<ws>/library/`.

    library/
      catalog.json            every document's metadata (rebuilt from docs/ if lost)
      docs/<id>/document.json  metadata, page or heading map
      docs/<id>/text.md        the extracted text (the map's offsets point into it)
      docs/<id>/original.pdf   the file as added (or fetched)
      .index/                  the search index (pensieve.library.index)

A document's id is the first 12 hex digits of its content's sha256: the same file added
twice (under any name, from a folder or a URL) is stored once. A document is built in a
temporary directory and renamed into docs/ in one step, and the catalog is written last,
under the library's lock: a crash or a refused file leaves nothing half-added.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path, PurePath
from typing import Any

from pensieve.clock import now_iso
from pensieve.errors import Busy, CorruptState, UsageError
from pensieve.hashing import sha256_of_bytes
from pensieve.library.extract import Extracted, ExtractionError, Limits, extract
from pensieve.project.index_file import Identity as FileIdentity
from pensieve.project.index_file import file_identity
from pensieve.project.source_archive import label_at
from pensieve.project.workspace import (
    TMP_PREFIX,
    Workspace,
    atomic_write_text,
    exclusive_lock,
    read_file_nofollow,
    remove_tree,
    rename_noreplace,
)
from pensieve.web.identifiers import year_of

LIBRARY_DIR = "library"
DOCS_DIR = "docs"
CATALOG_FILE = "catalog.json"
META_FILE = "document.json"
TEXT_FILE = "text.md"
LOCK_FILE = ".lock"
ID_LENGTH = 12
_ID = re.compile(r"^[0-9a-f]{12}$")
FORMAT_VERSION = 1
LOCK_TIMEOUT_S = 120.0
# document.json is metadata and a map of at most library.max_pages entries.
MAX_META_BYTES = 20_000_000


# The catalog this process last parsed, per path, with the file's identity then: a search
# reads it twice, and parsing 100 documents' entries cost ~10 ms a time (bench_library.py).
_catalogs: dict[Path, tuple[FileIdentity, tuple[Document, ...]]] = {}


class LibraryBusy(Busy):
    """Another process is changing the library or its index."""


@dataclass(frozen=True)
class Document:
    id: str
    title: str
    kind: str  # pdf | docx | html | markdown | text
    file_name: str  # the name it was added under (or the URL's last segment)
    sha256: str
    size: int
    chars: int
    added_at: str
    authors: tuple[str, ...] = ()
    published: str = ""
    year: int | None = None
    doi: str = ""
    isbn: str = ""
    url: str = ""  # the URL it was fetched from, if any
    tags: tuple[str, ...] = ()
    pages: int = 0  # pages of a PDF (0 for the other kinds)
    mark_kind: str = ""  # "page", "heading" or "" (no map)
    # (offset in text.md, page label or heading), in order; only in document.json.
    marks: tuple[tuple[int, str], ...] = field(default=(), compare=False)

    @property
    def original_name(self) -> str:
        suffix = PurePath(self.file_name).suffix.lower()
        return "original" + (suffix if re.fullmatch(r"\.[a-z0-9]{1,8}", suffix) else ".bin")

    def summary(self) -> dict[str, Any]:
        """The catalog's entry (and `library list --json`): everything but the map."""
        data = asdict(self)
        data.pop("marks")
        data["authors"] = list(self.authors)
        data["tags"] = list(self.tags)
        return data

    def page_at(self, offset: int) -> str:
        """The page (or heading) the text at `offset` is on; '' when there is no map."""
        return label_at(self.marks, offset)


def _document(data: dict[str, Any]) -> Document:
    """A Document from JSON, checked: a hand-edited file is refused, never half-trusted."""
    try:
        year = data.get("year")
        marks = tuple((int(m[0]), str(m[1])) for m in data.get("marks") or [])
        doc = Document(
            id=str(data["id"]),
            title=str(data.get("title") or ""),
            kind=str(data["kind"]),
            file_name=str(data.get("file_name") or ""),
            sha256=str(data["sha256"]),
            size=int(data["size"]),
            chars=int(data["chars"]),
            added_at=str(data.get("added_at") or ""),
            authors=tuple(str(a) for a in data.get("authors") or []),
            published=str(data.get("published") or ""),
            year=year if isinstance(year, int) and not isinstance(year, bool) else None,
            doi=str(data.get("doi") or ""),
            isbn=str(data.get("isbn") or ""),
            url=str(data.get("url") or ""),
            tags=tuple(str(t) for t in data.get("tags") or []),
            pages=int(data.get("pages") or 0),
            mark_kind=str(data.get("mark_kind") or ""),
            marks=marks,
        )
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise ValueError(f"not a library document record ({type(exc).__name__}: {exc})") from None
    if not _ID.match(doc.id):
        raise ValueError(f"bad document id {doc.id!r}")
    return doc


def check_id(doc_id: str) -> str:
    doc_id = doc_id.strip().lower()
    if not _ID.match(doc_id):
        raise UsageError(f"{doc_id!r} is not a library document id (12 hex digits, as `pensieve library list` shows)")
    return doc_id


def parse_tags(tags: str | None) -> tuple[str, ...]:
    found = [t.strip() for t in (tags or "").split(",") if t.strip()]
    for tag in found:
        if len(tag) > 60 or any(c in tag for c in "\n\r\t"):
            raise UsageError(f"tag {tag[:60]!r} is not a short one-line word; tags are like a,b")
    return tuple(dict.fromkeys(found))


class Library:
    """One workspace's library."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self.root = workspace.root / LIBRARY_DIR
        self.docs_dir = self.root / DOCS_DIR

    # -- locking ------------------------------------------------------------------------------
    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        self.root.mkdir(parents=True, exist_ok=True)
        path = self.root / LOCK_FILE

        def busy(_holder: str) -> LibraryBusy:
            return LibraryBusy(
                f"the library {self.root} has been locked by another process for {LOCK_TIMEOUT_S:.0f}s; "
                "try again when it finishes"
            )

        with exclusive_lock(path, busy, LOCK_TIMEOUT_S):
            yield

    # -- reading ------------------------------------------------------------------------------
    def documents(self) -> list[Document]:
        """Every document, oldest first; the catalog is rebuilt from docs/ when unreadable."""
        path = self.root / CATALOG_FILE
        identity = file_identity(path)
        cached = _catalogs.get(path)
        if identity is not None and cached is not None and cached[0] == identity:
            return list(cached[1])
        try:
            data = json.loads(read_file_nofollow(path, max_size=MAX_META_BYTES).decode("utf-8"))
            docs = [_document(item) for item in data["documents"]]
        except FileNotFoundError:
            return self._scan() if self.docs_dir.is_dir() else []
        except (OSError, ValueError, KeyError, TypeError, RecursionError):
            return self._scan()
        if identity is not None:
            _catalogs[path] = (identity, tuple(docs))
        return docs

    def _scan(self) -> list[Document]:
        found: list[Document] = []
        if not self.docs_dir.is_dir():
            return found
        for entry in sorted(os.scandir(self.docs_dir), key=lambda e: e.name):
            if not _ID.match(entry.name) or not entry.is_dir(follow_symlinks=False):
                continue
            with contextlib.suppress(CorruptState):
                found.append(self._load(entry.name))
        return sorted(found, key=lambda d: (d.added_at, d.id))

    def _load(self, doc_id: str) -> Document:
        path = self.docs_dir / doc_id / META_FILE
        try:
            doc = _document(json.loads(read_file_nofollow(path, max_size=MAX_META_BYTES).decode("utf-8")))
        except (OSError, ValueError, RecursionError) as exc:
            raise CorruptState(f"{path} cannot be read ({exc}); remove the document and add it again") from None
        if doc.id != doc_id:
            raise CorruptState(f"{path} names document {doc.id}, not {doc_id}; remove it and add it again")
        return doc

    def find(self, doc_id: str) -> Document | None:
        doc_id = doc_id.strip().lower()
        if not _ID.match(doc_id) or not (self.docs_dir / doc_id).is_dir():
            return None
        return self._load(doc_id)

    def get(self, doc_id: str) -> Document:
        """The document with its map; UsageError naming the library's documents if unknown."""
        found = self.find(check_id(doc_id))
        if found is None:
            known = [d.id for d in self.documents()]
            hint = (
                f"; documents here: {', '.join(known[:8])}" if known else "; add one with `pensieve library add PATH`"
            )
            raise UsageError(
                f"no document {doc_id.strip()!r} in the library of workspace {self.workspace.name!r}{hint}"
            )
        return found

    def text(self, doc: Document) -> str:
        path = self.docs_dir / doc.id / TEXT_FILE
        return read_file_nofollow(path).decode("utf-8", errors="replace")

    def original_path(self, doc: Document) -> Path:
        return self.docs_dir / doc.id / doc.original_name

    # -- writing --------------------------------------------------------------------------------
    def add_bytes(
        self,
        name: str,
        data: bytes,
        limits: Limits,
        *,
        url: str = "",
        media_type: str = "",
        tags: Iterable[str] = (),
    ) -> tuple[Document, bool]:
        """Store a document (extracting it first); (document, is_new). A document already
        stored keeps its record, with the new tags added. Raises ExtractionError."""
        digest = sha256_of_bytes(data)
        doc_id = digest[:ID_LENGTH]
        tags = tuple(tags)
        existing = self.find(doc_id)
        if existing is not None:
            return self._add_tags(existing, tags), False
        found = extract(name, data, limits, media_type=media_type, url=url)
        doc = _new_document(doc_id, name, data, digest, found, url=url, tags=tags)
        with self.lock():
            existing = self.find(doc_id)
            if existing is not None:  # added by another process meanwhile
                return existing, False
            self._write_document(doc, found.text, data)
            self._write_catalog([*(d for d in self.documents() if d.id != doc.id), doc])
        return doc, True

    def _write_document(self, doc: Document, text: str, data: bytes) -> None:
        self.docs_dir.mkdir(parents=True, exist_ok=True)
        staging = self.docs_dir / f"{TMP_PREFIX}{doc.id}-{os.getpid()}"
        if staging.exists():
            remove_tree(staging)
        staging.mkdir()
        try:
            atomic_write_text(staging / TEXT_FILE, text)
            (staging / doc.original_name).write_bytes(data)
            record = {**doc.summary(), "format": FORMAT_VERSION, "marks": [list(m) for m in doc.marks]}
            atomic_write_text(staging / META_FILE, json.dumps(record, ensure_ascii=False) + "\n")
            if not rename_noreplace(staging, self.docs_dir / doc.id):
                raise LibraryBusy(f"document {doc.id} appeared while it was being added; run the command again")
        finally:
            if staging.exists():
                remove_tree(staging)

    def _write_catalog(self, docs: list[Document]) -> None:
        _catalogs.pop(self.root / CATALOG_FILE, None)
        body = {"version": FORMAT_VERSION, "documents": [d.summary() for d in docs]}
        atomic_write_text(self.root / CATALOG_FILE, json.dumps(body, indent=1, ensure_ascii=False) + "\n")

    def _add_tags(self, doc: Document, tags: tuple[str, ...]) -> Document:
        merged = tuple(dict.fromkeys((*doc.tags, *tags)))
        if merged == doc.tags:
            return doc
        with self.lock():
            updated = replace(self._load(doc.id), tags=merged)
            record = {**updated.summary(), "format": FORMAT_VERSION, "marks": [list(m) for m in updated.marks]}
            atomic_write_text(self.docs_dir / doc.id / META_FILE, json.dumps(record, ensure_ascii=False) + "\n")
            self._write_catalog([updated if d.id == doc.id else d for d in self.documents()])
        return updated

    def remove(self, doc_id: str) -> Document:
        doc = self.get(doc_id)
        with self.lock():
            # The catalog first: a crash after it leaves a directory the next scan ignores
            # only if the catalog is lost, and `remove` again finishes the job.
            self._write_catalog([d for d in self.documents() if d.id != doc.id])
            remove_tree(self.docs_dir / doc.id)
        return doc


def _new_document(
    doc_id: str, name: str, data: bytes, digest: str, found: Extracted, *, url: str, tags: tuple[str, ...]
) -> Document:
    stem = PurePath(name).stem.replace("_", " ").strip()
    return Document(
        id=doc_id,
        title=found.title or stem or doc_id,
        kind=found.kind,
        file_name=PurePath(name).name[:200],
        sha256=digest,
        size=len(data),
        chars=len(found.text),
        added_at=now_iso(),
        authors=found.authors,
        published=found.published,
        year=year_of(found.published[:4]) if found.published else None,
        doi=found.doi,
        isbn=found.isbn,
        url=url,
        tags=tags,
        pages=len(found.marks) if found.mark_kind == "page" else 0,
        mark_kind=found.mark_kind,
        marks=found.marks,
    )


__all__ = ["Document", "ExtractionError", "Library", "LibraryBusy", "check_id", "label_at", "parse_tags"]
