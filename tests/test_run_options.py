"""One way to run a project: the options a run is given are checked in one place
(`RunOptions`), in the same words whoever asks (`pensieve run`, `pensieve batch`, the
studio), and one entry point (`run.pipeline.run_project`) runs them; refusals carry a kind
the studio answers with, not words it sorts."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from pensieve.errors import ErrorKind, ProjectBusy, UsageError
from pensieve.project.listing import new_project
from pensieve.run.preflight import RunOptions
from pensieve.studio.app import HTTP_STATUS
from tests.conftest import Home
from tests.studio_support import client, make_project, workspace

PACKAGE = Path(__file__).resolve().parent.parent / "pensieve"

REFUSED = [
    # (options, as a flag says it, as the studio's JSON says it)
    (
        {"until": "editor"},
        "unknown stage 'editor'; stages are: refiner",
        "until: unknown stage 'editor'; stages are: refiner",
    ),
    (
        {"from_stage": "polisher", "until": "refiner"},
        "--from polisher comes after --until refiner; nothing would run",
        "from polisher comes after until refiner; nothing would run",
    ),
]


@pytest.mark.parametrize(("given", "as_flags", "as_api"), REFUSED)
def test_run_options_refuse_in_one_wording_per_surface(given: dict[str, str], as_flags: str, as_api: str) -> None:
    with pytest.raises(UsageError) as flags:
        RunOptions(**given)  # type: ignore[arg-type]
    assert str(flags.value).startswith(as_flags)
    with pytest.raises(UsageError) as api:
        RunOptions.from_api(given.get("until"), given.get("from_stage"), None)
    assert str(api.value).startswith(as_api)


def test_run_options_refuse_what_no_run_can_do() -> None:
    with pytest.raises(UsageError, match="--stage runs one stage; it cannot be combined with --until or --from"):
        RunOptions(stage="drafter", until="polisher")
    with pytest.raises(UsageError, match="--model is empty"):
        RunOptions(model="  ")
    with pytest.raises(UsageError, match=r"^from: unknown stage \['x'\]"):
        RunOptions.from_api(None, ["x"], None)
    assert RunOptions.from_api("", "", "") == RunOptions()  # "" is "not given" in a JSON body


def test_run_options_are_the_flags_of_the_run_they_start() -> None:
    options = RunOptions(until="polisher", from_stage="drafter", model="openai/gpt-4o-mini", force=True)
    assert options.as_args() == [
        "--until",
        "polisher",
        "--from",
        "drafter",
        "--force",
        "--model",
        "openai/gpt-4o-mini",
    ]
    assert RunOptions(stage="drafter").as_args() == ["--stage", "drafter"]


def test_the_cli_the_batch_and_the_studio_refuse_alike(home: Home, tmp_path: Path) -> None:
    pid = home.new()
    result = home.run("run", pid, "--from", "polisher", "--until", "refiner")
    assert result.exit_code == 2 and result.stderr.strip() == f"error: {REFUSED[1][1]}"
    batch_file = tmp_path / "b.yaml"
    batch_file.write_text("- brief: How B-trees work\n")
    result = home.run("batch", str(batch_file), "--until", "editor")
    assert result.exit_code == 2 and result.stderr.startswith(f"error: {REFUSED[0][1]}")
    make_project("p1", upto="outliner")
    response = client().post("/api/projects/p1/run", json={"from": "polisher", "until": "refiner"})
    assert response.status_code == 400 and response.json()["error"] == REFUSED[1][2]


def test_refusals_carry_the_kind_the_studio_answers_with(home: Home) -> None:
    assert set(HTTP_STATUS) == set(ErrorKind)
    assert HTTP_STATUS[ProjectBusy("busy").kind] == 409
    ws = workspace()
    new_project(ws, "How B-trees work", "bt")
    with pytest.raises(UsageError) as taken:
        new_project(ws, "How B-trees work", "bt")
    assert taken.value.kind is ErrorKind.CONFLICT and taken.value.exit_code == 2
    with pytest.raises(UsageError) as missing:
        ws.existing_project("nope")
    assert missing.value.kind is ErrorKind.NOT_FOUND
    assert UsageError("bad").kind is ErrorKind.BAD_INPUT


def test_only_the_pipeline_builds_a_runner() -> None:
    """The CLI and the batch worker run a project through `run_project`, never a Runner of
    their own (the lock, recovery and the leftover-process kill live there once)."""
    builders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PACKAGE / "run" / "pipeline.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Runner":
                builders.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert builders == []
