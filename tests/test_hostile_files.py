"""Hostile input on disk (issue 15, second audit): planted trees, FIFOs, nested and giant
files, and concurrent writers. Each test fails without its fix, and none takes long: big
files are sparse, hangs are caught by a timeout and memory by tracemalloc."""

from __future__ import annotations

import contextlib
import errno
import functools
import io
import json
import os
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pensieve.config import Settings
from pensieve.errors import CorruptState, UsageError
from pensieve.evidence.store import load_evidence
from pensieve.project.events import Event, EventKind, EventLog, read_events
from pensieve.project.workspace import Workspace, find_link, remove_stale_temporaries
from pensieve.run.dispatch import ToolBox
from pensieve.stages import BY_NAME
from pensieve.tools import catalog
from pensieve.tools.registry import ToolContext
from tests.conftest import Home
from tests.fakes.cli_process import child_env

# --------------------------------------------------------------------------------------
# Deep trees: no walk or delete recurses, and a tree too deep or too large to check is
# refused rather than accepted unchecked.


def _deep_chain(parent: Path, levels: int) -> Path:
    """parent/d/d/.../d, `levels` deep (made relative to open directories: the path is
    longer than the system's limit). Returns its top."""
    parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(levels):
            os.mkdir("d", dir_fd=fd)
            child = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
    finally:
        os.close(fd)
    return parent / "d"


def _remove_chain(top: Path) -> None:
    """Undo _deep_chain one level at a time with short paths (shutil.rmtree, which pytest
    uses to clean up, recurses and would fail on it)."""
    spare = top.parent / "spare"
    while (top / "d").is_dir():
        (top / "d").rename(spare)
        top.rmdir()
        spare.rename(top)
    top.rmdir()


@pytest.mark.parametrize("where", ["scratch", ".tmp-left"])
def test_a_planted_deep_tree_is_refused_with_one_line(home: Home, where: str) -> None:
    pid = home.new()
    top = _deep_chain(home.project_dir(pid) / where, 1200)
    try:
        for command in (["run", pid], ["status", pid]):
            result = home.run(*command)
            assert result.exit_code == 2, (command, result.stderr)
            assert "nested too deeply" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    finally:
        _remove_chain(top)
    assert home.model.requests == []
    assert home.run("status", pid).exit_code == 0  # the same project, once cleaned


@contextlib.contextmanager
def _stack_limit(spare: int) -> Iterator[None]:
    """Only `spare` more frames than the caller has: a walk that recurses per level fails."""
    depth, frame = 0, sys._getframe()
    while frame.f_back is not None:
        depth, frame = depth + 1, frame.f_back
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(depth + spare)
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


def test_temporaries_and_staging_are_deleted_without_recursion(tmp_path: Path) -> None:
    from pensieve.run.commit import clear_staging

    workspace = Workspace(tmp_path, "default")
    project = workspace.project("alpha")
    (project.dir).mkdir(parents=True)
    (project.dir / "status.json").write_text("{}")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.md").write_text("keep")
    for where in (".tmp-left", "scratch/.tmp-x", ".staging/refiner"):
        top = _deep_chain(project.dir / where, 60)
        (top / "note.md").write_text("x")
        (top / "link").symlink_to(outside, target_is_directory=True)
    with _stack_limit(40):
        removed = remove_stale_temporaries(project.dir)
        clear_staging(project, BY_NAME["refiner"])
    assert sorted(p.relative_to(project.dir).as_posix() for p in removed) == [".tmp-left", "scratch/.tmp-x"]
    assert sorted(p.name for p in project.dir.iterdir()) == [".staging", "scratch", "status.json"]
    assert list((project.dir / ".staging").iterdir()) == [] and list((project.dir / "scratch").iterdir()) == []
    assert (outside / "keep.md").read_text() == "keep"


def test_remove_tree_refuses_a_tree_deeper_than_its_bound(tmp_path: Path) -> None:
    from pensieve.project.workspace import remove_tree

    top = _deep_chain(tmp_path / "tree", 80)
    with pytest.raises(OSError, match="nested more than 64"):
        remove_tree(top)
    remove_tree(top, max_depth=100)
    assert not top.exists()


