"""A process-wide pacer: at most one request per interval, callers served in turn.

A caller is granted its turn only when the interval since the previous grant has really
passed, checked under a thread lock at the moment of the grant: booking slots ahead of
time would let a caller that wakes late (a busy CPU) end up closer than the interval to
the next one. Nothing here is bound to an event loop, so one pacer serves every stage, every run and
every thread of the process (an asyncio.Lock would be tied to the first loop it met).
"""

from __future__ import annotations

import asyncio
import threading
import time


class Pacer:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._next = 0.0  # monotonic time of the next free slot
        self._blocked_until = 0.0  # a provider's Retry-After, in monotonic time

    def try_grant(self, interval_s: float) -> float:
        """Take the turn if it is free (returns 0), else return how long until it may be."""
        with self._lock:
            now = time.monotonic()
            if now >= self._next:
                self._next = now + interval_s
                return 0.0
            return self._next - now

    def defer(self, seconds: float) -> None:
        """No grant before `seconds` from now (a provider's Retry-After)."""
        with self._lock:
            until = time.monotonic() + seconds
            self._next = max(self._next, until)
            self._blocked_until = max(self._blocked_until, until)

    def blocked_for(self) -> float:
        """Seconds left of the last Retry-After (0 when none is pending)."""
        with self._lock:
            return max(0.0, self._blocked_until - time.monotonic())

    async def wait_turn(self, interval_s: float) -> None:
        while (delay := self.try_grant(interval_s)) > 0:
            await asyncio.sleep(delay)


# One pacer per provider API for the whole process: the limit is the provider's, not a run's.
_PACERS: dict[str, Pacer] = {}
_PACERS_LOCK = threading.Lock()


def pacer_for(provider: str) -> Pacer:
    with _PACERS_LOCK:
        return _PACERS.setdefault(provider, Pacer())
