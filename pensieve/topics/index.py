"""The workspace's topic index: chunk embeddings plus what each file looked like.

It lives in `workspaces/<ws>/.index/topics.npz`, one file holding the vectors and a JSON
manifest (per file: content sha256, size, mtime, title, one snippet per vector row), so a
reader can never see vectors from one update and a manifest from another. Updates are
incremental: only new or changed files are embedded, deleted ones dropped. Two processes
updating at once take turns on a file lock, and the file is replaced atomically, so a
crash or a concurrent reader never sees a half-written index.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import numpy.typing as npt

from pensieve.errors import Busy
from pensieve.hashing import sha256_of_bytes
from pensieve.project.index_file import IndexCache, pack, unpack, update_lock
from pensieve.project.workspace import (
    Workspace,
    read_file_nofollow,
)
from pensieve.topics.chunking import CHUNKER_VERSION, chunk_topic
from pensieve.topics.embedder import DIMENSION, MODEL_NAME, WEIGHTS_SHA256, Embedder
from pensieve.topics.library import (
    MAX_TOPIC_BYTES,
    TopicFormatError,
    problem_line,
    read_topic_bytes,
    slug_of,
    topic_files,
)

INDEX_DIR = ".index"
INDEX_FILE = "topics.npz"
LOCK_FILE = "topics.lock"
FORMAT_VERSION = 1
# Vectors from another model or another chunking are not comparable: rebuild on change.
EMBEDDING_ID = f"{MODEL_NAME}@{WEIGHTS_SHA256[:16]}/chunks-v{CHUNKER_VERSION}"
# A file's size and mtime are trusted to mean "unchanged" only if it was last modified well
# before the previous scan; otherwise an edit within the clock's granularity could hide
# (git's "racy clean" problem). Such recent files are hashed instead.
RACY_WINDOW_NS = 2_000_000_000
LOCK_TIMEOUT_S = 600.0

Vectors = npt.NDArray[np.float32]


class IndexBusy(Busy):
    """Another process is updating the topic index."""


@dataclass(frozen=True)
class FileEntry:
    slug: str
    sha256: str
    size: int
    mtime_ns: int
    ino: int
    title: str = ""
    # One per vector row of this file, in order; empty for a broken file.
    snippets: tuple[str, ...] = ()
    # Why the file is unusable (broken front matter...); it then has no rows.
    error: str | None = None


@dataclass(frozen=True)
class Hit:
    slug: str
    title: str
    snippet: str
    score: float


@dataclass
class TopicIndex:
    files: list[FileEntry]
    vectors: Vectors
    scanned_at_ns: int = 0
    embedding_id: str = EMBEDDING_ID
    starts: list[int] = field(init=False)
    row_file: npt.NDArray[np.int32] = field(init=False)

    def __post_init__(self) -> None:
        self.starts = []
        owners: list[int] = []
        for number, entry in enumerate(self.files):
            self.starts.append(len(owners))
            owners.extend([number] * len(entry.snippets))
        self.row_file = np.asarray(owners, dtype=np.int32)
        if len(owners) != self.vectors.shape[0]:
            raise ValueError(f"index has {self.vectors.shape[0]} vectors but {len(owners)} snippets")

    @classmethod
    def empty(cls) -> TopicIndex:
        return cls([], np.zeros((0, DIMENSION), dtype=np.float32))

    def rows_of(self, number: int) -> Vectors:
        start = self.starts[number]
        return self.vectors[start : start + len(self.files[number].snippets)]

    def query(self, vector: Vectors, k: int, min_score: float) -> list[Hit]:
        """Topics ranked by their best chunk's cosine similarity, floor min_score."""
        if not self.vectors.shape[0] or k <= 0:
            return []
        scores = self.vectors @ vector
        candidates = np.flatnonzero(scores >= min_score)
        order = candidates[np.argsort(-scores[candidates], kind="stable")]
        hits: list[Hit] = []
        seen: set[int] = set()
        for row in order.tolist():
            number = int(self.row_file[row])
            if number in seen:
                continue  # a topic's score is its best chunk; later chunks add nothing
            seen.add(number)
            entry = self.files[number]
            snippet = entry.snippets[row - self.starts[number]]
            hits.append(Hit(entry.slug, entry.title, snippet, float(scores[row])))
            if len(hits) == k:
                break
        return hits

    def to_bytes(self) -> bytes:
        manifest = {
            "format": FORMAT_VERSION,
            "embedding_id": self.embedding_id,
            "scanned_at_ns": self.scanned_at_ns,
            "files": [
                {
                    "slug": e.slug,
                    "sha256": e.sha256,
                    "size": e.size,
                    "mtime_ns": e.mtime_ns,
                    "ino": e.ino,
                    "title": e.title,
                    "snippets": list(e.snippets),
                    "error": e.error,
                }
                for e in self.files
            ],
        }
        return pack(self.vectors, manifest)

    @classmethod
    def from_file(cls, path: Path) -> TopicIndex:
        """Raises ValueError (or OSError) when the file is not a usable index."""
        vectors, manifest = unpack(path, FORMAT_VERSION)
        if vectors.ndim != 2 or vectors.shape[1] != DIMENSION:
            raise ValueError(f"vectors have shape {vectors.shape}")
        files = [
            FileEntry(
                slug=str(f["slug"]),
                sha256=str(f["sha256"]),
                size=int(f["size"]),
                mtime_ns=int(f["mtime_ns"]),
                ino=int(f["ino"]),
                title=str(f["title"]),
                snippets=tuple(str(s) for s in f["snippets"]),
                error=None if f["error"] is None else str(f["error"]),
            )
            for f in manifest["files"]
        ]
        return cls(files, vectors, int(manifest["scanned_at_ns"]), str(manifest["embedding_id"]))


