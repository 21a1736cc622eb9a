"""`pensieve batch`, `pensieve queue` and the batch file: real CLI processes, the fake model
on 127.0.0.1, the default SQLite queue in the workspace (DBOS for real)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
import yaml

from pensieve.batch.items import read_items, stable_id
from pensieve.project.run_outcome import last_run_end
from pensieve.project.status import load_status
from pensieve.stages import STAGE_NAMES
from tests.conftest import MODEL_KEY, Home
from tests.fakes.cli_process import child_env, exec_cli, fork_cli


def _env(home: Home) -> dict[str, str]:
    return child_env(home.path, {"OPENAI_API_KEY": MODEL_KEY})


def _cli(home: Home, *args: str, timeout: float = 240, name: str = "cli") -> subprocess.CompletedProcess[str]:
    """`pensieve ARGS` in a process forked from the warm forkserver (litellm imported)."""
    out, err = home.path / f"{name}.out", home.path / f"{name}.err"
    process = fork_cli(list(args), _env(home), home.path, out, err)
    process.join(timeout)
    if process.exitcode is None:  # killed, or pytest's exit would wait for it for ever
        process.kill()
        process.join()
        raise AssertionError(f"{args[0]} did not finish: {err.read_text()[-2000:]}")
    return subprocess.CompletedProcess(args, process.exitcode, out.read_text(), err.read_text())


def _batch(home: Home, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return _cli(home, "batch", *args, timeout=timeout, name="batch")


def _peak_projects(home: Home) -> int:
    """The most projects that had a request in flight at the fake model at one moment."""
    spans = [(r.started, r.finished, r.project) for r in home.model.requests]
    return max(len({p for s, f, p in spans if s <= start < f}) for start, _, _ in spans)


def _status(home: Home, project: str) -> dict[str, object]:
    data: dict[str, object] = json.loads((home.project_dir(project) / "status.json").read_text())
    return data


def _requests(home: Home) -> Counter[tuple[str | None, str]]:
    return Counter((r.project, r.stage) for r in home.model.requests if r.status == 200)


def _complete_stages(home: Home, ids: list[str]) -> set[tuple[str, str]]:
    done = set()
    for project in ids:
        try:
            stages = _status(home, project)["stages"]
        except (OSError, json.JSONDecodeError):
            continue
        assert isinstance(stages, dict)
        done |= {(project, name) for name, entry in stages.items() if entry["status"] == "complete"}
    return done


def _items_file(home: Home, n: int, name: str = "items.yaml") -> Path:
    items = [{"brief": f"How storage engine {i} lays out pages on disk"} for i in range(n)]
    for i in range(0, n, 2):
        items[i]["id"] = f"engine-{i}"
    path = home.path / name
    path.write_text(yaml.safe_dump(items))
    return path


# -- the batch file -----------------------------------------------------------------------


SURROGATE_REFUSED = "the brief is not valid UTF-8 text: it holds a lone surrogate"


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("b.yaml", "- brief: one\n- id: x\n  audience: devs\n", "b.yaml:2: missing brief"),
        (
            "b.yaml",
            "- {brief: a, id: same}\n- {brief: b, id: same}\n",
            "b.yaml:2: duplicate id 'same' (also on line 1)",
        ),
        ("b.yaml", "- brief: a\n- brief: b\n  colour: red\n", "b.yaml:2: unknown field 'colour'"),
        ("b.yaml", "- brief: a\n- brief: [unclosed\n", "b.yaml:3: bad YAML"),
        ("b.csv", "brief,colour\nabc,red\n", "b.csv:1: unknown column 'colour'"),
        ("b.csv", "brief,id\nfirst,a\n,b\n", "b.csv:3: missing brief"),
        ("b.jsonl", '{"brief": "a"}\n\n{"brief": "b"\n', "b.jsonl:3: not a JSON object"),
        ("b.jsonl", '{"brief": "a"}\n{"brief": "a"}\n', "b.jsonl:2: duplicate brief (also on line 1)"),
        ("b.jsonl", '{"brief": "a", "target_words": 5}\n', "b.jsonl:1: target_words must be at least 100"),
        ("b.txt", "brief: a\n", "not a YAML, CSV or JSONL file"),
        ("b.csv", "brief,brief\nfirst,second\n", "b.csv:1: column 'brief' appears twice"),
        ("b.yaml", "- brief: a\n- brief: b\n  id: x\n  id: y\n", "b.yaml:4: key 'id' appears twice"),
        ("b.yaml", "- {brief: a, brief: b}\n", "b.yaml:1: key 'brief' appears twice"),
        ("b.jsonl", '{"brief": "a"}\n"a bare brief"\n', "b.jsonl:2: not a JSON object (a JSON str)"),
        ("b.jsonl", '{"brief": "a", "brief": "b"}\n', "b.jsonl:1: key 'brief' appears twice"),
        # A lone surrogate, escaped in JSON or YAML: no text a file could hold.
        ("b.jsonl", '{"brief": "ok"}\n{"brief": "caf\\udcff"}\n', f"b.jsonl:2: {SURROGATE_REFUSED}"),
        ("b.yaml", '- brief: ok\n- brief: "caf\\udcff"\n', f"b.yaml:2: {SURROGATE_REFUSED}"),
        ("b.yaml", '- "caf\\ud800 plain"\n', f"b.yaml:1: {SURROGATE_REFUSED}"),
    ],
)
def test_bad_batch_files_are_refused_naming_the_line_before_anything_is_created(
    home: Home, name: str, content: str, expected: str
) -> None:
    path = home.path / name
    path.write_text(content)
    result = home.run("batch", str(path))
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], result.stderr
    assert lines[0].startswith(f"error: {path}"), lines[0]
    assert "Traceback" not in result.stderr
    workspace = home.path / "workspaces" / "default"
    assert not (workspace / "projects").exists() or not any((workspace / "projects").iterdir())
    assert not (workspace / "queue.sqlite").exists()
    assert home.model.requests == []


def test_items_from_yaml_csv_and_jsonl_get_stable_ids(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("items:\n  - brief: Why B-trees still matter\n  - {brief: Tries, id: tries}\n")
    (tmp_path / "a.csv").write_text("brief,id,target_words,audience,model\nWhy B-trees still matter,,900,DBAs,\n")
    (tmp_path / "a.jsonl").write_text('{"brief": "Why B-trees still matter", "model": "openai/x"}\n')
    yaml_items = read_items(tmp_path / "a.yaml")
    csv_item, jsonl_item = read_items(tmp_path / "a.csv")[0], read_items(tmp_path / "a.jsonl")[0]
    assert (
        yaml_items[0].project_id
        == csv_item.project_id
        == jsonl_item.project_id
        == stable_id("Why B-trees still matter\n")
    )
    assert yaml_items[0].project_id.startswith("why-b-trees-still-matter-")
    assert yaml_items[1].project_id == "tries"
    assert (csv_item.target_words, csv_item.audience, csv_item.model) == (900, "DBAs", None)
    assert jsonl_item.model == "openai/x"
    assert stable_id("Another brief") != stable_id("Why B-trees still matter")


def test_an_existing_project_with_another_brief_is_refused(home: Home) -> None:
    home.new("Something else entirely", "--id", "taken")
    path = home.path / "b.yaml"
    path.write_text("- {brief: A new brief, id: taken}\n")
    result = home.run("batch", str(path))
    assert result.exit_code == 2
    assert "b.yaml:1: project 'taken' already exists with another brief" in result.stderr


def test_a_budget_with_concurrency_0_is_refused(home: Home) -> None:
    # With --concurrency 0 the workers run the projects; nobody would keep the budget.
    path = _items_file(home, 2)
    # (In a process of its own: a batch that took it would watch, for ever, for workers.)
    result = _cli(home, "batch", str(path), "--concurrency", "0", "--max-cost-usd", "1", timeout=60)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "--max-cost-usd needs --concurrency 1 or more" in lines[0], result.stderr
    assert not (home.path / "workspaces" / "default" / "projects").exists()


def test_the_live_table_shows_each_project_s_state_stage_cost_and_worker() -> None:
    from io import StringIO

    from rich.console import Console

    from pensieve.cli.batch import _table

    screen = StringIO()
    console = Console(file=screen, force_terminal=True, width=100, color_system=None)
    rows = [("alpha", "running", "drafter", 0.01234, "this process"), ("beta", "queued", None, None, "")]
    console.print(_table(rows))
    assert [line.split() for line in screen.getvalue().splitlines()] == [
        ["project", "state", "stage", "cost", "worker"],
        ["alpha", "running", "drafter", "$0.0123", "this", "process"],
        ["beta", "queued", "-", "-"],
    ]


def test_waves_follow_the_stage_graph() -> None:
    from pensieve.batch.queue import waves  # imports DBOS: only inside the test

    groups = waves()
    assert [name for group in groups for name in group] == list(STAGE_NAMES)
    assert ["content_reviewer", "fact_checker", "style_reviewer"] in groups
    assert waves("outliner")[-1] == ["outliner"]


def test_a_queue_url_with_a_password_in_the_config_is_refused(home: Home) -> None:
    home.configure(queue={"url": "postgresql://pensieve:hunter22@db.example/pensieve"})
    result = home.run("queue")
    assert result.exit_code == 2
    assert "PENSIEVE_QUEUE_URL" in result.stderr and "hunter22" not in result.stderr


def test_an_unreachable_queue_database_is_reported_without_its_password(home: Home) -> None:
    home.monkeypatch.setenv("PENSIEVE_QUEUE_URL", "postgresql://pensieve:s3cret-pw@127.0.0.1:9/pensieve")
    result = home.run("queue")
    assert result.exit_code == 2, result.stderr
    assert "s3cret-pw" not in result.stderr and "cannot open the queue database" in result.stderr
    assert "postgresql://pensieve:***@127.0.0.1:9/pensieve" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://u@127.0.0.1:9/db?password=s3cret-pw",
        "postgresql://u@127.0.0.1:9/db?sslmode=prefer&sslpassword=s3cret-pw",
        "postgresql://u:s3cret@pw-x@127.0.0.1:9/db",  # a raw @ in the password
    ],
)
def test_a_queue_password_in_the_query_or_with_a_raw_at_is_never_printed(home: Home, url: str) -> None:
    """Seen in the hostile pass: password= and sslpassword= were printed in clear by queue,
    worker, batch and the studio, and a raw @ left "pw-x@127.0.0.1" in the driver's error."""
    home.monkeypatch.setenv("PENSIEVE_QUEUE_URL", url)
    path = home.path / "ok.yaml"
    path.write_text("- {brief: How pages are laid out on disk, id: one}\n")
    for args in (("queue",), ("queue", "--json"), ("batch", str(path)), ("worker",)):
        result = home.run(*args)
        shown = result.stdout + result.stderr
        assert result.exit_code != 0, (args, shown)
        for secret in ("s3cret-pw", "s3cret", "pw-x"):
            assert secret not in shown, (args, shown)
        assert "Traceback" not in shown


