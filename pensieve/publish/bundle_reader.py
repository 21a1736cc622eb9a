"""A bundle someone handed over, read for `export --verify`: a directory or a .zip, each
file hashed as a stream with a cap, nothing followed and nothing waited on.

- A directory is walked without following links: a symbolic link, FIFO, socket or device
  anywhere in it refuses the bundle (a link would let a file outside the bundle verify, a
  FIFO would block the read). Files are opened with O_NOFOLLOW and O_NONBLOCK and checked
  by fstat to be regular before a byte is read.
- A zip's member names must be unique (readers disagree on which of two `final.md` counts,
  so the one verified need not be the one shown), its members regular files. A member's
  declared size must be the manifest's before anything is inflated, and no more than the
  manifest's size plus one byte is ever inflated, so a small zip of a huge member costs a
  header read.
- No file may be listed larger than MAX_FILE_BYTES, nor all of them together larger than
  MAX_TOTAL_BYTES; manifest.json itself is read only up to MAX_MANIFEST_BYTES.

Whatever refuses the bundle is a PensieveError naming the file and the reason (one line,
exit 1); a file that differs from the manifest is a problem of the report instead.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import zipfile
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Protocol

from pensieve.errors import PensieveError, UsageError
from pensieve.project.workspace import TMP_PREFIX, mode_kind, special_file_kind, walk_tree

MAX_FILE_BYTES = 256 * 1024 * 1024
MAX_TOTAL_BYTES = 2 * 1024 * 1024 * 1024
MAX_MANIFEST_BYTES = 16 * 1024 * 1024
_CHUNK = 1024 * 1024
# What reading a damaged or hostile member can raise, beyond OSError.
_ZIP_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError, ValueError)


def refused(bundle: Path, name: str, why: str) -> PensieveError:
    return PensieveError(f"bundle {bundle}: {name} {why}; a bundle holds only regular files, so it is not verified")


class Bundle(Protocol):
    path: Path
    names: set[str]  # every file in the bundle

    def size(self, name: str) -> int | None:
        """The file's size as the bundle declares it (stat, zip header), None when absent."""

    def open(self, name: str) -> contextlib.AbstractContextManager[IO[bytes]]:
        """The file's bytes as a stream; only called for a name in `names`."""


def _kind_of_mode(mode: int) -> str:
    return f"is {mode_kind(mode)}"


class DirectoryBundle:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.names: set[str] = set()
        for entry in walk_tree(path, "in the bundle"):
            name = Path(entry.path).relative_to(path).as_posix()
            if entry.is_symlink():
                raise refused(path, name, "is a symbolic link")
            if entry.is_dir(follow_symlinks=False):
                continue
            if not entry.is_file(follow_symlinks=False):
                kind = special_file_kind(Path(entry.path)) or "not a regular file"
                raise refused(path, name, f"is {kind}")
            if not entry.name.startswith(TMP_PREFIX):  # an interrupted export's leftover
                self.names.add(name)

    def _descriptor(self, name: str) -> int:
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
        try:
            descriptor = os.open(self.path / name, flags)
        except OSError as exc:
            # ELOOP: the entry became a link after the walk.
            raise refused(self.path, name, f"cannot be opened as a regular file ({exc.strerror})") from None
        mode = os.fstat(descriptor).st_mode
        if not stat.S_ISREG(mode):
            os.close(descriptor)
            raise refused(self.path, name, _kind_of_mode(mode))
        return descriptor

    def size(self, name: str) -> int | None:
        if name not in self.names:
            return None
        descriptor = self._descriptor(name)
        try:
            return os.fstat(descriptor).st_size
        finally:
            os.close(descriptor)

    def open(self, name: str) -> contextlib.AbstractContextManager[IO[bytes]]:
        descriptor = self._descriptor(name)
        os.set_blocking(descriptor, True)  # a regular file: blocking reads are plain reads
        return os.fdopen(descriptor, "rb")


class ZipBundle:
    def __init__(self, path: Path, archive: zipfile.ZipFile) -> None:
        self.path = path
        self.archive = archive
        infos = archive.infolist()
        counts = Counter(info.filename for info in infos)
        duplicated = sorted(name for name, count in counts.items() if count > 1)
        if duplicated:
            name = duplicated[0]
            raise PensieveError(
                f"bundle {path}: {name} is in the zip {counts[name]} times (readers disagree on which one counts); "
                "a bundle holds each file once, so it is not verified"
            )
        self.infos: dict[str, zipfile.ZipInfo] = {}
        for info in infos:
            if info.is_dir():
                continue
            # The Unix mode, when the zip was made on Unix; zipfile itself writes permission
            # bits without a file type, which is a regular file.
            mode = info.external_attr >> 16 if info.create_system == 3 else 0
            if stat.S_IFMT(mode) and not stat.S_ISREG(mode):
                raise refused(path, info.filename, _kind_of_mode(mode))
            self.infos[info.filename] = info
        self.names = set(self.infos)

    def size(self, name: str) -> int | None:
        info = self.infos.get(name)
        return None if info is None else info.file_size

    def open(self, name: str) -> contextlib.AbstractContextManager[IO[bytes]]:
        return self.archive.open(self.infos[name])


@contextlib.contextmanager
def open_bundle(path: Path) -> Iterator[Bundle]:
    """The bundle at `path` (a directory, or else a zip file), refused when it holds a link,
    a special file or a duplicate member."""
    if path.is_dir():
        yield DirectoryBundle(path)
        return
    try:
        archive = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile, ValueError) as exc:
        raise UsageError(f"{path} is neither a bundle directory nor a zip file ({exc})") from None
    with archive:
        yield ZipBundle(path, archive)


def _stream_digest(read: Callable[[int], bytes], limit: int) -> tuple[str, int]:
    """sha256 and length of at most `limit` + 1 bytes of a stream: one byte more than
    expected tells a longer file without reading the rest of it."""
    digest = hashlib.sha256()
    count = 0
    while count <= limit:
        chunk = read(min(_CHUNK, limit + 1 - count))
        if not chunk:
            break
        digest.update(chunk)
        count += len(chunk)
    return digest.hexdigest(), count


def digest(bundle: Bundle, name: str, limit: int) -> tuple[str, int] | str:
    """(sha256, length) of the file read up to `limit` + 1 bytes, or why it could not be read."""
    try:
        with bundle.open(name) as stream:
            return _stream_digest(stream.read, limit)
    except PensieveError:
        raise
    except (OSError, *_ZIP_ERRORS) as exc:
        return f"cannot be read ({exc})"


def read_small(bundle: Bundle, name: str, limit: int) -> bytes | None:
    """The whole file, refused (before reading) when it is declared or found larger than `limit`."""
    size = bundle.size(name)
    if size is None:
        return None
    if size > limit:
        raise PensieveError(f"bundle {bundle.path}: {name} is {size:,} bytes, more than {limit:,}; it is not verified")
    parts: list[bytes] = []
    try:
        with bundle.open(name) as stream:
            while chunk := stream.read(_CHUNK):
                parts.append(chunk)
                if sum(map(len, parts)) > limit:
                    raise PensieveError(
                        f"bundle {bundle.path}: {name} is more than {limit:,} bytes; it is not verified"
                    )
    except (OSError, *_ZIP_ERRORS) as exc:
        raise PensieveError(f"bundle {bundle.path}: {name} cannot be read ({exc}); it is not verified") from None
    return b"".join(parts)
