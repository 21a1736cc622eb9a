"""web_search over SearXNG and the academic APIs (fake servers in each API's real format):
wire formats, merging and de-duplication, `kind`, a failing provider beside working ones,
Retry-After, per-provider pacing, keys, and the configuration's checks."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Iterator
from typing import Any

import pytest

from pensieve.config import load_settings
from pensieve.errors import UsageError
from pensieve.tools import offered_tools
from pensieve.tools.registry import ToolError
from pensieve.tools.web import web_search
from pensieve.web import ratelimit
from tests.conftest import Home
from tests.fakes.scholarly_server import DISKANN, HNSW, NOTHING, ODD, ODD_PMID, PQ, FakeScholarly
from tests.web_fixtures import tool_context

ACADEMIC = ["arxiv", "semantic_scholar", "pubmed", "openalex", "crossref"]
S2_KEY = "s2-canary-key-4be81f0c"
NCBI_KEY = "ncbi-canary-key-7d2a9e11"


@pytest.fixture
def scholarly() -> Iterator[FakeScholarly]:
    fake = FakeScholarly().start()
    yield fake
    fake.stop()


@pytest.fixture(autouse=True)
def fresh_pacers() -> Iterator[None]:
    # Pacers are process-wide on purpose (a provider's limit is not a run's); a test that
    # made a provider say "retry after 120 s" must not slow the next test down.
    yield
    ratelimit._PACERS.clear()


def configure(home: Home, fake: FakeScholarly, providers: list[str], **search: Any) -> str:
    home.configure(
        search={
            "providers": providers,
            "endpoints": {p: fake.base_url for p in providers},
            "min_intervals_s": {p: 0.0 for p in providers},
            "timeout_s": 3,
            "max_retry_wait_s": 2,
            "contact_email": "writer@example.org",
            **search,
        },
        fetch={"allow_private_hosts": True, "timeout_s": 3},
    )
    return home.new()


def results_of(text: str) -> list[dict[str, Any]]:
    inner = text.split(">>>\n", 1)[1].rsplit("\n<<<END UNTRUSTED", 1)[0]
    data: list[dict[str, Any]] = json.loads(inner)
    return data


async def search(home: Home, pid: str, query: str = "nearest neighbor graph", kind: str = "all") -> str:
    async with tool_context(home, pid) as ctx:
        result: str = await web_search(ctx, query=query, kind=kind)
        return result


async def search_error(home: Home, pid: str, kind: str = "all") -> str:
    with pytest.raises(ToolError) as info:
        await search(home, pid, kind=kind)
    return str(info.value)


HNSW_FIELDS = {
    "title": HNSW.title,
    "authors": ["Yury A. Malkov", "Dmitry A. Yashunin"],
    "year": 2018,
    "venue": HNSW.venue,
    "doi": HNSW.doi,
}


async def test_arxiv_atom(home: Home, scholarly: FakeScholarly) -> None:
    pid = configure(home, scholarly, ["arxiv"])
    (hnsw,) = results_of(await search(home, pid, "HNSW graphs"))
    assert hnsw == {
        **HNSW_FIELDS,
        "venue": f"{HNSW.venue} (2018)",  # the journal reference, which dates it
        "url": f"https://doi.org/{HNSW.doi}",  # the journal DOI arXiv knows comes first
        "snippet": HNSW.abstract,
        "source": "arxiv",
    }
    (hit,) = scholarly.of("arxiv")
    assert hit.params["search_query"] == "all:HNSW AND all:graphs" and hit.params["max_results"] == "5"


async def test_semantic_scholar_json_and_its_key(home: Home, scholarly: FakeScholarly) -> None:
    scholarly.s2_key = S2_KEY
    home.monkeypatch.setenv("S2_API_KEY", S2_KEY)
    pid = configure(home, scholarly, ["semantic_scholar"])
    text = await search(home, pid)
    results = results_of(text)
    assert [r["title"] for r in results] == [p.title for p in (HNSW, PQ, DISKANN, NOTHING)]
    assert results[0] == {
        **HNSW_FIELDS,
        "url": f"https://doi.org/{HNSW.doi}",
        # The page the provider named for the paper, beside its DOI.
        "landing_url": "https://www.semanticscholar.org/paper/" + f"{0:040x}",
        "snippet": HNSW.abstract,
        "source": "semantic_scholar",
    }
    # No identifier: the provider's own page for the paper, which it gave (nothing invented).
    assert results[2]["url"].startswith("https://www.semanticscholar.org/paper/")
    assert results[1]["snippet"] == ""  # no abstract
    (hit,) = scholarly.of("semantic_scholar")
    assert hit.headers["x-api-key"] == S2_KEY and "externalIds" in hit.params["fields"]
    assert S2_KEY not in text

    home.monkeypatch.setenv("S2_API_KEY", "wrong-s2-key-canary-0000")
    error = await search_error(home, pid)
    assert error == "semantic_scholar refused the API key (HTTP 403); check S2_API_KEY"


async def test_pubmed_esearch_then_esummary(home: Home, scholarly: FakeScholarly) -> None:
    home.monkeypatch.setenv("NCBI_API_KEY", NCBI_KEY)
    pid = configure(home, scholarly, ["pubmed"])
    text = await search(home, pid)
    hnsw, pq = results_of(text)
    assert hnsw["url"] == f"https://doi.org/{HNSW.doi}" and hnsw["source"] == "pubmed"
    assert hnsw["authors"] == ["Malkov YA", "Yashunin DA"] and hnsw["year"] == 2018 and hnsw["doi"] == HNSW.doi
    assert hnsw["title"] == HNSW.title  # PubMed's trailing period dropped
    assert pq["authors"] == ["Jégou H", "Douze M", "Schmid C"]
    search_hit, summary_hit = scholarly.of("pubmed")
    assert search_hit.path == "/esearch.fcgi" and summary_hit.path == "/esummary.fcgi"
    assert summary_hit.params["id"] == f"{HNSW.pmid},{PQ.pmid}"
    for hit in (search_hit, summary_hit):
        assert hit.params["api_key"] == NCBI_KEY and hit.params["tool"] == "pensieve"
        assert hit.params["email"] == "writer@example.org" and hit.params["retmode"] == "json"
    assert NCBI_KEY not in text


async def test_openalex_and_crossref_polite_pool(home: Home, scholarly: FakeScholarly) -> None:
    pid = configure(home, scholarly, ["openalex"])
    results = results_of(await search(home, pid))
    by_title = {r["title"]: r for r in results}
    assert by_title[HNSW.title]["url"] == f"https://doi.org/{HNSW.doi.lower()}"
    assert by_title[HNSW.title]["snippet"] == HNSW.abstract  # rebuilt from the inverted index
    # No DOI: its landing page; no DOI and no landing page: no URL at all.
    assert by_title[DISKANN.title]["url"] == scholarly.landing(DISKANN)
    assert by_title[NOTHING.title]["url"] is None
    (hit,) = scholarly.of("openalex")
    assert hit.params["mailto"] == "writer@example.org" and "mailto:writer@example.org" in hit.headers["user-agent"]

    pid = configure(home, scholarly, ["crossref"])
    hnsw, pq = results_of(await search(home, pid))
    assert hnsw == {
        **HNSW_FIELDS,
        "authors": ["Malkov, Yury A.", "Yashunin, Dmitry A."],
        "url": f"https://doi.org/{HNSW.doi}",
        "snippet": HNSW.abstract,
        "source": "crossref",
    }
    assert pq["year"] == 2011
    (hit,) = scholarly.of("crossref")
    assert hit.params["query"] == "nearest neighbor graph" and hit.params["mailto"] == "writer@example.org"


async def test_searxng_json(home: Home, scholarly: FakeScholarly) -> None:
    pid = configure(home, scholarly, ["searxng"])
    results = results_of(await search(home, pid, kind="web"))
    # A science engine's record with a DOI: the DOI's URL, the page it found kept beside it.
    assert results[0] == {
        **HNSW_FIELDS,
        "url": f"https://doi.org/{HNSW.doi}",
        "landing_url": scholarly.landing(HNSW),
        "snippet": HNSW.abstract,
        "source": "searxng",
    }
    # Plain web results (no identifier): the page as found, and nothing made up.
    assert [r["url"] for r in results[1:]] == [scholarly.landing(p) for p in (PQ, DISKANN)]
    assert results[1] == {"title": PQ.title, "url": scholarly.landing(PQ), "snippet": PQ.abstract, "source": "searxng"}
    (hit,) = scholarly.of("searxng")
    assert hit.params == {"q": "nearest neighbor graph", "format": "json", "pageno": "1"}


async def test_merged_and_deduplicated_by_doi_arxiv_and_url(home: Home, scholarly: FakeScholarly) -> None:
    pid = configure(home, scholarly, ["searxng", *ACADEMIC])
    results = results_of(await search(home, pid))
    titles = [r["title"] for r in results]
    # Each work once: HNSW came from six providers (DOI, arXiv id, PMID and landing URL all link them).
    assert sorted(titles) == sorted(p.title for p in (HNSW, PQ, DISKANN, NOTHING))
    hnsw = results[titles.index(HNSW.title)]
    # The first provider's record is kept, its gaps filled by the others; its URL is the
    # canonical identifier URL, SearXNG's page kept as the landing page.
    assert set(hnsw["source"].split(", ")) == {"searxng", *ACADEMIC}
    assert hnsw["url"] == f"https://doi.org/{HNSW.doi}" and hnsw["landing_url"] == scholarly.landing(HNSW)
    assert hnsw["doi"] == HNSW.doi and hnsw["year"] == 2018 and hnsw["authors"]
    # PQ: SearXNG found only its page (no DOI there); the academic providers' DOI makes it canonical.
    pq = results[titles.index(PQ.title)]
    assert pq["url"] == f"https://doi.org/{PQ.doi}" and pq["landing_url"] == scholarly.landing(PQ)
    # DiskANN has no identifier anywhere: the first page found stays its URL. NOTHING has no
    # identifier and no landing page: only Semantic Scholar's own page for it (nothing made up).
    diskann = results[titles.index(DISKANN.title)]
    assert diskann["url"] == scholarly.landing(DISKANN) and "landing_url" not in diskann
    nothing = results[titles.index(NOTHING.title)]
    assert nothing["url"].startswith("https://www.semanticscholar.org/paper/") and "landing_url" not in nothing
    # Interleaved: the top of every provider comes before anyone's second result.
    assert titles[0] == HNSW.title
    assert all(len(scholarly.of(p)) >= 1 for p in ["searxng", *ACADEMIC])


async def test_kind_chooses_the_providers(home: Home, scholarly: FakeScholarly) -> None:
    pid = configure(home, scholarly, ["searxng", "arxiv"])
    web = results_of(await search(home, pid, kind="web"))
    assert {r["source"] for r in web} == {"searxng"} and scholarly.of("arxiv") == []
    papers = results_of(await search(home, pid, kind="academic"))
    assert {r["source"] for r in papers} == {"arxiv"} and len(scholarly.of("searxng")) == 1

    pid = configure(home, scholarly, ["searxng"])
    error = await search_error(home, pid, kind="academic")
    assert error == "no academic search provider is configured (search.providers); use kind 'web' or 'all'"


async def test_a_failing_provider_is_reported_while_the_others_answer(home: Home, scholarly: FakeScholarly) -> None:
    scholarly.modes = {"semantic_scholar": "500", "crossref": "api-error"}
    pid = configure(home, scholarly, ["semantic_scholar", "arxiv", "crossref"])
    text = await search(home, pid)
    assert [r["source"] for r in results_of(text)] == ["arxiv"]
    assert "\nNot answered: semantic_scholar: semantic_scholar answered HTTP 500: Internal server error" in text
    assert "\nNot answered: crossref: crossref answered HTTP 400: Parameter x not allowed" in text

    scholarly.modes = {"semantic_scholar": "500", "crossref": "500", "arxiv": "500"}
    error = await search_error(home, pid)
    assert "semantic_scholar answered HTTP 500" in error and "arxiv answered HTTP 500" in error


ALL = ["searxng", *ACADEMIC]
SERVER_ERRORS = {
    "searxng": "searxng answered HTTP 500: 500 Internal Server Error Internal Server Error The server encountered",
    "arxiv": "arxiv answered HTTP 500: 500 Internal Server Error",
    "semantic_scholar": "semantic_scholar answered HTTP 500: Internal server error",
    "pubmed": "pubmed answered HTTP 500: NCBI - WWW Error 500 Diagnostic Server Error",
    "openalex": "openalex answered HTTP 500: Internal server error",
    "crossref": "crossref answered HTTP 500: Solr timed out",
}


@pytest.mark.parametrize(
    ("provider", "mode", "message"),
    [
        ("arxiv", "api-error", "arxiv refused the query: incorrect id format for 1234.12345"),
        ("arxiv", "bad-json", "arxiv returned a feed that is not valid XML"),
        # A 200 page that is not an Atom feed is an error, not "no results".
        ("arxiv", "html", "arxiv returned <html> instead of an Atom feed"),
        ("arxiv", "malformed-envelope", "arxiv returned <rss> instead of an Atom feed"),
        ("pubmed", "api-error", "pubmed refused the query: Invalid query: unbalanced"),
        # esearch answers, then esummary fails.
        ("pubmed", "esummary-500", "pubmed answered HTTP 500: NCBI - WWW Error 500 Diagnostic"),
        ("pubmed", "esummary-error", "pubmed: Invalid uid 30602420 at position=0"),
        ("searxng", "api-error", "searxng refused the JSON format (HTTP 403); list json under search.formats"),
        ("searxng", "html", "searxng returned a response that is not valid JSON"),
        ("openalex", "bad-json", "openalex returned a response that is not valid JSON"),
        ("crossref", "html", "crossref returned a response that is not valid JSON"),
        # Each API's own 429 body, with Retry-After: too long to wait, so said at once.
        *[(p, "429", f"{p} is rate-limiting requests (HTTP 429, retry after 120s)") for p in ALL],
        # Each API's own 5xx body: its message, as the API worded it.
        *[(p, "500", SERVER_ERRORS[p]) for p in ALL],
    ],
)
async def test_api_error_shapes(home: Home, scholarly: FakeScholarly, provider: str, mode: str, message: str) -> None:
    home.monkeypatch.setenv("NCBI_API_KEY", NCBI_KEY)  # NCBI's 429 body names the key: it must not show
    scholarly.modes = {provider: mode}
    scholarly.retry_after = "120"
    pid = configure(home, scholarly, [provider])
    error = await search_error(home, pid)
    assert message in error and NCBI_KEY not in error
    if mode.startswith("esummary"):
        assert [h.path for h in scholarly.of("pubmed")] == ["/esearch.fcgi", "/esummary.fcgi"]


@pytest.mark.parametrize("provider", ["arxiv", "crossref"])
async def test_a_429_without_retry_after(home: Home, scholarly: FakeScholarly, provider: str) -> None:
    # arXiv ("Rate exceeded.") and Crossref (an HTML page) answer 429 without Retry-After.
    scholarly.modes = {provider: "429"}
    scholarly.retry_after = ""
    pid = configure(home, scholarly, [provider])
    error = await search_error(home, pid)
    assert error == f"{provider} is rate-limiting requests (HTTP 429); search less often or try again later"
    assert len(scholarly.of(provider)) == 1  # no Retry-After, no retry


async def test_empty_and_malformed_answers(home: Home, scholarly: FakeScholarly) -> None:
    scholarly.modes = {p: "empty" for p in ALL}
    pid = configure(home, scholarly, ALL)
    assert (await search(home, pid)).startswith("No results for 'nearest neighbor graph'")
    # Junk records beside good ones: the good ones are kept, the junk skipped, nothing fails;
    # a record whose fields have the wrong types keeps its title and loses those fields.
    scholarly.modes = {p: "malformed" for p in ALL}
    for provider in ALL:
        pid = configure(home, scholarly, [provider])
        text = await search(home, pid)
        results = results_of(text)
        titles = [r["title"] for r in results]
        assert HNSW.title in titles and "Not answered" not in text, provider
        assert all(t and t.strip() for t in titles) and "no url" not in titles, provider
        assert not {"a number for a url", "an unreadable url", "a port out of range", "a list"} & set(titles)
        odd = [r for r in results if r["title"] == ODD]
        assert len(odd) == (0 if provider == "arxiv" else 1), provider  # XML has no types to get wrong
        for record in odd:
            assert not {"authors", "year", "venue"} & set(record), (provider, record)
            assert record.get("doi") == ("10.5555/odd" if provider == "crossref" else None), provider
            assert record["url"] == {
                "searxng": f"{scholarly.base_url}/landing/odd",
                "pubmed": f"https://pubmed.ncbi.nlm.nih.gov/{ODD_PMID}/",  # the PMID is all it has
                "crossref": "https://doi.org/10.5555/odd",
            }.get(provider), provider
    # An answer whose own structure is malformed (PubMed's idlist a number, a results list
    # an object, RSS for Atom) fails that provider only: the other five still answer.
    pid = configure(home, scholarly, ALL)
    for provider, why in [
        ("pubmed", "unexpected response from the search provider: esearchresult.idlist is not a list"),
        ("searxng", "unexpected response from the search provider: results is not a list"),
        ("arxiv", "arxiv returned <rss> instead of an Atom feed"),
        ("semantic_scholar", "unexpected response from the search provider: data is not a list"),
        ("openalex", "unexpected response from the search provider: results is not a list"),
        ("crossref", "unexpected response from the search provider: message.items is not a list"),
    ]:
        scholarly.modes = {provider: "malformed-envelope"}
        text = await search(home, pid)
        sources = {s for r in results_of(text) for s in r["source"].split(", ")}
        assert sources == set(ALL) - {provider}, provider
        not_answered = [line for line in text.splitlines() if line.startswith("Not answered:")]
        assert not_answered == [f"Not answered: {provider}: {why}"]


async def test_a_long_retry_after_holds_the_provider_back_without_waiting(home: Home, scholarly: FakeScholarly) -> None:
    scholarly.modes = {"semantic_scholar": "429"}
    scholarly.retry_after = "Wed, 21 Oct 2099 07:28:00 GMT"  # the HTTP-date form
    pid = configure(home, scholarly, ["semantic_scholar", "arxiv"])
    text = await search(home, pid)
    assert "Not answered: semantic_scholar: semantic_scholar is rate-limiting requests (HTTP 429, retry after" in text
    scholarly.modes = {}
    text = await search(home, pid)  # no request: the provider asked for time
    assert len(scholarly.of("semantic_scholar")) == 1 and "Not answered: semantic_scholar" in text
    assert [r["source"] for r in results_of(text)] == ["arxiv"]


async def test_retry_after_is_waited_out_once(home: Home, scholarly: FakeScholarly) -> None:
    scholarly.modes = {"semantic_scholar": "429-once"}
    scholarly.retry_after = "1"
    pid = configure(home, scholarly, ["semantic_scholar"])
    assert HNSW.title in await search(home, pid)
    first, second = (h.at for h in scholarly.of("semantic_scholar"))
    assert second - first >= 0.9


async def test_each_provider_is_paced_on_its_own(home: Home, scholarly: FakeScholarly) -> None:
    pid = configure(
        home, scholarly, ["searxng", "semantic_scholar"], min_intervals_s={"searxng": 1.0, "semantic_scholar": 1.0}
    )
    async with tool_context(home, pid, "researcher") as a, tool_context(home, pid, "fact_checker") as b:
        await asyncio.gather(*(web_search(ctx, query=f"q{i}") for i, ctx in enumerate([a, b, a])))
    for provider in ("searxng", "semantic_scholar"):
        times = sorted(h.at for h in scholarly.of(provider))
        assert len(times) == 3 and min(b - a for a, b in itertools.pairwise(times)) >= 0.9, provider
    # ... but not behind each other: both providers' first requests went out together.
    assert abs(scholarly.of("searxng")[0].at - scholarly.of("semantic_scholar")[0].at) < 0.5


def test_academic_defaults_follow_the_apis_limits() -> None:
    from pensieve.config import SearchSettings
    from pensieve.web.search import interval_for

    settings = SearchSettings(providers=["arxiv", "semantic_scholar", "pubmed", "tavily"])
    assert interval_for(settings, "arxiv", {}) == 3.0
    assert interval_for(settings, "semantic_scholar", {}) == 1.0
    assert interval_for(settings, "pubmed", {}) == 0.34
    assert interval_for(settings, "pubmed", {"NCBI_API_KEY": "k"}) == 0.1
    assert interval_for(settings, "tavily", {}) == settings.min_interval_s


def test_offered_without_a_search_key_when_a_keyless_provider_is_configured(home: Home) -> None:
    home.configure(search={"providers": ["arxiv"]})
    tools, missing = offered_tools(("web_search",), load_settings(), {})
    assert [t.name for t in tools] == ["web_search"] and missing == {}
    home.configure(search={"providers": ["tavily"]})
    tools, missing = offered_tools(("web_search",), load_settings(), {})
    assert tools == [] and "SEARCH_API_KEY is not set" in missing["web_search"]


async def test_keyed_provider_without_its_key_is_named_and_skipped(home: Home, scholarly: FakeScholarly) -> None:
    pid = configure(home, scholarly, ["arxiv"], provider="brave")
    text = await search(home, pid)
    assert [r["source"] for r in results_of(text)] == ["arxiv"]
    assert "\nNot used: brave (SEARCH_API_KEY is not set)" in text
    # Asked for web pages only: the web provider is configured, it only lacks its key.
    error = await search_error(home, pid, kind="web")
    assert error == "no web search provider can answer (brave: SEARCH_API_KEY is not set); use kind 'academic' or 'all'"
    assert scholarly.of("arxiv") and len(scholarly.of("arxiv")) == 1  # nothing was asked


@pytest.mark.parametrize(
    ("search", "message"),
    [
        ({"providers": ["searxng"]}, "searxng needs the address of an instance: set search.endpoints.searxng"),
        ({"provider": "searxng"}, "searxng needs the address of an instance"),
        (
            {"endpoint": "http://127.0.0.1:9", "providers": ["arxiv"]},
            "search.endpoint is set but search.provider is empty",
        ),
        ({"providers": ["google_scholar"]}, "search.providers"),
        ({"endpoints": {"arxiv": "ftp://x"}}, "search endpoint for arxiv must be an http(s) URL"),
        # Addresses the search client could not even request (they crashed the run before).
        (
            {"providers": ["searxng"], "endpoints": {"searxng": "http://localhost:99999"}},
            "search.endpoints.searxng is not a usable URL (Port out of range 0-65535): 'http://localhost:99999'",
        ),
        ({"endpoints": {"arxiv": "http://[::1"}}, "search.endpoints.arxiv is not a usable URL (Invalid IPv6 URL)"),
        ({"endpoints": {"crossref": "http://localhost:port"}}, "search.endpoints.crossref is not a usable URL (Port"),
        ({"endpoints": {"pubmed": "https://:8080"}}, "search.endpoints.pubmed is not a usable URL (it names no host)"),
        ({"endpoints": {"openalex": "http://api example.org"}}, "search.endpoints.openalex is not a usable URL (it"),
        ({"provider": "searxng", "endpoint": "http://☃.example"}, "search.endpoint is not a usable URL (Invalid IDNA"),
        ({"endpoints": {"arxiv": "http://a.example/?x=1"}}, "(a base URL takes no query or fragment)"),
        ({"min_intervals_s": {"bing": 1.0}}, "search.min_intervals_s"),
        ({"min_intervals_s": {"arxiv": -1.0}}, "the interval for arxiv must be >= 0 seconds"),
        ({"contact_email": "not an address"}, "is not an email address"),
    ],
)
def test_bad_search_config_is_a_usage_error(home: Home, search: dict[str, Any], message: str) -> None:
    home.configure(search=search)
    with pytest.raises(UsageError) as info:
        load_settings()
    assert message in str(info.value)
    result = home.run("run", "nothing")
    assert result.exit_code == 2 and message in result.stderr and "Traceback" not in result.stderr


def test_searxng_as_the_single_provider(home: Home, scholarly: FakeScholarly) -> None:
    home.configure(search={"provider": "searxng", "endpoint": scholarly.base_url})
    settings = load_settings()
    assert settings.search.configured() == ["searxng"] and settings.search.endpoint_for("searxng") == scholarly.base_url
