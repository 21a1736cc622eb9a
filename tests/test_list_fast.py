"""`pensieve list --json` answered by pensieve.launch without Typer, rich or pydantic: the
same text as the full command line over every kind of project, the same one-line errors
(it hands anything it cannot answer to the full path), and a status reader that agrees
with the model on every field a row shows."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import IO, Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pensieve.launch import list_json_workspace
from pensieve.project.status import Status, load_status
from pensieve.project.status_view import read_status_view
from pensieve.stages import STAGE_NAMES
from tests.conftest import Home
from tests.fakes.cli_process import child_env
from tests.studio_support import make_project, sentence, write_evidence


def _launch(home: Home, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`python -m pensieve ARGS` (the entry point), listing the modules it imported."""
    code = (
        "import sys, runpy\n"
        f"sys.argv = ['pensieve', *{list(args)!r}]\n"
        "try:\n    runpy.run_module('pensieve', run_name='__main__')\n"
        "finally:\n    sys.stderr.write('\\nMODULES ' + ' '.join(sorted(sys.modules)) + '\\n')\n"
    )
    environ = child_env(home.path, env)
    environ.pop("PENSIEVE_CONFIG")  # the home's own configs/pensieve.yaml, as a user has it
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=environ, cwd=home.path, timeout=60
    )


def _split(proc: subprocess.CompletedProcess[str]) -> tuple[str, set[str]]:
    stderr, _, modules = proc.stderr.rpartition("\nMODULES ")
    return stderr.strip(), set(modules.split())


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _every_kind_of_project(home: Home) -> list[IO[str]]:
    """Every kind of project; returns the run lock held for live-run (a run holds its flock)."""
    complete = make_project("complete-one")
    (complete / "final.md").write_text("# Title\n\nIndexes are graphs [S1].\n")
    write_evidence(complete, "final.md", [sentence(0, "Indexes are graphs [S1].", "S1", "supported", "graphs")])
    make_project("half-done", upto="drafter")
    home.new('A pending brief\nwith a second line and \u00e9 "quotes" \\ and a tab\t')
    held: list[IO[str]] = []
    # stale-run: a live pid left in a lock nobody holds (a copied project, a reused pid).
    for pid, holder in (("live-run", os.getpid()), ("dead-run", _dead_pid()), ("stale-run", os.getpid())):
        directory = make_project(pid, upto="outliner")
        doc = json.loads((directory / "status.json").read_text())
        doc["status"], doc["current_stage"] = "running", "drafter"
        (directory / "status.json").write_text(json.dumps(doc))
        (directory / ".run.lock").write_text(f"{holder}\n")
        if pid == "live-run":
            lock = (directory / ".run.lock").open("r")
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            held.append(lock)
    corrupt = Path(home.project_dir(home.new("Corrupt status")))
    (corrupt / "status.json").write_bytes(b'{"schema_version": 1, "id": "x"')
    no_brief = Path(home.project_dir(home.new("Brief goes away")))
    (no_brief / "brief.md").unlink()
    binary = Path(home.project_dir(home.new("Binary brief")))
    (binary / "brief.md").write_bytes(b"caf\xff \x00 brief\n")
    problems = Path(home.project_dir(home.new("With problems")))
    doc = json.loads((problems / "status.json").read_text())
    doc["problems"] = ["S9 is cited but not in the sources", "paragraph 2 cites nothing"]
    (problems / "status.json").write_text(json.dumps(doc))
    outside = home.path / "outside"
    outside.mkdir()
    (outside / "brief.md").write_text("secret brief elsewhere")
    (outside / "status.json").write_text((problems / "status.json").read_text())
    projects = home.path / "workspaces" / "default" / "projects"
    (projects / "linked-dir").symlink_to(outside, target_is_directory=True)
    linked_brief = Path(home.project_dir(home.new("Linked brief")))
    (linked_brief / "brief.md").unlink()
    (linked_brief / "brief.md").symlink_to(outside / "brief.md")
    (projects / "no-status").mkdir()  # half made: not listed
    (projects / ".hidden").mkdir()
    (projects / "a-file").write_text("not a project")
    return held


