"""Start-up cost of the read commands, as a ratio to a bare Python interpreter.

`pensieve list`, `status` and `--help` must stay instant: they never import litellm or
torch. Run: python bench/bench_cli_startup.py [--repeat N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

# Processes are timed as users run them, with their bytecode cached: a shell that sets
# PYTHONDONTWRITEBYTECODE would make every start compile every changed module again.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


def best_of(cmd: list[str], repeat: int, env: dict[str, str]) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True, env=env)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "PENSIEVE_HOME": home, "PENSIEVE_CONFIG": ""}
        subprocess.run(
            [sys.executable, "-m", "pensieve", "new", "Benchmark brief", "--id", "b"],
            check=True,
            capture_output=True,
            env=env,
        )
        bare = best_of([sys.executable, "-c", "pass"], args.repeat, env)
        litellm = best_of(
            [sys.executable, "-c", "import litellm"],
            max(2, args.repeat // 3),
            {**env, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
        )
        print(f"{'command':<28}{'median s':>10}{'x bare python':>15}")
        print(f"{'python -c pass':<28}{bare:>10.3f}{1.0:>15.1f}")
        for label, extra in (
            ("pensieve --help", ["--help"]),
            ("pensieve list", ["list"]),
            ("pensieve list --json", ["list", "--json"]),
            ("pensieve status b", ["status", "b"]),
        ):
            seconds = best_of([sys.executable, "-m", "pensieve", *extra], args.repeat, env)
            print(f"{label:<28}{seconds:>10.3f}{seconds / bare:>15.1f}")
        print(f"{'(import litellm, avoided)':<28}{litellm:>10.3f}{litellm / bare:>15.1f}")


if __name__ == "__main__":
    main()
