"""What a newcomer meets in the first hour: errors that point at the fix, a closed pipe,
commands given a project with nothing yet or a strange file name, an article written
without web sources, and a test run that leaves the user's home alone."""

from __future__ import annotations

import json
import os
import pwd
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from pensieve.model.llm import plain_reason, where_calls_go
from tests.conftest import MODEL_KEY, Home


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def stage_error(home: Home, pid: str, stage: str) -> str:
    status = json.loads((home.project_dir(pid) / "status.json").read_text())
    return str(status["stages"][stage]["error"])


def cli_env(home: Home) -> dict[str, str]:
    return {**os.environ, "PENSIEVE_HOME": str(home.path)}


# -- model errors a person can act on ------------------------------------------------------
def test_a_server_that_does_not_answer_is_named_in_one_line_and_not_retried_five_times(home: Home) -> None:
    port = closed_port()
    base = f"http://127.0.0.1:{port}/v1"
    home.configure(llm={"api_base": base, "retries": 4})
    pid = home.new()
    result = home.run("run", pid, "--quiet")
    assert result.exit_code == 1
    error = stage_error(home, pid, "refiner")
    assert f"nothing answers at {base} (openai/gpt-4o-mini): is the server running?" in error
    for noise in ("litellm.", "Exception", "Error:", "object at 0x", "Connection error"):
        assert noise not in error, error
    # One short retry for a server still starting, never llm.retries (4) more.
    assert "after 2 attempts" in error
    assert "\n" not in error and MODEL_KEY not in result.stderr
    # --verbose keeps the libraries' whole chain for a bug report.
    verbose = home.run("run", pid, "--quiet", "--verbose")
    assert verbose.exit_code == 1
    assert "litellm" in verbose.stderr and "Connect" in verbose.stderr
    assert MODEL_KEY not in verbose.stderr


def test_error_text_loses_class_names_and_object_reprs() -> None:
    assert plain_reason("litellm.InternalServerError: InternalServerError: OpenAIException - Connection error.") == (
        "Connection error"
    )
    ollama = plain_reason(
        "litellm.APIConnectionError: OllamaException - Cannot connect to host localhost:11434 "
        "ssl:<ssl.SSLContext object at 0x7f3a2b1c0d90> [Connect call failed ('127.0.0.1', 11434)]"
    )
    assert "object at" not in ollama and "Exception" not in ollama
    assert ollama.startswith("Cannot connect to host localhost:11434")
    # The address shown: host and port, never a user, a password or a query.
    assert where_calls_go("openai/q", "http://me:s3cret@10.0.0.5:8000/v1?key=abc") == "http://10.0.0.5:8000/v1"
    assert where_calls_go("ollama_chat/llama3.1", None) == "http://localhost:11434"
    assert where_calls_go("anthropic/claude-3-5-sonnet", None) == "anthropic's API"


# -- pipes ----------------------------------------------------------------------------------
def test_a_closed_pipe_never_fails_a_stage(home: Home) -> None:
    """`pensieve run ID 2>&1 | head`: the reader goes away, the run goes on to its end."""
    pid = home.new()
    child = subprocess.Popen(
        [sys.executable, "-m", "pensieve", "run", pid, "--until", "outliner", "--quiet"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=cli_env(home),
        cwd=home.path,
    )
    assert child.stdout is not None and child.stderr is not None
    child.stdout.close()
    child.stderr.close()  # before the first progress line is written
    assert child.wait(timeout=120) == 0
    status = json.loads((home.project_dir(pid) / "status.json").read_text())
    assert [status["stages"][s]["status"] for s in ("refiner", "researcher", "outliner")] == ["complete"] * 3
    assert "BrokenPipe" not in json.dumps(status)


def test_list_into_a_closed_pipe_ends_quietly(home: Home) -> None:
    for number in range(3):
        home.new(f"Article number {number} about B-trees")
    for args in (["list"], ["status", home.new("One more")], ["show", "x"]):
        done = subprocess.run(
            f"{sys.executable} -m pensieve {' '.join(args)} | head -c 1 >/dev/null",
            shell=True,
            capture_output=True,
            env=cli_env(home),
            cwd=home.path,
            timeout=60,
        )
        assert b"Traceback" not in done.stderr and b"BrokenPipe" not in done.stderr, done.stderr


# -- commands on a project with nothing yet, and strange file names -------------------------
def test_check_on_a_project_that_never_ran_says_so(home: Home) -> None:
    pid = home.new()
    for args in ((), ("--json",)):
        result = home.run("check", pid, *args)
        assert result.exit_code == 1
        assert "has no article yet" in result.stderr and f"pensieve run {pid}" in result.stderr
        assert "ok: every citation checks out" not in result.stdout


LONG = "x" * 300
STRANGE = (LONG, "é" * 200, "a\nb.md", "dir/" + "y" * 300, "\t", "z" * 260 + "/")


@pytest.mark.parametrize("name", STRANGE)
def test_every_bad_file_name_exits_2_with_one_line(home: Home, name: str) -> None:
    pid = home.new()
    commands = [
        ["show", pid, name],
        ["evidence", pid, "--file", name],
        ["export", pid, "--file", name],
        ["new", "--file", name],
        ["topics", "add", "A title", "--file", name],
        ["export", "--verify", name],
        ["batch", name],
    ]
    for args in commands:
        result = home.run(*args)
        assert result.exit_code == 2, (args[0], result.stderr)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), (args[0], result.stderr)


