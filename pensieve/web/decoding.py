"""Content decoding with a bound at every layer: `Content-Encoding: gzip, gzip` (or gzip
inside deflate, in any order and any stacking) cannot make a small response expand without
limit.

httpx decodes a whole network chunk at once, so a 3 KB response of stacked encodings can
decode to gigabytes in one call. Here each layer decodes in steps of at most `STEP` bytes of
output, no layer produces more than `max_bytes` in total, and the caller yields to the event
loop between steps, so the fetch deadline holds while decoding.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import Protocol

STEP = 64 * 1024
MAX_LAYERS = 4  # more encodings than this on one response is an attack, not a server


class DecodingError(Exception):
    """A body that cannot be decoded (unknown encoding, corrupt data, too many layers)."""


class _Layer(Protocol):
    def decode(self, data: bytes, limit: int) -> bytes: ...
    def pending(self) -> bool: ...


class _Identity:
    def __init__(self) -> None:
        self._buffer = b""

    def decode(self, data: bytes, limit: int) -> bytes:
        data = self._buffer + data
        out, self._buffer = data[:limit], data[limit:]
        return out

    def pending(self) -> bool:
        return bool(self._buffer)


class _Zlib:
    """gzip (wbits 16+), deflate (zlib-wrapped, or raw as some servers send it)."""

    def __init__(self, gzip: bool) -> None:
        self._gzip = gzip
        self._object = zlib.decompressobj(16 + zlib.MAX_WBITS if gzip else zlib.MAX_WBITS)
        self._started = False
        self._full = False

    def decode(self, data: bytes, limit: int) -> bytes:
        if self._object.eof:
            return b""  # trailing data after the stream: ignored, as browsers do
        tail = self._object.unconsumed_tail
        data = tail + data if tail else data
        try:
            out = self._object.decompress(data, limit)
        except zlib.error as exc:
            if self._gzip or self._started:
                raise DecodingError(f"corrupt {'gzip' if self._gzip else 'deflate'} data ({exc})") from None
            # "deflate" without its zlib wrapper: start again as raw deflate.
            self._object = zlib.decompressobj(-zlib.MAX_WBITS)
            self._started = True
            return self.decode(data, limit)
        self._started = True
        self._full = len(out) >= limit
        return out

    def pending(self) -> bool:
        # Input left over, or output that did not fit in the last step.
        return (bool(self._object.unconsumed_tail) or self._full) and not self._object.eof


class _Brotli:
    def __init__(self) -> None:
        import brotli  # type: ignore[import-not-found, unused-ignore]

        self._object = brotli.Decompressor()

    def decode(self, data: bytes, limit: int) -> bytes:
        try:
            out: bytes = self._object.process(data, output_buffer_limit=limit)
        except Exception as exc:  # brotli raises its own error type
            raise DecodingError(f"corrupt br data ({exc})") from None
        return out

    def pending(self) -> bool:
        # Brotli >= 1.2 keeps what did not fit and says so.
        return not self._object.is_finished() and not self._object.can_accept_more_data()


def brotli_available() -> bool:
    """brotli is decoded only by a library that can bound its output (Brotli >= 1.2)."""
    try:
        import brotli
    except ImportError:
        return False
    return hasattr(brotli.Decompressor(), "can_accept_more_data")


def accepted_encodings() -> str:
    return "gzip, deflate, br" if brotli_available() else "gzip, deflate"


def _layer(encoding: str) -> _Layer:
    if encoding in ("gzip", "x-gzip"):
        return _Zlib(gzip=True)
    if encoding == "deflate":
        return _Zlib(gzip=False)
    if encoding == "identity":
        return _Identity()
    if encoding == "br" and brotli_available():
        return _Brotli()
    raise DecodingError(f"content encoding {encoding!r} is not accepted (only {accepted_encodings()})")


class BoundedDecoder:
    """Decodes a body whose `Content-Encoding` lists `encodings` (in the order applied).

    `feed` yields decoded pieces; at most `max_bytes` come out of every layer, and once the
    innermost has given `max_bytes`, `truncated` is set and nothing more is produced."""

    def __init__(self, encodings: list[str], max_bytes: int) -> None:
        names = [e.strip().lower() for e in encodings if e.strip()]
        names = [n for n in names if n != "identity"]
        if len(names) > MAX_LAYERS:
            raise DecodingError(f"{len(names)} stacked content encodings; at most {MAX_LAYERS} are decoded")
        # The last encoding applied is the first to undo.
        self._layers: list[_Layer] = [_layer(name) for name in reversed(names)]
        self._produced = [0] * len(self._layers)
        self.max_bytes = max_bytes
        self.size = 0
        self.truncated = False

    def feed(self, data: bytes) -> Iterator[bytes]:
        """Decoded pieces of at most STEP bytes; call between them may yield to the loop."""
        if self.truncated:
            return
        yield from self._push(0, data)

    def _push(self, index: int, data: bytes) -> Iterator[bytes]:
        if self.truncated:
            return
        if index == len(self._layers):
            room = self.max_bytes - self.size
            if len(data) > room:
                data = data[:room]
                self.truncated = True
            self.size += len(data)
            if data:
                yield data
            return
        layer = self._layers[index]
        first = True
        while first or layer.pending():
            room = self.max_bytes - self._produced[index]
            if room <= 0:
                # This layer already gave max_bytes: whatever it still holds is over the cap.
                self.truncated = True
                return
            out = layer.decode(data if first else b"", min(STEP, room))
            first = False
            if not out:
                break
            self._produced[index] += len(out)
            yield from self._push(index + 1, out)
            if self._stopped():
                return

    def _stopped(self) -> bool:
        """Whether an inner layer reached the cap (a method: set while the generator ran)."""
        return self.truncated
