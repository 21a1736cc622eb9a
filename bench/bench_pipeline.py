"""Pensieve's own overhead on a full run: wall time against the model calls it waits for.

The fake model (OpenAI wire format on 127.0.0.1, the same one the tests use) answers every
call after a fixed delay (1.0 s by default), standing in for a provider's latency. Each
repetition runs `pensieve run` in a fresh process on a fresh project, topic capture on,
and prints:

- wall: the process from start to exit;
- critical path: the longest chain of model calls through the stage graph (a stage's
  calls are sequential; a stage starts when those in its `after` are done);
- import litellm: `import litellm` timed inside a fresh interpreter in the same repetition
  (the pipeline cannot send its first request before litellm is importable);
- overhead: wall - import litellm - critical path, Pensieve's own seconds;
- ratio: (wall - import litellm) / critical path. Target: <= 1.03.

With `--sources N` (the run a user gets), the Researcher fetches N real pages (the longest
design documents of ../shared/corpus/rust-rfcs, else synthetic pages) from a local site, so
they are archived as a web fetch archives them, the research notes quote them (`research_notes`:
modelled on the by-hand projects' notes, which the drafts restate), and the drafts cite them
sentence by sentence (about 1,500 words): the evidence check (on by default) aligns
draft_v1.md, draft_v2.md and final.md with the archived pages, the embedding model loaded and every page new to it.
Stage contracts are off in that mode (the scripted articles are not shaped for them; they
cost milliseconds). `--sources 0` (the default) is the run without sources.

Run: python bench/bench_pipeline.py [--delay 1.0] [--repeat 3] [--sources 0]
"""

from __future__ import annotations

import argparse
import html
import json
import os
import random
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
# Processes are timed as users run them, with their bytecode cached: a shell that sets
# PYTHONDONTWRITEBYTECODE would make every start compile every changed module again.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import yaml

from pensieve.stages import STAGES
from pensieve.topics.embedder import PRECISION_ENV, precision
from tests.fakes.http import QuietHandler, close, serve
from tests.fakes.model_server import FakeModel, Recorded, call, text

# `--profile FILE`: the timed run under cProfile (its figures then include the profiler's cost).
PROFILE: list[str] = []


def critical_path(requests: list[Recorded]) -> float:
    """The longest chain of model-call time through the stage graph."""
    own = {stage.name: 0.0 for stage in STAGES}
    for request in requests:
        if request.stage in own:
            own[request.stage] += request.finished - request.started
    finish: dict[str, float] = {}
    for stage in STAGES:  # the table is in dependency order
        finish[stage.name] = own[stage.name] + max((finish[dep] for dep in stage.after), default=0.0)
    extra = sum(r.finished - r.started for r in requests if r.stage not in own)  # e.g. summaries
    return max(finish.values()) + extra


def time_import_litellm(env: dict[str, str]) -> float:
    """`import litellm` alone, timed inside a fresh interpreter (its start and exit left out)."""
    code = "import time; t = time.perf_counter(); import litellm; print(time.perf_counter() - t)"
    done = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, env=env, text=True, cwd=env["PENSIEVE_HOME"]
    )
    return float(done.stdout.strip())


class PageSite:
    """Pages served as HTML on 127.0.0.1, as a web site would serve them."""

    def __init__(self, pages: list[tuple[str, str]]) -> None:
        self.pages = pages
        site = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                number = self.path.strip("/").rsplit("/", 1)[-1]
                if not number.isdigit() or int(number) >= len(site.pages):
                    body, status = b"<h1>Not found</h1>", 404
                else:
                    title, page = site.pages[int(number)]
                    paragraphs = "".join(f"<p>{html.escape(p)}</p>\n" for p in page.split("\n\n") if p.strip())
                    name = html.escape(title)
                    head = f"<!doctype html><html><head><title>{name}</title></head><body>"
                    body = f"{head}<article><h1>{name}</h1>{paragraphs}</article></body></html>".encode()
                    status = 200
                self.send_response(status)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = serve(Handler)

    def url(self, number: int) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/doc/{number}"


def source_pages(count: int) -> list[tuple[str, str]]:
    """The longest RFCs of the corpus (real pages, as a capable run cites), else synthetic."""
    from bench.bench_evidence import long_pages

    return long_pages(count, 60_000)


