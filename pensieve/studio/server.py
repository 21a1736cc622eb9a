"""How the studio is served: uvicorn's HTTP/1.1 protocol, with a deadline for a request's
headers. uvicorn waits for them without end, so a few thousand half-sent requests would
hold as many connections (and descriptors) open forever."""

from __future__ import annotations

import asyncio
from typing import Any

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

HEADER_TIMEOUT_S = 10.0  # from a connection (or the end of its last answer) to a request's headers


class H11WithHeaderDeadline(H11Protocol):
    """Closes a connection whose request headers are not complete within HEADER_TIMEOUT_S."""

    _deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def handle_events(self) -> None:
        before = self.cycle
        super().handle_events()
        if self.cycle is not before:  # a request's headers arrived: its answer is under way
            self._disarm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._arm()  # a kept-alive connection waits for the next request's headers

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(HEADER_TIMEOUT_S, self._too_slow)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _too_slow(self) -> None:
        self._deadline = None
        waiting = self.cycle is None or self.cycle.response_complete
        if waiting and not self.transport.is_closing():
            self.transport.close()


def server_config(app: Any, **options: Any) -> uvicorn.Config:
    """uvicorn's configuration for the studio: quiet, no lifespan, the header deadline."""
    settings: dict[str, Any] = {"log_level": "warning", "access_log": False, "lifespan": "off", **options}
    return uvicorn.Config(app, http=H11WithHeaderDeadline, **settings)