@pytest.mark.parametrize(
    ("url", "shown", "cause"),
    [
        ("postgresql://u:s3cret-pw@127.0.0.1:9/db", "postgresql://u:***@127.0.0.1:9/db", "Connection refused"),
        ("sqlite:////proc/q.sqlite", "sqlite:////proc/q.sqlite", "unable to open database file"),
    ],
)
def test_a_bad_queue_database_is_one_line_and_creates_no_project(home: Home, url: str, shown: str, cause: str) -> None:
    home.monkeypatch.setenv("PENSIEVE_QUEUE_URL", url)
    path = home.path / "ok.yaml"
    path.write_text("- {brief: How pages are laid out on disk, id: one}\n")
    result = home.run("batch", str(path))
    assert result.exit_code == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr  # no psycopg hint line, no SQLAlchemy "Background on this error"
    assert lines[0].startswith(f"error: cannot open the queue database {shown}: ") and cause in lines[0]
    assert "s3cret-pw" not in result.stderr and "Traceback" not in result.stderr
    projects = home.path / "workspaces" / "default" / "projects"
    assert not projects.exists() or not any(projects.iterdir())
    assert home.model.requests == []


def test_llm_max_concurrent_calls_caps_calls_in_flight_across_event_loops() -> None:
    import asyncio
    import threading

    from pensieve.model.llm import CallGate

    gate = CallGate(2)
    peak = 0
    lock = threading.Lock()

    async def one() -> None:
        nonlocal peak
        await gate.acquire()
        try:
            with lock:
                peak = max(peak, gate.in_use)
            await asyncio.sleep(0.01)
        finally:
            gate.release()

    async def many() -> None:
        await asyncio.gather(*(one() for _ in range(10)))

    threads = [threading.Thread(target=asyncio.run, args=(many(),)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert peak == 2 and gate.in_use == 0


# -- batches for real -----------------------------------------------------------------------


@pytest.mark.slow
def test_a_batch_of_20_at_concurrency_5_completes_and_the_same_file_again_runs_nothing(home: Home) -> None:
    home.configure(queue={"poll_interval_s": 0.2}, llm={"max_concurrent_calls": 4}, contracts={"topic_semantic": False})
    for stage in ("content_reviewer", "fact_checker", "style_reviewer"):
        home.model.delay_s[stage] = 0.1  # up to 15 reviewer calls could overlap without the cap
    path = _items_file(home, 20)
    first = _batch(home, str(path), "--concurrency", "5")
    assert first.returncode == 0, first.stderr[-3000:]
    assert "batch: 20 complete, 0 failed" in first.stderr
    ids = [item.project_id for item in read_items(path)]
    for project in ids:
        assert _status(home, project)["status"] == "complete"
        # The worker's waves end with run_end, as `pensieve run` does: the studio reads it.
        end = last_run_end(home.path / "workspaces" / "default" / "projects" / project / "events.jsonl")
        assert end is not None and end.outcome == "complete" and end.exit_code == 0
    counts = _requests(home)
    assert {project for project, _ in counts} == set(ids)
    # Never more than 5 projects at once: at most 5 distinct projects have a request in flight.
    assert _peak_projects(home) <= 5
    # llm.max_concurrent_calls 4: never more than 4 requests in flight at the model.
    spans = sorted((r.started, r.finished, r.project) for r in home.model.requests)
    in_flight = max(sum(1 for s, f, _ in spans if s <= start < f) for start, _, _ in spans)
    assert 2 <= in_flight <= 4

    seen = len(home.model.requests)
    again = _batch(home, str(path), "--concurrency", "5")
    assert again.returncode == 0, again.stderr[-3000:]
    assert len(home.model.requests) == seen  # nothing ran: zero model requests
    assert "batch: 20 complete, 0 failed" in again.stderr
    assert "20 projects (0 new)" in again.stderr

    queue = subprocess.run(
        [sys.executable, "-m", "pensieve", "queue", "--json"], env=_env(home), capture_output=True, text=True
    )
    data = json.loads(queue.stdout)
    assert len(data["complete"]) == 20 and data["queued"] == data["running"] == data["failed"] == []


@pytest.mark.slow
def test_another_concurrency_is_refused_while_the_queue_is_worked_and_queue_shows_who_runs_what(home: Home) -> None:
    from pensieve.batch.queue import HOST

    home.configure(queue={"poll_interval_s": 0.2}, contracts={"topic_semantic": False})
    for stage in STAGE_NAMES:
        home.model.delay_s[stage] = 0.15
    path = _items_file(home, 3)
    ids = [item.project_id for item in read_items(path)]
    out, err = home.path / "b.out", home.path / "b.err"
    batch = fork_cli(["batch", str(path), "--concurrency", "1"], _env(home), home.path, out, err)
    deadline = time.monotonic() + 90
    while True:  # `pensieve queue --json` shows the running project and which process holds it
        assert time.monotonic() < deadline, err.read_text()
        listing = _cli(home, "queue", "--json", name="q")
        data = json.loads(listing.stdout) if listing.returncode == 0 and listing.stdout else {}
        if data.get("running"):
            break
        time.sleep(0.2)
    label = f"batch pid {batch.pid} on {HOST}"
    (running,) = data["running"]
    (row,) = [w for w in data["workers"] if w["pid"] == batch.pid]
    assert running["project"] in ids and running["worker"] == label
    assert running["executor_id"] == row["executor_id"] and (row["kind"], row["concurrency"]) == ("batch", 1)
    text = _cli(home, "queue", name="q")
    assert text.returncode == 0, text.stderr
    assert "running" in text.stdout and label in text.stdout
    assert f"worker {label}, 1 at once" in text.stdout

    # DBOS keeps one worker_concurrency per queue: a worker with another N would set it for
    # the batch too (it ran 3 projects at once). It is refused, naming the N in force.
    refused = _cli(home, "worker", "--concurrency", "3", timeout=60, name="w")
    assert refused.returncode == 2, refused.stderr
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and "use --concurrency 1" in lines[0] and label in lines[0], refused.stderr
    batch.join(240)
    assert batch.exitcode == 0, err.read_text()[-3000:]
    assert "batch: 3 complete, 0 failed" in err.read_text()
    assert _peak_projects(home) == 1  # this process ran one project at a time throughout

    # Nobody works the queue any more: another N is taken (and nothing runs again).
    seen = len(home.model.requests)
    again = _batch(home, str(path), "--concurrency", "3")
    assert again.returncode == 0 and "batch: 3 complete, 0 failed" in again.stderr, again.stderr
    assert len(home.model.requests) == seen


@pytest.mark.slow
def test_work_queued_before_a_process_starts_is_taken_n_at_a_time_from_its_first_poll(home: Home) -> None:
    from pensieve.batch.queue import read_queue
    from pensieve.project.workspace import open_workspace

    home.configure(queue={"poll_interval_s": 0.2}, contracts={"topic_semantic": False})
    home.model.delay_s["refiner"] = 0.5
    path = _items_file(home, 3)
    workspace = open_workspace(home.path, "default")
    url = f"sqlite:///{workspace.root / 'queue.sqlite'}"
    # A batch that only enqueues, stopped before any worker came: three projects wait.
    out, err = home.path / "e.out", home.path / "e.err"
    args = ["batch", str(path), "--concurrency", "0", "--until", "refiner"]
    enqueuer = fork_cli(args, _env(home), home.path, out, err)
    deadline = time.monotonic() + 90
    while len([e for e in read_queue(workspace, url)[0] if e.state == "queued"]) < 3:
        assert time.monotonic() < deadline and enqueuer.exitcode is None, err.read_text()
        time.sleep(0.2)
    assert enqueuer.pid is not None
    os.kill(enqueuer.pid, signal.SIGKILL)
    enqueuer.join()
    # DBOS polls a queue with its row as it finds it at launch: a row with no limit (or
    # another N) had this process's first poll take all three.
    result = _batch(home, str(path), "--concurrency", "1", "--until", "refiner")
    assert result.returncode == 0 and "batch: 3 complete, 0 failed" in result.stderr, result.stderr[-3000:]
    assert _peak_projects(home) == 1


@pytest.mark.slow
def test_each_item_s_model_audience_and_length_reach_its_prompts_and_a_terminal_gets_the_live_table(
    home: Home,
) -> None:
    home.configure(queue={"poll_interval_s": 0.2}, contracts={"topic_semantic": False})
    home.model.delay_s["refiner"] = 0.6
    path = home.path / "items.yaml"
    path.write_text(
        "- {brief: How B-trees split pages, id: alpha, model: openai/gpt-4o,"
        " audience: database administrators, target_words: 1700}\n"
        "- {brief: How LSM trees compact runs, id: beta}\n"
    )
    out, err = home.path / "t.out", home.path / "t.err"
    args = ["batch", str(path), "--until", "refiner", "--model", "openai/gpt-3.5-turbo", "--concurrency", "2"]
    # rich takes stderr for an interactive terminal, as a person running it would have. A
    # process of its own (not forked): rich decides "interactive" when its console is made.
    env = {**_env(home), "TTY_COMPATIBLE": "1", "TTY_INTERACTIVE": "1", "COLUMNS": "100"}
    process = exec_cli(args, env, home.path, out, err)
    assert process.wait(180) == 0, err.read_text()[-3000:]

    sent = {r.project: r for r in home.model.requests if r.stage == "refiner"}
    assert (sent["alpha"].body["model"], sent["beta"].body["model"]) == ("gpt-4o", "gpt-3.5-turbo")
    alpha, beta = (next(m["content"] for m in sent[p].messages if m["role"] == "system") for p in ("alpha", "beta"))
    assert "about 1700 words" in alpha and "Audience: database administrators" in alpha
    assert "about 1700 words" not in beta and "database administrators" not in beta

    # The live table, last frame: project, state, stage and cost of each project.
    screen = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", err.read_text()).splitlines()
    headers = [i for i, line in enumerate(screen) if line.split()[:2] == ["project", "state"]]
    assert len(headers) > 1, screen  # redrawn while it ran, not printed once at the end
    frame = screen[headers[-1] :]
    assert frame[0].split() == ["project", "state", "stage", "cost", "worker"]
    rows = {line.split()[0]: line.split()[1:] for line in frame[1:3]}
    for project in ("alpha", "beta"):
        state, stage, cost = rows[project][:3]
        spent = load_status(home.project_dir(project) / "status.json").usage.cost_usd
        assert (state, stage, cost) == ("complete", "-", f"${spent:.4f}") and spent, rows
    running = [line.split() for line in screen if " running " in line]
    assert ["alpha", "running", "refiner"] in [r[:3] for r in running] and running[0][-2:] == ["this", "process"]


@pytest.mark.slow
def test_a_batch_killed_mid_way_resumes_without_running_a_finished_stage_again(home: Home) -> None:
    home.configure(queue={"poll_interval_s": 0.2}, contracts={"topic_semantic": False})
    for stage in STAGE_NAMES:
        home.model.delay_s[stage] = 0.15
    path = _items_file(home, 4)
    ids = [item.project_id for item in read_items(path)]
    proc = exec_cli(
        ["batch", str(path), "--concurrency", "2"], _env(home), home.path, home.path / "o1", home.path / "e1"
    )
    deadline = time.monotonic() + 120

    while len(_complete_stages(home, ids)) < 6 and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    done_at_kill = _complete_stages(home, ids)
    counts_at_kill = _requests(home)
    assert 6 <= len(done_at_kill) < 4 * len(STAGE_NAMES), done_at_kill
    assert any(_status(home, p)["status"] != "complete" for p in ids)  # killed mid-way

    for stage in STAGE_NAMES:
        home.model.delay_s[stage] = 0.0
    resumed = _batch(home, str(path), "--concurrency", "2")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "batch: 4 complete, 0 failed" in resumed.stderr
    after = _requests(home)
    for project, stage in done_at_kill:
        assert after[(project, stage)] == counts_at_kill[(project, stage)], (project, stage)
    for project in ids:
        assert _status(home, project)["status"] == "complete"


@pytest.mark.slow
def test_an_interrupted_batch_marks_its_stages_interrupted_exits_130_and_resumes(home: Home) -> None:
    home.configure(queue={"poll_interval_s": 0.2}, contracts={"topic_semantic": False})
    for stage in STAGE_NAMES:
        home.model.delay_s[stage] = 0.3
    path = _items_file(home, 2)
    ids = [item.project_id for item in read_items(path)]
    out, err = home.path / "i.out", home.path / "i.err"
    process = fork_cli(["batch", str(path), "--concurrency", "2"], _env(home), home.path, out, err)
    deadline = time.monotonic() + 90
    while len(_complete_stages(home, ids)) < 3:
        assert time.monotonic() < deadline, err.read_text()
        time.sleep(0.05)
    assert process.pid is not None
    os.kill(process.pid, signal.SIGINT)
    process.join(60)
    assert process.exitcode == 130, err.read_text()
    assert "interrupted: run the same command again" in err.read_text()
    for project in ids:
        doc = _status(home, project)
        assert doc["status"] != "running"
        stages = doc["stages"]
        assert isinstance(stages, dict)
        assert all(entry["status"] != "running" for entry in stages.values())
    done = _complete_stages(home, ids)
    counts = _requests(home)

    for stage in STAGE_NAMES:
        home.model.delay_s[stage] = 0.0
    resumed = _batch(home, str(path), "--concurrency", "2")
    assert resumed.returncode == 0 and "batch: 2 complete, 0 failed" in resumed.stderr, resumed.stderr[-2000:]
    after = _requests(home)
    assert all(after[key] == counts[key] for key in done)


@pytest.mark.slow
def test_the_budget_stops_new_projects_and_failures_are_retried_on_request(home: Home) -> None:
    home.configure(queue={"poll_interval_s": 0.2}, contracts={"topic_semantic": False})
    path = _items_file(home, 3)
    ids = [item.project_id for item in read_items(path)]
    # The first project's drafter fails for good (400s are not retried).
    home.model.always("drafter", {"status": 400, "body": "", "headers": {}})
    # Any spend reaches a budget this small: the first project finishes its current stage,
    # and no other project starts.
    result = _batch(home, str(path), "--concurrency", "1", "--max-cost-usd", "0.0000001")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "not finished" in result.stderr and "batch budget reached" in result.stderr
    started = {project for project, _ in _requests(home)}
    assert len(started) == 1
    # The budget is the batch's over all its runs: the same command again spends nothing.
    seen = len(home.model.requests)
    again = _batch(home, str(path), "--concurrency", "1", "--max-cost-usd", "0.0000001")
    assert again.returncode == 0, again.stderr[-3000:]
    assert len(home.model.requests) == seen
    spent = sum(load_status(home.project_dir(p) / "status.json").usage.cost_usd or 0.0 for p in ids)
    assert f"batch budget reached: the batch's projects have spent ${spent:.4f}" in again.stderr
    assert f"run the same command with --max-cost-usd above ${spent:.4f}" in again.stderr

    failed = _batch(home, str(path), "--concurrency", "1", "--until", "drafter")
    assert failed.returncode == 1
    assert "batch: 0 complete, 3 failed" in failed.stderr and "--retry-failed" in failed.stderr
    seen = len(home.model.requests)
    not_retried = _batch(home, str(path), "--until", "drafter")
    assert not_retried.returncode == 1 and len(home.model.requests) == seen

    home.model.fallbacks.clear()
    retried = _batch(home, str(path), "--until", "drafter", "--retry-failed")
    assert retried.returncode == 0, retried.stderr[-3000:]
    assert "batch: 3 complete, 0 failed" in retried.stderr
    for project in ids:
        doc = _status(home, project)
        stages = doc["stages"]
        assert isinstance(stages, dict)
        assert stages["drafter"]["status"] == "complete" and stages["reviser"]["status"] == "pending"


def test_batch_list_and_help_import_no_dbos(home: Home) -> None:
    code = (
        "import sys\nfrom typer.testing import CliRunner\nfrom pensieve.cli.main import app\n"
        "for args in (['list'], ['batch', '--help'], ['queue', '--help']):\n"
        "    assert CliRunner().invoke(app, args).exit_code == 0\n"
        "bad = [m for m in ('dbos', 'litellm', 'torch', 'sqlalchemy') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], env=_env(home), cwd=home.path, check=True, timeout=60)


# -- several workers on PostgreSQL --------------------------------------------------------------


@pytest.mark.slow
def test_three_workers_on_postgres_a_killed_one_s_project_is_finished_by_another(
    home: Home, tmp_path_factory: pytest.TempPathFactory
) -> None:
    from pensieve.batch.queue import read_queue
    from pensieve.project.workspace import open_workspace
    from tests.fakes.postgres import postgres_server

    home.configure(queue={"poll_interval_s": 0.2, "worker_timeout_s": 5}, contracts={"topic_semantic": False})
    for stage in STAGE_NAMES:
        home.model.delay_s[stage] = 0.2
    path = _items_file(home, 4)
    ids = [item.project_id for item in read_items(path)]
    workspace = open_workspace(home.path, "default")
    logs = [home.path / name for i in range(3) for name in (f"w{i}.out", f"w{i}.err")]
    logs += [home.path / "b.out", home.path / "b.err"]
    # The database lives outside the Pensieve home: every file under the home is checked below.
    with postgres_server(tmp_path_factory.mktemp("pg")) as server_url:
        # The server trusts loopback connections and ignores the password; Pensieve gets it
        # only from the environment and must write it nowhere.
        password = "pg-S3cret-7f2c19"
        url = server_url.replace("postgresql://postgres@", f"postgresql://postgres:{password}@")
        env = {**_env(home), "PENSIEVE_QUEUE_URL": url}
        workers = [
            fork_cli(["worker", "--concurrency", "1"], env, home.path, home.path / f"w{i}.out", home.path / f"w{i}.err")
            for i in range(3)
        ]
        deadline = time.monotonic() + 90
        while len([r for r in read_queue(workspace, url)[1] if r.kind == "worker"]) < 3:
            assert time.monotonic() < deadline, [(home.path / f"w{i}.err").read_text() for i in range(3)]
            time.sleep(0.2)
        # --concurrency 0: the batch only enqueues and watches; the workers run every project.
        batch = fork_cli(
            ["batch", str(path), "--concurrency", "0"], env, home.path, home.path / "b.out", home.path / "b.err"
        )

        victim = None
        while victim is None:
            assert time.monotonic() < deadline + 60, (home.path / "b.err").read_text()
            entries, rows = read_queue(workspace, url)
            by_id = {r.executor_id: r for r in rows if r.kind == "worker"}
            for entry in entries:
                if entry.state == "running" and entry.executor_id in by_id:
                    stages = _status(home, entry.project)["stages"]
                    assert isinstance(stages, dict)
                    if sum(s["status"] == "complete" for s in stages.values()) >= 2:
                        victim = (entry.project, by_id[entry.executor_id])
                        break
            time.sleep(0.1)
        project, worker_row = victim
        survivors = {r.executor_id for r in by_id.values() if r.executor_id != worker_row.executor_id}
        assert len(survivors) == 2
        os.kill(worker_row.pid, signal.SIGKILL)
        stages = _status(home, project)["stages"]
        assert isinstance(stages, dict)
        done_at_kill = {name for name, entry in stages.items() if entry["status"] == "complete"}
        counts_at_kill = _requests(home)
        assert len(done_at_kill) < len(STAGE_NAMES)

        batch.join(240)
        assert batch.exitcode == 0, (home.path / "b.err").read_text()[-3000:]
        assert "batch: 4 complete, 0 failed" in (home.path / "b.err").read_text()
        after = _requests(home)
        for stage in done_at_kill:
            assert after[(project, stage)] == counts_at_kill[(project, stage)], stage
        assert _status(home, project)["status"] == "complete"
        entries, _rows = read_queue(workspace, url)
        finished_by = {e.project: e.executor_id for e in entries}
        assert finished_by[project] in survivors  # one of the other workers, not the batch
        assert {e.state for e in entries} == {"complete"} and {e.project for e in entries} == set(ids)

        for process in workers:
            if process.pid is not None and process.pid != worker_row.pid:
                os.kill(process.pid, signal.SIGTERM)
        for i, process in enumerate(workers):
            process.join(30)
            if process.pid != worker_row.pid:
                assert process.exitcode == 0 and "stopped" in (home.path / f"w{i}.err").read_text()
    secret = password.encode()
    for log in logs:
        assert secret not in log.read_bytes(), log
    assert any(b"postgres:***@" in log.read_bytes() for log in logs)  # the URL is shown, hidden
    written = [f for f in home.path.rglob("*") if f.is_file() and secret in f.read_bytes()]
    assert written == []