def _prose(site: PageSite) -> list[list[str]]:
    """Each page's plain sentences (no code, links or tables), the drafts' and notes' material."""
    prose: list[list[str]] = []
    for _title, body in site.pages:
        flat = " ".join(body.split())
        found = [p for p in re.split(r"(?<=[.!?])\s+", flat) if 60 < len(p) < 240 and not set("`[]|#*") & set(p)]
        prose.append(found or [flat[:200]])
    return prose


def cited_lines(site: PageSite, words: int, seed: int) -> list[tuple[int, str]]:
    """(page, sentence) pairs taken from the pages, about `words` words in all."""
    rng = random.Random(seed)
    prose = _prose(site)
    lines: list[tuple[int, str]] = []
    count = 0
    while count < words:
        page = rng.randrange(len(prose))
        lines.append((page, rng.choice(prose[page]).rstrip(".")))
        count += len(lines[-1][1].split()) + 1
    return lines


def cited_article(site: PageSite, words: int, seed: int) -> str:
    """An article of sentences taken from the pages, each citing the page it came from."""
    sections, count = 0, 0
    lines = ["# Design documents in practice", ""]
    for page, sentence in cited_lines(site, words, seed):
        if count >= sections * 300:
            sections += 1
            lines += [f"## Part {sections}", ""]
        line = f"{sentence} [S{page + 1}]."
        count += len(line.split())
        lines += [line, ""]
    return "\n".join(lines)


def research_notes(site: PageSite, draft: list[tuple[int, str]], seed: int) -> str:
    """Notes as a researcher leaves them, findings quoted from the pages with [Sn], which the
    draft then restates (`bench_evidence.modelled_notes`)."""
    from bench.bench_evidence import modelled_notes

    rng = random.Random(seed + 1)
    prose = _prose(site)

    def other() -> tuple[int, str]:
        page = rng.randrange(len(prose))
        return page, rng.choice(prose[page]).rstrip(".")

    findings = sorted(modelled_notes(rng, draft, other))
    return "# Research notes\n\n## Findings\n" + "".join(f"- {s} [S{p + 1}].\n" for p, s in findings)


def script_sources(model: FakeModel, site: PageSite, number: int) -> None:
    """The Researcher fetches every page (one after the other, so S1.. follow the pages), the
    drafts cite them; the other stages answer with the fake's default artifacts."""
    fetches = [call("fetch_url", {"url": site.url(i)}) for i in range(len(site.pages))]
    notes = research_notes(site, cited_lines(site, 1_500, number), number)
    notes += "\n## Sources\n\n- listed by the archive\n"
    write = call("write_project_file", {"filename": "research_notes.md", "content": notes})
    model.script("researcher", *fetches, write)
    model.script("researcher", text("Notes written."))
    draft = cited_article(site, 1_500, number)
    check = "| # | claim | cited id | verdict | evidence |\n|---|---|---|---|---|\n| 1 | x | S1 | supported | - |\n"
    for stage, name, content in (
        ("drafter", "draft_v1.md", draft),
        ("fact_checker", "fact_check.md", check),
        ("reviser", "draft_v2.md", draft + "\n## Revision notes\n\n- Kept every claim as cited.\n"),
        ("polisher", "final.md", draft),
    ):
        model.script(stage, call("write_project_file", {"filename": name, "content": content}), text(f"{stage} done"))


