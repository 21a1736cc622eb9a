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

Run: python bench/bench_pipeline.py [--delay 1.0] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
# Processes are timed as users run them, with their bytecode cached: a shell that sets
# PYTHONDONTWRITEBYTECODE would make every start compile every changed module again.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import yaml

from pensieve.stages import STAGES
from tests.fakes.model_server import FakeModel, Recorded


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


def one_run(model: FakeModel, env: dict[str, str], number: int) -> tuple[float, float, int]:
    """(wall, critical path, model calls) of one full run in a fresh process."""
    pid = f"bench-{number}"
    subprocess.run(
        [sys.executable, "-m", "pensieve", "new", "How B-trees keep databases fast", "--id", pid],
        check=True,
        capture_output=True,
        env=env,
        cwd=env["PENSIEVE_HOME"],
    )
    model.requests.clear()
    started = time.perf_counter()
    # Run from the home, never from a checkout: `python -m` puts the working directory first
    # on sys.path, so every --code would otherwise run the checkout the bench started in.
    done = subprocess.run(
        [sys.executable, "-m", "pensieve", "run", pid, "--quiet"],
        capture_output=True,
        env=env,
        cwd=env["PENSIEVE_HOME"],
    )
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"run failed ({done.returncode}):\n{done.stderr.decode()[-2000:]}")
    requests = [r for r in model.requests if r.status == 200]
    return wall, critical_path(requests), len(requests)


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
    args = parser.parse_args()
    model = FakeModel().start()
    for stage in STAGES:
        model.delay_s[stage.name] = args.delay
    model.delay_s["summary"] = args.delay
    rows: dict[Path, list[tuple[float, ...]]] = {code: [] for code in args.code}
    try:
        with tempfile.TemporaryDirectory(prefix="pensieve-bench-") as home:
            Path(home, "configs").mkdir()
            Path(home, "configs", "pensieve.yaml").write_text(
                yaml.safe_dump({"llm": {"model": "openai/gpt-4o-mini", "api_base": model.base_url}})
            )
            base = {**os.environ, "PENSIEVE_HOME": home, "PENSIEVE_CONFIG": "", "OPENAI_API_KEY": "sk-bench-not-a-key"}
            header = (("wall s", 8), ("critical s", 12), ("calls", 7), ("litellm s", 11), ("overhead s", 12))
            print(f"{'run':<5}" + "".join(f"{label:>{width}}" for label, width in header) + "   ratio  code")
            for number in range(args.repeat):
                for code in args.code:
                    env = {**base, "PYTHONPATH": str(code.resolve())}
                    litellm = time_import_litellm(env)
                    wall, critical, calls = one_run(model, env, len(args.code) * number + args.code.index(code))
                    overhead = wall - litellm - critical
                    ratio = (wall - litellm) / critical
                    rows[code].append((wall, critical, litellm, overhead, ratio))
                    figures = f"{wall:>8.2f}{critical:>12.2f}{calls:>7}{litellm:>11.2f}{overhead:>12.2f}{ratio:>8.3f}"
                    print(f"{number + 1:<5}{figures}  {code}", flush=True)
    finally:
        model.stop()
    for code, runs in rows.items():
        wall, critical, litellm, overhead, ratio = (statistics.median(column) for column in zip(*runs, strict=True))
        print(
            f"median ({code}): wall {wall:.2f} s, critical path {critical:.2f} s, import litellm {litellm:.2f} s, "
            f"Pensieve's own {overhead:.2f} s; (wall - import litellm) / critical path = {ratio:.3f} (target <= 1.03)"
        )


if __name__ == "__main__":
    main()
