"""`pensieve topics ...`: every subcommand, bad input, and what stays out of cheap commands."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pensieve.project.status import Status, load_status, save_status
from tests.conftest import Home, Invocation
from tests.test_topics_library import BRIEF, NOTES
from tests.topic_library import TOPICS, write_library


def _one_line_usage_error(result: Invocation) -> None:
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines


def _topics_dir(home: Home) -> Path:
    return home.path / "workspaces" / "default" / "topics"


def test_add_list_show(home: Home, tmp_path: Path) -> None:
    result = home.run("topics", "add", "Raft consensus", "--body", "Leaders and terms.", "--tags", "raft, consensus")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == "raft-consensus"
    body_file = tmp_path / "body.md"
    body_file.write_text("## Pages\n\nBalanced trees on disk.")
    assert home.run("topics", "add", "B-tree indexes", "--file", str(body_file)).exit_code == 0

    listed = json.loads(home.run("topics", "list", "--json").stdout)
    assert [t["slug"] for t in listed] == ["b-tree-indexes", "raft-consensus"]
    assert listed[1]["tags"] == ["raft", "consensus"] and listed[1]["title"] == "Raft consensus"
    table = home.run("topics", "list")
    assert "raft-consensus" in table.stdout and "B-tree indexes" in table.stdout

    shown = home.run("topics", "show", "b-tree-indexes")
    assert shown.exit_code == 0
    assert shown.stdout.startswith("---\ntitle: B-tree indexes\n") and "Balanced trees on disk." in shown.stdout


def test_add_bad_input(home: Home, tmp_path: Path) -> None:
    assert home.run("topics", "add", "Raft", "--body", "x").exit_code == 0
    _one_line_usage_error(home.run("topics", "add", "Raft", "--body", "y"))
    assert home.run("topics", "add", "Raft", "--body", "y", "--force").exit_code == 0
    _one_line_usage_error(home.run("topics", "add", "Other", "--body", "x", "--file", str(tmp_path / "f")))
    _one_line_usage_error(home.run("topics", "add", "Other", "--file", str(tmp_path / "missing.md")))
    (tmp_path / "latin1.md").write_bytes(b"caf\xe9")
    _one_line_usage_error(home.run("topics", "add", "Other", "--file", str(tmp_path / "latin1.md")))
    _one_line_usage_error(home.run("topics", "add", "  "))
    _one_line_usage_error(home.run("topics", "add", "T", "-w", "../escape"))


def test_list_warns_about_broken_files_and_handles_empty(home: Home) -> None:
    empty = home.run("topics", "list", "--json")
    assert empty.exit_code == 0 and json.loads(empty.stdout) == []
    assert "no topics" in home.run("topics", "list").stderr
    home.run("topics", "add", "Good", "--body", "x")
    (_topics_dir(home) / "broken.md").write_text("---\ntitle: [\n---\n")
    result = home.run("topics", "list", "--json")
    assert result.exit_code == 0
    assert [t["slug"] for t in json.loads(result.stdout)] == ["good"]
    assert "warning: topic file workspaces/default/topics/broken.md: bad YAML" in result.stderr


def test_show_bad_input(home: Home) -> None:
    _one_line_usage_error(home.run("topics", "show", "nothing-here"))
    _one_line_usage_error(home.run("topics", "show", "../../configs/pensieve"))


def test_capture_command(home: Home) -> None:
    pid = home.new("B-trees")
    project = home.project_dir(pid)
    _one_line_usage_error(home.run("topics", "capture", pid))  # no artifacts yet
    (project / "topic_brief.md").write_text(BRIEF)
    (project / "research_notes.md").write_text(NOTES)
    _one_line_usage_error(refused := home.run("topics", "capture", pid))  # artifacts, but not complete
    assert f"project {pid} is pending, not complete" in refused.stderr
    status = load_status(project / "status.json")
    status.status = "complete"
    save_status(project / "status.json", status)
    result = home.run("topics", "capture", pid)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == "how-b-trees-keep-databases-fast"
    assert "wrote" in result.stderr
    assert "updated" in home.run("topics", "capture", pid).stderr
    _one_line_usage_error(home.run("topics", "capture", "no-such-project"))


def test_search_bad_input_fails_before_loading_anything(home: Home) -> None:
    _one_line_usage_error(home.run("topics", "search", "   "))
    _one_line_usage_error(home.run("topics", "search", "raft", "--k", "0"))
    home.configure(topics={"min_score": "high"})
    _one_line_usage_error(home.run("topics", "search", "raft"))


@pytest.mark.slow
def test_search_and_reindex(home: Home) -> None:
    write_library(_topics_dir(home), TOPICS[:6])
    first = home.run("topics", "reindex")
    assert first.exit_code == 0, first.stderr
    assert first.stdout.strip().startswith("embedded 6 files (")
    assert first.stdout.strip().endswith("0 unchanged, 0 removed")
    (_topics_dir(home) / "sourdough.md").unlink()
    again = json.loads(home.run("topics", "reindex", "--json").stdout)
    assert again["embedded"] == [] and len(again["unchanged"]) == 5 and again["removed"] == ["sourdough"]

    result = home.run("topics", "search", "servers voting for a leader", "--json", "--k", "2")
    assert result.exit_code == 0, result.stderr
    hits = json.loads(result.stdout)
    assert hits[0]["slug"] == "raft" and set(hits[0]) == {"slug", "title", "snippet", "score"}
    assert len(hits) <= 2
    table = home.run("topics", "search", "servers voting for a leader")
    assert "raft" in table.stdout
    nothing = home.run("topics", "search", "lyrics of a happy birthday song")
    assert nothing.exit_code == 0 and nothing.stdout == "" and "no topic is relevant" in nothing.stderr
    assert json.loads(home.run("topics", "search", "lyrics of a birthday song", "--json").stdout) == []


_PROBE = """
import runpy, sys
sys.argv = ["pensieve", *sys.argv[1:]]
try:
    runpy.run_module("pensieve", run_name="__main__")
except SystemExit as exc:
    code = exc.code
heavy = [m for m in ("torch", "sentence_transformers", "transformers", "litellm", "numpy") if m in sys.modules]
print("HEAVY=" + ",".join(heavy), file=sys.stderr)
"""


@pytest.mark.parametrize(
    "args",
    [
        ["list"],
        ["--help"],
        ["topics", "--help"],
        ["topics", "list"],
        ["topics", "show", "raft"],
        ["topics", "add", "A new topic", "--body", "text"],
        ["topics", "capture", "btrees"],
    ],
)
def test_commands_that_do_not_search_import_no_model(tmp_path: Path, args: list[str]) -> None:
    topics = tmp_path / "workspaces" / "default" / "topics"
    write_library(topics, TOPICS[:1])
    project = tmp_path / "workspaces" / "default" / "projects" / "btrees"
    project.mkdir(parents=True)
    status = Status.new("btrees", "default")
    status.status = "complete"  # only a finished project is captured
    save_status(project / "status.json", status)
    (project / "topic_brief.md").write_text(BRIEF)
    (project / "research_notes.md").write_text(NOTES)
    env = {**os.environ, "PENSIEVE_HOME": str(tmp_path)}
    cwd = Path(__file__).resolve().parents[1]
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=60
    )
    assert "error" not in proc.stderr.lower(), proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == "HEAVY=", proc.stderr
