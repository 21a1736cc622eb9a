"""`pensieve list --json` and the list_projects tool over a large workspace.

Builds workspaces of 1,000 and 10,000 projects (a mix: pending, paused, complete with a
final.md, `running` under a live process, `running` left by a dead one, and an unreadable
status.json), then prints, as medians of fresh processes:

- `pensieve list --json` against `python -c "import typer, yaml"` (the floor of any Typer
  command that reads a YAML configuration), as a ratio; targets: <= 2x at 1,000 projects,
  < 1 s at 10,000;
- the list_projects tool in-process (the rows the Consistency Checker gets).

The home has a configuration file, which every `list` checks (by identity once validated).

The command's output is checked (every project listed, live and dead runs told apart).
Run: python bench/bench_list.py [--sizes 1000 10000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
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

from pensieve.config import load_settings
from pensieve.project.events import EventBus
from pensieve.project.listing import new_project
from pensieve.project.status import load_status
from pensieve.project.workspace import LOCK_FILE, STATUS_FILE, Workspace
from pensieve.stages import BY_NAME, STAGE_NAMES
from pensieve.tools.registry import RunResources, ToolContext
from pensieve.tools.workspace import list_projects
from tests.fakes.artifacts import artifact

# One in KINDS[i % len(KINDS)]: what each project of the workspace is.
KINDS = ("pending", "paused", "complete", "complete", "complete", "live", "dead", "unreadable")
EXPECTED = {"pending": "pending", "paused": "paused", "complete": "complete", "live": "running"}
EXPECTED |= {"dead": "paused", "unreadable": "unreadable"}
CONFIG = "llm:\n  model: openai/gpt-4o-mini\n  timeout_s: 120\nsearch:\n  provider: searxng\n  endpoint: http://127.0.0.1:8888\n"


def build_workspace(home: Path, size: int, live_pid: int) -> Workspace:
    workspace = Workspace(home, f"w{size}")
    template = new_project(workspace, "How B-trees keep databases fast\n\nFor engineers.", "template")
    status = load_status(template.status_path)
    done = {name: status.model_copy(deep=True) for name in ("paused", "complete", "live", "dead")}
    for position, name in enumerate(STAGE_NAMES):
        for kind, copy in done.items():
            if kind == "complete" or position < 4:
                copy.stages[name].status = "complete"
    done["paused"].status = "paused"
    done["complete"].status = "complete"
    done["live"].status = done["dead"].status = "running"
    final = artifact("polisher", "B-trees")
    for number in range(size):
        kind = KINDS[number % len(KINDS)]
        pid = f"p{number:05d}"
        target = workspace.projects_dir / pid
        shutil.copytree(template.dir, target)
        if kind in done:
            copy = done[kind].model_copy(update={"id": pid})
            (target / STATUS_FILE).write_text(copy.to_json(), encoding="utf-8")
        if kind == "complete":
            (target / BY_NAME["polisher"].writes).write_text(final, encoding="utf-8")
        elif kind == "live":
            (target / LOCK_FILE).write_text(str(live_pid), encoding="ascii")
        elif kind == "dead":
            (target / LOCK_FILE).write_text("999999999", encoding="ascii")
        elif kind == "unreadable":
            (target / STATUS_FILE).write_text("{not json", encoding="utf-8")
    shutil.rmtree(template.dir)
    return workspace


def median_run(cmd: list[str], env: dict[str, str], repeat: int) -> tuple[float, bytes]:
    times, output = [], b""
    for _ in range(repeat):
        started = time.perf_counter()
        # From the home, never a checkout: `python -m` puts the working directory first on
        # sys.path, so every --code would otherwise run the checkout the bench started in.
        output = subprocess.run(cmd, check=True, capture_output=True, env=env, cwd=env["PENSIEVE_HOME"]).stdout
        times.append(time.perf_counter() - started)
    return statistics.median(times), output


def check_rows(output: bytes, size: int) -> None:
    rows = json.loads(output)
    assert len(rows) == size, (len(rows), size)
    for row in rows:
        kind = KINDS[int(row["id"][1:]) % len(KINDS)]
        assert row["status"] == EXPECTED[kind], (row, kind)


def tool_seconds(workspace: Workspace, repeat: int) -> float:
    ctx = ToolContext(
        project=workspace.project("p00000"),
        stage=BY_NAME["consistency_checker"],
        settings=load_settings(),
        events=EventBus(),
        environ={},
        resources=RunResources(),
    )
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        asyncio.run(list_projects(ctx))
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--code",
        type=Path,
        nargs="+",
        default=[Path(__file__).resolve().parents[1]],
        help="the Pensieve checkout(s) whose CLI to run, in turn (list_projects is always this one's)",
    )
    args = parser.parse_args()
    # A live process that holds no lock of ours: the `running` projects' owner.
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    try:
        with tempfile.TemporaryDirectory(prefix="pensieve-bench-") as tmp:
            home = Path(tmp)
            base = {**os.environ, "PENSIEVE_HOME": str(home), "PENSIEVE_CONFIG": ""}
            os.environ.update(PENSIEVE_HOME=str(home), PENSIEVE_CONFIG="")
            # A configuration to validate, as users have one (validated once, then by identity).
            (home / "configs").mkdir()
            (home / "configs" / "pensieve.yaml").write_text(CONFIG, encoding="utf-8")
            print(f"medians of {args.repeat} fresh processes; the floor is python -c 'import typer, yaml'")
            print(f"{'projects':>9}{'floor s':>9}{'list --json s':>15}{'x floor':>9}{'ms/project':>12}  code")
            for size in args.sizes:
                workspace = build_workspace(home, size, sleeper.pid)
                cmd = [sys.executable, "-m", "pensieve", "list", "--json", "--workspace", workspace.name]
                for code in args.code:  # the first run of each checkout validates the configuration
                    median_run(cmd, {**base, "PYTHONPATH": str(code.resolve())}, 1)
                floors: list[float] = []
                times: dict[Path, list[float]] = {code: [] for code in args.code}
                for _ in range(args.repeat):  # interleaved: the machine's load hits all alike
                    floors.append(median_run([sys.executable, "-c", "import typer, yaml"], base, 1)[0])
                    for code in args.code:
                        seconds, output = median_run(cmd, {**base, "PYTHONPATH": str(code.resolve())}, 1)
                        check_rows(output, size)
                        times[code].append(seconds)
                floor = statistics.median(floors)
                for code, runs in times.items():
                    seconds = statistics.median(runs)
                    print(
                        f"{size:>9,}{floor:>9.3f}{seconds:>15.3f}{seconds / floor:>9.2f}"
                        f"{seconds / size * 1e3:>12.3f}  {code}",
                        flush=True,
                    )
                print(f"{'':>9}list_projects tool in-process: {tool_seconds(workspace, args.repeat):.3f} s", flush=True)
    finally:
        sleeper.kill()
        sleeper.wait()


if __name__ == "__main__":
    main()
