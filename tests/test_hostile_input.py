"""Hostile input: path attacks on the file tools, malformed tool calls, bad CLI input."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from pensieve.config import Settings
from pensieve.project.events import EventLog
from pensieve.project.workspace import Workspace
from pensieve.run.dispatch import ToolBox
from pensieve.stages import BY_NAME
from pensieve.tools import catalog
from pensieve.tools.registry import ToolContext
from tests.conftest import Home
from tests.fakes.model_server import call, calls, default_artifact

# A real topic brief with a marker where a test puts a lone surrogate.
BRIEF = default_artifact("refiner").replace("## Angle", "## Angle ODD")

SECRET = "outside-secret-content-7c1e"

# --------------------------------------------------------------------------------------
# File tools, called through the dispatcher exactly as a model's call would be.

HOSTILE_NAMES = {
    "parent": "../x",
    "parent-backslash": "..\\x",
    "absolute": "/etc/passwd",
    "home": "~/.ssh/id_rsa",
    "other-project": "../other/brief.md",
    "prefix-sibling": "../alpha-2/brief.md",
    "prefix-sibling-via-link": "sib/brief.md",
    "nul-byte": "brief.md\x00.txt",
    "control-char": "brief\n.md",
    "lone-surrogate": "brief\ud800.md",
    "file-link-outside": "leak.md",
    "dir-link-outside": "linkdir/secret.md",
    "link-to-reserved": "status-link.md",
    "status": "status.json",
    "events": "events.jsonl",
    "lock": ".run.lock",
    "staging": ".staging/refiner/topic_brief.md",
    "history": "history/topic_brief.md",
    "hidden": ".env",
    "dot-dot-in-middle": "scratch/../../other/brief.md",
    "empty": "",
}


@pytest.fixture
def attack(tmp_path: Path) -> tuple[ToolBox, Path, Path]:
    """Project `alpha` beside `alpha-2` and `other`, links leading out, a secret outside."""
    home = tmp_path / "home"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text(SECRET)
    workspace = Workspace(home, "default")
    for name in ("alpha", "alpha-2", "other"):
        directory = workspace.projects_dir / name
        directory.mkdir(parents=True)
        (directory / "brief.md").write_text(f"brief of {name} {SECRET if name != 'alpha' else ''}")
        (directory / "status.json").write_text("{}")
    alpha = workspace.projects_dir / "alpha"
    (alpha / "events.jsonl").write_text("")
    (alpha / ".run.lock").write_text("")
    (alpha / ".env").write_text(SECRET)
    (alpha / "history").mkdir()
    (alpha / "history" / "topic_brief.md").write_text(SECRET)
    (alpha / "leak.md").symlink_to(outside / "secret.md")
    (alpha / "linkdir").symlink_to(outside, target_is_directory=True)
    (alpha / "sib").symlink_to(workspace.projects_dir / "alpha-2", target_is_directory=True)
    (alpha / "status-link.md").symlink_to(alpha / "status.json")
    project = workspace.project("alpha")
    ctx = ToolContext(
        project=project,
        stage=BY_NAME["refiner"],
        settings=Settings(),
        events=EventLog(project.events_path),
        environ={},
    )
    tools = [catalog()["read_project_file"], catalog()["write_project_file"]]
    return ToolBox(ctx, tools, {}), alpha, tmp_path


def _snapshot(root: Path) -> dict[str, str]:
    found = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink():
            found[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


@pytest.mark.parametrize("name", list(HOSTILE_NAMES.values()), ids=list(HOSTILE_NAMES))
async def test_file_tools_refuse_hostile_names_for_read(attack: tuple[ToolBox, Path, Path], name: str) -> None:
    box, _alpha, _root = attack
    outcome = await box.call("read_project_file", json.dumps({"filename": name}))
    assert outcome.is_error, outcome.text
    assert outcome.text.startswith("Error:")
    assert SECRET not in outcome.text
    assert "root:" not in outcome.text  # /etc/passwd


@pytest.mark.parametrize("name", list(HOSTILE_NAMES.values()), ids=list(HOSTILE_NAMES))
async def test_file_tools_refuse_hostile_names_for_write(attack: tuple[ToolBox, Path, Path], name: str) -> None:
    box, _alpha, root = attack
    before = _snapshot(root)
    outcome = await box.call("write_project_file", json.dumps({"filename": name, "content": "pwned"}))
    assert outcome.is_error, outcome.text
    assert _snapshot(root) == before  # nothing written anywhere


async def test_writes_through_a_scratch_link_leading_out_are_refused(attack: tuple[ToolBox, Path, Path]) -> None:
    box, alpha, root = attack
    (alpha / "scratch").symlink_to(root / "outside", target_is_directory=True)
    before = _snapshot(root)
    outcome = await box.call("write_project_file", json.dumps({"filename": "scratch/notes.md", "content": "x"}))
    assert outcome.is_error and "outside the project" in outcome.text
    assert _snapshot(root) == before


async def test_an_artifact_name_that_is_a_link_leading_out_is_refused(attack: tuple[ToolBox, Path, Path]) -> None:
    box, alpha, root = attack
    (alpha / "topic_brief.md").symlink_to(root / "outside" / "secret.md")
    outcome = await box.call("write_project_file", json.dumps({"filename": "topic_brief.md", "content": "x"}))
    assert outcome.is_error
    read = await box.call("read_project_file", json.dumps({"filename": "topic_brief.md"}))
    assert read.is_error and SECRET not in read.text
    assert (root / "outside" / "secret.md").read_text() == SECRET


async def test_legitimate_names_still_work(attack: tuple[ToolBox, Path, Path]) -> None:
    box, alpha, _root = attack
    assert not (await box.call("read_project_file", '{"filename": "brief.md"}')).is_error
    assert not (await box.call("read_project_file", '{"filename": "./brief.md"}')).is_error
    wrote = await box.call("write_project_file", '{"filename": "scratch/n.md", "content": "ok"}')
    assert not wrote.is_error and (alpha / "scratch" / "n.md").read_text() == "ok"
    own = await box.call("write_project_file", '{"filename": "topic_brief.md", "content": "mine"}')
    assert not own.is_error
    other = await box.call("write_project_file", '{"filename": "outline.md", "content": "x"}')
    assert other.is_error and "may write only 'topic_brief.md'" in other.text


# --------------------------------------------------------------------------------------
# Malformed tool calls, through the fake model: the answers are read from its records.

MALFORMED = {
    "not-json": ("read_project_file", '{"filename": "brief.md"'),
    "json-array": ("read_project_file", '["brief.md"]'),
    "json-string": ("read_project_file", '"brief.md"'),
    "missing-field": ("read_project_file", "{}"),
    "wrong-type": ("read_project_file", '{"filename": 5}'),
    "unknown-argument": ("read_project_file", '{"filename": "brief.md", "mode": "raw"}'),
    "write-missing-content": ("write_project_file", '{"filename": "topic_brief.md"}'),
}


def test_malformed_arguments_are_answered_with_an_error_and_the_schema(home: Home) -> None:
    home.model.script("refiner", calls(*MALFORMED.values()))
    pid = home.new()
    result = home.run("run", pid, "--until", "refiner")
    assert result.exit_code == 0, result.stderr
    answers = home.model.for_stage("refiner")[1].last_tool_results
    assert len(answers) == len(MALFORMED)
    for (case, (tool, _args)), answer in zip(MALFORMED.items(), answers, strict=True):
        assert answer.startswith("Error:"), (case, answer)
        assert "schema:" in answer, (case, answer)
        schema = json.loads(answer.split("schema: ", 1)[1])
        assert schema["required"] == (["filename"] if tool == "read_project_file" else ["filename", "content"])
    assert "not valid JSON" in answers[0]
    assert "must be a JSON object, not list" in answers[1]
    assert "filename: Field required" in answers[3]
    assert "filename: Input should be a valid string" in answers[4]
    assert "mode: unknown argument" in answers[5]
    # Nothing was dispatched on guessed arguments: the write without content wrote nothing,
    # so the agent was reminded to write the file, and its next (whole) write is the artifact.
    reminder = home.model.for_stage("refiner")[2].messages[-1]["content"]
    assert reminder.startswith("You have not written `topic_brief.md` yet")
    assert (home.project_dir(pid) / "topic_brief.md").read_text() == default_artifact("refiner")


def test_unknown_and_unoffered_tools_are_refused_naming_the_available_ones(home: Home) -> None:
    home.model.script(
        "refiner",
        calls(("delete_everything", "{}"), ("text_stats", '{"text": "x"}'), ("list_projects", "{}")),
    )
    pid = home.new()
    result = home.run("run", pid, "--until", "refiner")
    assert result.exit_code == 0, result.stderr
    answers = home.model.for_stage("refiner")[1].last_tool_results
    for name, answer in zip(("delete_everything", "text_stats", "list_projects"), answers, strict=True):
        assert answer.startswith(f"Error: tool '{name}' is not available to refiner; available: "), answer
        assert "read_project_file" in answer and "write_project_file" in answer


def test_path_attacks_through_the_model_are_answered_with_errors(home: Home) -> None:
    other = home.new("Another article", "--id", "vec")
    sibling = home.new("Sibling sharing a prefix", "--id", "vec-2")
    attacks = ["../x", "..\\x", "/etc/passwd", "~/.ssh/id_rsa", f"../{other}/brief.md", f"../{sibling}/brief.md"]
    attacks += ["brief.md\x00", "status.json", "events.jsonl", ".run.lock"]
    home.model.script("refiner", calls(*[("read_project_file", {"filename": a}) for a in attacks]))
    home.model.script("refiner", calls(*[("write_project_file", {"filename": a, "content": "pwned"}) for a in attacks]))
    pid = home.new("Target article", "--id", "target")
    before = (home.project_dir(other) / "brief.md").read_bytes()
    result = home.run("run", pid, "--until", "refiner")
    assert result.exit_code == 0, result.stderr
    requests = home.model.for_stage("refiner")
    for answers in (requests[1].last_tool_results, requests[2].last_tool_results):
        assert len(answers) == len(attacks)
        assert all(a.startswith("Error:") for a in answers), answers
    assert (home.project_dir(other) / "brief.md").read_bytes() == before
    status = json.loads((home.project_dir(pid) / "status.json").read_text())
    assert status["stages"]["refiner"]["status"] == "complete"


def test_a_lone_surrogate_in_a_model_reply_does_not_break_the_stage(home: Home) -> None:
    home.model.script(
        "refiner",
        call("read_project_file", '{"filename": "\\ud800.md"}'),
        call(
            "write_project_file",
            json.dumps({"filename": "topic_brief.md", "content": BRIEF}).replace("ODD", "\\ud800"),
        ),
    )
    pid = home.new()
    result = home.run("run", pid, "--until", "refiner")
    assert result.exit_code == 0, result.stderr
    answers = home.model.for_stage("refiner")[1].last_tool_results
    assert answers[0].startswith("Error: filename contains control or invalid characters")
    assert (home.project_dir(pid) / "topic_brief.md").read_text() == BRIEF.replace("ODD", "?")
    for line in (home.project_dir(pid) / "events.jsonl").read_text().splitlines():
        json.loads(line)


# --------------------------------------------------------------------------------------
# CLI input: one-line error on stderr, exit 2, nothing created or modified.


def tree(root: Path) -> dict[str, tuple[str, int]]:
    found = {}
    for path in sorted(root.rglob("*")):
        if path.is_file():
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            found[str(path.relative_to(root))] = (digest, path.stat().st_mtime_ns)
        else:
            found[str(path.relative_to(root))] = ("dir", 0)
    return found


def assert_refused(home: Home, *args: str, input: bytes | str | None = None, expect: str = "") -> str:
    before = tree(home.path)
    result = home.run(*args, input=input)
    assert result.exit_code == 2, (args, result.exit_code, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: "), lines
    assert expect in lines[0], lines[0]
    assert "Traceback" not in result.stderr + result.stdout
    assert tree(home.path) == before, "the command changed the tree"
    return lines[0]


def test_empty_and_whitespace_briefs(home: Home) -> None:
    assert_refused(home, "new", "", expect="the brief is empty")
    assert_refused(home, "new", "   \n\t  ", expect="the brief is empty")
    assert_refused(home, "new", "-", input=b"  \n", expect="the brief is empty")
    assert_refused(home, "new", expect="no brief given")


def test_briefs_of_several_megabytes(home: Home) -> None:
    big = home.path / "big.md"
    big.write_text("word " * 1_200_000)  # 6 MB
    assert_refused(home, "new", "--file", str(big), expect="the limit is")
    big.unlink()
    assert_refused(home, "new", "-", input=b"x" * 5_000_000, expect="the limit is")


def test_non_utf8_briefs(home: Home) -> None:
    latin = home.path / "latin1.md"
    latin.write_bytes("Caf\u00e9 cr\u00e8me br\u00fbl\u00e9e".encode("latin-1"))
    assert_refused(home, "new", "--file", str(latin), expect="not UTF-8")
    latin.unlink()
    assert_refused(home, "new", "-", input=b"\xff\xfe\x00bad", expect="not UTF-8")
    assert_refused(home, "new", "--file", str(home.path / "missing.md"), expect="cannot read brief file")


def test_unknown_ids_and_stage_names(home: Home) -> None:
    pid = home.new()
    for command in ("run", "status", "show", "repair"):
        assert_refused(home, command, "no-such-project", expect="unknown project")
    for bad in ("../etc", "a/b", ".hidden", "x" * 200):
        assert_refused(home, "run", bad, expect="invalid project id")
    assert_refused(home, "run", pid, "--stage", "editor", expect="unknown stage 'editor'")
    assert_refused(home, "run", pid, "--until", "nope", expect="unknown stage 'nope'")
    assert_refused(home, "run", pid, "-w", "../up", expect="invalid workspace")
    assert_refused(home, "new", "brief", "--id", "../escape", expect="invalid project id")
    assert_refused(home, "new", "brief", "--id", pid, expect="already exists")
    assert_refused(home, "show", pid, "../../../etc/passwd")
    assert home.model.requests == []


def test_an_unwritable_workspace(home: Home, tmp_path: Path) -> None:
    # A path under a regular file cannot be created even by root (chmod would not stop root).
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file")
    home.monkeypatch.setenv("PENSIEVE_HOME", str(blocker / "home"))
    result = home.run("new", "A brief")
    assert result.exit_code == 2
    assert len(result.stderr.strip().splitlines()) == 1
    assert "cannot write to workspace" in result.stderr
    assert blocker.read_text() == "a file"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through chmod 0; covered by the test above")
def test_a_read_only_workspace(home: Home) -> None:
    workspace = home.path / "workspaces" / "default" / "projects"
    workspace.mkdir(parents=True)
    workspace.chmod(0o500)
    try:
        result = home.run("new", "A brief")
        assert result.exit_code == 2
        assert "cannot write to workspace" in result.stderr
        assert list(workspace.iterdir()) == []
    finally:
        workspace.chmod(0o700)


BAD_CONFIGS: dict[str, tuple[str | bytes, str]] = {
    "bad-yaml": ("llm: {model: [unclosed\n", "bad YAML"),
    "tabs": ("llm:\n\tmodel: x\n", "bad YAML"),
    "not-a-mapping": ("- a\n- b\n", "top level must be a mapping"),
    "unknown-section": ("lmm:\n  model: x\n", "lmm: unknown key"),
    "unknown-key": ("llm:\n  modle: x\n", "llm.modle: unknown key"),
    "wrong-type": ("llm:\n  timeout_s: soon\n", "llm.timeout_s"),
    "wrong-type-int": ("llm:\n  retries: '3'\n", "llm.retries"),
    "negative": ("budget:\n  max_tokens: -5\n", "budget.max_tokens"),
    "unknown-stage": ("agents:\n  editor:\n    model: x\n", "unknown stage 'editor'"),
    "unknown-limit": ("limits:\n  shell: 3\n", "unknown tool 'shell'"),
    "not-utf8": (b"llm:\n  model: caf\xe9\n", "not UTF-8"),
}


@pytest.mark.parametrize("case", list(BAD_CONFIGS))
def test_bad_configuration_is_a_one_line_error_and_changes_nothing(home: Home, case: str) -> None:
    pid = home.new()
    content, expect = BAD_CONFIGS[case]
    if isinstance(content, bytes):
        home.config_path.write_bytes(content)
    else:
        home.config_path.write_text(content)
    assert_refused(home, "run", pid, expect=expect)
    assert_refused(home, "new", "Another brief", expect=expect)
    assert home.model.requests == []


def test_a_missing_config_file_named_by_the_environment(home: Home) -> None:
    home.monkeypatch.setenv("PENSIEVE_CONFIG", str(home.path / "nope.yaml"))
    assert_refused(home, "new", "A brief", expect="PENSIEVE_CONFIG names")
