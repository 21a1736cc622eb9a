"""A search index kept in one file: its update lock, and the copy this process last read.

The topic index and the library index are each one `.npz` file under an `.index/`
directory (the vectors and a JSON manifest, so a reader never sees the vectors of one update
with the manifest of another), replaced atomically while a lock is held. A process that searches again finds the file
unchanged (same inode, size, modification and change times) and reuses what it parsed last time.
"""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pensieve.project.workspace import atomic_write_bytes, exclusive_lock, open_regular_nofollow

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

T = TypeVar("T")
Identity = tuple[int, int, int, int]  # (inode, size, mtime_ns, ctime_ns)


def file_identity(path: Path) -> Identity | None:
    """What changes when a file is replaced or rewritten; None when there is no file."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


@contextlib.contextmanager
def update_lock(path: Path, busy: Callable[[str], Exception], timeout_s: float) -> Iterator[None]:
    """Exclusive while an index is updated (its directory made if needed); the kernel
    releases it if the holder dies. `busy` makes the error raised after timeout_s."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with exclusive_lock(path, busy, timeout_s):
        yield


class IndexCache(Generic[T]):
    """The last index this process read or wrote, per path, with the file's identity then."""

    def __init__(self) -> None:
        self._entries: dict[Path, tuple[Identity, T]] = {}

    def lookup(self, path: Path) -> tuple[Identity | None, T | None]:
        """The file's identity now, and the kept index when the file is still the one it came from."""
        identity = file_identity(path)
        kept = self._entries.get(path)
        return identity, (kept[1] if identity is not None and kept is not None and kept[0] == identity else None)

    def keep(self, path: Path, identity: Identity, index: T) -> None:
        self._entries[path] = (identity, index)

    def save(self, path: Path, data: bytes, index: T) -> None:
        """Replace the file atomically with `data`, and keep `index` as what it now holds."""
        atomic_write_bytes(path, data)
        identity = file_identity(path)
        if identity is not None:
            self._entries[path] = (identity, index)


def pack(vectors: npt.NDArray[np.float32], manifest: dict[str, object]) -> bytes:
    """The index file's bytes: the vectors and the manifest (JSON) in one .npz."""
    import numpy as np

    buffer = io.BytesIO()
    meta = np.frombuffer(json.dumps(manifest, ensure_ascii=False).encode("utf-8"), dtype=np.uint8)
    np.savez(buffer, vectors=vectors, manifest=meta)
    return buffer.getvalue()


def unpack(path: Path, format_version: int) -> tuple[npt.NDArray[np.float32], Any]:
    """The vectors and the manifest of an index file; ValueError (or OSError) when it is not
    one of `format_version`. Opened as Pensieve opens its files: a planted link or FIFO is an
    OSError, not a hang."""
    import numpy as np

    with open(open_regular_nofollow(path), "rb") as handle, np.load(handle, allow_pickle=False) as data:
        vectors = np.ascontiguousarray(data["vectors"], dtype=np.float32)
        manifest = json.loads(data["manifest"].tobytes().decode("utf-8"))
    if not isinstance(manifest, dict) or manifest.get("format") != format_version:
        found = manifest.get("format") if isinstance(manifest, dict) else None
        raise ValueError(f"index format {found!r}, expected {format_version}")
    return vectors, manifest
