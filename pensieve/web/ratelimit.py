"""A process-wide pacer: at most one request per interval, callers served in turn.

Each caller reserves the next free slot under a thread lock and then sleeps until it.
Nothing here is bound to an event loop, so one pacer serves every stage, every run and
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

    def reserve(self, interval_s: float) -> float:
        """Book the next slot; returns how long to wait for it."""
        with self._lock:
            now = time.monotonic()
            slot = max(now, self._next)
            self._next = slot + interval_s
            return slot - now

    async def wait_turn(self, interval_s: float) -> None:
        delay = self.reserve(interval_s)
        if delay > 0:
            await asyncio.sleep(delay)


# One pacer per provider API for the whole process: the limit is the provider's, not a run's.
SEARCH_PACER = Pacer()