def test_a_tree_too_large_to_check_for_links_is_refused(home: Home, tmp_path: Path) -> None:
    root = tmp_path / "tree"
    (root / "aaa").mkdir(parents=True)
    for n in range(60):
        (root / "aaa" / f"f{n}").touch()
    with pytest.raises(UsageError, match="too many files to check for links: more than 50"):
        find_link(root, max_entries=50)
    home.monkeypatch.setattr("pensieve.project.workspace.MAX_TREE_ENTRIES", 100)
    pid = home.new()
    (home.project_dir(pid) / "aaa").mkdir()
    for n in range(150):
        (home.project_dir(pid) / "aaa" / f"f{n}").touch()
    for command in (["run", pid], ["status", pid], ["sources", pid]):
        result = home.run(*command)
        assert result.exit_code == 2 and "too many files to check for links" in result.stderr, result.stderr
    assert home.model.requests == []


# --------------------------------------------------------------------------------------
# FIFOs (and other special files) planted in a project: refused, and never opened in a
# way that blocks.


def _unblock(fifo: Path) -> None:
    """Open both ends without blocking, so a reader or writer stuck on the FIFO goes on."""
    for flags in (os.O_RDONLY | os.O_NONBLOCK, os.O_WRONLY | os.O_NONBLOCK):
        with contextlib.suppress(OSError):
            os.close(os.open(fifo, flags))


def _within(seconds: float, fifo: Path, action: Callable[[], Any]) -> Any:
    """action() in a thread; fails (after unsticking it) when it does not finish in time."""
    outcome: list[Any] = []

    def target() -> None:
        try:
            outcome.append(action())
        except BaseException as exc:  # handed to the test
            outcome.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    stuck = thread.is_alive()
    while thread.is_alive():
        _unblock(fifo)
        thread.join(0.1)
    assert not stuck, f"blocked on the FIFO {fifo.name}"
    return outcome[0]


@pytest.mark.parametrize(
    ("name", "commands"),
    [("events.jsonl", ["run"]), ("evidence.json", ["status", "check"]), ("scratch/pipe", ["run", "sources"])],
)
def test_a_planted_fifo_is_refused_and_nothing_hangs(home: Home, name: str, commands: list[str]) -> None:
    pid = home.new()
    fifo = home.project_dir(pid) / name
    fifo.parent.mkdir(exist_ok=True)
    os.mkfifo(fifo)
    for command in commands:
        result = _within(10, fifo, functools.partial(home.run, command, pid))
        assert not isinstance(result, BaseException), result
        assert result.exit_code == 2 and "a FIFO (named pipe)" in result.stderr and name in result.stderr
    assert home.model.requests == []


def test_the_event_log_and_evidence_never_block_on_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "events.jsonl"
    os.mkfifo(fifo)
    assert isinstance(_within(5, fifo, lambda: EventLog(fifo)(Event(EventKind.NOTE, None, {}))), OSError)
    assert _within(5, fifo, lambda: read_events(fifo)) == []
    os.mkfifo(tmp_path / "evidence.json")
    assert isinstance(_within(5, tmp_path / "evidence.json", lambda: load_evidence(tmp_path)), CorruptState)


# --------------------------------------------------------------------------------------
# Deeply nested data in evidence.json and the topic index.

DEEP = "[" * 100_000 + "]" * 100_000


def test_a_deeply_nested_evidence_file_is_corrupt_state_and_list_shows_the_row(home: Home) -> None:
    pid = home.new()
    (home.project_dir(pid) / "evidence.json").write_text('{"artifacts": {"final.md": ' + DEEP + "}}")
    with pytest.raises(CorruptState, match="nested too deeply"):
        load_evidence(home.project_dir(pid))
    result = home.run("status", pid)
    assert result.exit_code == 0, result.stderr
    for args in (["list"], ["list", "--json"]):
        result = home.run(*args)
        assert result.exit_code == 0 and pid in result.stdout, result.stderr
    (row,) = json.loads(home.run("list", "--json").stdout)
    assert row["status"] == "pending" and row["supported_share"] is None


