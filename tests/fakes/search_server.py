"""Fake Tavily, SerpAPI and Brave APIs on 127.0.0.1, speaking their real wire formats.

One server answers all three by path: `POST /search` (Tavily), `GET /search.json`
(SerpAPI) and `GET /res/v1/web/search` (Brave). Each checks the key where its provider
expects it. Every request is recorded with its arrival time (server side), so tests can
check the spacing of requests without timing our code.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.fakes.http import QuietHandler, close, serve


@dataclass
class SearchHit:
    provider: str
    at: float
    query: str
    path: str  # with the query string (SerpAPI's carries the key)
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class FakeSearch:
    key: str = "test-search-key"
    # (title, url, snippet) returned for every query
    results: list[tuple[str, str, str]] = field(default_factory=list)
    # "ok" | "429" | "500" | "bad-json" | "slow" | "wrong-shape"
    mode: str = "ok"
    slow_s: float = 3.0
    hits: list[SearchHit] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    server: ThreadingHTTPServer | None = None

    @property
    def base_url(self) -> str:
        assert self.server is not None
        host, port = self.server.server_address[:2]
        assert isinstance(host, str)  # an AF_INET address (typeshed also allows bytes)
        return f"http://{host}:{port}"

    def times(self, provider: str | None = None) -> list[float]:
        with self.lock:
            return sorted(h.at for h in self.hits if provider is None or h.provider == provider)

    # -- the three wire formats ---------------------------------------------------------------
    def tavily(self, query: str, n: int) -> dict[str, Any]:
        return {
            "query": query,
            "follow_up_questions": None,
            "answer": None,
            "images": [],
            "results": [
                {"title": t, "url": u, "content": s, "score": 0.9 - i / 100, "raw_content": None}
                for i, (t, u, s) in enumerate(self.results[:n])
            ],
            "response_time": 0.42,
        }

    def serpapi(self, query: str, n: int) -> dict[str, Any]:
        data: dict[str, Any] = {
            "search_metadata": {"id": "fake", "status": "Success"},
            "search_parameters": {"engine": "google", "q": query},
            "search_information": {"query_displayed": query},
        }
        if self.results:
            data["organic_results"] = [
                {"position": i + 1, "title": t, "link": u, "displayed_link": u, "snippet": s}
                for i, (t, u, s) in enumerate(self.results[:n])
            ]
        return data

    def brave(self, query: str, n: int) -> dict[str, Any]:
        return {
            "type": "search",
            "query": {"original": query},
            "web": {
                "type": "search",
                "results": [
                    # Brave marks the matched words with <strong>.
                    {
                        "title": t,
                        "url": u,
                        "description": f"<strong>{s.split(' ')[0]}</strong> {' '.join(s.split(' ')[1:])}",
                    }
                    for t, u, s in self.results[:n]
                ],
            },
        }

    def handle(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> tuple[int, bytes]:
        parts = urlsplit(path)
        params = {k: v[0] for k, v in parse_qs(parts.query).items()}
        body: dict[str, Any] = {}
        if method == "POST" and parts.path == "/search":
            provider = "tavily"
            body = json.loads(raw or b"{}")
            query, n = body.get("query", ""), int(body.get("max_results", 5))
            authorised = headers.get("authorization") == f"Bearer {self.key}"
        elif method == "GET" and parts.path == "/search.json":
            provider = "serpapi"
            query, n = params.get("q", ""), int(params.get("num", 10))
            authorised = params.get("api_key") == self.key and params.get("engine") == "google"
        elif method == "GET" and parts.path == "/res/v1/web/search":
            provider = "brave"
            query, n = params.get("q", ""), int(params.get("count", 20))
            authorised = headers.get("x-subscription-token") == self.key
        else:
            return 404, b'{"error": "no such endpoint"}'
        with self.lock:
            self.hits.append(SearchHit(provider, time.monotonic(), query, path, headers, body))
        if not authorised:
            # SerpAPI echoes nothing secret; some proxies do: echo the key to test redaction.
            return 401, json.dumps({"error": f"Invalid API key: {params.get('api_key', '')}"}).encode()
        if self.mode == "429":
            return 429, b'{"error": "rate limit exceeded"}'
        if self.mode == "500":
            return 500, b'{"error": "internal error"}'
        if self.mode == "bad-json":
            return 200, b'{"results": [ this is not json'
        if self.mode == "wrong-shape":
            return 200, json.dumps({"results": "nope", "organic_results": "nope", "web": {"results": 3}}).encode()
        if self.mode == "slow":
            time.sleep(self.slow_s)
        answer = {"tavily": self.tavily, "serpapi": self.serpapi, "brave": self.brave}[provider](query, n)
        return 200, json.dumps(answer).encode()

    def start(self) -> FakeSearch:
        fake = self

        class Handler(QuietHandler):
            def _serve(self, method: str) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                headers = {k.lower(): v for k, v in self.headers.items()}
                status, payload = fake.handle(method, self.path, headers, raw)
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def do_GET(self) -> None:
                self._serve("GET")

            def do_POST(self) -> None:
                self._serve("POST")

        self.server = serve(Handler, "127.0.0.1")
        return self

    def stop(self) -> None:
        close(self.server)
