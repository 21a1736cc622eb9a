"""Benchmark: the cost of crash-safe writes (temp file, fsync, rename, dir fsync).

Run: python -m bench.atomic_write
Prints the time per write of a status.json-sized file, atomic versus a plain overwrite,
and their ratio. status.json is saved after every model call, so this bounds the
bookkeeping overhead a run pays for never losing work.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from pensieve.project.workspace import atomic_write_bytes

N = 200
PAYLOAD = b"x" * 6_000  # about the size of a status.json


def _per_write(write: object, path: Path) -> float:
    assert callable(write)
    started = time.perf_counter()
    for _ in range(N):
        write(path, PAYLOAD)
    return (time.perf_counter() - started) / N


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "status.json"
        plain = _per_write(lambda p, d: p.write_bytes(d), path)
        atomic = _per_write(atomic_write_bytes, path)
    print(f"plain write  {plain * 1e6:9.1f} us")
    print(f"atomic write {atomic * 1e6:9.1f} us")
    print(f"ratio atomic/plain: {atomic / plain:.1f}x")


if __name__ == "__main__":
    main()
