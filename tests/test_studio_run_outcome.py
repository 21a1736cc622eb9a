"""The studio learns how a child run ended from the run's run_end event and status.json,
never from the words the run printed: real child processes, a real server, the fake model."""

from __future__ import annotations

import json
import os
from pathlib import Path

import httpx
import pytest

from pensieve.project.run_outcome import RECORD_ERRORS_ENV, SCAN_LIMIT, RunEnd, last_run_end
from tests.conftest import Home
from tests.fakes.model_server import error
from tests.studio_support import TOKEN, real_server, wait_for

AUTH = {"Authorization": f"Bearer {TOKEN}"}
# Printed by every child run as its very last line (after the CLI's own last word): a line
# that would decide the outcome if the studio read the run's output.
MISLEADING = "error: project vec is being run by process 4242"


def _print_at_exit(home: Home) -> Path:
    shadow = home.path / "shadow"
    shadow.mkdir()
    (shadow / "sitecustomize.py").write_text(
        f"import atexit, sys\natexit.register(lambda: print({MISLEADING!r}, file=sys.stderr))\n"
    )
    home.monkeypatch.setenv("PYTHONPATH", str(shadow))  # the studio's children inherit it
    home.monkeypatch.setenv("PENSIEVE_CONFIG", str(home.config_path))
    return shadow


def _view(base: str, project_id: str) -> dict[str, object]:
    answer = httpx.get(f"{base}/api/projects/{project_id}/view", headers=AUTH, timeout=30)
    assert answer.status_code == 200, answer.text
    view: dict[str, object] = answer.json()
    return view


def _page(base: str, project_id: str) -> str:
    return httpx.get(f"{base}/projects/{project_id}", headers={**AUTH, "Accept": "text/html"}, timeout=30).text


def _run_log(home: Home, project_id: str) -> str:
    return (home.project_dir(project_id) / "scratch" / "studio-run.log").read_text()


@pytest.mark.slow
def test_a_failed_child_run_is_known_from_its_events_and_status(home: Home) -> None:
    _print_at_exit(home)
    pid = home.new()
    # The first stage's model answers 400 (not retried): the stage fails, the run exits 1.
    home.model.always("refiner", {**error(400), "delay": 1.0})
    with real_server() as base:
        started = httpx.post(f"{base}/api/projects/{pid}/run", headers=AUTH, json={}, timeout=60)
        assert started.status_code == 202, started.text
        wait_for(lambda: _view(base, pid)["running_pid"] is None, 90, "the run to end")
        view = _view(base, pid)
        status = view["status"]
        assert isinstance(status, dict) and status["status"] == "error"
        assert view["last_run"] == {
            "outcome": "failed",
            "exit_code": 1,
            "pid": started.json()["pid"],
            "error": status["error"],
            "error_kind": None,
            "failed_stage": "refiner",
            "message": None,
        }
        assert str(status["error"]).startswith("refiner: ")
        page = _page(base, pid)
    assert _run_log(home, pid).rstrip().endswith(MISLEADING)  # the run's output did end so
    assert "4242" not in page


@pytest.mark.slow
def test_a_refused_child_run_answers_by_its_error_kind_not_its_output(home: Home) -> None:
    _print_at_exit(home)
    pid = home.new()
    with real_server() as base:
        # The configuration breaks after the studio started: the child run refuses it (exit 2).
        home.configure(llm={"temperature": "hot"})
        refused = httpx.post(f"{base}/api/projects/{pid}/run", headers=AUTH, json={}, timeout=60)
        assert refused.status_code == 400, refused.text  # bad input, not "already running" (409)
        message = refused.json()["error"]
        assert "temperature" in message and "4242" not in message
        view = _view(base, pid)
        last = view["last_run"]
        assert isinstance(last, dict)
        assert (last["outcome"], last["exit_code"], last["error_kind"]) == ("error", 2, "bad_input")
        assert last["error"] == message
        page = _page(base, pid)
    assert _run_log(home, pid).rstrip().endswith(MISLEADING)
    assert "The last run did not finish" in page and "temperature" in page and "4242" not in page
    # Nothing but the event log changed: the refusal touched no stage.
    status = json.loads((home.project_dir(pid) / "status.json").read_text())
    assert status["status"] == "pending"


def test_the_cli_records_how_each_run_ended(home: Home) -> None:
    pid = home.new()
    events = home.project_dir(pid) / "events.jsonl"
    # Refused in a terminal: nothing changes, the event log included.
    assert home.run("run", pid, "--until", "nowhere").exit_code == 2
    assert not events.exists()
    # Refused in a run whose starter waits for the answer (the studio's): recorded.
    home.monkeypatch.setenv(RECORD_ERRORS_ENV, "1")
    assert home.run("run", pid, "--until", "nowhere").exit_code == 2
    end = last_run_end(events)
    assert end is not None and (end.outcome, end.exit_code, end.error_kind) == ("error", 2, "bad_input")
    assert end.pid == os.getpid() and end.error is not None and "nowhere" in end.error
    ran = home.run("run", pid, "--until", "refiner")
    assert ran.exit_code == 0, ran.stderr
    end = last_run_end(events)
    assert end is not None and (end.outcome, end.exit_code, end.error) == ("paused", 0, None)
    assert end.message == f"paused before researcher: `pensieve run {pid}` continues"
    # An unknown project has no log to write to: nothing is created for it.
    assert home.run("run", "no-such-project").exit_code == 2
    assert not home.project_dir("no-such-project").exists()


def _line(**fields: object) -> str:
    return json.dumps({"ts": "2026-01-01T00:00:00Z", "kind": "run_end", "stage": None, **fields}) + "\n"


def test_the_last_run_end_is_read_from_the_end_of_the_log(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    first = _line(outcome="failed", exit_code=1, pid=11, error="drafter: x", failed_stage="drafter")
    second = _line(outcome="complete", exit_code=0, pid=22, message="complete: final.md")
    noise = [
        json.dumps({"kind": "note", "message": 'a model wrote "run_end" here'}) + "\n",
        _line(outcome="exploded", exit_code=1, pid=33),  # not an outcome
        _line(outcome="failed", exit_code="1", pid=33),  # not a number
        '{"kind": "run_end", "outcome": "fail',  # cut short by a crash
    ]
    log.write_text(first + "x" * (3 * 65536) + "\n" + second + "".join(noise))
    assert last_run_end(log) == RunEnd("complete", 0, 22, message="complete: final.md")
    assert last_run_end(log, pid=11) == RunEnd("failed", 1, 11, error="drafter: x", failed_stage="drafter")
    assert last_run_end(log, pid=11, after=len(first)) is None  # written before the child started
    assert last_run_end(log, pid=33) is None
    link = tmp_path / "linked.jsonl"
    link.symlink_to(log)
    assert last_run_end(link) is None  # a planted link is not followed
    # Past the scan limit from the end, an older ending is not looked for.
    log.write_text(first + ("y" * 1000 + "\n") * (SCAN_LIMIT // 1000 + 1))
    assert last_run_end(log) is None
