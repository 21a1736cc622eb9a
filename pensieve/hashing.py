"""The one way Pensieve takes a sha256: of a file (read in blocks) or of bytes in memory."""

from __future__ import annotations

import hashlib
from pathlib import Path

_BLOCK = 1 << 20


def sha256_of(path: Path) -> str:
    """Hex sha256 of a file's content, read in 1 MiB blocks (model weights are ~90 MB)."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(_BLOCK), b""):
            digest.update(block)
    return digest.hexdigest()


def sha256_of_bytes(data: bytes) -> str:
    """Hex sha256 of bytes already in memory (a fetched body, a topic file, a title)."""
    return hashlib.sha256(data).hexdigest()