@dataclass
class UpdateReport:
    index: TopicIndex
    embedded: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    # One line per unusable file, naming it.
    problems: list[str] = field(default_factory=list)
    chunks_embedded: int = 0


def index_path(workspace: Workspace) -> Path:
    return workspace.root / INDEX_DIR / INDEX_FILE


def index_lock(workspace: Workspace, timeout_s: float = LOCK_TIMEOUT_S) -> contextlib.AbstractContextManager[None]:
    """Exclusive while updating; the kernel releases it if the holder dies."""
    path = workspace.root / INDEX_DIR / LOCK_FILE

    def busy(_holder: str) -> IndexBusy:
        return IndexBusy(
            f"the topic index {path.parent} has been locked by another process for {timeout_s:.0f}s; "
            "try again when it finishes"
        )

    return update_lock(path, busy, timeout_s)


# A search that finds the file unchanged skips parsing it again.
_cache: IndexCache[TopicIndex] = IndexCache()


def load_index(path: Path) -> tuple[TopicIndex, str | None]:
    """The stored index (or an empty one) and, if the stored one was unusable, why."""
    identity, cached = _cache.lookup(path)
    if identity is None:
        return TopicIndex.empty(), None
    if cached is not None:
        return cached, None
    try:
        index = TopicIndex.from_file(path)
    except (OSError, ValueError, KeyError, TypeError, RecursionError) as exc:
        # RecursionError: a planted manifest nested thousands deep is as unreadable as any.
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        return TopicIndex.empty(), f"topic index {path} was unreadable ({reason}); rebuilding it"
    if index.embedding_id != EMBEDDING_ID:
        return TopicIndex.empty(), None  # another model or chunker: re-embed everything
    _cache.keep(path, identity, index)
    return index, None


def save_index(path: Path, index: TopicIndex) -> None:
    _cache.save(path, index.to_bytes(), index)


