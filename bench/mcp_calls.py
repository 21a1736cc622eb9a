"""Benchmark: what an MCP server costs a run (tests/fakes/mcp_server.py, on stdio and HTTP).

Run: python -m bench.mcp_calls
Prints the time to start a stdio server and list its tools (paid once per run, when the
first stage that may use it begins), the time to shut it down, and the time per tools/call
on stdio and on streamable HTTP (uvicorn on 127.0.0.1), against a plain in-process call of
the same function (the ratio is the protocol's overhead per call).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

from pensieve.config import Settings
from pensieve.tools.mcp import McpServers
from tests.fakes.mcp_server import HttpWiki, build

N = 50
REPO = Path(__file__).resolve().parent.parent


async def _measure(config: dict[str, object]) -> tuple[float, float, float]:
    settings = Settings.model_validate({"mcp": {"servers": {"wiki": config}, "startup_timeout_s": 120}})
    manager = McpServers(settings, {**os.environ, "PYTHONPATH": str(REPO)})
    started = time.perf_counter()
    failures = await manager.ensure(["wiki"])
    assert not failures, failures
    start_s = time.perf_counter() - started
    server = manager.servers["wiki"]
    times = []
    for i in range(N):
        t = time.perf_counter()
        await server.call("search", {"query": f"q{i}"})
        times.append(time.perf_counter() - t)
    t = time.perf_counter()
    await manager.aclose()
    return start_s, statistics.median(times), time.perf_counter() - t


async def _plain() -> float:
    server = build()
    times = []
    for i in range(N):
        t = time.perf_counter()
        await server.call_tool("search", {"query": f"q{i}"})
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    plain = asyncio.run(_plain())
    stdio = asyncio.run(_measure({"command": [sys.executable, "-m", "tests.fakes.mcp_server"], "env": ["PYTHONPATH"]}))
    http = HttpWiki()
    try:
        remote = asyncio.run(_measure({"url": http.url}))
    finally:
        http.stop()
    print(f"in-process call (no protocol):      {plain * 1000:8.2f} ms")
    print(f"stdio: start + list tools           {stdio[0] * 1000:8.0f} ms; shut down {stdio[2] * 1000:.0f} ms")
    print(f"stdio: per call (median of {N})       {stdio[1] * 1000:8.2f} ms  ({stdio[1] / plain:.0f}x in-process)")
    print(f"http:  connect + list tools         {remote[0] * 1000:8.0f} ms; close {remote[2] * 1000:.0f} ms")
    print(f"http:  per call (median of {N})       {remote[1] * 1000:8.2f} ms  ({remote[1] / plain:.0f}x in-process)")


if __name__ == "__main__":
    main()
