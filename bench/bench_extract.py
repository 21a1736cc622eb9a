"""Extraction time for a 100 KB HTML page (trafilatura on bytes, as fetch_url does it).

Run: python bench/bench_extract.py
Prints the median and best of several runs, after one warm-up (the first call pays for
trafilatura's imports and lxml's setup, which happen once per process).
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pensieve.web.extract import extract

SENTENCE = (
    "Vector databases index embeddings with graphs, trees or quantised lists, trading recall for speed "
    "in ways that depend on the data and the queries."
)


def page(target_bytes: int) -> bytes:
    head = "<!doctype html><html><head><meta charset='utf-8'><title>Benchmark page</title></head><body>"
    nav = "<nav>" + " | ".join(f"<a href='/s{i}'>Section {i}</a>" for i in range(30)) + "</nav><article><h1>Bench</h1>"
    parts = [head, nav]
    size = sum(len(p) for p in parts)
    i = 0
    while size < target_bytes:
        block = f"<h2>Part {i}</h2><p>{SENTENCE} Paragraph {i}.</p><p>{SENTENCE}</p>\n"
        parts.append(block)
        size += len(block)
        i += 1
    parts.append("</article><footer>Copyright. All rights reserved.</footer></body></html>")
    return "".join(parts).encode()


def main() -> None:
    body = page(100_000)
    start = time.perf_counter()
    extract(body, "text/html", "utf-8", "https://example.org/bench")
    first = time.perf_counter() - start
    times = []
    for _ in range(15):
        start = time.perf_counter()
        result = extract(body, "text/html", "utf-8", "https://example.org/bench")
        times.append(time.perf_counter() - start)
    print(f"page: {len(body):,} bytes -> {len(result.text):,} characters of text, title {result.title!r}")
    print(f"first call (imports included): {first * 1000:.0f} ms")
    print(
        f"extraction of a 100 KB page: median {statistics.median(times) * 1000:.1f} ms, best {min(times) * 1000:.1f} ms"
    )


if __name__ == "__main__":
    main()
