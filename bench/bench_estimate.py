"""`pensieve estimate` against what runs actually used, per stage.

1. The fake pipeline: the fake model (OpenAI wire format on 127.0.0.1, as in the tests)
   counting usage from each request and reply (4 characters a token, the by-hand relay's
   rule). Three projects run in turn in one workspace; each is estimated just before its
   run, so the first has no finished project to learn from, the second one, the third two.
2. Project directories given as arguments (e.g. the by-hand runs of a capable writer,
   .../home/workspaces/<ws>/projects/<id>/, whose status.json records per-stage usage):
   each is estimated as before its first run (only its brief), once with no history and
   once with the other given projects as history (leave one out), with its own home's
   configuration, and compared with the usage it recorded.

A stage is "in" when its actual total tokens (input + output) lie within the estimate's
low-high range. Target: >= 8 of 10 stages in, and no range wider than 3x (high <= 3 x low).

A bare project directory (bench/byhand/<name>/, kept without its home) is copied into a
scratch home with --config, by default the by-hand runs' configuration.

Run: python bench/bench_estimate.py [--no-fake] [--config FILE] [PROJECT_DIR ...]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import yaml

from pensieve.config import Settings, load_settings
from pensieve.estimate import Estimate, estimate_project
from pensieve.project.status import load_status
from pensieve.project.workspace import Project, Workspace
from tests.fakes.model_server import FakeModel

BRIEFS = (
    "How B-trees keep databases fast",
    "Why sourdough starters need regular feeding",
    "How vector databases index embeddings for similarity search",
)


def compare(label: str, estimate: Estimate, project: Project) -> tuple[int, int, float]:
    """Print estimate vs actual per stage; returns (stages in range, stages, widest high/low)."""
    status = load_status(project.status_path, keep_copy=False)
    print(f"\n{label}: {project.id} (history: {', '.join(estimate.history) or 'none'})")
    print(f"  {'stage':<20}{'low':>10}{'expected':>10}{'high':>10}{'actual':>10}{'high/low':>9}  in range")
    hits = counted = 0
    widest = 0.0
    for stage in estimate.stages:
        usage = status.stages[stage.stage].usage
        if usage.calls == 0:
            continue
        total = stage.total_tokens
        actual = usage.total_tokens
        inside = total.contains(actual)
        spread = total.high / total.low if total.low else float("inf")
        widest = max(widest, spread)
        hits += inside
        counted += 1
        print(
            f"  {stage.stage:<20}{total.low:>10,.0f}{total.expected:>10,.0f}{total.high:>10,.0f}{actual:>10,}"
            f"{spread:>9.2f}  {'yes' if inside else 'NO'}"
        )
    est, actual_total = estimate.total_tokens, status.usage.total_tokens
    print(
        f"  total: estimate {est.low:,.0f}-{est.high:,.0f} (expected {est.expected:,.0f}), actual {actual_total:,}; "
        f"{hits} of {counted} stages in range, widest range {widest:.2f}x"
    )
    return hits, counted, widest


def fake_pipeline() -> list[tuple[int, int, float]]:
    model = FakeModel(count_tokens=True).start()
    results = []
    try:
        with tempfile.TemporaryDirectory(prefix="pensieve-bench-estimate-") as home:
            Path(home, "configs").mkdir()
            config = {
                "llm": {"model": "openai/gpt-4o-mini", "api_base": model.base_url},
                "topics": {"capture": False},
            }
            Path(home, "configs", "pensieve.yaml").write_text(yaml.safe_dump(config))
            env = {**os.environ, "PENSIEVE_HOME": home, "PENSIEVE_CONFIG": "", "OPENAI_API_KEY": "sk-bench-not-a-key"}
            settings = load_settings(Path(home), env)
            workspace = Workspace(Path(home), "default")
            for number, brief in enumerate(BRIEFS):
                pid = f"fake-{number + 1}"
                subprocess.run(
                    [sys.executable, "-m", "pensieve", "new", brief, "--id", pid], check=True, env=env, cwd=home
                )
                project = workspace.project(pid)
                estimate = estimate_project(project, settings, environ=env)
                done = subprocess.run(
                    [sys.executable, "-m", "pensieve", "run", pid, "--quiet"], capture_output=True, env=env, cwd=home
                )
                if done.returncode != 0:
                    raise SystemExit(f"run failed ({done.returncode}):\n{done.stderr.decode()[-2000:]}")
                results.append(compare(f"fake pipeline, run {number + 1}", estimate, project))
    finally:
        model.stop()
    return results


# The configuration of the by-hand runs (../shared/tools/model-by-hand/README.md), for a
# project directory kept without its home (bench/byhand/<name>/): search on, 1,200 words.
BY_HAND_CONFIG = {
    "llm": {"model": "openai/by-hand", "api_base": "http://127.0.0.1:9/v1", "context_window": 128000},
    "search": {"provider": "searxng", "endpoints": {"searxng": "http://127.0.0.1:9"}},
    "fetch": {"allow_private_hosts": True},
    "article": {"target_words": 1200, "audience": "working Rust programmers"},
}


def project_at(directory: Path, scratch: Path, config: Path | None) -> tuple[Project, Settings]:
    """The project in a directory: inside its home (<home>/workspaces/<ws>/projects/<id>,
    the home's configuration), or a bare project directory (bench/byhand/<name>/), copied
    into a scratch home with `config` (default: the by-hand runs' configuration)."""
    directory = directory.resolve()
    if directory.parent.name == "projects" and (directory.parents[3] / "workspaces").is_dir():
        home = directory.parents[3]
        workspace = directory.parents[1].name
    else:
        home = scratch / directory.name
        shutil.copytree(directory, home / "workspaces" / "default" / "projects" / directory.name)
        (home / "configs").mkdir()
        text = config.read_text(encoding="utf-8") if config else yaml.safe_dump(BY_HAND_CONFIG)
        (home / "configs" / "pensieve.yaml").write_text(text, encoding="utf-8")
        workspace = "default"
    env = {**os.environ, "PENSIEVE_HOME": str(home), "PENSIEVE_CONFIG": ""}
    return Project(Workspace(home, workspace), directory.name), load_settings(home, env)


def given_projects(directories: list[Path], config: Path | None) -> list[tuple[int, int, float]]:
    scratch = Path(tempfile.mkdtemp(prefix="pensieve-bench-estimate-given-"))
    try:
        return _compare_given([project_at(d, scratch, config) for d in directories])
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _compare_given(found: list[tuple[Project, Settings]]) -> list[tuple[int, int, float]]:
    results = []
    for project, settings in found:
        status = load_status(project.status_path, keep_copy=False)
        if status.status != "complete":
            print(f"\n{project.id}: {status.status}, not complete; compared on its complete stages only")
        others = [p for p, _ in found if p.id != project.id]
        alone = estimate_project(project, settings, history_from=[], fresh=True)
        results.append(compare("given project, no history", alone, project))
        if others:
            learned = estimate_project(project, settings, history_from=others, fresh=True)
            results.append(compare("given project, the others as history", learned, project))
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("projects", nargs="*", type=Path, help="project directories to compare with")
    parser.add_argument("--no-fake", action="store_true", help="skip the fake pipeline")
    parser.add_argument(
        "--config", type=Path, help="configuration for bare project directories (default: the by-hand runs')"
    )
    args = parser.parse_args()
    results = [] if args.no_fake else fake_pipeline()
    if args.projects:
        results += given_projects(args.projects, args.config)
    print("\nsummary (target: >= 8 of 10 stages in range, high <= 3 x low):")
    for number, (hits, counted, widest) in enumerate(results, 1):
        print(f"  comparison {number}: {hits}/{counted} in range, widest {widest:.2f}x")


if __name__ == "__main__":
    main()
