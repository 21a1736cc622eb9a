"""The studio's guard: every request passes through `Guard` before any route sees it.

- Host: only the address the studio serves (or localhost); anything else is DNS rebinding.
- Token: `?token=` on a first visit (then an HttpOnly, SameSite=Strict cookie and a redirect
  that drops it from the address bar), the cookie, or `Authorization: Bearer`. Compared in
  constant time; without it, 401 and nothing else. The token never reaches a log.
- Origin: a state-changing request from another site is refused (CSRF); no CORS headers.
- Bodies are capped; every response carries a Content-Security-Policy with a fresh nonce
  that forbids inline scripts other than the studio's own and every outside origin.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode

from starlette.types import ASGIApp, Message, Receive, Scope, Send

TOKEN_ENV = "PENSIEVE_STUDIO_TOKEN"  # noqa: S105 - the variable's name, not a token
MAX_BODY_BYTES = 2_000_000
SAFE_METHODS = frozenset({"GET", "HEAD"})


def new_token() -> str:
    return secrets.token_urlsafe(32)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def csp_header(nonce: str) -> str:
    return (
        "default-src 'none'; "
        f"script-src 'self' 'nonce-{nonce}'; "
        f"style-src 'self' 'nonce-{nonce}'; "
        "img-src 'self'; connect-src 'self'; font-src 'self'; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'"
    )


# Served with raw archived pages (downloads): even opened directly, nothing in them runs.
SANDBOX_CSP = "sandbox; default-src 'none'"


def _host_name(value: str) -> tuple[str, int | None]:
    """`name[:port]` -> (lower-cased name, port or None); IPv6 stays bracketed."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return value, None
        name, rest = value[: end + 1], value[end + 1 :]
    else:
        name, _, port_text = value.partition(":")
        rest = f":{port_text}" if port_text else ""
    if rest.startswith(":") and rest[1:].isdigit():
        return name, int(rest[1:])
    if rest:
        return value, -1  # something malformed after the name: never matches
    return name, None