def update_index(workspace: Workspace, embedder: Callable[[], Embedder]) -> UpdateReport:
    """Bring the index up to date with the topic files; `embedder` is called only if needed."""
    path = index_path(workspace)
    with index_lock(workspace):
        old, trouble = load_index(path)
        previous = {entry.slug: number for number, entry in enumerate(old.files)}
        scan_started = time.time_ns()
        report = UpdateReport(index=old)
        if trouble:
            report.problems.append(trouble)
        # Per file in name order: either (entry, old row block) or (entry, chunk texts to embed).
        plan: list[tuple[FileEntry, Vectors | None, list[str]]] = []
        dirty = trouble is not None or old.embedding_id != EMBEDDING_ID
        seen: set[str] = set()
        for file in topic_files(workspace):
            slug = slug_of(file)
            try:
                st = file.lstat()  # a planted link is not followed (its read below is refused)
            except FileNotFoundError:
                continue  # deleted while we scanned
            seen.add(slug)
            number = previous.get(slug)
            prev = old.files[number] if number is not None else None
            stat_key = (st.st_size, st.st_mtime_ns, st.st_ino)
            if (
                prev is not None
                and number is not None
                and (prev.size, prev.mtime_ns, prev.ino) == stat_key
                and st.st_mtime_ns < old.scanned_at_ns - RACY_WINDOW_NS
            ):
                plan.append((prev, old.rows_of(number), []))
                _note_kept(workspace, file, prev, report)
                continue
            try:
                data = read_file_nofollow(file, MAX_TOPIC_BYTES + 1)
            except OSError as exc:
                reason = "is a symbolic link (not followed)" if file.is_symlink() else f"cannot read ({exc.strerror})"
                report.problems.append(problem_line(workspace, file, reason))
                dirty = True
                continue
            digest = sha256_of_bytes(data)
            if prev is not None and number is not None and prev.sha256 == digest:
                fresh = replace(prev, size=st.st_size, mtime_ns=st.st_mtime_ns, ino=st.st_ino)
                # Saving also records this scan's time, after which the size+mtime shortcut
                # applies to this file: hash it once, not on every search.
                dirty = dirty or fresh != prev or st.st_mtime_ns < scan_started - RACY_WINDOW_NS
                plan.append((fresh, old.rows_of(number), []))
                _note_kept(workspace, file, fresh, report)
                continue
            dirty = True
            try:
                topic = read_topic_bytes(file, data)
            except TopicFormatError as exc:
                broken = FileEntry(slug, digest, st.st_size, st.st_mtime_ns, st.st_ino, error=str(exc))
                plan.append((broken, None, []))
                report.problems.append(problem_line(workspace, file, str(exc)))
                continue
            chunks = chunk_topic(topic)
            entry = FileEntry(
                slug, digest, st.st_size, st.st_mtime_ns, st.st_ino, topic.title, tuple(c.snippet for c in chunks)
            )
            plan.append((entry, None, [c.text for c in chunks]))
            report.embedded.append(slug)
        report.removed = sorted(set(previous) - seen)
        dirty = dirty or bool(report.removed)
        if not dirty:
            return report

        texts = [text for _, _, chunk_texts in plan for text in chunk_texts]
        fresh_vectors = embedder().encode(texts) if texts else np.zeros((0, DIMENSION), dtype=np.float32)
        blocks: list[Vectors] = []
        cursor = 0
        for _entry, kept, chunk_texts in plan:
            if kept is not None:
                blocks.append(kept)
            elif chunk_texts:
                blocks.append(fresh_vectors[cursor : cursor + len(chunk_texts)])
                cursor += len(chunk_texts)
        vectors = np.concatenate(blocks) if blocks else np.zeros((0, DIMENSION), dtype=np.float32)
        index = TopicIndex([entry for entry, _, _ in plan], np.ascontiguousarray(vectors), scan_started)
        save_index(path, index)
        report.index = index
        report.chunks_embedded = len(texts)
        return report


def _note_kept(workspace: Workspace, file: Path, entry: FileEntry, report: UpdateReport) -> None:
    if entry.error:
        report.problems.append(problem_line(workspace, file, entry.error))
    else:
        report.unchanged.append(entry.slug)
