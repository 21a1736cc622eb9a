"""SIGKILL and SIGINT against real `pensieve run` processes and the fake model.

The kill test starts runs as child processes, kills them with SIGKILL at seeded random
moments, then checks what a crash may leave behind (status.json always parses, every
artifact complete or absent, temporary files invisible) and that the next run completes
without paying again for any stage that had finished before the kill.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

import pytest

from pensieve.project.listing import summarize_projects
from pensieve.project.status import load_status
from pensieve.project.workspace import STAGING_DIR, TMP_PREFIX, Workspace
from pensieve.run.pipeline import COMMIT_MARKER
from pensieve.stages import BY_NAME, STAGE_NAMES, STAGES
from tests.conftest import Home, make_home
from tests.fakes.cli_process import child_env, exec_cli, fork_cli
from tests.fakes.model_server import FakeModel

SEED = 20_250_505
TRIALS = 22
BATCH = 6  # trials whose processes run at once (separate projects, one fake model)
# Trials that use a genuine `python -m pensieve` process (the others fork from a warm
# forkserver); the Ctrl-C and secrets tests also run genuine processes.
REAL_EXEC_TRIALS = frozenset({5})
DELAY_S = 0.03  # the fake model's think time per call: makes a run last long enough to hit

ARTIFACTS = {str(stage.writes): stage.name for stage in STAGES}


def wait_until(predicate: object, timeout_s: float = 60.0) -> None:
    assert callable(predicate)
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.02)


def requests_of(home: Home, project: str) -> list[str]:
    with home.model.lock:
        return [r.stage for r in home.model.requests if r.project == project]


def finished_stages(project_dir: Path) -> set[str]:
    """Stages a crash may not make us pay for again: complete, or committed on disk."""
    status = json.loads((project_dir / "status.json").read_text())
    done = {name for name, entry in status["stages"].items() if entry["status"] == "complete"}
    staging = project_dir / STAGING_DIR
    done |= {name for name in STAGE_NAMES if (staging / name / COMMIT_MARKER).is_file()}
    return done


def written_artifacts(home: Home, project_id: str, stage: str) -> set[str]:
    """What the fake wrote for the project's stage, as written and after the pipeline's
    transform (no sources were fetched here). Its artifacts name the project's topic and,
    for the consistency report, the other projects it has seen, so they are looked up."""
    written = set(home.model.artifacts_written(project_id, stage))
    transform = BY_NAME[stage].transform
    return written | {transform(text, {}, "numbered") for text in written} if transform else written


def assert_crash_leftovers_are_safe(home: Home, project_id: str) -> None:
    project_dir = home.project_dir(project_id)
    # status.json always parses and validates.
    load_status(project_dir / "status.json", keep_copy=False)
    # Every artifact is complete or absent; the same for kept history and staged copies.
    for path in project_dir.rglob("*.md"):
        if path.name.startswith(TMP_PREFIX) or path.name == "brief.md":
            continue
        stem = path.name if path.parent == project_dir or path.parent.parent.name == STAGING_DIR else None
        if stem is None and path.parent.name == "history":
            stem = path.name.split(".", 1)[0] + ".md"
        assert stem in ARTIFACTS, path
        stage = ARTIFACTS[stem]
        # As the agent wrote it (staged), or as committed with its generated reference list.
        assert path.read_text() in written_artifacts(home, project_id, stage), f"partial file {path}"
    # Temporary files may be left by the kill, but no reader sees them.
    rows = summarize_projects(Workspace(home.path, "default"))
    assert all(not row.id.startswith(".") for row in rows)
    assert project_id in {row.id for row in rows}


def run_children(
    home: Home, trials: list[int], rng_for: dict[int, random.Random], calls_per_run: int
) -> dict[int, dict[str, Any]]:
    """Start one `pensieve run` per trial, SIGKILL each at its random moment: when the
    fake model has received a random number of the run's calls, plus a random fraction of
    a few calls' time (so kills land in model calls, tool calls, commits and transitions)."""
    env = child_env(home.path, {"OPENAI_API_KEY": os.environ["OPENAI_API_KEY"]})
    started: dict[int, subprocess.Popen[bytes] | BaseProcess] = {}
    outcome: dict[int, dict[str, Any]] = {}
    for trial in trials:
        out, err = home.path / f"t{trial}.out", home.path / f"t{trial}.err"
        if trial in REAL_EXEC_TRIALS:
            started[trial] = exec_cli(["run", f"t{trial}", "-q"], env, home.path, out, err)
        else:
            started[trial] = fork_cli(["run", f"t{trial}", "-q"], env, home.path, out, err)

    def killer(trial: int) -> None:
        process = started[trial]
        rng = rng_for[trial]
        calls = rng.randint(1, calls_per_run)
        offset = rng.uniform(0.0, 3 * DELAY_S)
        wait_until(lambda: len(requests_of(home, f"t{trial}")) >= calls, timeout_s=120)
        time.sleep(offset)
        pid = process.pid
        alive = (process.poll() is None) if isinstance(process, subprocess.Popen) else process.is_alive()
        assert pid is not None
        if alive:
            os.kill(pid, signal.SIGKILL)
        code: int | None
        if isinstance(process, subprocess.Popen):
            code = process.wait()
        else:
            process.join()
            code = process.exitcode
        outcome[trial] = {"calls": calls, "offset": offset, "killed_while_running": alive, "exit": code}

    threads = [threading.Thread(target=killer, args=(trial,)) for trial in trials]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcome


def resume_children(home: Home, trials: list[int]) -> dict[int, int | None]:
    env = child_env(home.path, {"OPENAI_API_KEY": os.environ["OPENAI_API_KEY"]})
    processes = {
        trial: fork_cli(["run", f"t{trial}", "-q"], env, home.path, home.path / f"r{trial}.out", home.path / "r.err")
        for trial in trials
    }
    for process in processes.values():
        process.join(120)
    return {trial: process.exitcode for trial, process in processes.items()}


@pytest.fixture
def memory_home(tmp_path: Path, fake_model: FakeModel, monkeypatch: pytest.MonkeyPatch) -> Iterator[Home]:
    """A home on tmpfs when there is one. SIGKILL loses no page-cache data, so fsync is not
    what these trials test (only power loss needs it), and on a shared disk the fsyncs of
    concurrent trials would dominate the test's time. Renames behave the same on tmpfs."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        root = Path(tempfile.mkdtemp(prefix="pensieve-crash-", dir=shm))
        try:
            yield make_home(root, fake_model, monkeypatch)
        finally:
            shutil.rmtree(root, ignore_errors=True)
    else:
        yield make_home(tmp_path, fake_model, monkeypatch)


@pytest.mark.slow
def test_sigkill_at_random_moments_loses_nothing_and_repeats_nothing(memory_home: Home) -> None:
    home = memory_home
    home.model.delay_s = dict.fromkeys(STAGE_NAMES, DELAY_S)
    for trial in range(TRIALS):
        home.new(f"Crash trial {trial}: how write-ahead logs survive power loss", "--id", f"t{trial}")

    # Calibrate: how many model calls an undisturbed run makes. Kills are placed by progress
    # (after a run's k-th call), not by the clock: a clock calibrated under one machine load
    # missed most runs when the load changed (runs ended before their kill moment).
    home.new("Calibration run", "--id", "calib")
    env = child_env(home.path, {"OPENAI_API_KEY": os.environ["OPENAI_API_KEY"]})
    calibration = fork_cli(["run", "calib", "-q"], env, home.path, home.path / "c.out", home.path / "c.err")
    calibration.join(120)
    assert calibration.exitcode == 0, (home.path / "c.err").read_text()
    calls_per_run = len(requests_of(home, "calib"))
    assert calls_per_run >= len(STAGES)

    rng_for = {trial: random.Random(SEED + trial) for trial in range(TRIALS)}
    report: dict[int, dict[str, Any]] = {}
    for first in range(0, TRIALS, BATCH):
        batch = list(range(first, min(first + BATCH, TRIALS)))
        outcome = run_children(home, batch, rng_for, calls_per_run)
        before: dict[int, Counter[str]] = {}
        finished: dict[int, set[str]] = {}
        for trial in batch:
            pid = f"t{trial}"
            assert_crash_leftovers_are_safe(home, pid)
            finished[trial] = finished_stages(home.project_dir(pid))
            before[trial] = Counter(requests_of(home, pid))
        codes = resume_children(home, batch)
        for trial in batch:
            pid = f"t{trial}"
            project_dir = home.project_dir(pid)
            assert codes[trial] == 0, (trial, outcome[trial], (home.path / "r.err").read_text())
            status = load_status(project_dir / "status.json", keep_copy=False)
            assert status.status == "complete", (trial, status.status)
            after = Counter(requests_of(home, pid)) - before[trial]
            repeated = {stage: after[stage] for stage in finished[trial] if after[stage]}
            assert not repeated, f"trial {trial}: finished stages ran again: {repeated} ({outcome[trial]})"
            for stage in STAGES:
                assert (project_dir / stage.writes).read_text() in written_artifacts(home, pid, stage.name)
            leftovers = [p for p in project_dir.rglob("*") if p.name.startswith(TMP_PREFIX)]
            assert not leftovers, leftovers
            assert not (project_dir / STAGING_DIR).exists() or not any((project_dir / STAGING_DIR).iterdir())
            lines = (project_dir / "events.jsonl").read_text().splitlines()
            broken = [line for line in lines if not _parses(line)]
            assert len(broken) <= 1, broken  # at most the one line the kill cut short
            report[trial] = {**outcome[trial], "finished_before_kill": len(finished[trial])}

    mid_run = sum(1 for r in report.values() if r["killed_while_running"])
    print(f"\nkill trials: {len(report)} run, {len(report)} passed, {mid_run} killed mid-run")
    for trial, entry in sorted(report.items()):
        print(
            f"  trial {trial:2d}: kill at call {entry['calls']} +{entry['offset']:.2f}s, "
            f"{'mid-run' if entry['killed_while_running'] else 'after exit'}, "
            f"{entry['finished_before_kill']} stages finished before the kill"
        )
    assert len(report) == TRIALS
    # The trials must really interrupt runs, at different points of the pipeline.
    assert mid_run >= TRIALS * 2 // 3
    assert len({r["finished_before_kill"] for r in report.values() if r["killed_while_running"]}) >= 4


def _parses(line: str) -> bool:
    try:
        json.loads(line)
    except json.JSONDecodeError:
        return False
    return True