def test_list_json_is_answered_without_typer_and_matches_the_full_command_line(home: Home) -> None:
    held = _every_kind_of_project(home)
    try:
        proc = _launch(home, "list", "--json")
        full = home.run("list", "--json")
    finally:
        for lock in held:
            lock.close()
    stderr, modules = _split(proc)
    assert proc.returncode == 0 and stderr == "", stderr
    assert full.exit_code == 0
    assert proc.stdout == full.stdout, "the fast path prints exactly what the full command line prints"
    rows = {row["id"]: row for row in json.loads(proc.stdout)}
    assert rows["live-run"]["status"] == "running" and rows["dead-run"]["status"] == "paused"
    assert rows["stale-run"]["status"] == "paused"  # the lock decides, not the pid in it
    assert rows["complete-one"]["supported_share"] == 1.0 and rows["complete-one"]["status"] == "complete"
    assert rows["half-done"]["current_stage"] == "content_reviewer"
    assert rows["corrupt-status"]["status"] == "unreadable"
    assert rows["with-problems"]["problems"] == 2
    assert rows["linked-dir"]["status"] == rows["linked-brief"]["status"] == "unreadable"
    assert "secret" not in proc.stdout
    assert rows["binary-brief"]["brief"].startswith("caf\ufffd")
    assert "no-status" not in rows and ".hidden" not in rows and "a-file" not in rows
    heavy = {m for m in modules if m.split(".")[0] in {"typer", "rich", "pydantic", "click", "litellm", "torch"}}
    assert "pensieve.launch" in modules and not heavy, sorted(heavy)[:8]


def test_the_workspace_option_in_each_form(home: Home) -> None:
    home.new("In the default workspace")
    assert home.run("new", "In another workspace", "--workspace", "other").exit_code == 0
    expected = home.run("list", "--json", "-w", "other").stdout
    assert json.loads(expected)[0]["id"] == "in-another-workspace"
    for args in (("-w", "other"), ("--workspace", "other"), ("--workspace=other",)):
        for order in ((*args, "--json"), ("--json", *args)):
            proc = _launch(home, "list", *order)
            assert proc.returncode == 0 and proc.stdout == expected, (order, proc.stderr)
            assert "typer" not in _split(proc)[1]
    empty = _launch(home, "list", "--json", "-w", "nothing-here")
    assert empty.returncode == 0 and empty.stdout == home.run("list", "--json", "-w", "nothing-here").stdout


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["list", "--json"], "default"),
        (["list", "--json", "--json"], "default"),
        (["list", "-w", "a", "--json"], "a"),
        (["list", "--workspace=a", "--json", "-w", "b"], "b"),
        (["list"], None),
        (["list", "-w", "a"], None),
        (["list", "--json", "-w"], None),
        (["list", "--json", "--help"], None),
        (["list", "--json", "extra"], None),
        (["list", "--json", "--", "-w"], None),
        (["list", "--json", "-wa"], None),
        (["status", "--json"], None),
        (["--json", "list"], None),
        ([], None),
    ],
)
def test_only_command_lines_it_is_sure_of_take_the_fast_path(args: list[str], expected: str | None) -> None:
    assert list_json_workspace(args) == expected


def test_failures_go_to_the_full_command_line_with_its_one_line_errors(home: Home) -> None:
    home.new()
    for args in (("list", "--json", "-w", "../escape"), ("list", "--json", "--workspace=")):
        proc = _launch(home, *args)
        stderr, modules = _split(proc)
        full = home.run(*args)
        assert proc.returncode == full.exit_code == 2, stderr
        assert len(stderr.splitlines()) == 1 and "workspace" in stderr and "Traceback" not in stderr
        assert proc.stdout == ""
        assert "pensieve.cli.main" in modules  # the full path said it
    home.configure(llm={"timeout_s": "soon"})
    proc = _launch(home, "list", "--json")
    stderr, _ = _split(proc)
    assert proc.returncode == home.run("list", "--json").exit_code == 2
    assert len(stderr.splitlines()) == 1 and "llm.timeout_s" in stderr, stderr
    assert proc.stdout == ""
    projects = home.path / "workspaces" / "default" / "projects"
    projects.chmod(0o000)
    try:
        if os.access(projects, os.R_OK):
            return  # root reads through chmod 0
        proc = _launch(home, "list", "--json")
        stderr, _ = _split(proc)
        assert proc.returncode == 1 and len(stderr.splitlines()) == 1 and "Permission denied" in stderr
    finally:
        projects.chmod(0o755)