def one_run(model: FakeModel, env: dict[str, str], number: int) -> tuple[float, float, int, float]:
    """(wall, critical path, model calls, CPU seconds) of one full run in a fresh process."""
    pid = f"bench-{number}"
    subprocess.run(
        [sys.executable, "-m", "pensieve", "new", "How B-trees keep databases fast", "--id", pid],
        check=True,
        capture_output=True,
        env=env,
        cwd=env["PENSIEVE_HOME"],
    )
    model.requests.clear()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    # Run from the home, never from a checkout: `python -m` puts the working directory first
    # on sys.path, so every --code would otherwise run the checkout the bench started in.
    done = subprocess.run(
        [sys.executable, *PROFILE, "-m", "pensieve", "run", pid, "--quiet"],
        capture_output=True,
        env=env,
        cwd=env["PENSIEVE_HOME"],
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    if done.returncode != 0:
        raise SystemExit(f"run failed ({done.returncode}):\n{done.stderr.decode()[-2000:]}")
    requests = [r for r in model.requests if r.status == 200]
    return wall, critical_path(requests), len(requests), cpu


def print_timeline(home: Path, number: int) -> None:
    """Seconds from the run's first event to each stage's start and end and each evidence check:
    where the time between model calls goes."""
    events = home / "workspaces" / "default" / "projects" / f"bench-{number}" / "events.jsonl"
    records = [json.loads(line) for line in events.read_text(encoding="utf-8").splitlines() if line.strip()]
    kinds = ("stage_start", "stage_end", "evidence", "fetch", "topic_captured", "run_end")
    shown = [r for r in records if r.get("kind") in kinds]
    if not shown:
        return
    start = datetime.fromisoformat(shown[0]["ts"])
    for record in shown:
        offset = (datetime.fromisoformat(record["ts"]) - start).total_seconds()
        print(f"      {offset:7.2f} s  {record['kind']:<12} {record.get('stage') or ''}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--delay", type=float, default=1.0, help="seconds per model reply")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--code",
        type=Path,
        nargs="+",
        default=[Path(__file__).resolve().parents[1]],
        help="the Pensieve checkout(s) to run; several are run in turn in every repetition",
    )
    parser.add_argument(
        "--sources", type=int, default=0, help="pages the Researcher fetches and the drafts cite (0: none)"
    )
    parser.add_argument("--profile", type=Path, help="write a cProfile of the (last) timed run to this file")
    parser.add_argument(
        "--timeline", action="store_true", help="print when each stage started and ended, and each evidence check"
    )
    args = parser.parse_args()
    if args.profile is not None:
        PROFILE[:] = ["-m", "cProfile", "-o", str(args.profile.resolve())]
    site = PageSite(source_pages(args.sources)) if args.sources else None
    model = FakeModel().start()
    for stage in STAGES:
        model.delay_s[stage.name] = args.delay
    model.delay_s["summary"] = args.delay
    rows: dict[Path, list[tuple[float, ...]]] = {code: [] for code in args.code}
    try:
        with tempfile.TemporaryDirectory(prefix="pensieve-bench-") as home:
            Path(home, "configs").mkdir()
            config: dict[str, object] = {"llm": {"model": "openai/gpt-4o-mini", "api_base": model.base_url}}
            if site is not None:
                config |= {
                    "fetch": {"allow_private_hosts": True, "url_policy": "any"},
                    "limits": {"fetch_url": args.sources + 5},
                    "contracts": {"enabled": False},
                }
            Path(home, "configs", "pensieve.yaml").write_text(yaml.safe_dump(config))
            base = {**os.environ, "PENSIEVE_HOME": home, "PENSIEVE_CONFIG": "", "OPENAI_API_KEY": "sk-bench-not-a-key"}
            header = (("wall s", 8), ("critical s", 12), ("calls", 7), ("litellm s", 11), ("overhead s", 12))
            print(f"{'run':<5}" + "".join(f"{label:>{width}}" for label, width in header) + "   ratio  code")
            for number in range(args.repeat):
                for code in args.code:
                    env = {**base, "PYTHONPATH": str(code.resolve())}
                    litellm = time_import_litellm(env)
                    if site is not None:
                        script_sources(model, site, number)
                    wall, critical, calls, cpu = one_run(model, env, len(args.code) * number + args.code.index(code))
                    overhead = wall - litellm - critical
                    ratio = (wall - litellm) / critical
                    rows[code].append((wall, critical, litellm, overhead, ratio))
                    figures = f"{wall:>8.2f}{critical:>12.2f}{calls:>7}{litellm:>11.2f}{overhead:>12.2f}{ratio:>8.3f}"
                    load = os.getloadavg()[0]
                    print(f"{number + 1:<5}{figures}  cpu {cpu:.2f}s, load {load:.1f}  {code}", flush=True)
                    if args.timeline:
                        print_timeline(Path(home), len(args.code) * number + args.code.index(code))
    finally:
        model.stop()
        close(site.server if site is not None else None)
    if site is not None:
        chars = sum(len(t) for _, t in site.pages)
        print(
            f"with {len(site.pages)} archived sources ({chars:,} characters), evidence on; this checkout runs "
            f"the embedding model in {precision()} ({PRECISION_ENV} chooses; before 2026-12-06, float32)"
        )
    for code, runs in rows.items():
        wall, critical, litellm, overhead, ratio = (statistics.median(column) for column in zip(*runs, strict=True))
        print(
            f"median ({code}): wall {wall:.2f} s, critical path {critical:.2f} s, import litellm {litellm:.2f} s, "
            f"Pensieve's own {overhead:.2f} s; (wall - import litellm) / critical path = {ratio:.3f} (target <= 1.03)"
        )


if __name__ == "__main__":
    main()