def test_a_deeply_nested_topic_index_is_rebuilt(tmp_path: Path) -> None:
    import numpy as np

    from pensieve.topics.embedder import DIMENSION
    from pensieve.topics.index import load_index

    buffer = io.BytesIO()
    manifest = np.frombuffer(('{"format": ' + DEEP + "}").encode(), dtype=np.uint8)
    np.savez(buffer, vectors=np.zeros((0, DIMENSION), dtype=np.float32), manifest=manifest)
    path = tmp_path / "topics.npz"
    path.write_bytes(buffer.getvalue())
    index, trouble = load_index(path)
    assert index.files == [] and trouble is not None and "nested too deeply" in trouble


# --------------------------------------------------------------------------------------
# Resource bounds in the file tools: only what is returned (or could be written) is read.


@pytest.fixture
def files(tmp_path: Path) -> tuple[ToolBox, Path]:
    workspace = Workspace(tmp_path / "home", "default")
    directory = workspace.projects_dir / "alpha"
    (directory / "scratch").mkdir(parents=True)
    (directory / "brief.md").write_text("brief")
    (directory / "status.json").write_text("{}")
    project = workspace.project("alpha")
    ctx = ToolContext(project, BY_NAME["refiner"], Settings(), EventLog(project.events_path), {})
    names = ("read_project_file", "write_project_file", "edit_project_file")
    return ToolBox(ctx, [catalog()[name] for name in names], {}), directory


def _sparse(path: Path, size: int, at: int = 0, data: bytes = b"") -> Path:
    """A file of `size` bytes that takes no space: NULs, with `data` written at `at`."""
    with path.open("wb") as handle:
        handle.truncate(size)
        handle.seek(at)
        handle.write(data)
    return path


@contextlib.contextmanager
def _peak_memory() -> Iterator[list[int]]:
    """The peak of Python's allocations (all threads) while the block runs, in bytes."""
    tracemalloc.start()
    peak: list[int] = []
    try:
        yield peak
    finally:
        peak.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()


async def _call(toolbox: ToolBox, name: str, **arguments: Any) -> str:
    outcome = await toolbox.call(name, json.dumps(arguments))
    assert outcome.is_error == outcome.text.startswith("Error:")
    return outcome.text


async def test_read_project_file_offsets_count_the_file_characters(files: tuple[ToolBox, Path]) -> None:
    toolbox, directory = files
    (directory / "scratch" / "accents.md").write_text("é" * 300_000 + "MARK and the end")
    result = await _call(toolbox, "read_project_file", filename="scratch/accents.md", offset=300_000)
    assert "characters 300,000 to 300,016 of 300,016" in result and "\nMARK and the end\n" in result
    # NULs are characters of the file too (the old reader counted in its sanitized text).
    _sparse(directory / "scratch" / "sparse.md", 30_000_000, 20_000_000, b"needle")
    result = await _call(toolbox, "read_project_file", filename="scratch/sparse.md", offset=20_000_000)
    assert "characters 20,000,000 to 20,200,000 of 30,000,000" in result and "\nneedle" in result
    assert "offset=20200000) reads on" in result


async def test_read_project_file_at_a_far_offset_reads_a_bounded_part(files: tuple[ToolBox, Path]) -> None:
    toolbox, directory = files
    _sparse(directory / "scratch" / "big.md", 200_000_000, 150_000_000, b"far away")
    with _peak_memory() as peak:
        result = await _call(toolbox, "read_project_file", filename="scratch/big.md", offset=150_000_000)
    assert "past what read_project_file reads" in result and "first 32,000,000 bytes" in result
    assert peak[0] < 8_000_000
    result = await _call(toolbox, "read_project_file", filename="scratch/big.md", offset=31_999_990)
    assert "of more than 32,000,000" in result and "the file goes on for 168,000,000 more bytes" in result


