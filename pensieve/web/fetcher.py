"""One guarded HTTP GET: every hop through the SSRF guard, redirects followed by hand,
the body read while streaming and cut at a byte cap.

The connection is made to the address the guard checked (the URL is rewritten to that
address; the Host header and TLS SNI keep the real name, so virtual hosts and
certificates still work). Nothing here reads proxy settings from the environment: a
proxy would make the checked address meaningless.
"""

from __future__ import annotations

import asyncio
import ipaddress
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urljoin, urlunsplit

import certifi
import httpx

from pensieve import __version__
from pensieve.web.decoding import BoundedDecoder, DecodingError, accepted_encodings
from pensieve.web.guard import AddressPolicy, GuardError, Target, resolve, split_url

if TYPE_CHECKING:
    from pensieve.config import FetchSettings

USER_AGENT = f"Pensieve/{__version__} (research agent; respects robots.txt)"
REDIRECT_CODES = frozenset({301, 302, 303, 307, 308})

# Called with each URL before it is requested (robots.txt lives here); raises to refuse.
HopCheck = Callable[[str], Awaitable[None]]


def tls_context(ca_file: str | None) -> ssl.SSLContext:
    """Certificates are always verified: against certifi's authorities, plus `ca_file`
    (fetch.ca_file) when given, for a company's own authority."""
    context = ssl.create_default_context(cafile=certifi.where())
    if ca_file:
        context.load_verify_locations(cafile=ca_file)  # checked when the config was loaded
    return context


class FetchError(Exception):
    """A fetch that failed in an expected way; the message is shown to the agent."""


@dataclass(frozen=True)
class Response:
    url: str  # as asked for
    final_url: str  # after redirects
    status: int
    media_type: str  # "text/html", without parameters
    charset: str | None
    body: bytes
    truncated: bool  # the body cap was reached and the rest was not read


def _media_type(header: str) -> tuple[str, str | None]:
    media, _, params = header.partition(";")
    charset = None
    for param in params.split(";"):
        key, _, value = param.partition("=")
        if key.strip().lower() == "charset" and value.strip():
            charset = value.strip().strip("\"'")
    return media.strip().lower(), charset


def _pinned_request(client: httpx.AsyncClient, url: str, target: Target) -> httpx.Request:
    parts = split_url(url)
    address = f"[{target.address}]" if isinstance(target.address, ipaddress.IPv6Address) else str(target.address)
    path = parts.path or "/"
    dial = urlunsplit((target.scheme, f"{address}:{target.port}", path, parts.query, ""))
    host = f"[{target.host}]" if ":" in target.host else target.host
    host_header = host if target.default_port else f"{host}:{target.port}"
    extensions = {"sni_hostname": target.host} if target.scheme == "https" else {}
    return client.build_request("GET", dial, headers={"Host": host_header}, extensions=extensions)


class Fetcher:
    """Owns the HTTP client used for pages and robots.txt during one run."""

    def __init__(
        self, *, policy: AddressPolicy | None, max_redirects: int, timeout_s: float, ca_file: str | None = None
    ) -> None:
        self.policy = policy
        self.max_redirects = max_redirects
        self.client = httpx.AsyncClient(
            follow_redirects=False,
            trust_env=False,
            verify=tls_context(ca_file),
            timeout=httpx.Timeout(timeout_s),
            # No pooled connections: a pooled connection is keyed by address, and reusing
            # it for another host name would send that host's request over the wrong TLS
            # session. Fetches are few, so the cost is small.
            limits=httpx.Limits(max_keepalive_connections=0),
            headers={
                "User-Agent": USER_AGENT,
                "Accept": "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.1",
                "Accept-Encoding": accepted_encodings(),
            },
        )

    @classmethod
    def for_settings(cls, fetch: FetchSettings) -> Fetcher:
        """The fetcher the configuration's `fetch` section describes (private hosts refused
        unless fetch.allow_private_hosts): fetch_url's and the library's `add --url`."""
        from pensieve.web.guard import refusal

        return cls(
            policy=None if fetch.allow_private_hosts else refusal,
            max_redirects=fetch.max_redirects,
            timeout_s=fetch.timeout_s,
            ca_file=fetch.ca_file,
        )

    async def aclose(self) -> None:
        await self.client.aclose()

    async def get(
        self,
        url: str,
        *,
        max_bytes: int,
        allowed_types: frozenset[str] | None = None,
        before_hop: HopCheck | None = None,
    ) -> Response:
        """GET url; non-2xx responses come back with an empty body for the caller to judge.

        Raises GuardError for a refused hop and FetchError for network or content problems.
        """
        current = url
        for _hop in range(self.max_redirects + 1):
            parts = split_url(current)
            target = await resolve(parts, policy=self.policy)  # the guard speaks first
            if before_hop is not None:
                await before_hop(current)
            request = _pinned_request(self.client, current, target)
            try:
                response = await self.client.send(request, stream=True)
            except httpx.TimeoutException:
                raise FetchError(f"{parts.hostname} did not answer in time") from None
            except httpx.HTTPError as exc:
                raise FetchError(f"cannot connect to {parts.hostname} ({_short_reason(exc)})") from None
            try:
                if response.status_code in REDIRECT_CODES:
                    location = response.headers.get("location")
                    if not location:
                        raise FetchError(f"HTTP {response.status_code} redirect without a Location header")
                    current = urljoin(current, location.strip())
                    continue
                media, charset = _media_type(response.headers.get("content-type", ""))
                if not 200 <= response.status_code < 300:
                    return Response(url, current, response.status_code, media, charset, b"", False)
                if allowed_types is not None and media not in allowed_types:
                    shown = media or "no content type"
                    raise FetchError(
                        f"content type {shown} is not fetched; only {', '.join(sorted(allowed_types))} pages are"
                    )
                body, truncated = await read_capped(response, max_bytes)
                return Response(url, current, response.status_code, media, charset, body, truncated)
            except httpx.TimeoutException:
                raise FetchError(f"{parts.hostname} stopped sending before the page was complete") from None
            except httpx.HTTPError as exc:
                raise FetchError(f"error while reading from {parts.hostname} ({_short_reason(exc)})") from None
            finally:
                await response.aclose()
        raise FetchError(f"more than {self.max_redirects} redirects (fetch.max_redirects); last was to {current}")


async def read_capped(response: httpx.Response, max_bytes: int) -> tuple[bytes, bool]:
    """Read at most max_bytes of decoded body. The content encodings are undone here, not by
    httpx, with every layer bounded (pensieve.web.decoding): a compressed bomb, stacked or
    not, is cut at max_bytes, and the loop is yielded to between steps so the fetch
    deadline holds while decoding. At most max_bytes of raw bytes are read too."""
    try:
        decoder = BoundedDecoder(response.headers.get_list("content-encoding", split_commas=True), max_bytes)
    except DecodingError as exc:
        raise FetchError(str(exc)) from None
    chunks: list[bytes] = []
    raw_size = 0
    async for raw in response.aiter_raw():
        raw_size += len(raw)
        try:
            for piece in decoder.feed(raw):
                chunks.append(piece)
                await asyncio.sleep(0)
        except DecodingError as exc:
            raise FetchError(str(exc)) from None
        if decoder.truncated or raw_size > max_bytes:
            return b"".join(chunks), True
        await asyncio.sleep(0)
    return b"".join(chunks), False


def _short_reason(exc: Exception) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text[:200]


__all__ = ["USER_AGENT", "AddressPolicy", "FetchError", "Fetcher", "GuardError", "Response"]
