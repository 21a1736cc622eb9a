"""Shared fixtures: a scratch PENSIEVE_HOME, a fake model on 127.0.0.1, and a CLI runner.

No test reaches the internet or a real model: Pensieve is pointed at local servers
through its ordinary configuration.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from pensieve.cli.main import app
from tests.fakes.model_server import FakeModel

# litellm must never fetch its price list from the network during tests.
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"


def _isolate_user_directories() -> None:
    """The suite's processes get a home and cache of their own (removed at the end), so a
    test run writes nothing into the user's ~/.cache/pensieve, ~/.config or anywhere under ~.
    Set once per session: pytest-xdist workers inherit it from the controller."""
    if os.environ.get("PENSIEVE_TEST_USER_HOME"):
        return
    import atexit
    import shutil
    import tempfile

    root = Path(tempfile.mkdtemp(prefix="pensieve-test-user-"))
    os.environ["PENSIEVE_TEST_USER_HOME"] = str(root)
    os.environ["HOME"] = str(root / "home")
    for variable, folder in (("XDG_CACHE_HOME", "cache"), ("XDG_CONFIG_HOME", "config"), ("XDG_DATA_HOME", "data")):
        os.environ[variable] = str(root / folder)
    (root / "home").mkdir()
    pid = os.getpid()

    def remove() -> None:
        if os.getpid() == pid:  # only the process that made it (forked children run atexit too)
            shutil.rmtree(root, ignore_errors=True)

    atexit.register(remove)


_isolate_user_directories()

# A suite started as a shell's background job inherits SIGINT ignored, and so would every
# `pensieve run` a test starts and then interrupts: they would run on as if never asked.
# The tests' processes hear Ctrl-C as a user's do, however the suite was launched.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

pytest_plugins = ("tests.web_fixtures",)

MODEL_KEY = "sk-test-canary-model-key-5f1d2a"


@dataclass
class Invocation:
    exit_code: int
    stdout: str
    stderr: str


@dataclass
class Home:
    path: Path
    model: FakeModel
    monkeypatch: pytest.MonkeyPatch

    @property
    def config_path(self) -> Path:
        return self.path / "configs" / "pensieve.yaml"

    def config(self) -> dict[str, Any]:
        return yaml.safe_load(self.config_path.read_text()) or {}

    def configure(self, **sections: dict[str, Any]) -> None:
        data = self.config()
        for name, values in sections.items():
            data.setdefault(name, {}).update(values)
        self.config_path.write_text(yaml.safe_dump(data))

    def project_dir(self, project_id: str, workspace: str = "default") -> Path:
        return self.path / "workspaces" / workspace / "projects" / project_id

    def run(self, *args: str, input: str | bytes | None = None) -> Invocation:
        result = CliRunner().invoke(app, list(args), input=input, catch_exceptions=False)
        return Invocation(result.exit_code, result.stdout, result.stderr)

    def new(self, brief: str = "How vector databases index embeddings", *extra: str) -> str:
        result = self.run("new", brief, *extra)
        assert result.exit_code == 0, result.stderr
        return result.stdout.strip()


@pytest.fixture
def fake_model() -> Iterator[FakeModel]:
    model = FakeModel().start()
    yield model
    model.stop()


@pytest.fixture
def home(tmp_path: Path, fake_model: FakeModel, monkeypatch: pytest.MonkeyPatch) -> Home:
    return make_home(tmp_path, fake_model, monkeypatch)


def make_home(tmp_path: Path, fake_model: FakeModel, monkeypatch: pytest.MonkeyPatch) -> Home:
    """A scratch PENSIEVE_HOME at tmp_path, configured for the fake model."""
    for var in (
        "PENSIEVE_CONFIG",
        "PENSIEVE_MODEL",
        "PENSIEVE_API_BASE",
        "SEARCH_API_KEY",
        "PENSIEVE_SEARCH_PROVIDER",
        "PENSIEVE_SEARCH_ENDPOINT",
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PENSIEVE_HOME", str(tmp_path))
    monkeypatch.setenv("OPENAI_API_KEY", MODEL_KEY)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "pensieve.yaml").write_text(
        yaml.safe_dump(
            {
                "llm": {
                    "model": "openai/gpt-4o-mini",
                    "api_base": fake_model.base_url,
                    "retries": 2,
                    "retry_max_wait_s": 0.05,
                    "timeout_s": 20,
                },
                "topics": {"capture": False},
                # The default fake artifacts cite nothing; citation tests set their own bar.
                "check": {"min_cited_paragraph_share": 0.0},
            }
        )
    )
    return Home(tmp_path, fake_model, monkeypatch)
