"""What the evidence check makes the pipeline do, and what it shows: a stage that keeps the
sentences its evidence list quoted is no echo of its instructions; the consistency report is
judged against the list_projects answers the model got; repair lists carry only confident
sentences and are never cut without saying where the rest is; exports carry no verdict
marks unless asked. No embedding model: the evidence entries are written as the alignment
writes them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pensieve.config import Settings
from pensieve.contracts.not_a_document import echo_overlap
from pensieve.evidence.hooks import confident_sentences, problems_of, repair_instructions
from pensieve.evidence.store import EVIDENCE_FILE, text_sha256
from pensieve.project.events import EventLog
from pensieve.project.listing import new_project
from pensieve.project.source_archive import SourceArchive
from pensieve.project.status import load_status
from pensieve.project.workspace import Project, Workspace, atomic_write_text
from pensieve.run.finishing import Finisher
from pensieve.stages import BY_NAME
from pensieve.tools import offered_tools
from pensieve.tools.registry import ToolContext
from pensieve.tools.workspace import list_projects

PAGE = (
    "The layered graph was introduced in 2016. Each layer holds a smaller share of the points than the one "
    "below it. Searches start at the top layer and descend greedily toward the query. Links per node are "
    "capped at thirty-two neighbours to bound memory. Construction inserts each point at a random top layer."
)
# Sentences a real reviser keeps: the evidence list quoted each of them back to it.
KEPT = [
    "The layered graph design appeared in 2016 and put a smaller share of the points on each higher layer [S1].",
    "A search begins at the top layer of the graph and descends greedily toward the query vector [S1].",
    "Every node keeps links to at most thirty-two neighbours so that memory use stays bounded [S1].",
    "Construction inserts each new point at a randomly drawn top layer and links it below [S1].",
    "The design remains the most widely deployed index for vector search in production systems today [S1].",
]


@pytest.fixture
def project(tmp_path: Path) -> Project:
    made = new_project(Workspace(tmp_path, "default"), "# How vector databases index embeddings\nDetail", "vec")
    SourceArchive(made.dir).add(
        url="https://example.org/hnsw",
        final_url="https://example.org/hnsw",
        title="HNSW",
        content_type="text/plain",
        body=PAGE.encode(),
        text=PAGE,
    )
    return made


def citation(verdict: str, confidence: float, reasons: list[str], passage: str = PAGE[:60]) -> dict[str, Any]:
    return {
        "source": "S1",
        "verdict": verdict,
        "score": 0.3,
        "confidence": confidence,
        "passage": {"text": passage, "start": 0, "end": len(passage)},
        "passages": [],
        "missing": [],
        "reasons": reasons,
        "judge": None,
    }


def entry_for(text: str, sentences: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    rows = [
        {
            "index": i,
            "text": sentence,
            "start": 0,
            "end": len(sentence),
            "verdict": cited["verdict"],
            "citations": [cited],
            "findings": [f"S1 was not found to support it: {'; '.join(cited['reasons'])}"],
        }
        for i, (sentence, cited) in enumerate(sentences)
    ]
    counts = {v: sum(1 for r in rows if r["verdict"] == v) for v in ("supported", "weak", "unsupported")}
    summary = {"cited_sentences": len(rows), **counts, "supported_share": counts["supported"] / len(rows)}
    return {"artifact_sha256": text_sha256(text), "summary": summary, "sentences": rows}


def store(project: Project, name: str, entry: dict[str, Any]) -> None:
    document = {"version": 1, "thresholds": {"supported": 0.55, "weak": 0.4}, "artifacts": {name: entry}}
    atomic_write_text(project.dir / EVIDENCE_FILE, json.dumps(document))


# -- the echo check ------------------------------------------------------------------------------
def test_a_revision_that_keeps_the_sentences_its_evidence_list_quoted_is_no_echo(project: Project) -> None:
    """The failing case of issue 25: the reviser is sent the evidence list of draft_v1.md,
    which quotes the draft's sentences and the source's passages; a sound draft_v2.md keeps
    or lightly re-cites them, and more than half its 8-word runs were in the task message."""
    draft = "# Vector search\n\n## How it works\n\n" + " ".join(KEPT) + "\n"
    atomic_write_text(project.file("draft_v1.md"), draft)
    flagged = [(s, citation("unsupported", 0.9, ["2016 not found in S1"])) for s in KEPT]
    listed = repair_instructions(entry_for(draft, flagged), "draft_v1.md", 15, own=False)
    assert listed is not None and all(s in listed for s in KEPT)
    task = "Project: vec. Your stage: reviser (Reviser).\nRead: draft_v1.md.\n\n" + listed
    revised = draft + "\n## Revision notes\n\n- Kept the flagged sentences: the source says them.\n"
    # What made the stage fail: most of the revision's 8-word runs are in the task message.
    assert echo_overlap(revised, task) > Settings().contracts.echo_max_overlap
    stage = BY_NAME["reviser"]
    ctx = ToolContext(project, stage, Settings(), EventLog(project.events_path), {})
    staged = project.dir / "staged_draft_v2.md"
    atomic_write_text(staged, revised)
    finisher = Finisher.for_stage(ctx, offered_tools(stage.tools, Settings(), {})[0], staged)
    verdict = finisher.check(revised, ("You revise drafts.", task), set(stage.reads))
    assert [v.contract for v in verdict if v.contract == "not_echo"] == []
    # Instructions that are not the project's text, handed back, are still an echo.
    atomic_write_text(project.file("draft_v1.md"), "# Vector search\n\nSomething else entirely [S1].\n")
    echoed = finisher.check(revised, ("You revise drafts.", task), set(stage.reads))
    assert [v.contract for v in echoed if v.contract == "not_echo"] == ["not_echo"]


# -- the consistency report ------------------------------------------------------------------------
def complete(project: Project, pid: str, final: str) -> None:
    done = new_project(project.workspace, f"Background on {pid}", pid)
    status = load_status(done.status_path)
    status.status = "complete"
    atomic_write_text(done.status_path, status.to_json())
    atomic_write_text(done.file("final.md"), final)


async def test_a_report_naming_a_project_completed_mid_stage_is_judged_against_what_list_projects_said(
    project: Project,
) -> None:
    stage = BY_NAME["consistency_checker"]
    settings = Settings()
    ctx = ToolContext(project, stage, settings, EventLog(project.events_path), {})
    staged = project.dir / "staged_report.md"
    # When the stage starts, one other project is complete ...
    complete(project, "raft", "# Raft, explained\n\nRaft elects a leader.\n")
    finisher = Finisher.for_stage(ctx, offered_tools(stage.tools, settings, {})[0], staged)
    # ... then a batch neighbour completes, and list_projects (called now) shows both.
    complete(project, "btrees", "# B-trees, explained\n\nB-trees keep sorted data balanced.\n")
    rows = await list_projects.function(ctx)
    assert {r["id"] for r in rows} >= {"raft", "btrees"}
    report = "# Consistency report\n\nCompared with btrees (B-trees, explained): no contradiction found.\n"
    assert [v.contract for v in finisher.check(report, ("s", "t"), set(stage.reads))] == []
    says_none = "# Consistency report\n\nNo earlier articles to compare.\n"
    assert [v.contract for v in finisher.check(says_none, ("s", "t"), set(stage.reads))] == ["names_compared"]


# -- the repair lists --------------------------------------------------------------------------------
def test_repair_lists_carry_only_confident_sentences_with_what_differs() -> None:
    text = "# T\n\nirrelevant\n"
    entry = entry_for(
        text,
        [
            ("It appeared in 2019 [S1].", citation("unsupported", 0.9, ["2019 not found in S1"])),
            ("Searches start at the top [S1].", citation("unsupported", 0.55, ["closest passage of S1 scores 0.38"])),
            ("Links are capped [S1].", citation("weak", 0.4, ["stated more strongly than the passage: all"])),
        ],
    )
    assert [s["text"] for s in confident_sentences(entry)] == ["It appeared in 2019 [S1]."]
    listed = repair_instructions(entry, "draft_v1.md", 15, own=False)
    assert listed is not None
    assert "It appeared in 2019" in listed and "2019 not found in S1" in listed and "closest passage in S1" in listed
    assert "Searches start at the top" not in listed and "Links are capped" not in listed
    assert problems_of(entry, "final.md") == [
        'final.md: unsupported_citation: "It appeared in 2019 [S1]." '
        "(S1 was not found to support it: 2019 not found in S1)"
    ]
    doubtful_only = entry_for(text, [("Searches start [S1].", citation("unsupported", 0.5, ["scores 0.38"]))])
    assert repair_instructions(doubtful_only, "draft_v1.md", 15, own=False) is None


def test_a_long_repair_list_is_never_cut_silently(project: Project) -> None:
    text = "# T\n\nx\n"
    sentences = [
        (f"Claim number {i} happened in {1900 + i} [S1].", citation("unsupported", 0.9, ["x"])) for i in range(20)
    ]
    entry = entry_for(text, sentences)
    listed = repair_instructions(entry, "draft_v2.md", 15, own=False, project_dir=project.dir)
    assert listed is not None and "Claim number 14 " in listed and "Claim number 15 " not in listed
    assert "... and 5 more: read scratch/evidence_draft_v2.md (read_project_file) for the whole list" in listed
    whole = (project.dir / "scratch" / "evidence_draft_v2.md").read_text()
    assert all(f"Claim number {i} " in whole for i in range(20))


def test_a_sentence_the_fact_checker_verified_with_a_quote_says_so(project: Project) -> None:
    table = (
        "# Fact check\n\n| # | claim | cited id | verdict | evidence |\n|---|---|---|---|---|\n"
        '| 1 | The layered graph was introduced in 2016 | S1 | supported | "The layered graph was introduced in '
        '2016" [S1] |\n'
    )
    atomic_write_text(project.file("fact_check.md"), table)
    sentence = "The layered graph was introduced in 2016 [S1]."
    entry = entry_for("# T\n", [(sentence, citation("unsupported", 0.8, ["the passage says the opposite"]))])
    listed = repair_instructions(entry, "draft_v1.md", 15, own=False, project_dir=project.dir)
    assert listed is not None
    assert 'fact_check.md claim 1 verified it with the quote "The layered graph was introduced in 2016" from S1' in (
        listed
    )
    assert "keep the sentence unless that quote does not say it" in listed


def test_a_quote_the_fact_checker_verified_is_evidence_for_the_same_claim(project: Project) -> None:
    from pensieve.evidence.align import Alignment, Citation
    from pensieve.evidence.hooks import apply_fact_check, load_source_texts, verified_quotes

    table = (
        "# Fact check\n\n| # | claim | cited id | verdict | evidence |\n|---|---|---|---|---|\n"
        '| 1 | Searches start at the top layer | S1 | supported | "Searches start at the top layer and descend '
        'greedily" [S1] |\n| 2 | Links are capped | S1 | supported | "Links are capped at 64" [S1] |\n'
    )
    atomic_write_text(project.file("fact_check.md"), table)
    quotes = verified_quotes(project.dir, load_source_texts(project.dir)[0])
    assert [(number, sid) for number, _claim, sid, _quote in quotes] == [("1", "S1")]  # claim 2's is not in S1
    alignment = Alignment("draft_v2.md", "0" * 64, [], [], [])
    for text in ("Searches start at the top layer and then descend greedily [S1].", "Links are capped [S1]."):
        alignment.sentences.append(
            {"index": 0, "text": text, "start": 0, "end": len(text), "verdict": "", "citations": [], "findings": []}
        )
        citation = Citation("S1", "unsupported", 0.3, {"text": "x", "start": 0, "end": 1}, confidence=0.6)
        alignment.citations.append([citation])
        alignment.missing_everywhere.append([])
    alignment.refresh()
    assert apply_fact_check(alignment, quotes) == 1
    assert [s["verdict"] for s in alignment.sentences] == ["supported", "unsupported"]
    assert "fact_check.md claim 1 verified it" in alignment.citations[0][0].reasons[-1]
