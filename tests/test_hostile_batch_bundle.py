"""Hostile input, issue 26, outside the studio: batch files (alias bombs, unsafe tags, deep
nesting, FIFOs), the Markdown export's links, the bundle verifier (links, zip bombs,
duplicate members, FIFOs), the queue URL's password and MCP tool-name collisions."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import Home
from tests.fakes.cli_process import child_env


def _alias_bomb(field: str) -> str:
    """A few hundred bytes whose `field` expands to 10^9 leaves when a YAML loader builds it."""
    levels = ["&l0 [x, x, x, x, x, x, x, x, x, x]"]
    for n in range(1, 9):
        levels.append(f"&l{n} [" + ", ".join([f"*l{n - 1}"] * 10) + "]")
    return f"- brief: How B-trees lay out pages\n  {field}: [{', '.join(levels)}]\n"


def _refused(home: Home, path: Path) -> str:
    result = home.run("batch", str(path))
    assert result.exit_code == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {path}"), result.stderr
    workspace = home.path / "workspaces" / "default"
    assert not (workspace / "projects").exists() or not any((workspace / "projects").iterdir())
    assert home.model.requests == []
    return lines[0]


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("bomb.yaml", _alias_bomb("id"), "bomb.yaml:2: YAML alias *l0 in a batch file; write each value out"),
        ("bomb.yaml", _alias_bomb("target_words"), "bomb.yaml:2: YAML alias *l0"),
        ("alias.yaml", "- brief: &b Why B-trees\n- brief: *b\n  id: other\n", "alias.yaml:2: YAML alias *b"),
        (
            "tag.yaml",
            "- brief: x\n  id: !!python/object:os.system [echo hi]\n",
            "tag.yaml:2: bad YAML: could not determine a constructor for the tag",
        ),
        ("list.yaml", "- brief: x\n  id: [a, b]\n", "list.yaml:1: id must be text"),
        ("map.jsonl", '{"brief": "x", "target_words": {"a": 1}}\n', "map.jsonl:1: target_words must be a whole number"),
        (
            "deep.yaml",
            "- brief: x\n  id: " + "[" * 50_000 + "]" * 50_000 + "\n",
            "nested too deeply to be a batch file",
        ),
        ("deep.jsonl", '{"brief": "x", "id": ' + "[" * 100_000 + "]" * 100_000 + "}\n", "nested too deeply"),
    ],
)
def test_hostile_batch_files_are_one_line_refusals(home: Home, name: str, content: str, expected: str) -> None:
    assert len(content) < 1000 or "deep" in name  # the bombs are small files
    path = home.path / name
    path.write_text(content)
    line = _refused(home, path)
    assert expected in line, line
    assert "check the project's files" not in line


def test_a_fifo_as_the_batch_file_is_refused_not_waited_on(home: Home) -> None:
    fifo = home.path / "items.yaml"
    os.mkfifo(fifo)
    result = subprocess.run(
        [sys.executable, "-m", "pensieve", "batch", str(fifo)],
        env=child_env(home.path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().startswith(f"error: {fifo}: not a regular file (a pipe, device or directory)")
    directory = home.path / "dir.yaml"
    directory.mkdir()
    assert "not a regular file" in _refused(home, directory)
