"""The studio's queue view (`/queue`, `GET /api/queue`): what `pensieve queue --json` shows,
read in the studio's process without starting or changing anything."""

from __future__ import annotations

import json
import subprocess
import time

import pytest
import yaml

from tests.conftest import MODEL_KEY, Home
from tests.fakes.cli_process import child_env, fork_cli
from tests.studio_support import client, workspace


def test_a_workspace_without_a_queue_says_so(home: Home) -> None:
    response = client().get("/api/queue")
    assert response.status_code == 200
    assert response.json()["queue"] is None and response.json()["workspace"] == "default"
    page = client().get("/queue")
    assert page.status_code == 200 and "no batch queue in this workspace" in page.text
    assert '<a href="/queue">Queue</a>' in client().get("/").text  # in the navigation
    assert not (workspace().root / "queue.sqlite").exists()  # looking created nothing


def _batch(home: Home, *args: str) -> subprocess.CompletedProcess[str]:
    out, err = home.path / "batch.out", home.path / "batch.err"
    env = child_env(home.path, {"OPENAI_API_KEY": MODEL_KEY})
    process = fork_cli(["batch", *args], env, home.path, out, err)
    process.join(120)
    assert process.exitcode is not None, "batch did not finish"
    return subprocess.CompletedProcess(args, process.exitcode, out.read_text(), err.read_text())


@pytest.mark.slow
def test_a_batch_s_projects_show_complete_as_pensieve_queue_json_shows_them(home: Home) -> None:
    from pensieve.batch.queue import HOST, Registry, WorkerRow, queue_url
    from pensieve.config import load_settings

    home.configure(queue={"poll_interval_s": 0.2}, contracts={"topic_semantic": False})
    items = home.path / "items.yaml"
    items.write_text(
        yaml.safe_dump(
            [{"brief": "How B-trees keep pages balanced", "id": "btrees"}, {"brief": "How LSM trees compact <b>"}]
        )
    )
    result = _batch(home, str(items), "--concurrency", "2", "--until", "refiner")
    assert result.returncode == 0, result.stderr
    queue_db = workspace().root / "queue.sqlite"
    before = queue_db.read_bytes()

    api = client().get("/api/queue")
    assert api.status_code == 200
    view = api.json()
    shown = view["queue"]
    assert [e["state"] for e in shown["complete"]] == ["complete", "complete"]
    assert "btrees" in {e["project"] for e in shown["complete"]}
    assert shown["queued"] == shown["running"] == shown["failed"] == [] and shown["workers"] == []
    cli = home.run("queue", "--json")
    assert cli.exit_code == 0 and json.loads(cli.stdout) == shown  # the same object as the CLI's
    assert "queue pensieve.default: 2 complete" in home.run("queue").stdout  # (shares the grouping)

    page = client().get("/queue").text
    assert "2 complete" in page and 'data-project="btrees" data-state="complete"' in page
    assert "No worker is registered" in page
    assert queue_db.read_bytes() == before  # read, never written

    # A live worker (a row in the workers table, as `pensieve worker` writes) is listed.
    url = queue_url(load_settings(), workspace())
    registry = Registry(url)
    try:
        now = time.time()
        registry.register(WorkerRow("exec-7f3a", "default", "worker", HOST, 4242, 3, now, now))
    finally:
        registry.close()
    workers = client().get("/api/queue").json()["queue"]["workers"]
    assert [(w["executor_id"], w["pid"], w["concurrency"]) for w in workers] == [("exec-7f3a", 4242, 3)]
    page = client().get("/queue").text
    assert "worker pid 4242 on" in page and "3 at once" in page and "exec-7f3a" in page


def test_the_studio_reads_the_queue_without_changing_it(home: Home) -> None:
    """An empty queue database (as a fresh `pensieve worker` leaves it) is read, not written."""
    from pensieve.batch.queue import Registry, queue_url
    from pensieve.config import load_settings

    workspace().root.mkdir(parents=True, exist_ok=True)
    url = queue_url(load_settings(), workspace())
    Registry(url).close()  # creates queue.sqlite with the workers table only: no DBOS tables
    queue_db = workspace().root / "queue.sqlite"
    before = queue_db.read_bytes()
    view = client().get("/api/queue").json()
    assert view["queue"] == {"queued": [], "running": [], "complete": [], "failed": [], "other": [], "workers": []}
    assert "The queue is empty." in client().get("/queue").text
    assert queue_db.read_bytes() == before
