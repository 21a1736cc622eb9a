"""What every fake server shares: a quiet HTTP/1.1 handler and a threaded server on 127.0.0.1."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class QuietHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # TCP_NODELAY on every accepted connection. The handler writes the status line and headers,
    # then the body, as two sends: with Nagle on, the body waits for the client's delayed ACK of
    # the headers (~40 ms on Linux), which bench_pipeline counted as Pensieve's own time between
    # model calls. Real providers' servers do not add it.
    disable_nagle_algorithm = True

    def log_message(self, *args: Any) -> None:
        pass


def serve(
    handler: type[BaseHTTPRequestHandler],
    host: str = "127.0.0.1",
    server_class: type[ThreadingHTTPServer] = ThreadingHTTPServer,
) -> ThreadingHTTPServer:
    """Start serving on a free port in a daemon thread."""
    server = server_class((host, 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return server


def close(server: ThreadingHTTPServer | None) -> None:
    if server is not None:
        server.shutdown()
        server.server_close()
