"""web_search against fake Tavily, SerpAPI and Brave servers speaking their real formats."""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

import pytest

from pensieve.config import load_settings
from pensieve.tools import offered_tools
from pensieve.tools.registry import ToolError
from pensieve.tools.web import web_search
from pensieve.web.search_providers import plain
from tests.conftest import Home
from tests.fakes.search_server import FakeSearch
from tests.fakes.web_site import FakeSite
from tests.web_fixtures import SEARCH_KEY, tool_context


def results_of(text: str) -> list[dict[str, Any]]:
    inner = text.split(">>>\n", 1)[1].rsplit("\n<<<END UNTRUSTED", 1)[0]
    data: list[dict[str, Any]] = json.loads(inner)
    return data


async def search(home: Home, pid: str, query: str) -> str:
    async with tool_context(home, pid) as ctx:
        result: str = await web_search(ctx, query=query)
        return result


async def search_error(home: Home, pid: str, query: str = "hnsw") -> str:
    with pytest.raises(ToolError) as info:
        await search(home, pid, query)
    return str(info.value)


@pytest.mark.parametrize("provider", ["tavily", "serpapi", "brave"])
async def test_each_provider_wire_format(web_home: Home, site: FakeSite, search_api: FakeSearch, provider: str) -> None:
    web_home.configure(search={"provider": provider, "max_results_per_query": 2})
    pid = web_home.new()
    text = await search(web_home, pid, "  vector   index  ")
    assert text.startswith("<<<UNTRUSTED ")
    assert results_of(text) == [
        {
            "title": "How HNSW works",
            "url": site.url("/article"),
            "snippet": "HNSW builds a layered proximity graph.",
            "source": provider,
        },
        {
            "title": "Product quantisation explained",
            "url": site.url("/second"),
            "snippet": "Product quantisation splits vectors.",
            "source": provider,
        },
    ]
    (hit,) = search_api.hits
    assert (hit.provider, hit.query) == (provider, "vector index")
    if provider == "tavily":
        assert hit.body["max_results"] == 2 and hit.headers["authorization"] == f"Bearer {SEARCH_KEY}"
    elif provider == "serpapi":
        assert "engine=google" in hit.path and "num=2" in hit.path
    else:
        assert hit.headers["x-subscription-token"] == SEARCH_KEY and "count=2" in hit.path


async def test_no_results(web_home: Home, search_api: FakeSearch) -> None:
    search_api.results = []
    for provider in ("tavily", "serpapi", "brave"):
        web_home.configure(search={"provider": provider})
        pid = web_home.new(f"brief {provider}")
        assert "No results for 'nothing'" in await search(web_home, pid, "nothing")


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("429", "tavily is rate-limiting requests (HTTP 429)"),
        ("500", "tavily answered HTTP 500: internal error"),
        ("bad-json", "tavily returned a response that is not valid JSON"),
        ("wrong-shape", "unexpected response from the search provider: results is not a list"),
        ("slow", "tavily did not answer within 0.5s (search.timeout_s)"),
    ],
)
async def test_failures_are_error_strings(web_home: Home, search_api: FakeSearch, mode: str, message: str) -> None:
    search_api.mode = mode
    search_api.slow_s = 2
    web_home.configure(search={"timeout_s": 0.5})
    pid = web_home.new()
    assert message in await search_error(web_home, pid)


async def test_unreachable_provider(web_home: Home) -> None:
    web_home.configure(search={"endpoint": "http://127.0.0.1:9"})
    pid = web_home.new()
    assert "cannot reach tavily (ConnectError" in await search_error(web_home, pid)


@pytest.mark.parametrize("provider", ["tavily", "serpapi", "brave"])
async def test_wrong_key_is_refused_without_showing_it(web_home: Home, provider: str) -> None:
    web_home.monkeypatch.setenv("SEARCH_API_KEY", "wrong-key-canary-91c2e7")
    web_home.configure(search={"provider": provider})
    pid = web_home.new()
    error = await search_error(web_home, pid)
    assert f"{provider} refused the API key (HTTP 401); check SEARCH_API_KEY" in error
    assert "wrong-key-canary" not in error


def test_not_offered_without_provider_or_key(home: Home) -> None:
    settings = load_settings()
    tools, missing = offered_tools(("web_search", "fetch_url"), settings, {"SEARCH_API_KEY": "k"})
    assert [t.name for t in tools] == ["fetch_url"]
    assert "no search provider is configured" in missing["web_search"]
    home.configure(search={"provider": "brave"})
    tools, missing = offered_tools(("web_search",), load_settings(), {})
    assert tools == [] and "SEARCH_API_KEY is not set" in missing["web_search"]
    tools, missing = offered_tools(("web_search",), load_settings(), {"SEARCH_API_KEY": "k"})
    assert [t.name for t in tools] == ["web_search"] and missing == {}


def test_run_without_search_says_so_once(home: Home) -> None:
    pid = home.new()
    result = home.run("run", pid, "--quiet")
    assert result.exit_code == 0, result.stderr
    assert result.stderr.count("web_search is not available") == 1
    assert "research works without web search" in result.stderr
    researcher = home.model.for_stage("researcher")[0]
    assert "web_search" not in researcher.tool_names and "fetch_url" in researcher.tool_names


async def test_one_request_per_second_across_concurrent_callers(web_home: Home, search_api: FakeSearch) -> None:
    web_home.configure(search={"min_interval_s": 1.0})
    pid = web_home.new()
    async with (
        tool_context(web_home, pid, "researcher") as researcher,
        tool_context(web_home, pid, "fact_checker") as checker,
    ):
        # Two stages' worth of concurrent calls, each with its own run state: the pacer is process-wide.
        results = await asyncio.gather(
            *(web_search(researcher, query=f"q{i}") for i in range(2)),
            *(web_search(checker, query=f"r{i}") for i in range(2)),
        )
    assert all(r.startswith("<<<UNTRUSTED") for r in results)  # nobody saw a rate-limit error
    times = search_api.times()
    assert len(times) == 4
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert min(gaps) >= 0.9, gaps


def test_snippets_lose_their_markup_but_keep_the_angle_brackets_of_code() -> None:
    """Seen by hand on an article about impl Trait: every `Box<dyn Trait>` in the search
    results had lost its `<dyn Trait>`, stripped as if it were a tag."""
    snippet = (
        "Return <strong>impl Trait</strong> instead of Box<dyn Trait> or Vec<T>; "
        "fn f<'a>(x: &'a str) <br/><jats:p>An abstract</jats:p> <span class=\"hl\">kept</span>"
    )
    assert plain(snippet) == (
        "Return impl Trait instead of Box<dyn Trait> or Vec<T>; fn f<'a>(x: &'a str) An abstract kept"
    )
