"""A bounded body for the HTTP clients Pensieve does not read from itself: litellm's (model
calls) and the mcp SDK's (MCP over streamable HTTP).

httpx undoes a response's content encodings a whole network chunk at a time, so a few KB of
`Content-Encoding: gzip, gzip` decode to gigabytes in one call. fetch_url and web_search read
the raw body themselves (pensieve.web.fetcher.read_capped); a library reads it on its own, so
the response is changed before the library reads it: the encodings are undone through
BoundedDecoder as the library reads, and the `Content-Encoding` header is removed (httpx then
has nothing left to decode). A body over `max_bytes` once decoded, or one that cannot be
decoded, raises BodyRefused while it is read. Requests offer only the encodings that can be
bounded.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

import httpx

from pensieve.web.decoding import BoundedDecoder, DecodingError, accepted_encodings

if TYPE_CHECKING:
    import httpx2


class BodyRefused(Exception):
    """A response body larger than allowed once decoded, or not decodable."""


def megabytes(size: int) -> str:
    return f"{size / 1_000_000:g} MB"


class _RawStream(Protocol):
    def __aiter__(self) -> AsyncIterator[bytes]: ...
    async def aclose(self) -> None: ...


class _BoundedBody:
    """The raw body decoded layer by layer, at most `max_bytes` in all."""

    def __init__(self, raw: _RawStream, encodings: list[str], max_bytes: int) -> None:
        self._raw = raw
        self._encodings = encodings
        self._max_bytes = max_bytes

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            decoder = BoundedDecoder(self._encodings, self._max_bytes)
            async for chunk in self._raw:
                for piece in decoder.feed(chunk):
                    yield piece
                    await asyncio.sleep(0)  # the caller's deadline holds while decoding
                if decoder.truncated:
                    raise BodyRefused(f"the answer is larger than {megabytes(self._max_bytes)} once decoded")
        except DecodingError as exc:
            raise BodyRefused(str(exc)) from None

    async def aclose(self) -> None:
        await self._raw.aclose()


def _bound(response: Any, body_class: type[_BoundedBody], max_bytes: int) -> None:
    """Give `response` (httpx's or httpx2's, not read yet) a bounded, decoding body."""
    encodings = response.headers.get_list("content-encoding", split_commas=True)
    for name in ("content-encoding", "content-length"):
        if name in response.headers:
            del response.headers[name]
    response.stream = body_class(response.stream, encodings, max_bytes)


class _HttpxBody(_BoundedBody, httpx.AsyncByteStream):
    pass


class BoundedTransport(httpx.AsyncBaseTransport):
    """Wraps the transport under an httpx client Pensieve does not build (litellm's)."""

    def __init__(self, inner: httpx.AsyncBaseTransport, max_bytes: int) -> None:
        self._inner = inner
        self._max_bytes = max_bytes

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        request.headers["Accept-Encoding"] = accepted_encodings()
        response = await self._inner.handle_async_request(request)
        _bound(response, _HttpxBody, self._max_bytes)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


def bounded_httpx2_client(max_bytes: int, headers: dict[str, str], timeout: httpx2.Timeout) -> httpx2.AsyncClient:
    """An httpx2 client (the mcp SDK's) whose every response body is bounded. Built with
    event hooks, not a transport: a transport of ours would turn off the proxy settings
    the client reads from the environment."""
    import httpx2

    class Body(_BoundedBody, httpx2.AsyncByteStream):
        pass

    async def on_response(response: httpx2.Response) -> None:
        _bound(response, Body, max_bytes)

    hooks: dict[str, list[Callable[..., Awaitable[None]]]] = {"response": [on_response]}
    return httpx2.AsyncClient(
        headers={**headers, "Accept-Encoding": accepted_encodings()}, timeout=timeout, event_hooks=hooks
    )
