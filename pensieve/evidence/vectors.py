"""Source window vectors, cached per content hash: re-checking an article embeds nothing.

`sources/.vectors/<sha256>.npy` holds one unit-length float32 row per window of a source's
archived text (a row of NaN: a window no claim has needed yet, embedded when one does); the
hash covers the text and the windowing version, so an edited source or a change of
windowing is never served stale vectors. Writes are atomic (a crash leaves the
old file or none); an unreadable or mis-shaped file is simply recomputed.
"""

from __future__ import annotations

import contextlib
import io
import threading
from collections.abc import Callable, Hashable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from pensieve.evidence.segment import Span, source_sentences
from pensieve.hashing import sha256_of_bytes
from pensieve.project.workspace import atomic_write_bytes
from pensieve.topics.embedder import DIMENSION, Embedder

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Vectors = npt.NDArray[np.float32]

WINDOWING = "sentences-v2"  # v2: code, quotations, URLs and versions kept whole
VECTORS_DIR = Path("sources") / ".vectors"
_CLAIMS_KEPT = 4_000  # sentence vectors a cache keeps in memory
_VERDICTS_KEPT = 4_000  # (sentence, source) verdicts a cache keeps in memory


def content_key(text: str) -> str:
    return sha256_of_bytes(f"{WINDOWING}\n{text}".encode())


class VectorCache:
    """Windows and vectors of source texts; `embedded` counts windows this instance embedded."""

    def __init__(self, directory: Path | None, embedder: Callable[[], Embedder]) -> None:
        self.directory = directory
        self._embedder = embedder
        self._memory: dict[str, tuple[list[Span], Vectors]] = {}
        self._claims: dict[str, Vectors] = {}
        self._verdicts: dict[Hashable, object] = {}
        self.embedded = 0

    def verdict(self, key: Hashable) -> object | None:
        """What the alignment remembered under `key` (a sentence against a source), if anything.
        Kept here, beside the vectors it was computed from: another embedder has another cache."""
        return self._verdicts.get(key)

    def remember_verdict(self, key: Hashable, verdict: object) -> None:
        if len(self._verdicts) >= _VERDICTS_KEPT:
            self._verdicts.clear()
        self._verdicts[key] = verdict

    def claims(self, texts: list[str]) -> Vectors:
        """The vectors of an article's sentences; those this cache embedded before (the next
        draft keeps most of the last one's sentences) are not embedded again."""
        import numpy as np

        todo = [t for t in dict.fromkeys(texts) if t not in self._claims]
        if todo:
            if len(self._claims) + len(todo) > _CLAIMS_KEPT:
                self._claims.clear()
            self._claims.update(zip(todo, self._embedder().encode(todo), strict=True))
        if not texts:
            return np.zeros((0, DIMENSION), dtype=np.float32)
        return np.stack([self._claims[t] for t in texts])

    def windows(self, texts: dict[str, str]) -> dict[str, tuple[list[Span], Vectors]]:
        """Each text's windows and vectors (name -> ...), every window embedded."""
        prepared = self.prepare(texts)
        self.fill({name: range(len(spans)) for name, (spans, _) in prepared.items()}, texts)
        return prepared

    def prepare(self, texts: dict[str, str]) -> dict[str, tuple[list[Span], Vectors]]:
        """Each text's windows and the vectors known so far: a row of NaN is a window not
        embedded yet (`fill` embeds the rows a claim needs; the rest may never be)."""
        import numpy as np

        out: dict[str, tuple[list[Span], Vectors]] = {}
        for name, text in texts.items():
            key = content_key(text)
            if key not in self._memory:
                spans = source_sentences(text)
                vectors = self._load(key, len(spans))
                if vectors is None:
                    vectors = np.full((len(spans), DIMENSION), np.nan, dtype=np.float32)
                self._memory[key] = (spans, vectors)
            out[name] = self._memory[key]
        return out

    def fill(self, needed: Mapping[str, Iterable[int]], texts: dict[str, str], *, save: bool = True) -> None:
        """Embed, in one batch, the needed windows that have no vector yet, and keep them
        (in memory and on disk: the next alignment against these sources embeds nothing;
        `save=False` leaves the disk to `save`, for a caller that fills in many small steps)."""
        import numpy as np

        todo: list[tuple[str, list[int]]] = []
        for name, indexes in needed.items():
            key = content_key(texts[name])
            spans, vectors = self._memory[key]
            rows = sorted({i for i in indexes if 0 <= i < len(spans) and np.isnan(vectors[i, 0])})
            if rows:
                todo.append((key, rows))
        if not todo:
            return
        batch = [self._memory[key][0][i].text for key, rows in todo for i in rows]
        encoded = self._embedder().encode(batch)
        self.embedded += len(batch)
        cursor = 0
        for key, rows in todo:
            vectors = self._memory[key][1]
            vectors[rows] = encoded[cursor : cursor + len(rows)]
            cursor += len(rows)
            if save:
                self._save(key, vectors)

    def save(self, texts: Iterable[str]) -> None:
        """Write these texts' vectors known so far to disk (after `fill(..., save=False)`)."""
        for text in texts:
            key = content_key(text)
            if key in self._memory:
                self._save(key, self._memory[key][1])

    def _path(self, key: str) -> Path | None:
        return self.directory / f"{key}.npy" if self.directory is not None else None

    def _load(self, key: str, rows: int) -> Vectors | None:
        import numpy as np

        path = self._path(key)
        if path is None or not path.is_file():
            return None
        try:
            vectors = np.load(path, allow_pickle=False)
        except (OSError, ValueError):
            return None
        if vectors.dtype != np.float32 or vectors.shape != (rows, DIMENSION):
            return None
        return np.ascontiguousarray(vectors)

    def _save(self, key: str, vectors: Vectors) -> None:
        import numpy as np

        path = self._path(key)
        if path is None:
            return
        buffer = io.BytesIO()
        np.save(buffer, vectors, allow_pickle=False)
        # A read-only project still gets its evidence, only slower next time.
        with contextlib.suppress(OSError):
            atomic_write_bytes(path, buffer.getvalue())


_SHARED: dict[Path, VectorCache] = {}
_SHARED_LOCK = threading.Lock()
_SHARED_MAX = 4  # projects whose windows a process keeps (a batch worker runs many in turn)


def shared_cache(directory: Path, embedder: Callable[[], Embedder]) -> VectorCache:
    """This process's cache for a project's vectors: the pipeline aligns draft_v1.md,
    draft_v2.md and final.md against the same sources, and prepares them while the drafter
    writes; cutting a million characters into windows again for each would cost seconds.
    A different embedder gets its own cache (its vectors are not these)."""
    key = directory.resolve()
    with _SHARED_LOCK:
        cache = _SHARED.pop(key, None)
        if cache is None or cache._embedder is not embedder:
            cache = VectorCache(directory, embedder)
        _SHARED[key] = cache  # most recent last
        while len(_SHARED) > _SHARED_MAX:
            del _SHARED[next(iter(_SHARED))]
        return cache


def shared_forget() -> None:
    """Drop what this process keeps (a benchmark timing what a new process pays)."""
    with _SHARED_LOCK:
        _SHARED.clear()
