"""Secrets never reach a file, a log or the terminal.

Every key Pensieve can see comes from the environment; `scrub` replaces each such value
(and anything that looks like a key in a URL query) before text is stored or shown.
"""

from __future__ import annotations

import os
import re

_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)$|API_?KEY|_AUTH", re.IGNORECASE)
_QUERY_SECRET = re.compile(
    r"(?i)([?&](?:api[_-]?key|key|token|access[_-]?token|auth|secret|subscription[_-]?token)=)[^&#\s\"']+"
)
_BEARER = re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]{8,}")
_MIN_SECRET_LEN = 6


def secret_values(environ: dict[str, str] | None = None) -> list[str]:
    env = os.environ if environ is None else environ
    values = {value for name, value in env.items() if _SECRET_NAME.search(name) and len(value) >= _MIN_SECRET_LEN}
    # Longest first, so a key that contains another is replaced whole.
    return sorted(values, key=len, reverse=True)


def scrub(text: str, environ: dict[str, str] | None = None) -> str:
    for value in secret_values(environ):
        if value in text:
            text = text.replace(value, "[REDACTED]")
    text = _QUERY_SECRET.sub(r"\1[REDACTED]", text)
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
