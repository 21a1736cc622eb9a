"""A full run in which the Researcher and the Fact Checker really search and fetch through
the fake search API and the fixture website; the archive's reuse on a re-run; and the key
redaction, checked with a canary in every file and output the run leaves behind."""

from __future__ import annotations

import json
from pathlib import Path

from pensieve.project.events import read_events
from pensieve.stages import STAGES
from tests.conftest import Home
from tests.fakes.model_server import call, calls, text
from tests.fakes.search_server import FakeSearch
from tests.fakes.web_site import ARTICLE_FACT, FakeSite
from tests.web_fixtures import SEARCH_KEY

NOTES = (
    "# Research notes\n\n## How HNSW indexes embeddings\n- HNSW builds a layered graph [S1].\n"
    "- Product quantisation compresses vectors with codebooks [S2].\n\n"
    "## Open questions\n- How recall changes as the index grows.\n\n## Sources\n- S1, S2\n"
)
CHECK = "| # | claim | cited source | verdict | evidence |\n|---|---|---|---|---|\n| 1 | HNSW | S1 | supported | q |\n"


def script_fact_checker(home: Home, site: FakeSite) -> None:
    home.model.script(
        "fact_checker",
        call("web_search", {"query": "HNSW layered graph"}),
        calls(
            ("fetch_url", {"url": site.url("/article")}),
            ("fetch_url", {"url": site.url("/second")}),
            ("fetch_url", {"url": site.url("/chain/2")}),
        ),
        call("write_project_file", {"filename": "fact_check.md", "content": CHECK}),
        text("Checked 1 claim."),
    )


def fetch_events(project: Path, stage: str) -> tuple[int, int]:
    """(fetches that went to the network, fetches served from the archive) of a stage."""
    events = [e for e in read_events(project / "events.jsonl") if e["kind"] == "fetch" and e["stage"] == stage]
    network = sum(1 for e in events if e.get("from_archive") is False)
    archived = sum(1 for e in events if e.get("from_archive") is True)
    return network, archived


def test_researcher_and_fact_checker_search_and_fetch(web_home: Home, site: FakeSite, search_api: FakeSearch) -> None:
    # SerpAPI carries the key in the query string: the hardest case for redaction.
    web_home.configure(search={"provider": "serpapi"})
    pid = web_home.new()
    web_home.model.script(
        "researcher",
        call("web_search", {"query": "how HNSW indexes embeddings"}),
        # Sequential, so the archive's ids are known: concurrent fetches get ids as they finish.
        call("fetch_url", {"url": site.url("/article")}),
        call("fetch_url", {"url": site.url("/second"), "mode": "summary"}),
        call("fetch_url", {"url": site.url("/private/secret")}),
        call("write_project_file", {"filename": "research_notes.md", "content": NOTES}),
        text("Notes written."),
    )
    web_home.model.script("summary", text("Product quantisation compresses vectors with codebooks."))
    script_fact_checker(web_home, site)

    result = web_home.run("run", pid, "--quiet")
    assert result.exit_code == 0, result.stderr
    project = web_home.project_dir(pid)
    for stage in STAGES:
        assert (project / stage.writes).is_file()

    # Only the Researcher and the Fact Checker were offered the web tools.
    for stage in STAGES:
        names = set(web_home.model.for_stage(stage.name)[0].tool_names)
        has_web = {"web_search", "fetch_url"} <= names
        assert has_web == (stage.name in ("researcher", "fact_checker")), stage.name
        assert not (names & {"web_search", "fetch_url"}) or has_web

    researcher = web_home.model.for_stage("researcher")
    search_result = researcher[1].last_tool_results[0]
    assert "How HNSW works" in search_result and site.url("/article") in search_result
    (page,) = researcher[2].last_tool_results
    (summary,) = researcher[3].last_tool_results
    assert ARTICLE_FACT in page and "Source S1" in page
    assert "Source S2" in summary and "compresses vectors with codebooks" in summary
    # The summary call saw the page as wrapped, untrusted data.
    (summary_request,) = web_home.model.for_stage("summary")
    assert "<<<UNTRUSTED" in summary_request.messages[-1]["content"]
    assert "Product quantisation splits vectors" in summary_request.messages[-1]["content"]
    refused = researcher[4].last_tool_results[0]
    assert refused.startswith("Error: could not fetch") and "robots.txt" in refused

    # The summary's model call is counted in the Researcher's usage.
    status = json.loads((project / "status.json").read_text())
    assert status["stages"]["researcher"]["usage"]["calls"] == len(researcher) + 1

    # The Fact Checker found the Researcher's pages in the archive; the redirect URL was new.
    checker = web_home.model.for_stage("fact_checker")
    fetched = checker[2].last_tool_results
    assert "from the project's archive" in fetched[0] and "from the project's archive" in fetched[1]
    # The redirect chain ends at /article: fetched now, but the same page, so the same source.
    assert "fetched now" in fetched[2] and "Source S1" in fetched[2]
    assert fetch_events(project, "fact_checker") == (1, 2)
    assert [s["id"] for s in json.loads(web_home.run("sources", pid, "--json").stdout)] == ["S1", "S2"]

    # The key never left the search request: not in any file, output, event or model request.
    outputs = result.stdout + result.stderr + web_home.run("sources", pid).stdout
    assert SEARCH_KEY not in outputs
    leaked = [p for p in web_home.path.rglob("*") if p.is_file() and SEARCH_KEY.encode() in p.read_bytes()]
    assert leaked == []
    assert all(SEARCH_KEY not in json.dumps(r.body) for r in web_home.model.requests)
    assert any(SEARCH_KEY in hit.path for hit in search_api.hits)  # it was really sent (and only there)
    assert any(e["kind"] == "web_search" for e in read_events(project / "events.jsonl"))


def test_fact_checker_rerun_costs_no_fetches_with_the_archive(web_home: Home, site: FakeSite) -> None:
    pid = web_home.new()
    project = web_home.project_dir(pid)
    # With web search configured, research notes must cite a fetched page (their contract).
    web_home.model.script(
        "researcher",
        call("fetch_url", {"url": site.url("/article")}),
        call("write_project_file", {"filename": "research_notes.md", "content": NOTES.replace(" [S2]", " [S1]")}),
        text("Notes written."),
    )
    script_fact_checker(web_home, site)
    assert web_home.run("run", pid, "--quiet").exit_code == 0
    first = fetch_events(project, "fact_checker")
    pages_after_first = site.page_requests()

    # Re-run the fact checker alone: every page comes from the archive.
    script_fact_checker(web_home, site)
    assert web_home.run("run", pid, "--stage", "fact_checker", "--quiet").exit_code == 0
    with_archive = fetch_events(project, "fact_checker")[0] - first[0]
    assert with_archive == 0 and site.page_requests() == pages_after_first

    # Forced: the archive is bypassed and every page is fetched again (same ids).
    script_fact_checker(web_home, site)
    assert web_home.run("run", pid, "--stage", "fact_checker", "--force", "--quiet").exit_code == 0
    without_archive = fetch_events(project, "fact_checker")[0] - first[0]
    assert without_archive == 3 and site.page_requests() > pages_after_first
    assert [s["id"] for s in json.loads(web_home.run("sources", pid, "--json").stdout)] == ["S1", "S2"]
    print(f"\nfact checker re-run: {with_archive} fetches with the archive, {without_archive} without")
