"""robots.txt, read with protego (the standard library's parser gets `Allow` after
`Disallow`, `*` and `$` wrong), fetched once per origin per run, through the same guard.

RFC 9309: a 4xx answer means there are no rules (everything allowed); a 5xx answer or an
unreachable server means the whole site is off limits until a later run tries again.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from urllib.parse import urlunsplit

from protego import Protego

from pensieve.web.fetcher import USER_AGENT, Fetcher, FetchError
from pensieve.web.guard import GuardError, split_url

# RFC 9309 asks crawlers to read at least 500 KiB of a robots.txt file.
MAX_ROBOTS_BYTES = 512 * 1024


class RobotsRefusal(Exception):
    """robots.txt (or its absence for a server error) forbids this URL."""


@dataclass(frozen=True)
class _Rules:
    parser: Protego | None  # None with allow_all: no rules apply
    allow_all: bool
    why_closed: str = ""  # set when the whole site is refused

    def allows(self, url: str) -> bool:
        if self.parser is None:
            return self.allow_all
        return bool(self.parser.can_fetch(url, USER_AGENT))


def origin(url: str) -> str:
    parts = split_url(url)
    scheme = parts.scheme.lower()
    port = parts.port or (443 if scheme == "https" else 80)
    return f"{scheme}://{(parts.hostname or '').lower()}:{port}"


class RobotsCache:
    """One task per origin: concurrent fetches of the same site share one robots.txt request."""

    def __init__(self, fetcher: Fetcher, timeout_s: float) -> None:
        self.fetcher = fetcher
        self.timeout_s = timeout_s
        self._rules: dict[str, asyncio.Task[_Rules]] = {}
        self.requests = 0  # robots.txt requests actually sent (for tests and figures)

    async def check(self, url: str) -> None:
        """Raise RobotsRefusal (or GuardError for a refused robots.txt host) unless allowed."""
        key = origin(url)
        task = self._rules.get(key)
        if task is None:
            task = asyncio.ensure_future(self._load(url))
            self._rules[key] = task
        # Shielded: a caller that times out must not cancel the lookup other callers share.
        rules = await asyncio.shield(task)
        if not rules.allows(url):
            if rules.why_closed:
                raise RobotsRefusal(rules.why_closed)
            raise RobotsRefusal(f"robots.txt of {key.split('://', 1)[1]} disallows {url} for Pensieve")

    async def _load(self, url: str) -> _Rules:
        parts = split_url(url)
        robots_url = urlunsplit((parts.scheme.lower(), parts.netloc, "/robots.txt", "", ""))
        host = parts.hostname
        self.requests += 1
        try:
            async with asyncio.timeout(self.timeout_s):
                response = await self.fetcher.get(robots_url, max_bytes=MAX_ROBOTS_BYTES)
        except GuardError:
            raise
        except (FetchError, TimeoutError) as exc:
            reason = str(exc) or "timed out"
            return _Rules(None, False, f"robots.txt of {host} could not be read ({reason}); the site is not fetched")
        if 400 <= response.status < 500:
            return _Rules(None, True)
        if response.status >= 500 or not 200 <= response.status < 300:
            return _Rules(None, False, f"robots.txt of {host} answered HTTP {response.status}; the site is not fetched")
        text = response.body.decode("utf-8", errors="replace")
        return _Rules(Protego.parse(text), True)

    def close(self) -> None:
        """Cancel lookups still running when the run ends (their callers are gone)."""
        for task in self._rules.values():
            if not task.done():
                task.cancel()
