"""Citations checked by code across real fake-model runs: every id resolves to a fetched
page, quotes are found in their sources, reference lists are generated and consistent."""

from __future__ import annotations

import json
from typing import Any

from tests.conftest import Home
from tests.fakes.model_server import call, text
from tests.fakes.web_site import ARTICLE_FACT, FakeSite

P1 = "HNSW builds a layered proximity graph and searches it greedily, starting from the sparse top layer [S1]."
P2 = "Product quantisation splits each vector into sub-vectors and encodes them with small codebooks [S2]."
P3 = "Both trade a little accuracy for speed or memory, which is the central bargain of vector search [S1, S2]."
TYPED_REFS = "\n\n## References\n\n1. Some Made Up Paper - https://invented.example/paper\n"


def write(stage: str, filename: str, content: str) -> list[dict[str, Any]]:
    return [call("write_project_file", {"filename": filename, "content": content}), text(f"{stage} done")]


def article(*paragraphs: str, title: str = "# Vector search") -> str:
    return title + "\n\n" + "\n\n".join(paragraphs) + "\n"


def fact_table(*rows: tuple[str, str, str, str]) -> str:
    lines = ["| # | claim | cited id | verdict | evidence |", "|---|---|---|---|---|"]
    lines += [
        f"| {i} | {claim} | {sid} | {verdict} | {evidence} |"
        for i, (claim, sid, verdict, evidence) in enumerate(rows, start=1)
    ]
    return "\n".join(lines) + "\n"


GOOD_FACTS = fact_table(
    ("HNSW is a layered graph", "S1", "supported", f'"{ARTICLE_FACT}" [S1]'),
    ("PQ uses codebooks", "S2", "supported", "\u201cencodes each with a small codebook\u201d [S2]"),
)


def script_clean_run(
    home: Home, site: FakeSite, *, draft: str | None = None, facts: str = GOOD_FACTS, final: str | None = None
) -> None:
    # Short scripted articles exercise the citation check; the stage contracts (length,
    # sections) have their own tests (test_contracts.py, test_misbehaving_model.py).
    home.configure(contracts={"enabled": False})
    home.model.script(
        "researcher",
        # One after the other: concurrent fetches are archived in the order they finish.
        call("fetch_url", {"url": site.url("/article")}),
        call("fetch_url", {"url": site.url("/second")}),
        *write(
            "researcher",
            "research_notes.md",
            "# Notes\n\n- HNSW is a layered graph [S1].\n- PQ uses codebooks [S2].\n\n## Sources\n\n- typed by model",
        ),
    )
    home.model.script("drafter", *write("drafter", "draft_v1.md", draft or article(P1, P2, P3) + TYPED_REFS))
    home.model.script("fact_checker", *write("fact_checker", "fact_check.md", facts))
    home.model.script(
        "reviser",
        *write("reviser", "draft_v2.md", article(P1, P2, P3) + "\n## Revision notes\n\n- Tightened the intro.\n"),
    )
    home.model.script("polisher", *write("polisher", "final.md", final or article(P2, P1, P3) + TYPED_REFS))


