"""The studio's live feeds against a long event log: its memory and the latency of other
requests while N feeds open at once, each as the project page opens one (the last 150 lines
of the log, then following it).

Each project's events.jsonl is --log-mb MB (hard links of one file, to spare the disk); the
feeds spread over projects of at most MAX_FEEDS_PER_PROJECT feeds (past it a feed is
refused with 429, which this bench also checks). Figures: the studio's resident memory
before and at its peak (sampled), the time until every feed has its 150 lines, and the
latency of GET /api/projects meanwhile, as a ratio of the same request with no feed open.

Run: python bench/bench_studio_feeds.py [--feeds 1,10,50] [--log-mb 51]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.bench_studio import TOKEN, rss_mib, start_studio, studio_env

AUTH = {"Authorization": f"Bearer {TOKEN}"}
TAIL = 150  # what the project page asks for: ?since=<lines - 150>


def make_projects(home: Path, count: int, log_mb: int) -> int:
    """`count` projects sharing one log of `log_mb` MB; returns its number of lines."""
    from pensieve.project.listing import new_project
    from pensieve.project.workspace import open_workspace

    ws = open_workspace(home, "default")
    line = json.dumps({"kind": "note", "message": "bench " + "x" * 180}) + "\n"
    lines = log_mb * (1 << 20) // len(line) // 1000 * 1000
    first: Path | None = None
    for n in range(count):
        project = new_project(ws, f"Feed benchmark article {n}", f"f{n:03d}")
        if first is None:
            with project.events_path.open("w") as handle:
                for _ in range(lines // 1000):
                    handle.write(line * 1000)
            first = project.events_path
        else:
            project.events_path.unlink(missing_ok=True)
            os.link(first, project.events_path)
    return lines


def feed(base: str, project_id: str, since: int, got: list[float], failed: list[int], stop: threading.Event) -> None:
    started = time.perf_counter()
    seen = 0
    try:
        with (
            httpx.Client(timeout=None, headers=AUTH) as client,
            client.stream("GET", f"{base}/api/projects/{project_id}/events?since={since}") as response,
        ):
            if response.status_code != 200:
                failed.append(response.status_code)
                return
            for text in response.iter_lines():
                if text.startswith("data:"):
                    seen += 1
                    if seen == TAIL:
                        got.append(time.perf_counter() - started)
                        stop.wait()
                        return
    except httpx.HTTPError:
        failed.append(0)


def latencies(base: str, until: threading.Event, samples: list[float], pid: int, peak: list[float]) -> None:
    with httpx.Client(timeout=120, headers=AUTH) as client:
        while not until.is_set():
            started = time.perf_counter()
            client.get(base + "/api/projects").raise_for_status()
            samples.append(time.perf_counter() - started)
            peak.append(rss_mib(pid))
            time.sleep(0.05)


def measure(base: str, pid: int, feeds: int, per_project: int, lines: int) -> dict[str, float]:
    got: list[float] = []
    failed: list[int] = []
    samples: list[float] = []
    peak = [rss_mib(pid)]
    stop, done = threading.Event(), threading.Event()
    sampler = threading.Thread(target=latencies, args=(base, done, samples, pid, peak), daemon=True)
    sampler.start()
    threads = [
        threading.Thread(
            target=feed, args=(base, f"f{n // per_project:03d}", lines - TAIL, got, failed, stop), daemon=True
        )
        for n in range(feeds)
    ]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    deadline = started + 600
    while len(got) + len(failed) < feeds and time.perf_counter() < deadline:
        time.sleep(0.05)
    all_in = time.perf_counter() - started
    done.set()
    sampler.join(timeout=120)
    stop.set()
    for thread in threads:
        thread.join(timeout=30)
    time.sleep(0.5)  # the closed feeds end on the studio's side
    return {
        "served": len(got),
        "failed": len(failed),
        "all_in": all_in,
        "peak_rss": max(peak),
        "median": statistics.median(samples) if samples else float("nan"),
        "max": max(samples) if samples else float("nan"),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--feeds", default="1,10,50")
    parser.add_argument("--log-mb", type=int, default=51)
    parser.add_argument("--per-project", type=int, default=0, help="feeds per project (default: the studio's cap)")
    args = parser.parse_args()
    try:
        from pensieve.studio.runs import MAX_FEEDS_PER_PROJECT
    except ImportError:  # an older tree without the cap
        MAX_FEEDS_PER_PROJECT = 8
    per_project = args.per_project or MAX_FEEDS_PER_PROJECT
    counts = [int(n) for n in args.feeds.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        env = studio_env(tmp)
        lines = make_projects(home, -(-max(counts) // per_project), args.log_mb)
        process, base, _, _, idle = start_studio(env)
        try:
            with httpx.Client(headers=AUTH, timeout=60) as client:
                for _ in range(5):  # warm-up: the first answers import and cache
                    client.get(base + "/api/projects").raise_for_status()
                quiet = [0.0] * 20
                for i in range(20):
                    started = time.perf_counter()
                    client.get(base + "/api/projects").raise_for_status()
                    quiet[i] = time.perf_counter() - started
                    time.sleep(0.05)  # paced as during the feeds
            baseline = statistics.median(quiet)
            rows = [(n, measure(base, process.pid, n, per_project, lines)) for n in counts]
            after = rss_mib(process.pid)
            over_cap = None
            if per_project == MAX_FEEDS_PER_PROJECT:
                over = measure(base, process.pid, MAX_FEEDS_PER_PROJECT + 2, MAX_FEEDS_PER_PROJECT + 2, lines)
                over_cap = (int(over["served"]), int(over["failed"]))
        finally:
            process.send_signal(signal.SIGINT)
            process.wait(timeout=30)
    print(f"log: {args.log_mb} MB ({lines:,} lines) per project; {per_project} feeds per project at most")
    print(f"GET /api/projects with no feed open: median {baseline * 1000:.1f} ms; studio idle RSS {idle:.0f} MiB")
    header = f"{'feeds':>6}{'served':>8}{'all in s':>10}{'peak RSS MiB':>14}{'x idle':>8}"
    print(header + f"{'GET median ms':>15}{'x quiet':>9}{'GET max ms':>12}{'x quiet':>9}")
    for n, r in rows:
        print(
            f"{n:>6}{int(r['served']):>8}{r['all_in']:>10.2f}{r['peak_rss']:>14.0f}{r['peak_rss'] / idle:>8.2f}"
            f"{r['median'] * 1000:>15.1f}{r['median'] / baseline:>9.1f}{r['max'] * 1000:>12.1f}"
            f"{r['max'] / baseline:>9.1f}"
        )
    print(f"studio RSS after the feeds closed: {after:.0f} MiB")
    if over_cap is not None:
        served, refused = over_cap
        print(f"{MAX_FEEDS_PER_PROJECT + 2} feeds on one project: {served} served, {refused} refused (429)")


if __name__ == "__main__":
    main()
