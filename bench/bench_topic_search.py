"""Where a warm search_topics call spends its time, at 2,000 chunks.

Each query is a fresh sentence (a model sees new text every call), and every part is timed
on its own fresh query too, so the parts add up to what a call costs:

- freshness check: `update_index` finding every topic file unchanged;
- query embedding: the model encoding one new query;
- ranking: the dot product and the top-k over the index;
- `search_topic_library` end to end, and the search_topics tool end to end (worker thread,
  sanitising and wrapping the result for the model), on one event loop as in a run.

Target: search_topics within 1.2x of (freshness check + query embedding + ranking).
Run: python bench/bench_topic_search.py [--chunks 2000] [--queries 40]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_topics import _sentence, write_library
from pensieve.config import load_settings
from pensieve.project.events import EventBus
from pensieve.project.workspace import Workspace
from pensieve.stages import BY_NAME
from pensieve.tools.registry import RunResources, ToolContext
from pensieve.tools.topics import search_topics
from pensieve.topics.embedder import get_embedder
from pensieve.topics.index import update_index
from pensieve.topics.search import search_topic_library


def timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chunks", type=int, default=2000)
    parser.add_argument("--queries", type=int, default=40)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pensieve-bench-") as tmp:
        workspace = Workspace(Path(tmp), "search")
        write_library(workspace, args.chunks, seed=2)
        print(f"building a {args.chunks:,}-chunk index (real embeddings)...", flush=True)
        report = update_index(workspace, get_embedder)
        settings = load_settings(Path(tmp), {"PENSIEVE_CONFIG": ""})
        topics = settings.topics
        ctx = ToolContext(
            project=workspace.project("bench"),
            stage=BY_NAME["researcher"],
            settings=settings,
            events=EventBus(),
            environ={},
            resources=RunResources(),
        )
        embedder = get_embedder()
        rng = random.Random(5)
        fresh = iter([_sentence(rng, 8) for _ in range(args.queries * 5 + 10)])
        # One event loop for every tool call, as in a run: asyncio.run per call would time a
        # new loop and a new worker thread each time (2-3 ms), which a run never pays.
        loop = asyncio.new_event_loop()
        search_topic_library(workspace, next(fresh), k=topics.max_results, min_score=topics.min_score)  # warm
        loop.run_until_complete(search_topics(ctx, query=next(fresh)))
        vector = embedder.encode([next(fresh)])[0]
        parts: dict[str, list[float]] = {"check": [], "embed": [], "rank": [], "search": [], "tool": []}

        def search(text: str) -> object:
            return search_topic_library(workspace, text, k=topics.max_results, min_score=topics.min_score)

        def tool(text: str) -> object:
            return loop.run_until_complete(search_topics(ctx, query=text))

        for _ in range(args.queries):  # interleaved, so load on the machine hits every part alike
            texts = [next(fresh) for _ in range(3)]
            parts["check"].append(timed(lambda: update_index(workspace, get_embedder)))
            parts["embed"].append(timed(partial(embedder.encode, [texts[0]])))
            parts["rank"].append(timed(lambda: report.index.query(vector, topics.max_results, topics.min_score)))
            parts["search"].append(timed(partial(search, texts[1])))
            parts["tool"].append(timed(partial(tool, texts[2])))
        loop.close()
        median = {name: statistics.median(times) for name, times in parts.items()}
        floor = median["check"] + median["embed"] + median["rank"]
        print(f"warm search at {report.index.vectors.shape[0]:,} chunks, {args.queries} fresh queries (medians):")
        print(f"  index freshness check {median['check'] * 1e3:7.2f} ms")
        print(f"  query embedding       {median['embed'] * 1e3:7.2f} ms")
        print(f"  ranking               {median['rank'] * 1e3:7.2f} ms")
        print(f"  = sum of the parts    {floor * 1e3:7.2f} ms")
        print(f"  search_topic_library  {median['search'] * 1e3:7.2f} ms  ({median['search'] / floor:.2f}x the parts)")
        print(
            f"  search_topics tool    {median['tool'] * 1e3:7.2f} ms  ({median['tool'] / floor:.2f}x the parts; "
            "target <= 1.2x)"
        )


if __name__ == "__main__":
    main()
