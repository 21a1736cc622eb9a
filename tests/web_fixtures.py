"""Fixtures for the web tools: the fake website, the fake search APIs, and a ToolContext
for calling a tool directly (the same object the pipeline builds for a stage)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import pytest

from pensieve.config import load_settings
from pensieve.project.events import EventLog
from pensieve.project.workspace import open_workspace
from pensieve.stages import BY_NAME
from pensieve.tools.registry import ToolContext
from tests.conftest import Home
from tests.fakes.model_server import call, text
from tests.fakes.search_server import FakeSearch
from tests.fakes.web_site import FakeSite

SEARCH_KEY = "srch-canary-7c1e9b04d2f3a6"


@pytest.fixture
def site() -> Iterator[FakeSite]:
    fake = FakeSite().start()
    yield fake
    fake.stop()


@pytest.fixture
def search_api(site: FakeSite) -> Iterator[FakeSearch]:
    fake = FakeSearch(
        key=SEARCH_KEY,
        results=[
            ("How HNSW works", site.url("/article"), "HNSW builds a layered proximity graph."),
            ("Product quantisation explained", site.url("/second"), "Product quantisation splits vectors."),
            ("Blocked page", site.url("/private/secret"), "Robots.txt disallows this page."),
        ],
    ).start()
    yield fake
    fake.stop()


@pytest.fixture
def web_home(home: Home, site: FakeSite, search_api: FakeSearch) -> Home:
    """A home whose search goes to the fake APIs and whose fetches may reach 127.0.0.1."""
    home.monkeypatch.setenv("SEARCH_API_KEY", SEARCH_KEY)
    home.configure(
        search={"provider": "tavily", "endpoint": search_api.base_url, "min_interval_s": 0.0, "timeout_s": 2},
        fetch={"allow_private_hosts": True, "timeout_s": 3},
    )
    # Scripted agents fetch the fixture pages without searching first: the user's topic
    # notes name them, which makes them known URLs (fetch.url_policy: known).
    topics = home.path / "workspaces" / "default" / "topics"
    topics.mkdir(parents=True, exist_ok=True)
    pages = [site.url(p) for p in ("/article", "/second", "/chain/2", "/private/secret")]
    (topics / "fixture-site.md").write_text(
        "---\ntitle: Fixture site\nsources:\n" + "".join(f"- {u}\n" for u in pages) + "---\nPages to read.\n"
    )
    return home


@contextlib.asynccontextmanager
async def tool_context(
    home: Home,
    project_id: str,
    stage: str = "researcher",
    *,
    force: bool = False,
    summarize: Callable[[str, str], Awaitable[str]] | None = None,
) -> AsyncIterator[ToolContext]:
    """The context a stage's tools get in a run, for calling a tool directly."""
    project = open_workspace(home.path, "default").existing_project(project_id)
    ctx = ToolContext(
        project=project,
        stage=BY_NAME[stage],
        settings=load_settings(),
        events=EventLog(project.events_path),
        environ=dict(os.environ),
        force=force,
        summarize=summarize,
    )
    try:
        yield ctx
    finally:
        await ctx.resources.aclose()


def script_researcher(home: Home, site: FakeSite, notes: str) -> None:
    """The researcher fetches the fake site's two pages (S1, S2; one after the other, so
    they are archived in that order), then writes `notes` as research_notes.md."""
    home.model.script(
        "researcher",
        call("fetch_url", {"url": site.url("/article")}),
        call("fetch_url", {"url": site.url("/second")}),
        call("write_project_file", {"filename": "research_notes.md", "content": notes}),
        text("Notes written."),
    )