# -- an article written without web sources ---------------------------------------------------
def test_an_unsourced_article_is_complete_without_citation_problems(home: Home) -> None:
    home.configure(check={"min_cited_paragraph_share": 0.5})  # the default bar
    pid = home.new()
    result = home.run("run", pid, "--quiet")
    assert result.exit_code == 0, result.stderr
    status = json.loads((home.project_dir(pid) / "status.json").read_text())
    assert status["status"] == "complete" and status["problems"] == []
    listed = home.run("list")
    assert "problems" not in listed.stdout
    check = home.run("check", pid)
    assert check.exit_code == 0, check.stdout
    exported = home.run("export", pid, "--format", "html")
    assert exported.exit_code == 0, exported.stderr
    page = Path(exported.stdout.strip()).read_text(encoding="utf-8")
    assert "written without web sources" in page
    assert "0 sources" not in page and "of 0 cited sentences" not in page


# -- the test run leaves the user's machine alone ---------------------------------------------
def test_the_suite_runs_with_a_home_and_cache_of_its_own() -> None:
    real_home = Path(pwd.getpwuid(os.getuid()).pw_dir).resolve()
    scratch = Path(tempfile.gettempdir()).resolve()
    for variable in ("HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME"):
        where = Path(os.environ[variable]).resolve()
        assert where != real_home and scratch in where.parents, (variable, where)
    assert Path.home().resolve() != real_home


@pytest.mark.slow
def test_representative_commands_write_only_to_their_own_directories(home: Home, tmp_path: Path) -> None:
    """A fresh HOME and XDG_CACHE_HOME, the commands a user runs first, and the list of every
    file that appeared there: only Pensieve's configuration-check record in the cache."""
    user, cache = tmp_path / "user-home", tmp_path / "user-cache"
    user.mkdir()
    cache.mkdir()
    env = {**cli_env(home), "HOME": str(user), "XDG_CACHE_HOME": str(cache)}
    for variable in ("XDG_CONFIG_HOME", "XDG_DATA_HOME"):
        env.pop(variable, None)
    commands = [
        ["new", "How B-trees keep databases fast", "--id", "iso"],
        ["estimate", "iso"],
        ["run", "iso", "--quiet"],
        ["list"],
        ["list", "--json"],
        ["status", "iso"],
        ["check", "iso"],
        ["evidence", "iso"],
        ["export", "iso"],
        ["topics", "list"],
    ]
    for args in commands:
        done = subprocess.run(
            [sys.executable, "-m", "pensieve", *args], capture_output=True, env=env, cwd=home.path, timeout=300
        )
        assert done.returncode == 0, (args, done.stderr[-2000:])
    appeared = sorted(str(p.relative_to(tmp_path)) for d in (user, cache) for p in d.rglob("*") if not p.is_dir())
    assert appeared, "the configuration check records itself in the cache"
    for name in appeared:
        assert name.startswith("user-cache/pensieve/config-checked-"), appeared
