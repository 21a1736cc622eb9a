"""A workspace's own config.yaml (workspaces/<ws>/config.yaml): `research` and `library` set
per workspace, between the user's file and the project's plan; anything else refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from pensieve.config import load_settings, workspace_settings
from pensieve.errors import UsageError
from pensieve.project.listing import new_project
from pensieve.project.workspace import open_workspace
from pensieve.run.preflight import project_settings
from tests.conftest import Home


def _workspace_config(home: Home, text: str, workspace: str = "default") -> Path:
    path = home.path / "workspaces" / workspace / "config.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_a_workspace_turns_the_web_off_for_its_projects_only(home: Home) -> None:
    home.configure(library={"max_results": 5})
    _workspace_config(home, "research:\n  web: false\nlibrary:\n  max_results: 3\n", "private")
    private = new_project(open_workspace(home.path, "private"), "How Raft elects a leader", "raft")
    public = new_project(open_workspace(home.path, "default"), "How Raft elects a leader", "raft")
    settings = load_settings()
    there = project_settings(private, settings)
    assert there.research.web is False and there.library.max_results == 3
    assert project_settings(public, settings).research.web is True
    assert settings.research.web is True and settings.library.max_results == 5  # the user's settings untouched
    # Keys the workspace does not set keep the user's values.
    assert there.library.read_chars == settings.library.read_chars


def test_the_workspace_file_sits_under_the_projects_own_plan(home: Home) -> None:
    home.configure(research={"web": False})
    _workspace_config(home, "research: {web: true}\n")
    pid = home.new("How Raft elects a leader", "--no-web")
    project = open_workspace(home.path, "default").existing_project(pid)
    assert project_settings(project, load_settings()).research.web is False  # --no-web wins
    other = new_project(open_workspace(home.path, "default"), "Why B-trees still matter", "btrees")
    assert project_settings(other, load_settings()).research.web is True  # the workspace over the user


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("mcp:\n  servers: {}\n", "section 'mcp' cannot be set per workspace"),
        ("llm: {api_base: 'http://example.org'}\n", "section 'llm' cannot be set per workspace"),
        ("research: {web: 'no'}\n", "research: web: Input should be a valid boolean"),
        ("research: {webb: false}\n", "research: webb: unknown key"),
        ("research: false\n", "research must be a mapping of keys"),
        ("research: [web\n", "bad YAML"),
    ],
)
def test_a_bad_workspace_file_is_one_line_naming_it(home: Home, text: str, problem: str) -> None:
    path = _workspace_config(home, text)
    with pytest.raises(UsageError, match=r"config\.yaml") as raised:
        workspace_settings(load_settings(), path.parent)
    assert problem in str(raised.value) and str(path) in str(raised.value)
    # Through the CLI: exit 2, one line, nothing created.
    result = home.run("new", "How Raft elects a leader")
    assert result.exit_code == 2
    assert problem in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (path.parent / "projects").exists()


def test_a_link_in_place_of_the_file_is_refused(home: Home, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.yaml"
    target.write_text("research: {web: false}\n")
    root = home.path / "workspaces" / "default"
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.yaml").symlink_to(target)
    with pytest.raises(UsageError, match="not a regular file"):
        workspace_settings(load_settings(), root)
