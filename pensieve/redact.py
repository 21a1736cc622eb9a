"""Secrets never reach a file, a log or the terminal.

Every key Pensieve can see comes from the environment; `scrub` replaces each such value
(and anything that looks like a key in a URL query) before text is stored or shown. A
value is a secret when its variable's name looks like one (OPENAI_API_KEY, WIKI_TOKEN), or
when Pensieve or its configuration uses the variable as one, whatever its name: the search
keys, the password in PENSIEVE_QUEUE_URL, and what an MCP server is given (`env`,
`headers_env`; the configuration names them with `remember_secret_names` when it is loaded).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from urllib.parse import unquote

from pensieve.web.catalog import NCBI_KEY_ENV, S2_KEY_ENV, SEARCH_KEY_ENV

_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)$|API_?KEY|_AUTH", re.IGNORECASE)
_QUERY_SECRET = re.compile(
    r"(?i)([?&](?:api[_-]?key|key|token|access[_-]?token|auth|secret|subscription[_-]?token)=)[^&#\s\"']+"
)
_BEARER = re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]{8,}")
_MIN_SECRET_LEN = 6
QUEUE_URL_ENV = "PENSIEVE_QUEUE_URL"
# Variables Pensieve itself reads as keys.
_KEY_VARIABLES = frozenset({SEARCH_KEY_ENV, S2_KEY_ENV, NCBI_KEY_ENV})
# Passed to an MCP server for its own use, never secret: scrubbing their values (a path,
# "production") would cut ordinary words out of every article.
_NEVER_SECRET = frozenset(
    {"PATH", "PYTHONPATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "LC_ALL", "TZ", "TMPDIR", "NODE_ENV"}
)
_configured: set[str] = set()  # names the configuration uses as secrets (process-wide)


def remember_secret_names(names: Iterable[str]) -> None:
    """Variables the loaded configuration uses as secrets: their values are scrubbed from
    everything Pensieve writes or shows, whatever the names look like."""
    _configured.update(name for name in names if name not in _NEVER_SECRET)


_SECRET_PARAMS = frozenset({"password", "sslpassword"})
_URL_QUERY_SECRET = re.compile(r"(?i)([?&](?:ssl)?password=)[^&#\s\"']+")


def url_secrets(url: str | None) -> list[str]:
    """The secrets a database URL carries: the password of its user information (taken up to
    the last `@` before the path, so a raw `@` inside it does not leave a piece of it in
    "failed to resolve host 'ssw0rd@127.0.0.1'") and every piece of it between `@`s, and the
    `password=` / `sslpassword=` query parameters; each also percent-decoded."""
    if not url or "://" not in url:
        return []
    rest = url.split("://", 1)[1]
    head = re.split(r"[/?#]", rest, maxsplit=1)[0]
    found: list[str] = []
    if "@" in head and ":" in head[: head.rfind("@")]:
        password = head[: head.rfind("@")].split(":", 1)[1]
        found += [password, *password.split("@")]
    query = rest.split("?", 1)[1].split("#", 1)[0] if "?" in rest else ""
    for pair in query.split("&"):
        key, _, value = pair.partition("=")
        if key.lower() in _SECRET_PARAMS and value:
            found.append(value)
    return [piece for secret in found for piece in {secret, unquote(secret)} if len(piece) >= 3]


def hide_url_secrets(text: str, url: str | None) -> str:
    """`text` with every secret of `url` (url_secrets) replaced by ***, and any password= or
    sslpassword= query value hidden whatever URL it belongs to."""
    for secret in sorted(url_secrets(url), key=len, reverse=True):
        text = text.replace(secret, "***")
    return _URL_QUERY_SECRET.sub(r"\1***", text)


def _queue_password(url: str | None) -> list[str]:
    return url_secrets(url)


def secret_values(environ: dict[str, str] | None = None) -> list[str]:
    env = os.environ if environ is None else environ
    named = {name for name in env if _SECRET_NAME.search(name)} | _KEY_VARIABLES | _configured
    values = {env[name] for name in named if name in env}
    values.update(_queue_password(env.get(QUEUE_URL_ENV)))
    # Longest first, so a key that contains another is replaced whole.
    return sorted((v for v in values if len(v) >= _MIN_SECRET_LEN), key=len, reverse=True)


def scrub(text: str, environ: dict[str, str] | None = None) -> str:
    for value in secret_values(environ):
        if value in text:
            text = text.replace(value, "[REDACTED]")
    text = _QUERY_SECRET.sub(r"\1[REDACTED]", text)
    text = _URL_QUERY_SECRET.sub(r"\1[REDACTED]", text)
    return _BEARER.sub(r"\1[REDACTED]", text)


def scrub_secret_bytes(data: bytes, environ: dict[str, str] | None = None) -> bytes:
    """The configured secrets (the environment's keys) replaced in bytes about to be
    written: a key a provider or a page echoes back never lands in an artifact, in
    sources/ or in status.json. (Only the values themselves: a file's other text is kept.)"""
    for value in secret_values(environ):
        encoded = value.encode("utf-8", errors="replace")
        if encoded in data:
            data = data.replace(encoded, b"[REDACTED]")
    return data


def scrub_key(text: str, key: str) -> str:
    """`scrub`, and also replace `key` itself: a search key read from the settings'
    environment, which need not be this process's."""
    return scrub(text.replace(key, "[REDACTED]") if key else text)