@dataclass
class Guard:
    """ASGI middleware enforcing the studio's security rules (see the module docstring)."""

    app: ASGIApp
    token: str
    host: str
    port: int
    extra_hosts: Iterable[str] = ()
    max_body: int = MAX_BODY_BYTES
    # Paths whose bodies may be larger (the library's upload: a PDF is often over 2 MB).
    large_bodies: Mapping[str, int] = field(default_factory=dict)
    _hosts: frozenset[str] = field(init=False)
    cookie_name: str = field(init=False)

    def __post_init__(self) -> None:
        bound = self.host.lower()
        if ":" in bound and not bound.startswith("["):
            bound = f"[{bound}]"  # an IPv6 address as it appears in a Host header
        names = {bound, "localhost", *(h.lower() for h in self.extra_hosts)}
        if is_loopback(self.host) or self.host in ("0.0.0.0", "::"):  # noqa: S104 - a check, not a bind
            names |= {"127.0.0.1", "[::1]"}
        self._hosts = frozenset(names)
        self.cookie_name = f"pensieve_studio_{self.port}"

    # -- checks ----------------------------------------------------------------------------
    def host_allowed(self, header: str | None) -> bool:
        if not header:
            return False
        name, port = _host_name(header)
        return name in self._hosts and (port is None or port == self.port)

    def origin_allowed(self, origin: str) -> bool:
        scheme, sep, rest = origin.partition("://")
        if not sep or scheme not in ("http", "https") or "/" in rest:
            return False
        return self.host_allowed(rest)

    def token_ok(self, candidate: str | None) -> bool:
        if not candidate:
            return False
        return hmac.compare_digest(candidate.encode("utf-8", "replace"), self.token.encode("utf-8"))

    # -- ASGI ------------------------------------------------------------------------------
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "lifespan":
                await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        if not self.host_allowed(headers.get("host")):
            await _refuse(send, 403, "this studio only answers requests addressed to it (Host refused)")
            return
        method = scope["method"]
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        from_query = next((v for k, v in query if k == "token"), None)
        bearer = headers.get("authorization", "")
        from_header = bearer[7:].strip() if bearer[:7].lower() == "bearer " else None
        from_cookie = cookie_value(headers.get("cookie", ""), self.cookie_name)
        if not (self.token_ok(from_header) or self.token_ok(from_cookie) or self.token_ok(from_query)):
            if _wants_page(scope["path"], headers):
                await _refuse_page(send, 401, UNAUTHORIZED_PAGE)
            else:
                await _refuse(send, 401, "unauthorized")
            return
        if method not in SAFE_METHODS:
            origin = headers.get("origin")
            if origin is not None and not self.origin_allowed(origin):
                await _refuse(send, 403, "cross-site request refused (Origin)")
                return
            if headers.get("sec-fetch-site") == "cross-site":
                await _refuse(send, 403, "cross-site request refused (Sec-Fetch-Site)")
                return
        length = headers.get("content-length")
        limit = self.large_bodies.get(scope["path"], self.max_body)
        if length is not None and (not length.isdigit() or int(length) > limit):
            await _refuse(send, 413, f"request body over the {limit:,}-byte limit")
            return
        if from_query is not None and method in SAFE_METHODS and not scope["path"].startswith("/api/"):
            # First visit: the token moves into a cookie and out of the address bar.
            rest = urlencode([(k, v) for k, v in query if k != "token"])
            location = same_site_path(scope["path"]) + (f"?{rest}" if rest else "")
            await send(
                {
                    "type": "http.response.start",
                    "status": 303,
                    "headers": [
                        (b"location", location.encode("latin-1", "replace")),
                        (b"set-cookie", self._cookie().encode("latin-1")),
                        (b"cache-control", b"no-store"),
                        (b"referrer-policy", b"no-referrer"),
                        (b"content-length", b"0"),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": b""})
            return
        nonce = secrets.token_urlsafe(16)
        scope.setdefault("state", {})["csp_nonce"] = nonce
        await self.app(scope, self._capped(receive, limit), self._with_headers(send, nonce))

    def _cookie(self) -> str:
        return f"{self.cookie_name}={self.token}; Path=/; HttpOnly; SameSite=Strict"

    def _capped(self, receive: Receive, limit: int) -> Receive:
        seen = 0

        async def capped() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise BodyTooLarge()
            return message

        return capped

    def _with_headers(self, send: Send, nonce: str) -> Send:
        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                raw: list[tuple[bytes, bytes]] = [
                    (k, v) for k, v in message.get("headers", []) if k.lower() != b"access-control-allow-origin"
                ]
                present = {k.lower() for k, _ in raw}
                if b"content-security-policy" not in present:
                    raw.append((b"content-security-policy", csp_header(nonce).encode("ascii")))
                raw += [
                    (b"x-content-type-options", b"nosniff"),
                    (b"referrer-policy", b"no-referrer"),
                    (b"x-frame-options", b"DENY"),
                    (b"cross-origin-opener-policy", b"same-origin"),
                    (b"cross-origin-resource-policy", b"same-origin"),
                ]
                if b"cache-control" not in present:
                    raw.append((b"cache-control", b"no-store"))
                message = {**message, "headers": raw}
            await send(message)

        return sending


def cookie_value(header: str, name: str) -> str | None:
    """The value of cookie `name` in a Cookie header, or None. Each `name=value` pair is read on
    its own: other localhost apps share the browser's cookies with the studio (cookies ignore
    ports), and a value the standard library's parser dislikes (`session={"user": 1}`,
    `a="b`, `theme=dark mode`) must not hide the studio's own cookie behind it."""
    for pair in header.split(";"):
        key, sep, value = pair.partition("=")
        if sep and key.strip() == name:
            return value.strip()
    return None


def same_site_path(path: str) -> str:
    """`path` as a Location on this site: one leading slash (`//evil.example/` would be another
    host) and percent-encoded (a CR or LF decoded from %0d%0a cannot split the header)."""
    return "/" + quote(path.lstrip("/\\"), safe="/!$&'()*+,;=:@-._~")


TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
MIN_TOKEN_CHARS = 16


def token_problem(token: str) -> str | None:
    """Why `token` cannot guard the studio, or None. It travels in a cookie, a URL and a header:
    only URL-safe ASCII survives all three unchanged (a `;` or an accented letter sets a cookie
    that never matches); a short one is guessed."""
    if len(token) < MIN_TOKEN_CHARS:
        return f"{TOKEN_ENV} is {len(token)} characters; use at least {MIN_TOKEN_CHARS} (or unset it for a random one)"
    bad = sorted({c for c in token if c not in TOKEN_CHARS})
    if bad:
        shown = " ".join(repr(c) for c in bad[:5])
        return f"{TOKEN_ENV} holds characters a cookie or URL would change ({shown}); use only A-Z a-z 0-9 - . _ ~"
    return None


class BodyTooLarge(Exception):
    """A body grew past the cap while being read (no or a lying Content-Length)."""


def _headers(scope: Scope) -> dict[str, str]:
    found: dict[str, str] = {}
    for key, value in scope.get("headers", []):
        name = key.decode("latin-1").lower()
        if name not in found:  # the first of repeated headers counts
            found[name] = value.decode("latin-1")
    return found


# What a browser without the token sees: how to get in, not raw JSON. Nothing of the request
# is echoed (no reflected text), and the page loads nothing.
UNAUTHORIZED_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Pensieve studio: open the address with its token</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:36em;margin:3em auto;padding:0 1em}
code{background:#f2f2f2;padding:0 .2em}</style></head>
<body><h1>This studio needs its access token</h1>
<p>Open the address that <code>pensieve studio</code> printed when it started, the one ending in
<code>?token=...</code>: it lets this browser in (a cookie keeps it in afterwards).</p>
<p>Lost it? Stop the studio (Ctrl-C in its terminal) and start it again: it prints the address anew.
With <code>PENSIEVE_STUDIO_TOKEN</code> set, the token is that value.</p>
</body></html>
"""


def _wants_page(path: str, headers: dict[str, str]) -> bool:
    """A browser asking for a page (not the JSON API, not a script's request)."""
    return not path.startswith("/api/") and "text/html" in headers.get("accept", "")


async def _refuse_page(send: Send, status: int, page: str) -> None:
    # The page's own style is inline; nothing else may load.
    await _answer(send, status, page.encode("utf-8"), b"text/html; charset=utf-8", b"; style-src 'unsafe-inline'")


async def _refuse(send: Send, status: int, message: str) -> None:
    await _answer(send, status, json.dumps({"error": message}).encode("utf-8"), b"application/json")


async def _answer(send: Send, status: int, body: bytes, content_type: bytes, csp_extra: bytes = b"") -> None:
    """A refusal answered before the app: never cached, never sniffed, loading nothing."""
    headers: list[Any] = [
        (b"content-type", content_type),
        (b"content-length", str(len(body)).encode("ascii")),
        (b"cache-control", b"no-store"),
        (b"x-content-type-options", b"nosniff"),
        (b"content-security-policy", b"default-src 'none'" + csp_extra),
    ]
    if content_type.startswith(b"text/html"):
        headers.append((b"referrer-policy", b"no-referrer"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
