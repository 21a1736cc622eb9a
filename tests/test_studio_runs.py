"""The studio against real processes: the live feed (SSE on a real server), runs started,
refused, stopped and resumed through the API, and the `pensieve studio` command itself."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import Home
from tests.fakes.cli_process import child_env, exec_cli
from tests.studio_support import TOKEN, make_project, real_server, wait_for

AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _collect(
    url: str, into: list[tuple[float, dict[str, object], str]], stop: threading.Event, token: str = TOKEN
) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(timeout=None) as client, client.stream("GET", url, headers=headers) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        event_id = ""
        try:
            for line in response.iter_lines():
                if line.startswith("id:"):
                    event_id = line[3:].strip()
                if line.startswith("data:"):
                    into.append((time.monotonic(), json.loads(line[5:].strip()), event_id))
                if stop.is_set():
                    return
        except httpx.RemoteProtocolError:
            return  # the studio stopped: a stream cut at shutdown is how a feed ends


def test_the_feed_tails_the_event_log_from_connection_and_replays_on_request(home: Home) -> None:
    project = make_project("p1", upto="outliner")
    log = project / "events.jsonl"
    log.write_text('{"kind": "note", "message": "old 0"}\n{"kind": "note", "message": "old 1"}\n')
    with real_server() as base:
        live: list[tuple[float, dict[str, object], str]] = []
        replay: list[tuple[float, dict[str, object], str]] = []
        stop = threading.Event()
        threads = [
            threading.Thread(target=_collect, args=(f"{base}/api/projects/p1/events", live, stop), daemon=True),
            threading.Thread(
                target=_collect, args=(f"{base}/api/projects/p1/events?since=1", replay, stop), daemon=True
            ),
        ]
        for thread in threads:
            thread.start()
        wait_for(lambda: len(replay) == 1, 10, "the replayed line")
        time.sleep(0.3)  # the live client is connected by now
        written = []
        for n in range(3):
            with log.open("a") as handle:
                handle.write(json.dumps({"kind": "note", "message": f"new {n}"}) + "\n")
            written.append(time.monotonic())
            time.sleep(0.2)
        wait_for(lambda: len(live) == 3 and len(replay) == 4, 10, "the new lines")
        stop.set()
        with log.open("a") as handle:  # wakes the readers so they notice the stop
            handle.write('{"kind": "note", "message": "bye"}\n')
        for thread in threads:
            thread.join(timeout=5)
    assert [e[1]["message"] for e in live] == ["new 0", "new 1", "new 2"]
    assert [e[2] for e in live] == ["2", "3", "4"]  # ids are line numbers: a reconnect resumes
    assert [e[1]["message"] for e in replay] == ["old 1", "new 0", "new 1", "new 2"]
    delays = [arrived - sent for (arrived, _, _), sent in zip(live, written, strict=True)]
    assert max(delays) < 1.0, delays  # "arriving within a second"


def test_the_feed_reader_never_follows_a_link(tmp_path: Path) -> None:
    """The studio refuses a linked project when a request arrives; a log swapped for a link
    while a feed is open is not followed either."""
    from pensieve.studio.runs import count_lines, tail_events

    secret = tmp_path / "secret.jsonl"
    secret.write_text('{"kind": "note", "message": "TOP SECRET"}\n' * 5)
    log = tmp_path / "events.jsonl"
    log.write_text('{"kind": "note", "message": "mine"}\n')

    async def read_for(seconds: float) -> list[str]:
        seen: list[str] = []

        async def collect() -> None:
            async for _, line in tail_events(log, since=0, poll_s=0.01):
                seen.append(line)
                if "mine" in line:  # the regular log was read; now it becomes a link
                    log.unlink()
                    log.symlink_to(secret)

        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(collect(), seconds)
        return seen

    assert asyncio.run(read_for(0.5)) == ['{"kind": "note", "message": "mine"}']
    assert count_lines(log) == 0 and count_lines(secret) == 5
    assert asyncio.run(read_for(0.3)) == []  # linked from the start: nothing at all


def _get(base: str, path: str) -> httpx.Response:
    return httpx.get(base + path, headers=AUTH, timeout=30)


def _post(base: str, path: str, body: dict[str, object] | None = None) -> httpx.Response:
    return httpx.post(base + path, headers=AUTH, json=body or {}, timeout=60)


def _status(base: str, pid: str) -> dict[str, object]:
    data: dict[str, object] = _get(base, f"/api/projects/{pid}").json()
    return data


@pytest.mark.slow
def test_create_run_refuse_stop_and_resume_through_the_api(home: Home) -> None:
    home.monkeypatch.setenv("PENSIEVE_CONFIG", str(home.config_path))
    with real_server() as base:
        created = _post(base, "/api/projects", {"brief": "How vector databases index embeddings", "id": "vec"})
        assert created.status_code == 201
        # Stage one runs at once; the researcher's model call then hangs until we stop it.
        home.model.delay_s["researcher"] = 120.0
        started = _post(base, "/api/projects/vec/run")
        assert started.status_code == 202, started.text
        run_pid = started.json()["pid"]
        wait_for(lambda: any(r.stage == "researcher" for r in home.model.requests), 90, "the researcher's call")
        assert _get(base, "/api/projects").json()[0]["status"] == "running"
        # The run lock refuses a second run, and edits wait for the run to end.
        second = _post(base, "/api/projects/vec/run")
        assert second.status_code == 409 and "already running" in second.json()["error"]
        brief = _get(base, "/api/projects/vec/files/topic_brief.md").json()
        put = httpx.put(
            base + "/api/projects/vec/files/topic_brief.md",
            headers=AUTH,
            json={"text": "edited", "base_sha256": brief["sha256"]},
        )
        assert put.status_code == 409
        # Stop: the run ends as after Ctrl-C.
        stopped = _post(base, "/api/projects/vec/stop")
        assert stopped.status_code == 202 and stopped.json()["pid"] == run_pid
        wait_for(lambda: _get(base, "/api/projects/vec/view").json()["running_pid"] is None, 60, "the run to end")
        status = _status(base, "vec")
        stages = status["stages"]
        assert isinstance(stages, dict)
        assert status["status"] == "paused"
        assert stages["refiner"]["status"] == "complete"
        assert stages["researcher"]["status"] == "interrupted"
        log = (home.project_dir("vec") / "scratch" / "studio-run.log").read_text()
        assert "interrupted: run `pensieve run vec` to continue" in log and "Traceback" not in log
        # Resume: the interrupted stage runs again and the project completes.
        home.model.delay_s.clear()
        refiner_calls = home.model.count("refiner")
        assert _post(base, "/api/projects/vec/run").status_code == 202
        wait_for(lambda: _status(base, "vec")["status"] == "complete", 120, "the project to complete")
        assert home.model.count("refiner") == refiner_calls
        kinds = [
            json.loads(line)["kind"] for line in (home.project_dir("vec") / "events.jsonl").read_text().splitlines()
        ]
        assert "stage_interrupted" in kinds and kinds.count("stage_end") >= 10


@pytest.mark.slow
def test_the_studio_command_prints_its_address_and_stops_cleanly_on_ctrl_c(home: Home) -> None:
    env = child_env(home.path, {"PENSIEVE_STUDIO_TOKEN": "cli-token-0a9f3e"})
    process = subprocess.Popen(
        [sys.executable, "-m", "pensieve", "studio", "--port", "0"],
        env=env,
        cwd=home.path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:") and url.endswith("/?token=cli-token-0a9f3e")
        base = url.split("/?")[0]
        assert httpx.get(base + "/api/projects").status_code == 401
        assert httpx.get(base + "/api/projects", headers={"Authorization": "Bearer cli-token-0a9f3e"}).json() == []
        assert httpx.get(url).status_code == 303
        # A live feed left open does not keep the studio from stopping.
        make_project("p1", upto="refiner")
        feed: list[tuple[float, dict[str, object], str]] = []
        listener = threading.Thread(
            target=_collect,
            args=(base + "/api/projects/p1/events", feed, threading.Event(), "cli-token-0a9f3e"),
            daemon=True,
        )
        listener.start()
        time.sleep(0.5)
    finally:
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=20)
    listener.join(timeout=5)
    assert not listener.is_alive(), "the feed's connection stayed open after the studio stopped"
    assert process.returncode == 0, err
    assert "Traceback" not in err and "studio stopped" in err
    assert "cli-token-0a9f3e" not in err + out  # the token is printed once, in the address, never logged


@pytest.mark.slow
def test_a_non_loopback_address_needs_saying_and_warns(home: Home) -> None:
    env = child_env(home.path)
    process = subprocess.Popen(
        [sys.executable, "-m", "pensieve", "studio", "--host", "0.0.0.0", "--port", "0"],
        env=env,
        cwd=home.path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        assert "?token=" in url
        assert len(url.split("token=")[1]) >= 40  # a fresh random token
    finally:
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=20)
    assert "warning: serving on 0.0.0.0" in err


def test_the_studio_starts_without_litellm_or_torch(home: Home, tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from starlette.testclient import TestClient\n"
        "from pensieve.config import pensieve_home\n"
        "from pensieve.project.workspace import open_workspace\n"
        "from pensieve.studio.app import create_app\n"
        "app = create_app(open_workspace(pensieve_home(), 'default'), token='t', port=8765)\n"
        "c = TestClient(app, base_url='http://127.0.0.1:8765', headers={'Authorization': 'Bearer t'})\n"
        "for path in ('/', '/new', '/topics', '/api/projects'):\n"
        "    assert c.get(path).status_code == 200, path\n"
        "heavy = [m for m in ('litellm', 'torch', 'sentence_transformers', 'dbos', 'sqlalchemy') if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], env=child_env(home.path), cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ""


@pytest.mark.slow
def test_a_run_started_in_a_terminal_is_seen_and_stoppable(home: Home) -> None:
    """`pensieve run` in a terminal: the studio sees its lock, refuses a second run, stops it
    as Ctrl-C would (the stage in flight is interrupted) and resumes it later."""
    home.model.delay_s["researcher"] = 120.0
    with real_server() as base:
        assert _post(base, "/api/projects", {"brief": "How Raft elects a leader", "id": "raft"}).status_code == 201
        terminal = exec_cli(
            ["run", "raft"], child_env(home.path), home.path, home.path / "run.out", home.path / "run.err"
        )
        try:
            wait_for(lambda: any(r.stage == "researcher" for r in home.model.requests), 90, "the researcher's call")
            view = _get(base, "/api/projects/raft/view").json()
            assert view["running_pid"] == terminal.pid and view["state"] == "running"
            assert _post(base, "/api/projects/raft/run").status_code == 409
            stopped = _post(base, "/api/projects/raft/stop")
            assert stopped.status_code == 202 and stopped.json()["pid"] == terminal.pid
            assert terminal.wait(timeout=60) == 130  # as after Ctrl-C
        finally:
            if terminal.poll() is None:
                terminal.kill()
        err = (home.path / "run.err").read_text()
        assert "interrupted: run `pensieve run raft` to continue" in err and "Traceback" not in err
        status = _status(base, "raft")
        stages = status["stages"]
        assert isinstance(stages, dict)
        assert status["status"] == "paused" and stages["researcher"]["status"] == "interrupted"
        # Resumed later, from the studio: the interrupted stage runs again to the end.
        home.model.delay_s.clear()
        assert _post(base, "/api/projects/raft/run").status_code == 202
        wait_for(lambda: _status(base, "raft")["status"] == "complete", 120, "the project to complete")


def test_only_a_pensieve_run_of_the_project_is_signalled() -> None:
    from pensieve.studio.runs import pensieve_arguments

    assert pensieve_arguments(["/usr/bin/python3", "-m", "pensieve", "run", "p1", "-q"]) == ["run", "p1", "-q"]
    assert pensieve_arguments(["/usr/bin/python3", "-P", "-m", "pensieve", "run", "p1"]) == ["run", "p1"]
    assert pensieve_arguments(["/venv/bin/python", "/venv/bin/pensieve", "worker"]) == ["worker"]
    assert pensieve_arguments(["/venv/bin/python", "-X", "dev", "-m", "pensieve", "batch", "f.yaml"]) == [
        "batch",
        "f.yaml",
    ]
    for other in (["python", "-m", "pytest", "tests/pensieve"], ["vim", "pensieve/run.py"], ["python", "-c", "x"]):
        assert pensieve_arguments(other) is None, other


@pytest.mark.slow
def test_stop_refuses_to_interrupt_a_queue_worker(home: Home) -> None:
    """`pensieve batch` runs its projects in its own process, under each project's lock: Stop
    on one of them says so instead of interrupting the whole batch."""
    from pensieve.project.listing import lock_holder
    from pensieve.project.workspace import open_workspace

    home.configure(queue={"poll_interval_s": 0.2})
    home.model.delay_s["researcher"] = 120.0
    items = home.path / "items.yaml"
    items.write_text("- brief: How Raft elects a leader\n  id: raft\n")
    batch = exec_cli(
        ["batch", str(items), "--concurrency", "1"],
        child_env(home.path),
        home.path,
        home.path / "batch.out",
        home.path / "batch.err",
    )
    try:
        project = open_workspace(home.path, "default").project("raft")
        wait_for(lambda: any(r.stage == "researcher" for r in home.model.requests), 120, "the researcher's call")
        assert lock_holder(project) == batch.pid
        with real_server() as base:
            refused = _post(base, "/api/projects/raft/stop")
        assert refused.status_code == 409, refused.text
        error = refused.json()["error"]
        assert f"queue worker (`pensieve batch`, process {batch.pid})" in error and "Ctrl-C" in error
        time.sleep(0.5)
        assert batch.poll() is None and lock_holder(project) == batch.pid  # the batch goes on
    finally:
        batch.send_signal(signal.SIGINT)
        try:
            batch.wait(timeout=60)
        except subprocess.TimeoutExpired:
            batch.kill()


@pytest.mark.slow
def test_closing_the_studio_leaves_its_runs_running(home: Home) -> None:
    from pensieve.project.listing import lock_holder
    from pensieve.project.workspace import open_workspace

    token = "close-token-5b1e"
    home.model.delay_s["researcher"] = 120.0
    env = child_env(home.path, {"PENSIEVE_STUDIO_TOKEN": token})
    studio = subprocess.Popen(
        [sys.executable, "-m", "pensieve", "studio", "--port", "0"],
        env=env,
        cwd=home.path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    run_pid = None
    try:
        assert studio.stdout is not None
        base = studio.stdout.readline().strip().split("/?")[0]
        headers = {"Authorization": f"Bearer {token}"}
        assert (
            httpx.post(base + "/api/projects", json={"brief": "Raft", "id": "raft"}, headers=headers).status_code == 201
        )
        started = httpx.post(base + "/api/projects/raft/run", json={}, headers=headers, timeout=60)
        assert started.status_code == 202, started.text
        run_pid = started.json()["pid"]
        studio.send_signal(signal.SIGINT)
        studio.communicate(timeout=20)
        assert studio.returncode == 0
        project = open_workspace(home.path, "default").project("raft")
        assert lock_holder(project) == run_pid  # the run carries on without the studio
        wait_for(lambda: any(r.stage == "researcher" for r in home.model.requests), 60, "the run to go on")
    finally:
        if studio.poll() is None:
            studio.kill()
        if run_pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(run_pid, signal.SIGINT)
            wait_for(lambda: not Path(f"/proc/{run_pid}").exists() or _zombie(run_pid), 30, "the run to stop")


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except OSError:
        return True


def test_a_module_planted_in_the_studios_directory_is_not_imported_by_its_runs(
    home: Home, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`python -m` puts the working directory first on sys.path: a `typer.py` (which every
    pensieve command imports) left where the studio was started would run inside each run."""
    from pensieve.stages import STAGES

    planted = tmp_path / "downloads"
    planted.mkdir()
    marker = tmp_path / "imported"
    (planted / "typer.py").write_text(f"open({str(marker)!r}, 'w').write('planted typer ran')\nraise SystemExit(9)\n")
    monkeypatch.chdir(planted)
    make_project("p1", upto=STAGES[-1].name)  # complete: the run starts, finds nothing to do, exits
    with real_server() as base:
        started = _post(base, "/api/projects/p1/run")
    assert started.status_code == 202, started.text
    assert started.json()["args"][:2] == ["run", "p1"]
    assert not marker.exists(), "the planted typer.py was imported"
    log = (home.project_dir("p1") / "scratch" / "studio-run.log").read_text()
    assert "Traceback" not in log, log