async def test_edit_project_file_refuses_a_file_too_large_to_write(files: tuple[ToolBox, Path]) -> None:
    toolbox, directory = files
    _sparse(directory / "scratch" / "big.md", 64_000_000, 0, b"old words")
    with _peak_memory() as peak:
        result = await _call(toolbox, "edit_project_file", filename="scratch/big.md", old_text="old", new_text="new")
    assert result.startswith("Error:") and "larger than 4,000,000 bytes" in result
    assert peak[0] < 8_000_000
    (directory / "scratch" / "small.md").write_text("old words")
    result = await _call(toolbox, "edit_project_file", filename="scratch/small.md", old_text="old", new_text="new")
    assert result.startswith("Edited") and (directory / "scratch" / "small.md").read_text() == "new words"


# --------------------------------------------------------------------------------------
# `list` (and list_projects) read a bounded amount of each project's files.


def test_list_shows_a_giant_brief_or_status_as_unreadable_without_reading_it(home: Home) -> None:
    from pensieve.project.listing import summarize_projects

    big_brief, big_status, fine = home.new("One", "--id", "one"), home.new("Two", "--id", "two"), home.new()
    _sparse(home.project_dir(big_brief) / "brief.md", 64_000_000, 0, b"Huge brief")
    _sparse(home.project_dir(big_status) / "status.json", 64_000_000, 0, b"{")
    workspace = Workspace(home.path, "default")
    summarize_projects(workspace)  # imports done before measuring
    with _peak_memory() as peak:
        rows = {row.id: row for row in summarize_projects(workspace)}
    assert peak[0] < 8_000_000
    assert rows[big_brief].status == rows[big_status].status == "unreadable" and rows[fine].status == "pending"
    assert rows[big_brief].brief == "(brief.md is too large to read)"
    listed = {row["id"]: row for row in json.loads(home.run("list", "--json").stdout)}
    assert listed[big_status]["brief"] == "(status.json is too large to read)"


def test_a_giant_status_is_refused_unread_and_repair_does_not_copy_it(home: Home) -> None:
    pid = home.new()
    status = _sparse(home.project_dir(pid) / "status.json", 64_000_000, 0, b"{")
    result = home.run("status", pid)
    assert result.exit_code == 2 and "larger than 4,000,000 bytes" in result.stderr, result.stderr
    assert "pensieve repair" in result.stderr and not list(home.project_dir(pid).glob("status.corrupt-*"))
    assert home.run("repair", pid).exit_code == 0
    (kept,) = home.project_dir(pid).glob("status.replaced-*.json")
    assert kept.stat().st_size == 64_000_000 and kept.stat().st_blocks * 512 < 1_000_000  # still sparse
    assert status.stat().st_size < 10_000 and home.run("status", pid).exit_code == 0


# --------------------------------------------------------------------------------------
# Concurrent writers of one topic: one creates it, the others are told (or take a new slug).


def _slowly(monkeypatch: pytest.MonkeyPatch, module: str) -> None:
    """Widen the window between deciding where to write and writing (render_topic runs in
    it in the code that checked first and wrote later) so concurrent calls overlap."""
    from pensieve.topics.library import render_topic

    def render(*args: Any, **kwargs: Any) -> str:
        time.sleep(0.3)
        return render_topic(*args, **kwargs)

    monkeypatch.setattr(f"{module}.render_topic", render)


