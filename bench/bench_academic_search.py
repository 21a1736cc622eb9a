"""Benchmark: one web_search over six providers at once, against asking them one by one;
and the cost of reading a page's citation meta tags.

Run: python -m bench.bench_academic_search
Uses the fake SearXNG / arXiv / Semantic Scholar / PubMed / OpenAlex / Crossref servers on
127.0.0.1 with a fixed delay per answer (`DELAY_S`, standing in for a real API's latency),
no pacing, and prints wall times, their ratio, the merged result count and how many
duplicates the merge removed.
"""

from __future__ import annotations

import asyncio
import time

import httpx

from pensieve.config import SearchSettings
from pensieve.web.page_meta import page_meta
from pensieve.web.search import search_all
from tests.fakes.scholarly_server import FakeScholarly

PROVIDERS = ["searxng", "arxiv", "semantic_scholar", "pubmed", "openalex", "crossref"]
DELAY_S = 0.2
ROUNDS = 3


class SlowScholarly(FakeScholarly):
    def handle(self, raw_path: str, headers: dict[str, str]) -> tuple[int, str, bytes, dict[str, str]]:
        time.sleep(DELAY_S)
        return super().handle(raw_path, headers)


async def _run(fake: FakeScholarly) -> None:
    settings = SearchSettings(
        providers=PROVIDERS,  # type: ignore[arg-type]
        endpoints={p: fake.base_url for p in PROVIDERS},  # type: ignore[misc]
        min_intervals_s={p: 0.0 for p in PROVIDERS},  # type: ignore[misc]
    )
    async with httpx.AsyncClient() as client:
        started = time.perf_counter()
        for _ in range(ROUNDS):
            together = await search_all(client, settings, {}, PROVIDERS, "nearest neighbor graph")
        at_once = (time.perf_counter() - started) / ROUNDS
        started = time.perf_counter()
        for _ in range(ROUNDS):
            for name in PROVIDERS:
                await search_all(client, settings, {}, [name], "nearest neighbor graph")
        one_by_one = (time.perf_counter() - started) / ROUNDS
    raw = sum(together.counts.values())
    merged = len(together.results)
    print(f"six providers at once   {at_once * 1000:8.0f} ms per search")
    print(f"one provider at a time  {one_by_one * 1000:8.0f} ms per search")
    print(f"ratio one-by-one/at-once: {one_by_one / at_once:.1f}x (PubMed makes two requests)")
    print(f"results: {raw} from the providers, {merged} after merging ({raw - merged} duplicates)")


def main() -> None:
    fake = SlowScholarly().start()
    try:
        asyncio.run(_run(fake))
        page = fake.landing_page("hnsw")
        assert page is not None
        body = page[2]
        n = 500
        started = time.perf_counter()
        for _ in range(n):
            page_meta(body, "text/html")
        print(f"page meta tags: {(time.perf_counter() - started) / n * 1e6:.0f} us per page ({len(body)} bytes)")
    finally:
        fake.stop()


if __name__ == "__main__":
    main()
