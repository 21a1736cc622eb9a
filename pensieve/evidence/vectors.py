"""Source window vectors, cached per content hash: re-checking an article embeds nothing.

`sources/.vectors/<sha256>.npy` holds one unit-length float32 row per window of a source's
archived text; the hash covers the text and the windowing version, so an edited source or
a change of windowing is never served stale vectors. Writes are atomic (a crash leaves the
old file or none); an unreadable or mis-shaped file is simply recomputed.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable
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

WINDOWING = "sentences-v1"
VECTORS_DIR = Path("sources") / ".vectors"


def content_key(text: str) -> str:
    return sha256_of_bytes(f"{WINDOWING}\n{text}".encode())


class VectorCache:
    """Windows and vectors of source texts; `embedded` counts windows this instance embedded."""

    def __init__(self, directory: Path | None, embedder: Callable[[], Embedder]) -> None:
        self.directory = directory
        self._embedder = embedder
        self._memory: dict[str, tuple[list[Span], Vectors]] = {}
        self.embedded = 0

    def windows(self, texts: dict[str, str]) -> dict[str, tuple[list[Span], Vectors]]:
        """Each text's windows and vectors (name -> ...); missing ones embedded in one batch."""
        import numpy as np

        out: dict[str, tuple[list[Span], Vectors]] = {}
        todo: list[tuple[str, str, list[Span]]] = []
        for name, text in texts.items():
            key = content_key(text)
            if key in self._memory:
                out[name] = self._memory[key]
                continue
            spans = source_sentences(text)
            vectors = self._load(key, len(spans))
            if vectors is None:
                todo.append((name, key, spans))
            else:
                out[name] = self._memory[key] = (spans, vectors)
        if todo:
            batch = [span.text for _, _, spans in todo for span in spans]
            encoded = self._embedder().encode(batch) if batch else np.zeros((0, DIMENSION), dtype=np.float32)
            self.embedded += len(batch)
            cursor = 0
            for name, key, spans in todo:
                vectors = np.ascontiguousarray(encoded[cursor : cursor + len(spans)])
                cursor += len(spans)
                self._save(key, vectors)
                out[name] = self._memory[key] = (spans, vectors)
        return out

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
