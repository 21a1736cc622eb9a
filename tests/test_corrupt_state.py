"""An unreadable status.json is never reset: the command says so, keeps a copy, and says
how to recover; `pensieve repair` rebuilds it from the artifacts on disk."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from pensieve.stages import STAGE_NAMES
from tests.conftest import Home

CORRUPTIONS: dict[str, Callable[[bytes], bytes]] = {
    "truncated": lambda good: good[: len(good) // 2],
    "empty": lambda good: b"",
    "not-json": lambda good: b"<html>this is not json</html>",
    "binary": lambda good: b"\x00\xff\xfe garbage",
    "unknown-schema-version": lambda good: json.dumps({**json.loads(good), "schema_version": 99}).encode(),
    "no-schema-version": lambda good: json.dumps(
        {k: v for k, v in json.loads(good).items() if k != "schema_version"}
    ).encode(),
    "wrong-shape": lambda good: json.dumps({**json.loads(good), "stages": "all done"}).encode(),
    "a-list": lambda good: b"[]",
}


@pytest.mark.parametrize("case", list(CORRUPTIONS))
def test_corrupt_status_is_refused_kept_and_explained(home: Home, case: str) -> None:
    pid = home.new()
    assert home.run("run", pid, "--until", "outliner").exit_code == 0
    status_path = home.project_dir(pid) / "status.json"
    bad = CORRUPTIONS[case](status_path.read_bytes())
    status_path.write_bytes(bad)
    calls = len(home.model.requests)

    for args in (("run", pid), ("status", pid), ("status", pid, "--json")):
        result = home.run(*args)
        assert result.exit_code == 2, (args, result.stderr)
        message = result.stderr.strip()
        assert len(message.splitlines()) == 1, message
        assert "status.json" in message
        assert f"pensieve repair {pid}" in message
        assert "a copy was kept as status.corrupt-" in message
        assert status_path.read_bytes() == bad, "never silently reset"
    assert len(home.model.requests) == calls  # no stage ran

    copies = list(home.project_dir(pid).glob("status.corrupt-*.json"))
    assert copies and all(c.read_bytes() == bad for c in copies)

    # list does not fail or hide the project: it reports it unreadable.
    listed = home.run("list", "--json")
    assert listed.exit_code == 0
    assert {row["id"]: row["status"] for row in json.loads(listed.stdout)}[pid] == "unreadable"

    repaired = home.run("repair", pid)
    assert repaired.exit_code == 0, repaired.stderr
    assert "3 of 10 stages complete" in repaired.stderr
    assert list(home.project_dir(pid).glob("status.replaced-*.json"))
    doc = json.loads(status_path.read_text())
    assert [doc["stages"][n]["status"] for n in STAGE_NAMES[:4]] == ["complete", "complete", "complete", "pending"]

    # The project continues without paying again for the stages it had.
    before = {stage: home.model.count(stage) for stage in ("refiner", "researcher", "outliner")}
    result = home.run("run", pid)
    assert result.exit_code == 0, result.stderr
    assert {stage: home.model.count(stage) for stage in before} == before
    assert json.loads(status_path.read_text())["status"] == "complete"


def test_repair_refuses_while_a_run_holds_the_lock(home: Home) -> None:
    pid = home.new()
    project_dir = home.project_dir(pid)
    (project_dir / "status.json").write_text("{")
    import fcntl

    with (project_dir / ".run.lock").open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        held.write("424242\n")
        held.flush()
        result = home.run("repair", pid)
    assert result.exit_code == 1
    assert f"project {pid} is being run by process 424242" in result.stderr
    assert (project_dir / "status.json").read_text() == "{"