def _in_threads(count: int, action: Callable[[int], Any]) -> list[Any]:
    outcomes: list[Any] = [None] * count

    def run(n: int) -> None:
        try:
            outcomes[n] = action(n)
        except Exception as exc:  # handed to the test
            outcomes[n] = exc

    threads = [threading.Thread(target=run, args=(n,)) for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes


def test_concurrent_topics_add_of_one_title_creates_it_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pensieve.topics.library import add_topic

    workspace = Workspace(tmp_path, "default")
    _slowly(monkeypatch, "pensieve.topics.library")
    outcomes = _in_threads(6, lambda n: add_topic(workspace, "Same topic", f"body {n}"))
    (winner,) = [n for n, outcome in enumerate(outcomes) if isinstance(outcome, Path)]
    losers = [outcome for outcome in outcomes if not isinstance(outcome, Path)]
    assert all(isinstance(exc, UsageError) and "already exists" in str(exc) for exc in losers)
    assert f"body {winner}" in (workspace.topics_dir / "same-topic.md").read_text()
    assert [p.name for p in workspace.topics_dir.iterdir()] == ["same-topic.md"]  # no temporary left
    assert add_topic(workspace, "Same topic", "forced", force=True).read_text().endswith("forced\n")


def test_concurrent_captures_with_one_title_get_their_own_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pensieve.topics.capture import capture_project
    from tests.test_topics_library import _finished_project

    for pid in ("one", "two", "three"):
        workspace, _ = _finished_project(tmp_path, pid)
    _slowly(monkeypatch, "pensieve.topics.capture")
    captured = _in_threads(3, lambda n: capture_project(workspace.project(("one", "two", "three")[n])))
    assert len({c.slug for c in captured}) == 3 and not any(c.updated_existing for c in captured)
    owners = {c.path.read_text().split("project: ")[1].split()[0] for c in captured}
    assert owners == {"one", "two", "three"}


# Loaded by each child: it says it is about to write, then waits for the test's go, so all
# of them have decided before any writes (the race, every time, not by chance).
_HOLD = """
import os, pathlib, time
import pensieve.topics.library as library

_render = library.render_topic
def render(*args, **kwargs):
    hold = pathlib.Path(os.environ["PENSIEVE_TEST_HOLD"])
    (hold / f"ready-{os.getpid()}").touch()
    deadline = time.monotonic() + 30
    while not (hold / "go").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    return _render(*args, **kwargs)
library.render_topic = render
"""


def test_concurrent_topics_add_processes(home: Home, tmp_path: Path) -> None:
    hold = tmp_path / "hold"
    hold.mkdir()
    (hold / "sitecustomize.py").write_text(_HOLD)
    env = child_env(home.path, {"PENSIEVE_TEST_HOLD": str(hold)})
    env["PYTHONPATH"] = f"{hold}{os.pathsep}{env['PYTHONPATH']}"
    started = [
        subprocess.Popen(
            [sys.executable, "-m", "pensieve", "topics", "add", "Same topic", "--body", f"body {n}"],
            env=env,
            cwd=home.path,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for n in range(8)
    ]
    deadline = time.monotonic() + 60
    while len(list(hold.glob("ready-*"))) < 8 and time.monotonic() < deadline:
        time.sleep(0.05)
    (hold / "go").touch()
    done = [subprocess.CompletedProcess(p.args, p.wait(), *p.communicate()) for p in started]
    assert sorted(p.returncode for p in done) == [0] + [2] * 7, [p.stderr for p in done]
    for process in done:
        assert "Traceback" not in process.stderr and len(process.stderr.strip().splitlines()) == 1
        if process.returncode == 2:
            assert "already exists" in process.stderr


def test_creating_a_file_never_replaces_one_without_renameat2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pensieve.project.workspace import atomic_write_text

    def missing(src: Path, dst: Path) -> None:
        raise OSError(errno.ENOSYS, "renameat2 is not available")

    monkeypatch.setattr("pensieve.project.workspace._renameat2", missing)
    atomic_write_text(tmp_path / "topic.md", "first", replace=False)
    with pytest.raises(FileExistsError):
        atomic_write_text(tmp_path / "topic.md", "second", replace=False)
    assert (tmp_path / "topic.md").read_text() == "first" and [p.name for p in tmp_path.iterdir()] == ["topic.md"]


def test_a_fifo_planted_as_the_topic_index_is_rebuilt(tmp_path: Path) -> None:
    from pensieve.topics.index import load_index

    fifo = tmp_path / "topics.npz"
    os.mkfifo(fifo)
    index, trouble = _within(5, fifo, lambda: load_index(fifo))
    assert index.files == [] and trouble is not None and "unreadable" in trouble
