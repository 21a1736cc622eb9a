"""A whole run with SearXNG and an academic provider (fake servers, fake model): the
Researcher searches papers, fetches their pages, and the final article ends with a reference
list in each style, made from the metadata the archive kept, which `pensieve check` accepts."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from pensieve.web import ratelimit
from tests.conftest import Home
from tests.fakes.model_server import call, text
from tests.fakes.scholarly_server import DISKANN, HNSW, PQ, FakeScholarly

NCBI_KEY = "ncbi-canary-9f3b27c1d5"
P1 = "Hierarchical graphs let a search descend from sparse upper layers to dense lower ones quickly [S1]."
P2 = "Product quantisation splits vectors into sub-vectors and stores short codes instead of floats [S2]."
P3 = "Disk-resident graphs index a billion points on one machine with an SSD and modest memory [S3, S1]."
FACTS = (
    "| # | claim | cited id | verdict | evidence |\n|---|---|---|---|---|\n"
    "| 1 | HNSW is a graph method | S1 | supported |"
    ' "navigable small world graphs with controllable hierarchy" [S1] |\n'
)


def article(*paragraphs: str) -> str:
    return "# Vector search\n\n" + "\n\n".join(paragraphs) + "\n"


def write(filename: str, content: str) -> list[dict[str, Any]]:
    return [call("write_project_file", {"filename": filename, "content": content}), text("done")]


@pytest.fixture
def scholarly() -> Iterator[FakeScholarly]:
    fake = FakeScholarly().start()
    yield fake
    fake.stop()
    ratelimit._PACERS.clear()


def script_run(home: Home, fake: FakeScholarly) -> None:
    home.model.script(
        "researcher",
        call("web_search", {"query": "approximate nearest neighbor search", "kind": "academic"}),
        call("web_search", {"query": "vector index", "kind": "web"}),
        call("fetch_url", {"url": fake.landing(HNSW)}),
        call("fetch_url", {"url": fake.landing(PQ)}),
        call("fetch_url", {"url": fake.landing(DISKANN)}),
        *write("research_notes.md", "# Notes\n\n## Indexes\n- HNSW [S1].\n- PQ [S2].\n- DiskANN [S3].\n"),
    )
    home.model.script("drafter", *write("draft_v1.md", article(P1, P2, P3)))
    home.model.script("fact_checker", *write("fact_check.md", FACTS))
    home.model.script("reviser", *write("draft_v2.md", article(P1, P2, P3) + "\n## Revision notes\n\n- Tightened.\n"))
    home.model.script("polisher", *write("final.md", article(P2, P1, P3)))


@pytest.mark.slow
@pytest.mark.parametrize("style", ["numbered", "author-year"])
def test_a_run_with_academic_providers_ends_with_references_in_each_style(
    home: Home, scholarly: FakeScholarly, style: str
) -> None:
    providers = ["searxng", "openalex", "pubmed"]
    home.monkeypatch.setenv("NCBI_API_KEY", NCBI_KEY)
    home.configure(
        search={
            "providers": providers,
            "endpoints": {p: scholarly.base_url for p in providers},
            "min_intervals_s": {p: 0.0 for p in providers},
            "contact_email": "writer@example.org",
        },
        fetch={"allow_private_hosts": True, "timeout_s": 3},
        article={"reference_style": style},
        contracts={"enabled": False},
        check={"min_cited_paragraph_share": 0.6},
    )
    pid = home.new()
    script_run(home, scholarly)
    result = home.run("run", pid, "--quiet")
    assert result.exit_code == 0, result.stderr
    project = home.project_dir(pid)

    # No SEARCH_API_KEY: the keyless providers made web_search available, and the prompt says when papers help.
    researcher = home.model.for_stage("researcher")
    assert "web_search" in researcher[0].tool_names
    assert 'Pass `kind: "academic"`' in researcher[0].messages[0]["content"]
    papers = researcher[1].last_tool_results[0]
    assert "openalex" in papers and "pubmed" in papers and "searxng" not in papers and "Malkov" in papers
    assert len(scholarly.of("searxng")) == 1 and len(scholarly.of("openalex")) == 1
    assert all(hit.params["api_key"] == NCBI_KEY for hit in scholarly.of("pubmed"))

    notes = (project / "research_notes.md").read_text()
    assert f"- [S1] {HNSW.title} (Malkov & Yashunin, 2018) - {scholarly.landing(HNSW)}" in notes

    final = (project / "final.md").read_text()
    refs = final.split("## References\n\n")[1].strip().splitlines()
    hnsw_entry = f"Malkov, Y. A., & Yashunin, D. A. (2018). {HNSW.title}. *{HNSW.venue}*. https://doi.org/{HNSW.doi}"
    pq_entry = f"Jégou, H., Douze, M., & Schmid, C. (2011). {PQ.title}. *{PQ.venue}*. https://doi.org/{PQ.doi}"
    diskann_entry = (
        f"Subramanya, S. J., Devvrit, F., & Kadekodi, R. (2019). {DISKANN.title}. *{DISKANN.venue}*. "
        f"Curran Associates. {scholarly.landing(DISKANN)}"
    )
    if style == "numbered":
        assert "short codes instead of floats [1]." in final and "modest memory [3, 2]." in final
        assert refs == [f"1. {pq_entry}", f"2. {hnsw_entry}", f"3. {diskann_entry}"]
    else:
        assert "short codes instead of floats (Jégou et al., 2011)." in final
        assert "modest memory (Subramanya et al., 2019; Malkov & Yashunin, 2018)." in final
        assert refs == [f"- {pq_entry}", f"- {hnsw_entry}", f"- {diskann_entry}"]  # alphabetical

    status = json.loads((project / "status.json").read_text())
    assert status["problems"] == [] and status["check"]["ok"] is True
    report = home.run("check", pid, "--json")
    assert report.exit_code == 0, report.stdout
    assert json.loads(report.stdout)["files"]["final.md"]["cited_paragraph_share"] == 1.0
    # The NCBI key went to NCBI only: not into any file, output or model request.
    leaked = [p for p in home.path.rglob("*") if p.is_file() and NCBI_KEY.encode() in p.read_bytes()]
    assert leaked == [] and NCBI_KEY not in result.stdout + result.stderr
    assert all(NCBI_KEY not in json.dumps(r.body) for r in home.model.requests)
    print(f"\n{style}: {len(refs)} references, check ok")
