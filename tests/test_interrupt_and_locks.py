"""Ctrl-C and the run lock, against real `pensieve run` processes."""

from __future__ import annotations

import json
import os
import pty
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from pensieve.stages import STAGE_NAMES
from tests.conftest import Home
from tests.fakes.cli_process import child_env, fork_cli

pytestmark = pytest.mark.slow


def wait_for(predicate: object, timeout_s: float = 90.0) -> None:
    assert callable(predicate)
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.01)


def test_ctrl_c_marks_the_stage_interrupted_exits_130_and_leaves_the_terminal_sane(home: Home) -> None:
    pid = home.new()
    home.model.delay_s["researcher"] = 60.0  # the researcher's first call hangs until Ctrl-C
    env = child_env(home.path, {"TERM": "xterm-256color", "COLUMNS": "100", "LINES": "30"})
    env.pop("NO_COLOR", None)
    env.pop("CI", None)  # rich would not draw live output on a CI "terminal"
    master, slave = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "pensieve", "run", pid],
        env=env,
        cwd=home.path,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
    )
    os.close(slave)
    chunks: list[bytes] = []

    def pump() -> None:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        wait_for(lambda: home.model.requests and home.model.requests[-1].stage == "researcher")
        process.send_signal(signal.SIGINT)
        code = process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
        reader.join(timeout=5)
        os.close(master)
    output = b"".join(chunks).decode("utf-8", "replace")
    assert code == 130, output
    assert "Traceback" not in output, output
    assert "interrupted: run `pensieve run" in output
    # The live display hid the cursor while it ran and showed it again on the way out.
    assert "\x1b[?25l" in output, "the live (terminal) display was not used"
    assert output.rfind("\x1b[?25h") > output.rfind("\x1b[?25l"), "cursor left hidden"

    status = json.loads((home.project_dir(pid) / "status.json").read_text())
    assert status["stages"]["refiner"]["status"] == "complete"
    assert status["stages"]["researcher"]["status"] == "interrupted"
    assert "interrupted" in status["stages"]["researcher"]["error"]
    assert status["status"] == "paused"

    # The next run re-runs the interrupted stage, not the finished one.
    refiner_calls = home.model.count("refiner")
    home.model.delay_s.clear()
    result = home.run("run", pid)
    assert result.exit_code == 0, result.stderr
    assert home.model.count("refiner") == refiner_calls
    assert home.model.count("researcher") >= 1
    status = json.loads((home.project_dir(pid) / "status.json").read_text())
    assert status["status"] == "complete"
    assert status["stages"]["researcher"]["attempts"] == 2


def test_a_second_run_is_refused_while_list_and_status_answer(home: Home) -> None:
    pid = home.new()
    home.model.delay_s["refiner"] = 60.0
    process = fork_cli(["run", pid, "-q"], child_env(home.path), home.path, home.path / "o", home.path / "e")
    try:
        wait_for(lambda: home.model.requests)
        second = home.run("run", pid)
        assert second.exit_code == 1
        assert f"project {pid} is being run by process {process.pid}" in second.stderr
        assert len(second.stderr.strip().splitlines()) == 1
        # list and status never wait for the lock: they answer while the run holds it.
        listed = home.run("list", "--json")
        assert listed.exit_code == 0
        assert json.loads(listed.stdout)[0]["status"] == "running"
        shown = home.run("status", pid, "--json")
        assert shown.exit_code == 0
        assert json.loads(shown.stdout)["stages"]["refiner"]["status"] == "running"
        assert process.is_alive(), "the run ended before the checks; they prove nothing"
    finally:
        assert process.pid is not None
        os.kill(process.pid, signal.SIGKILL)
        process.join()
    assert home.model.count("refiner") == 1  # the refused run made no model call

    # The dead holder's lock (its pid still in the file) is taken over.
    lock = home.project_dir(pid) / ".run.lock"
    assert lock.read_text().strip() == str(process.pid)
    listed = home.run("list", "--json")
    assert json.loads(listed.stdout)[0]["status"] == "paused"  # not "running": its process is gone
    home.model.delay_s.clear()
    result = home.run("run", pid)
    assert result.exit_code == 0, result.stderr
    status = json.loads((home.project_dir(pid) / "status.json").read_text())
    assert status["status"] == "complete"
    assert [status["stages"][n]["status"] for n in STAGE_NAMES] == ["complete"] * len(STAGE_NAMES)


def test_a_lock_file_naming_a_dead_process_does_not_block(home: Home) -> None:
    pid = home.new()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    Path(home.project_dir(pid) / ".run.lock").write_text(f"{dead.pid}\n")
    result = home.run("run", pid, "--until", "refiner")
    assert result.exit_code == 0, result.stderr
    assert home.model.count("refiner") == 2


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # what a shell's background job inherits


def test_a_detached_run_hears_a_stop_even_when_started_with_sigint_ignored(home: Home) -> None:
    # The studio starts runs in sessions of their own and stops them with SIGINT. A studio
    # launched as a background job (`pensieve studio &` in a script) hands its runs SIGINT
    # ignored: Stop then did nothing until the model answered.
    pid = home.new()
    home.model.delay_s["researcher"] = 120.0
    with (home.path / "out.txt").open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "pensieve", "run", pid, "--quiet"],
            env=child_env(home.path),
            cwd=home.path,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_ignore_sigint,
        )
    try:
        wait_for(lambda: home.model.requests and home.model.requests[-1].stage == "researcher")
        process.send_signal(signal.SIGINT)
        code = process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    output = (home.path / "out.txt").read_text()
    assert code == 130, output
    assert "interrupted: run `pensieve run" in output and "Traceback" not in output
    status = json.loads((home.project_dir(pid) / "status.json").read_text())
    assert status["stages"]["researcher"]["status"] == "interrupted"
