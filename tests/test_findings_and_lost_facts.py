"""Findings that act (a consistency report's "needs attention" gets one polisher fix turn, then
a re-check; what is left stays on the project as problems) and facts lost between drafts
(listed in the stage's result and by `pensieve check`, as warnings)."""

from __future__ import annotations

import json

from pensieve.evidence.lost_facts import lost_facts
from pensieve.run.findings import fix_instructions, parse_findings
from tests.conftest import Home
from tests.fakes.model_server import call, text
from tests.fakes.web_site import FakeSite
from tests.test_web_pipeline import NOTES
from tests.web_fixtures import script_researcher

NEEDS_ATTENTION = """# Consistency report

## Compared articles
No earlier articles to compare.

## Verdict
needs attention

## Findings
1. The code block in "How the index is built" is labelled for versions 3.5 to 3.9, but the
   text says 3.6 to 3.9; label it 3.6 to 3.9.
2. "HNSW" is spelled "HNSW" and "H.N.S.W." in different sections; use HNSW.
"""


def test_a_report_s_verdict_and_findings_are_read_in_the_forms_models_write() -> None:
    found = parse_findings(NEEDS_ATTENTION)
    assert found.needs_attention and found.actionable
    assert found.items[0].startswith("The code block in") and found.items[0].endswith("label it 3.6 to 3.9.")
    assert len(found.items) == 2
    inline = "# Report\n\n**Verdict:** Needs attention.\n\n## Findings\n1. A number differs.\n"
    assert parse_findings(inline).items == ("A number differs.",)
    consistent = "# Report\n\nVerdict: consistent.\n\n## Findings\n1. The article delivers the brief's angle.\n"
    assert not parse_findings(consistent).needs_attention and not parse_findings(consistent).actionable
    nothing = "# Report\n\n## Verdict\nneeds attention\n\n## Findings\nNone\n"
    assert parse_findings(nothing).needs_attention and not parse_findings(nothing).actionable


def test_the_fix_turn_starts_from_the_text_with_source_ids_when_the_article_was_renumbered() -> None:
    found = parse_findings(NEEDS_ATTENTION)
    told = fix_instructions(found, "consistency_report.md", "final.md", "scratch/final.md")
    assert told.startswith('The consistency checker read final.md and its verdict is "needs attention"')
    assert "Start from scratch/final.md, your previous text with source ids" in told
    assert told.endswith("use HNSW.") and "\n1. The code block" in told and "\n2. " in told


def run_to_the_end(home: Home, pid: str) -> None:
    result = home.run("run", pid, "--quiet")
    assert result.exit_code == 0, result.stderr


def report_reply(content: str) -> list[dict[str, object]]:
    return [call("write_project_file", {"filename": "consistency_report.md", "content": content}), text("Done.")]


def test_needs_attention_sends_the_findings_to_the_polisher_once_then_checks_again(home: Home) -> None:
    pid = home.new()
    home.model.script("consistency_checker", *report_reply(NEEDS_ATTENTION))
    run_to_the_end(home, pid)
    # The polisher's second conversation was told the findings; the checker ran again on its work.
    polisher_tasks = [r.messages[1]["content"] for r in home.model.for_stage("polisher") if len(r.messages) == 2]
    assert len(polisher_tasks) == 2
    assert "needs attention" in polisher_tasks[1] and "label it 3.6 to 3.9" in polisher_tasks[1]
    # It works on final.md (unsourced here: not renumbered), and gets no other list to follow.
    assert "Read final.md and write it again" in polisher_tasks[1] and "unsupported" not in polisher_tasks[1]
    checker_runs = [r for r in home.model.for_stage("consistency_checker") if len(r.messages) == 2]
    assert len(checker_runs) == 2
    status = json.loads((home.project_dir(pid) / "status.json").read_text())
    assert status["status"] == "complete" and status["problems"] == []  # the re-check found it consistent
    # What each stage was sent counts every attempt, the fix turn and the re-check included.
    assert status["stages"]["polisher"]["context"]["requests"] == len(home.model.for_stage("polisher"))
    assert status["stages"]["consistency_checker"]["context"]["requests"] == len(checker_runs) * 2
    assert home.run("check", pid).exit_code == 0


