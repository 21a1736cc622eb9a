"""How much the pipeline's concurrency saves: the three reviewers run at once.

Each model reply from the fake model (OpenAI wire format on 127.0.0.1, the same one the
tests use) takes a fixed delay, standing in for a real provider's latency. The script
runs the whole pipeline through the CLI and prints, for the reviewer phase, the wall time
against the sum of the three reviewers' times (the time a sequential pipeline would
need).

Run: python bench/bench_concurrency.py [--delay 0.3]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import yaml
from typer.testing import CliRunner

from pensieve.cli.main import app
from tests.fakes.model_server import FakeModel

REVIEWERS = ("content_reviewer", "fact_checker", "style_reviewer")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--delay", type=float, default=0.3, help="seconds per model reply")
    args = parser.parse_args()
    model = FakeModel().start()
    try:
        for stage in (
            "refiner",
            "researcher",
            "outliner",
            "drafter",
            *REVIEWERS,
            "reviser",
            "polisher",
            "consistency_checker",
            "summary",
        ):
            model.delay_s[stage] = args.delay
        with tempfile.TemporaryDirectory() as home:
            Path(home, "configs").mkdir()
            Path(home, "configs", "pensieve.yaml").write_text(
                yaml.safe_dump(
                    {
                        "llm": {"model": "openai/gpt-4o-mini", "api_base": model.base_url},
                        "topics": {"capture": False},
                    }
                )
            )
            os.environ.update(PENSIEVE_HOME=home, OPENAI_API_KEY="sk-bench-not-a-key", PENSIEVE_CONFIG="")
            runner = CliRunner()
            pid = runner.invoke(app, ["new", "Benchmark brief"]).stdout.strip()
            result = runner.invoke(app, ["run", pid, "--quiet"])
            assert result.exit_code == 0, result.stderr
        spans = {
            stage: (min(r.started for r in model.for_stage(stage)), max(r.finished for r in model.for_stage(stage)))
            for stage in REVIEWERS
        }
        wall = max(end for _, end in spans.values()) - min(start for start, _ in spans.values())
        sequential = sum(end - start for start, end in spans.values())
        print(
            f"reviewer phase: {wall:.2f} s wall; sequential would take {sequential:.2f} s; "
            f"ratio {sequential / wall:.2f}x"
        )
    finally:
        model.stop()


if __name__ == "__main__":
    main()