def test_invalid_utf8_arguments_are_one_line_before_any_parsing(home: Home) -> None:
    proc = _launch(home, "list", "--json", "-w", b"caf\xff".decode("utf-8", "surrogateescape"))
    stderr, modules = _split(proc)
    assert proc.returncode == 2 and stderr == (
        "error: a command-line argument is not valid UTF-8 text; check the terminal's encoding"
    )
    assert "pensieve.project.listing" not in modules


# -- the status reader agrees with the model on every shown field ---------------------------
def _shown(status: Status) -> dict[str, Any]:
    return {
        "status": status.status,
        "current_stage": status.current_stage or status.first_unfinished(),
        "updated_at": status.updated_at,
        "problems": len(status.problems),
        "stages_done": sum(1 for s in status.stages.values() if s.status == "complete"),
        "cost_usd": status.usage.cost_usd,
        "tokens": status.usage.total_tokens,
    }


def _view_fields(raw: bytes) -> dict[str, Any] | None:
    view = read_status_view(raw, STAGE_NAMES)
    if view is None:
        return None
    return {name: getattr(view, name) for name in view.__slots__}


def _model_fields(path: Path) -> dict[str, Any] | None:
    from pensieve.errors import CorruptState

    try:
        return _shown(load_status(path, keep_copy=False))
    except CorruptState:
        return None


@pytest.fixture(scope="module")
def real_status() -> dict[str, Any]:
    status = Status.new("p", "default")
    status.status, status.current_stage = "paused", None
    status.problems = ["one"]
    for name in STAGE_NAMES[:4]:
        status.stages[name].status = "complete"
        status.stages[name].usage.add(120, 30, 0.002)
        status.usage.add(120, 30, 0.002)
    result: dict[str, Any] = json.loads(status.to_json())
    return result


# Where a shown field lives in status.json.
SHOWN_PATHS: list[tuple[str | int, ...]] = [
    ("schema_version",),
    ("id",),
    ("workspace",),
    ("status",),
    ("current_stage",),
    ("updated_at",),
    ("problems",),
    ("problems", 0),
    ("stages",),
    ("stages", STAGE_NAMES[0]),
    ("stages", STAGE_NAMES[0], "status"),
    ("stages", STAGE_NAMES[5], "status"),
    ("usage",),
    ("usage", "prompt_tokens"),
    ("usage", "completion_tokens"),
    ("usage", "cost_usd"),
]

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from(["pending", "running", "paused", "complete", "error", "interrupted", "", "7", "1.5"])
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=st.sampled_from(SHOWN_PATHS), value=json_values)
def test_the_reader_never_shows_what_the_model_would_refuse_or_read_differently(
    real_status: dict[str, Any], tmp_path_factory: pytest.TempPathFactory, where: tuple[str | int, ...], value: Any
) -> None:
    doc = json.loads(json.dumps(real_status))
    target: Any = doc
    for key in where[:-1]:
        target = target[key]
    target[where[-1]] = value
    raw = json.dumps(doc).encode()
    path = tmp_path_factory.mktemp("status") / "status.json"
    path.write_bytes(raw)
    model, view = _model_fields(path), _view_fields(raw)
    if model is None:
        assert view is None, (where, value, view)  # refused by the model: unreadable in list too
    elif view is not None:
        assert view == model, (where, value)
    # (A view may refuse what the model coerces, e.g. "7" as a token count: Pensieve writes numbers.)


def test_the_reader_and_the_model_agree_on_real_and_corrupt_files(real_status: dict[str, Any], tmp_path: Path) -> None:
    from tests.test_corrupt_state import CORRUPTIONS

    good = json.dumps(real_status).encode()
    cases = {"real": good, **{name: corrupt(good) for name, corrupt in CORRUPTIONS.items()}}
    for name, raw in cases.items():
        path = tmp_path / f"{name}.json"
        path.write_bytes(raw)
        assert _view_fields(raw) == _model_fields(path), name
    assert _view_fields(good) == {
        "status": "paused",
        "current_stage": STAGE_NAMES[4],
        "updated_at": real_status["updated_at"],
        "problems": 1,
        "stages_done": 4,
        "cost_usd": 0.008,
        "tokens": 600,
    }