def test_findings_left_after_the_fix_turn_stay_on_the_project(home: Home) -> None:
    pid = home.new()
    home.model.script("consistency_checker", *report_reply(NEEDS_ATTENTION), *report_reply(NEEDS_ATTENTION))
    run_to_the_end(home, pid)
    assert len([r for r in home.model.for_stage("polisher") if len(r.messages) == 2]) == 2  # one fix turn only
    status = json.loads((home.project_dir(pid) / "status.json").read_text())
    assert status["status"] == "complete"
    problems = [p for p in status["problems"] if ": consistency: " in p]
    assert len(problems) == 2 and "label it 3.6 to 3.9" in problems[0]
    assert "complete (2 problems)" in home.run("list").stdout
    check = home.run("check", pid, "--json")
    assert check.exit_code == 1
    data = json.loads(check.stdout)
    assert data["ok"] is False and any(
        p["kind"] == "consistency" and "3.6 to 3.9" in p["detail"] for p in data["problems"]
    )
    assert "label it 3.6 to 3.9" in home.run("status", pid).stdout + home.run("status", pid).stderr


def test_with_fix_findings_off_the_findings_only_become_problems(home: Home) -> None:
    home.configure(check={"fix_findings": False})
    pid = home.new()
    home.model.script("consistency_checker", *report_reply(NEEDS_ATTENTION))
    run_to_the_end(home, pid)
    assert len([r for r in home.model.for_stage("polisher") if len(r.messages) == 2]) == 1
    status = json.loads((home.project_dir(pid) / "status.json").read_text())
    assert len([p for p in status["problems"] if ": consistency: " in p]) == 2


DRAFT = """# How vector databases index embeddings

## How HNSW works

HNSW builds a layered proximity graph and searches it greedily from the top layer [S1].
Product quantisation compresses vectors with codebooks of 256 centroids [S2].
Each layer is a navigable small-world graph, and the upper layers are sparse [S1].
"""


def test_lost_facts_are_found_and_rewording_is_not_a_loss() -> None:
    reworded = DRAFT.replace(
        "HNSW builds a layered proximity graph and searches it greedily from the top layer [S1].",
        "Searching greedily from the top layer, HNSW builds a layered proximity graph [S1].",
    ).replace(
        "Each layer is a navigable small-world graph, and the upper layers are sparse [S1].",
        "Each layer is a navigable small-world graph [S1]. The upper layers are sparse.",
    )
    assert lost_facts("draft_v1.md", DRAFT, "draft_v2.md", reworded) == []
    dropped = reworded.replace("Product quantisation compresses vectors with codebooks of 256 centroids [S2].\n", "")
    (lost,) = lost_facts("draft_v1.md", DRAFT, "draft_v2.md", dropped)
    assert (lost.sources, lost.missing) == (("S2",), ("256",))
    assert lost.line() == (
        'draft_v1.md: a sourced fact is not in draft_v2.md: "Product quantisation compresses vectors with '
        'codebooks of 256 centroids." [S2] (256 no longer in draft_v2.md)'
    )
    changed = reworded.replace("256 centroids", "128 centroids")
    assert [f.missing for f in lost_facts("draft_v1.md", DRAFT, "draft_v2.md", changed)] == [("256",)]


def test_a_reviser_that_drops_a_sourced_fact_is_told_in_its_result_and_by_check(web_home: Home, site: FakeSite) -> None:
    web_home.configure(contracts={"enabled": False})
    pid = web_home.new()
    script_researcher(web_home, site, NOTES)
    draft_v2 = DRAFT.replace("Product quantisation compresses vectors with codebooks of 256 centroids [S2].\n", "")
    web_home.model.script("drafter", call("write_project_file", {"filename": "draft_v1.md", "content": DRAFT}))
    web_home.model.script("drafter", text("Drafted."))
    web_home.model.script("reviser", call("write_project_file", {"filename": "draft_v2.md", "content": draft_v2}))
    web_home.model.script("reviser", text("Revised."))
    result = web_home.run("run", pid, "--until", "reviser", "--quiet")
    assert result.exit_code == 0, result.stderr
    status = json.loads((web_home.project_dir(pid) / "status.json").read_text())
    (line,) = status["stages"]["reviser"]["lost_facts"]
    assert line.startswith('draft_v1.md: a sourced fact is not in draft_v2.md: "Product quantisation')
    check = web_home.run("check", pid, "--json")
    assert json.loads(check.stdout)["warnings"] == [line]
    assert f"warning: {line}" in web_home.run("check", pid).stdout