def status_of(home: Home, pid: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((home.project_dir(pid) / "status.json").read_text())
    return doc


def test_clean_run_passes_with_generated_references(web_home: Home, site: FakeSite) -> None:
    web_home.configure(check={"min_cited_paragraph_share": 0.6})
    pid = web_home.new()
    script_clean_run(web_home, site)
    result = web_home.run("run", pid, "--quiet")
    assert result.exit_code == 0, result.stderr
    project = web_home.project_dir(pid)

    notes = (project / "research_notes.md").read_text()
    assert "typed by model" not in notes
    assert "- [S1] How HNSW works - " + site.url("/article") in notes
    assert "- [S2] Product quantisation explained - " + site.url("/second") in notes

    draft = (project / "draft_v1.md").read_text()
    assert "invented.example" not in draft and "- [S1] How HNSW works" in draft

    final = (project / "final.md").read_text()
    assert "invented.example" not in final
    # renumbered in order of first use: S2 first, then S1
    assert "codebooks [1]." in final and "top layer [2]." in final and "vector search [2, 1]." in final
    assert f"1. Product quantisation explained. (n.d.). 127.0.0.1. {site.url('/second')}" in final
    assert f"2. How HNSW works. (n.d.). 127.0.0.1. {site.url('/article')}" in final

    doc = status_of(web_home, pid)
    assert doc["problems"] == []
    assert doc["check"]["ok"] is True
    assert doc["check"]["files"]["final.md"]["cited_paragraph_share"] == 1.0
    assert doc["check"]["quotes_checked"] == 2
    assert web_home.model.count("polisher") == 2  # no second polish

    report = web_home.run("check", pid, "--json")
    assert report.exit_code == 0
    figures = json.loads(report.stdout)
    assert figures["ok"] and figures["sources"] == 2 and figures["citations_checked"] >= 8
    shown = web_home.run("status", pid).stdout
    assert "citations: 16 checked against 2 archived sources, 100% of paragraphs cite a source; 0 problem(s)" in shown
    table = web_home.run("check", pid)
    assert "final.md: 4 citations, 3/3 paragraphs cited (100%)" in table.stdout
    assert "ok: every citation checks out" in table.stdout
    print(
        f"\nclean run: {figures['citations_checked']} citations checked, share "
        f"{figures['files']['final.md']['cited_paragraph_share']:.0%}, 0 problems"
    )


def test_unknown_id_and_unfetched_url_in_the_draft_are_caught(web_home: Home, site: FakeSite) -> None:
    pid = web_home.new()
    bad = article(
        P1,
        "Graphs are old news, as everyone knows from long experience [S9].",
        "See https://never-fetched.example/post for a benchmark of every index type.",
    )
    script_clean_run(web_home, site, draft=bad)
    assert web_home.run("run", pid, "--until", "drafter", "--quiet").exit_code == 0
    problems = status_of(web_home, pid)["problems"]
    assert "draft_v1.md: unknown_citation: [S9] is not in the source archive" in problems
    assert "draft_v1.md: unfetched_url: https://never-fetched.example/post was never fetched" in problems
    shown = web_home.run("status", pid)
    assert "problem: draft_v1.md: unknown_citation" in shown.stdout


def test_quote_not_in_source_and_unaddressed_claim_are_caught(web_home: Home, site: FakeSite) -> None:
    pid = web_home.new()
    facts = fact_table(
        ("HNSW is a layered graph", "S1", "supported", '"HNSW was invented in 1970 by a committee" [S1]'),
        ("PQ is lossless", "S2", "contradicted", '"trades a little accuracy" [S2]'),
    )
    script_clean_run(web_home, site, facts=facts)
    assert web_home.run("run", pid, "--until", "reviser", "--quiet").exit_code == 0
    problems = status_of(web_home, pid)["problems"]
    assert any(p.startswith("fact_check.md: quote_not_in_source: claim 1:") for p in problems), problems
    assert not any("claim 2:" in p and "quote_not_in_source" in p for p in problems)  # that quote is real
    assert "draft_v2.md: unaddressed_claim: revision notes do not say what was done about claim 2" in problems


def test_inconsistent_reference_list_is_caught_by_check(web_home: Home, site: FakeSite) -> None:
    pid = web_home.new()
    script_clean_run(web_home, site)
    assert web_home.run("run", pid, "--quiet").exit_code == 0
    final = web_home.project_dir(pid) / "final.md"
    body = final.read_text().split("## References")[0]
    final.write_text(
        body
        + "## References\n\n1. A - "
        + site.url("/second")
        + "\n1. A - "
        + site.url("/second")
        + "\n3. Typed - https://invented.example/x\n"
    )
    result = web_home.run("check", pid, "--json")
    assert result.exit_code == 1
    kinds = {(p["file"], p["kind"]) for p in json.loads(result.stdout)["problems"]}
    assert ("final.md", "duplicate_reference") in kinds
    assert ("final.md", "missing_reference") in kinds  # [2] cited, not listed
    assert ("final.md", "orphan_reference") in kinds  # [3] listed, never cited
    assert ("final.md", "unfetched_url") in kinds


def test_failed_final_check_sends_the_polisher_back_once(web_home: Home, site: FakeSite) -> None:
    pid = web_home.new()
    script_clean_run(web_home, site, final=article(P1, "A claim with an invented source at the very end [S7]."))
    web_home.model.script("polisher", *write("polisher", "final.md", article(P1, P2)))
    result = web_home.run("run", pid, "--quiet")
    assert result.exit_code == 0, result.stderr
    polisher = web_home.model.for_stage("polisher")
    assert len(polisher) == 4
    retry_task = polisher[2].messages[1]["content"]
    assert "unknown_citation: [S7] is not in the source archive" in retry_task
    # The second polish starts from the text with source ids, not the renumbered final.md.
    assert "Start from scratch/final.md" in retry_task
    assert "[S1]" in (web_home.project_dir(pid) / "scratch" / "final.md").read_text()
    doc = status_of(web_home, pid)
    assert doc["problems"] == [] and doc["status"] == "complete"
    assert "[S7]" not in (web_home.project_dir(pid) / "final.md").read_text()


def test_problems_that_survive_the_second_polish_stay_on_the_project(web_home: Home, site: FakeSite) -> None:
    pid = web_home.new()
    bad_final = article(P1, "A claim with an invented source at the very end [S7].")
    script_clean_run(web_home, site, final=bad_final)
    web_home.model.script("polisher", *write("polisher", "final.md", bad_final))
    assert web_home.run("run", pid, "--quiet").exit_code == 0
    assert web_home.model.count("polisher") == 4  # sent back once, not in a loop
    doc = status_of(web_home, pid)
    assert "final.md: unknown_citation: [S7] is not in the source archive" in doc["problems"]
    assert (web_home.project_dir(pid) / "final.md").is_file()  # the article is kept
    assert "problem: final.md: unknown_citation" in web_home.run("status", pid).stdout
    (row,) = json.loads(web_home.run("list", "--json").stdout)
    assert row["status"] == "complete" and row["problems"] == 1
    assert "complete (1 problems)" in web_home.run("list").stdout
    assert web_home.run("check", pid).exit_code == 1
