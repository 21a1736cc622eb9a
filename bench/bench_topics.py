"""Topic search benchmark: index build time per 1,000 chunks, warm query latency at 10,000.

Run from the repository root:  python bench/bench_topics.py  [--build-chunks N] [--query-chunks N]

Both figures are also printed as ratios to a plain numpy dot product (matrix @ vector)
over the same matrix of chunk vectors: the floor any search over these vectors pays.
The libraries are synthetic (random English words in topic files with four sections), but
go through the real path: files on disk, chunking, the real model, the index on disk.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from pensieve.project.workspace import Workspace
from pensieve.topics.chunking import chunk_topic
from pensieve.topics.embedder import get_embedder
from pensieve.topics.index import update_index
from pensieve.topics.library import parse_topic, render_topic
from pensieve.topics.search import search_topic_library

WORDS = [
    "system",
    "data",
    "model",
    "memory",
    "storage",
    "network",
    "protocol",
    "server",
    "client",
    "request",
    "latency",
    "cache",
    "index",
    "query",
    "tree",
    "page",
    "disk",
    "log",
    "replica",
    "leader",
    "vote",
    "term",
    "commit",
    "batch",
    "stream",
    "event",
    "queue",
    "worker",
    "thread",
    "lock",
    "file",
    "river",
    "mountain",
    "forest",
    "ocean",
    "climate",
    "soil",
    "plant",
    "animal",
    "cell",
    "protein",
    "gene",
    "enzyme",
    "light",
    "energy",
    "heat",
    "water",
    "market",
    "price",
    "trade",
    "bank",
    "money",
    "policy",
    "law",
    "court",
    "vote",
    "city",
    "history",
    "empire",
    "war",
    "treaty",
    "king",
    "revolution",
    "music",
    "song",
    "rhythm",
    "painting",
    "colour",
    "novel",
    "poem",
    "theatre",
    "film",
    "camera",
    "sport",
    "team",
    "race",
    "training",
    "coach",
    "bread",
    "coffee",
    "wine",
    "cheese",
    "recipe",
    "oven",
    "flavour",
    "kitchen",
    "garden",
    "flower",
    "seed",
    "harvest",
    "farm",
    "machine",
    "engine",
]
CHUNKS_PER_TOPIC = 5  # the title+summary chunk and four one-paragraph sections


def _sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def write_library(workspace: Workspace, chunks: int, seed: int) -> None:
    rng = random.Random(seed)
    workspace.topics_dir.mkdir(parents=True, exist_ok=True)
    for number in range(chunks // CHUNKS_PER_TOPIC):
        sections = [
            f"## {_sentence(rng, 3)[:-1]}\n\n" + " ".join(_sentence(rng, rng.randint(10, 16)) for _ in range(6))
            for _ in range(CHUNKS_PER_TOPIC - 1)
        ]
        text = render_topic(
            f"Topic {number}: {_sentence(rng, 4)[:-1]}", "\n\n".join(sections), summary=_sentence(rng, 14)
        )
        (workspace.topics_dir / f"topic-{number:05d}.md").write_text(text, encoding="utf-8")


def median_seconds(action: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def dot_seconds(vectors: np.ndarray, repeat: int = 200) -> float:
    query = vectors[0].copy()
    return median_seconds(lambda: vectors @ query, repeat)


def bench_build(root: Path, chunks: int) -> None:
    workspace = Workspace(root, "build")
    write_library(workspace, chunks, seed=1)
    embedder = get_embedder()  # loading the model is not part of building the index
    embedder.encode(["warm up"])
    started = time.perf_counter()
    report = update_index(workspace, lambda: embedder)
    elapsed = time.perf_counter() - started
    n = report.chunks_embedded
    per_1000 = elapsed / n * 1000
    dot = dot_seconds(report.index.vectors)
    check = chunk_topic(parse_topic("x", next(workspace.topics_dir.iterdir()).read_text()))
    print(f"index build: {n:,} chunks ({len(report.embedded):,} files) in {elapsed:.2f} s")
    print(f"  = {per_1000:.2f} s per 1,000 chunks  (chunks per file: {len(check)})")
    print(f"  numpy dot over the same {report.index.vectors.shape} matrix: {dot * 1e6:.1f} us")
    print(f"  ratio build / dot: {elapsed / dot:,.0f}x")


def bench_query(root: Path, chunks: int, queries: int) -> None:
    workspace = Workspace(root, "query")
    write_library(workspace, chunks, seed=2)
    print(f"building a {chunks:,}-chunk index for the query benchmark (real embeddings)...", flush=True)
    started = time.perf_counter()
    report = update_index(workspace, get_embedder)
    print(f"  built in {time.perf_counter() - started:.1f} s", flush=True)
    vectors = report.index.vectors
    rng = random.Random(3)
    texts = [_sentence(rng, 8) for _ in range(queries)]
    search_topic_library(workspace, texts[0], k=5, min_score=0.3)  # warm: model and index in memory
    embedder = get_embedder()

    def run(kind: str) -> list[float]:
        times = []
        for text in texts:
            started = time.perf_counter()
            if kind == "search":
                search_topic_library(workspace, text, k=5, min_score=0.3)
            elif kind == "encode":
                embedder.encode([text])
            elif kind == "rank":
                report.index.query(vectors[0], 5, 0.3)
            elif kind == "update":
                update_index(workspace, get_embedder)
            times.append(time.perf_counter() - started)
        return times

    search = run("search")
    parts = {kind: statistics.median(run(kind)) for kind in ("update", "encode", "rank")}
    dot = dot_seconds(vectors)
    median = statistics.median(search)
    p95 = sorted(search)[int(0.95 * (len(search) - 1))]
    print(f"warm query at {vectors.shape[0]:,} chunks ({len(report.index.files):,} files), {queries} queries:")
    print(f"  search_topics end to end: median {median * 1e3:.1f} ms, p95 {p95 * 1e3:.1f} ms")
    print(
        f"  of which: index up-to-date check {parts['update'] * 1e3:.1f} ms, "
        f"query embedding {parts['encode'] * 1e3:.1f} ms, ranking {parts['rank'] * 1e3:.2f} ms"
    )
    print(f"  numpy dot over the same {vectors.shape} matrix: {dot * 1e6:.1f} us")
    print(f"  ratio search / dot: {median / dot:,.0f}x;  ranking / dot: {parts['rank'] / dot:.1f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build-chunks", type=int, default=1000)
    parser.add_argument("--query-chunks", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pensieve-bench-") as tmp:
        bench_build(Path(tmp), args.build_chunks)
        bench_query(Path(tmp), args.query_chunks, args.queries)


if __name__ == "__main__":
    main()
