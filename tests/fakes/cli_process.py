"""Run the `pensieve` CLI in a child process, either exec'd (`python -m pensieve`) or
forked from a warm forkserver.

Fault-injection tests need many real processes they can SIGKILL or SIGINT. Starting
Python and importing litellm costs seconds of CPU per process, so most trials fork
their process from a forkserver that has imported Pensieve and litellm once; the child
is still a separate process running the same `pensieve.launch.main` entry point with its
own environment, working directory and stdout/stderr. A few trials use a genuine
`python -m pensieve` subprocess so the exec path is covered too.
"""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
from collections.abc import Mapping
from multiprocessing.context import ForkServerContext
from multiprocessing.process import BaseProcess
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]

_context: ForkServerContext | None = None


def child_env(home: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a CLI child: the test's own plus PYTHONPATH at this worktree."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PENSIEVE_HOME"] = str(home)
    env["PENSIEVE_CONFIG"] = str(home / "configs" / "pensieve.yaml")
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    env.pop("COLUMNS", None)
    env.update(extra or {})
    return env


def exec_cli(args: list[str], env: Mapping[str, str], cwd: Path, out: Path, err: Path) -> subprocess.Popen[bytes]:
    """`python -m pensieve ARGS` as a real subprocess, output to files."""
    with out.open("wb") as stdout, err.open("wb") as stderr:
        return subprocess.Popen(
            [sys.executable, "-m", "pensieve", *args],
            env=dict(env),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
        )


def _child(args: list[str], env: dict[str, str], cwd: str, out: str, err: str) -> None:
    """Runs in the forked child: become a fresh `pensieve` process, then run the CLI."""
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    for fd, path in ((1, out), (2, err)):
        handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(handle, fd)
        os.close(handle)
    sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115 - lives as long as the process
    sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
    sys.argv = ["pensieve", *args]
    import pensieve

    assert Path(pensieve.__file__).resolve().is_relative_to(REPO_ROOT), pensieve.__file__
    code = 0
    try:
        from pensieve.launch import main

        main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)


def _forkserver() -> ForkServerContext:
    global _context
    if _context is None:
        context = multiprocessing.get_context("forkserver")
        # Imported once in the server; every child starts warm.
        context.set_forkserver_preload(
            [
                "tests.fakes.cli_process",
                "pensieve.cli.main",
                "pensieve.run.pipeline",
                "litellm",
                "tests.fakes.warm_litellm",
            ]
        )
        _context = context
    return _context


def fork_cli(args: list[str], env: Mapping[str, str], cwd: Path, out: Path, err: Path) -> BaseProcess:
    """The CLI in a process forked from the warm forkserver; `.pid`, `.join()`, `.exitcode`."""
    process = _forkserver().Process(target=_child, args=(list(args), dict(env), str(cwd), str(out), str(err)))
    # The forkserver is started by the first start() with this process's environment; it
    # must import this worktree's code, not an installed copy of Pensieve.
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = child_env(Path(cwd))["PYTHONPATH"]
    try:
        process.start()
    finally:
        if saved is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = saved
    return process
