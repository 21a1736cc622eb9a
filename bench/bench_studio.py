"""The studio's figures: the projects list over 1,000 projects against `pensieve list --json`,
the delay from an event written to the log to its arrival on an SSE client, start-up time
and idle memory.

Targets: /api/projects and the projects page within 2x of `pensieve list --json` on the same
workspace; SSE delay under 250 ms. Run: python bench/bench_studio.py [--projects N]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

TOKEN = "bench-token-2f7c"

# Processes are timed as users run them, with their bytecode cached: a shell that sets
# PYTHONDONTWRITEBYTECODE would make every start compile every changed module again.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


def make_workspace(home: Path, count: int) -> None:
    from pensieve.project.listing import new_project
    from pensieve.project.status import Status
    from pensieve.project.workspace import open_workspace
    from pensieve.stages import STAGE_NAMES

    ws = open_workspace(home, "default")
    for n in range(count):
        project = new_project(ws, f"Benchmark article number {n} about vector databases", f"p{n:04d}")
        status = Status.new(project.id, "default")
        for name in STAGE_NAMES[: n % 11]:
            status.stages[name].status = "complete"
            status.usage.add(1000, 200, 0.001)
        status.status = "complete" if n % 11 == 10 else "paused"
        project.status_path.write_text(status.to_json())
        if status.status == "complete":
            write_article(project.dir, n)


def write_article(project_dir: Path, n: int) -> None:
    """A finished project's final.md and evidence.json, as `pensieve evidence` leaves them: the
    projects page reads each article's title and list reads its supported share."""
    from pensieve.evidence.store import save_entry, summarize, text_sha256

    paragraph = "Vector indexes trade recall for speed [S1]. Graph indexes walk neighbours [S2].\n\n"
    text = f"# How vector databases index embeddings, part {n}\n\n" + paragraph * 40
    (project_dir / "final.md").write_text(text, encoding="utf-8")
    verdicts = ["supported"] * 60 + ["weak"] * 12 + ["unsupported"] * 8
    sentences = [{"index": i, "verdict": v, "citations": []} for i, v in enumerate(verdicts)]
    entry = {"artifact_sha256": text_sha256(text), "summary": summarize(sentences), "sentences": sentences}
    save_entry(project_dir, "final.md", entry, {})


def timed(action: object, repeat: int) -> float:
    assert callable(action)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def studio_env(home: str) -> dict[str, str]:
    """The environment of a studio over the scratch PENSIEVE_HOME `home` (this process's too,
    so the bench's own reads see the same home)."""
    os.environ["PENSIEVE_HOME"] = home
    return {
        **os.environ,
        "PENSIEVE_HOME": home,
        "PENSIEVE_CONFIG": "",
        "PENSIEVE_STUDIO_TOKEN": TOKEN,
        "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
    }


def start_studio(env: dict[str, str]) -> tuple[subprocess.Popen[str], str, float, float, float]:
    started = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-m", "pensieve", "studio", "--port", "0"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdout is not None
    url = process.stdout.readline().strip()
    printed = time.perf_counter() - started
    base = url.split("/?")[0]
    httpx.get(base + "/static/studio.css", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60).raise_for_status()
    answered = time.perf_counter() - started
    time.sleep(0.5)
    return process, base, printed, answered, rss_mib(process.pid)


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def sse_delays(base: str, events: Path, samples: int) -> list[float]:
    arrivals: dict[int, float] = {}
    ready = threading.Event()

    def listen() -> None:
        with (
            httpx.Client(timeout=None) as client,
            client.stream(
                "GET", base + "/api/projects/p0000/events", headers={"Authorization": f"Bearer {TOKEN}"}
            ) as response,
        ):
            ready.set()
            for line in response.iter_lines():
                if line.startswith("data:"):
                    n = int(json.loads(line[5:])["n"])
                    arrivals[n] = time.perf_counter()
                    if n == samples - 1:
                        return

    thread = threading.Thread(target=listen, daemon=True)
    thread.start()
    ready.wait(10)
    time.sleep(0.3)
    written: dict[int, float] = {}
    for n in range(samples):
        with events.open("a") as handle:
            written[n] = time.perf_counter()
            handle.write(json.dumps({"kind": "note", "message": "bench", "n": n}) + "\n")
        time.sleep(0.137)  # not a multiple of the poll interval
    thread.join(timeout=10)
    return [arrivals[n] - written[n] for n in range(samples) if n in arrivals]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--projects", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--sse-samples", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        env = studio_env(tmp)
        make_workspace(home, args.projects)
        cli = timed(
            lambda: subprocess.run(
                [sys.executable, "-m", "pensieve", "list", "--json"], check=True, capture_output=True, env=env
            ),
            args.repeat,
        )
        process, base, printed, answered, idle_before = start_studio(env)
        try:
            auth = {"Authorization": f"Bearer {TOKEN}"}
            with httpx.Client(headers=auth, timeout=60) as client:
                listed = client.get(base + "/api/projects").json()
                assert len(listed) == args.projects
                api = timed(lambda: client.get(base + "/api/projects").raise_for_status(), args.repeat)
                page = timed(lambda: client.get(base + "/").raise_for_status(), args.repeat)
                detail = timed(lambda: client.get(base + "/api/projects?detail=1").raise_for_status(), args.repeat)
            idle = rss_mib(process.pid)
            delays = sse_delays(base, home / "workspaces/default/projects/p0000/events.jsonl", args.sse_samples)
        finally:
            process.send_signal(signal.SIGINT)
            process.wait(timeout=20)
    print(f"projects: {args.projects}")
    print(f"{'what':<40}{'median s':>10}{'x list --json':>15}")
    print(f"{'pensieve list --json (whole process)':<40}{cli:>10.3f}{1.0:>15.2f}")
    for label, value in (
        ("GET /api/projects", api),
        ("GET / (projects page)", page),
        ("GET /api/projects?detail=1 (live page)", detail),
    ):
        print(f"{label:<40}{value:>10.3f}{value / cli:>15.2f}")
    print(f"studio start-up: address printed after {printed:.3f} s, first answer after {answered:.3f} s")
    print(f"studio memory (RSS): idle after start {idle_before:.1f} MiB, after serving the lists {idle:.1f} MiB")
    if delays:
        ms = sorted(d * 1000 for d in delays)
        print(
            f"SSE delay, event written -> received ({len(ms)} events): median {statistics.median(ms):.0f} ms, "
            f"p95 {ms[int(0.95 * (len(ms) - 1))]:.0f} ms, max {ms[-1]:.0f} ms (target < 250 ms)"
        )


if __name__ == "__main__":
    main()
