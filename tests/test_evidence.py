"""Claim-level evidence: segmentation and lexical facts (no model), the alignment with the
real MiniLM model (one instance per test session), the vector cache, evidence.json, the
labelled set's floor, and the repair loop in real fake-model runs."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pensieve.article.reference_list import reader_numbers
from pensieve.article.sentences import cited_sentences, source_sentences
from pensieve.config import Settings
from pensieve.evidence import lexical
from pensieve.evidence.align import Alignment, Citation
from pensieve.evidence.hooks import align_file, current_evidence, stale_artifacts
from pensieve.evidence.store import EVIDENCE_FILE, describe_share, latest_summary
from pensieve.evidence.vectors import VECTORS_DIR
from pensieve.model.llm import LLMReply
from pensieve.project.events import read_events
from pensieve.project.source_archive import SourceArchive
from pensieve.project.workspace import Project, open_workspace
from pensieve.topics.embedder import MODEL_PACKAGE, Embedder, get_embedder
from tests.conftest import Home
from tests.evidence_scoring import corpus_dir, load_labels, load_real, score, score_real
from tests.fakes.cli_process import child_env
from tests.fakes.web_site import ARTICLE_FACT, PAGES, FakeSite
from tests.publish_fixtures import damaged_evidence
from tests.test_citations import P1, P2, P3, TYPED_REFS, article, script_clean_run, status_of, write

CATEGORIES = {
    "paraphrase",
    "exact",
    "changed_number",
    "changed_date",
    "swapped_entity",
    "negation",
    "stronger",
    "related_unsupported",
    "unrelated",
}
# Measured: precision 1.000, recall 0.964, F1 0.982 (README, Benchmarks); the target is F1 0.85.
F1_FLOOR = 0.90
RECALL_FLOOR = 0.90
# On the real set (docs/evidence.md, Benchmarks): measured 8.7% false alarms (25 of 287),
# planted recall 0.815 (119 of 146) (2026-12-06): the floors are issue 25's targets (10%, 0.80),
# three pairs of margin on the false alarms, two on the recall.
REAL_FALSE_ALARMS_CEILING = 0.100
REAL_RECALL_FLOOR = 0.80
INVENTED = "HNSW builds its layered proximity graph in exactly 14 layers and searches it from the top [S1]."


# -- no model -------------------------------------------------------------------------------
def test_cited_sentences_keep_offsets_and_normalised_ids() -> None:
    text = (
        "# Title\n\nAn uncited opening sentence. HNSW builds a graph (S1). Quantisation "
        "uses codebooks, e.g. small ones [s2; S3]. A claim cited after its stop. [S1]\n\n"
        "- A list item that cites [S2, p. 4].\n\n```\ncode [S1]. Not prose [S2].\n```\n\n"
        "| table | [S1] |\n\n## References\n\n- [S1] A - https://a.example\n\n"
        "## Revision notes\n\n- Claim 1: fixed [S1].\n"
    )
    found = cited_sentences(text)
    assert [s.ids for s in found] == [("S1",), ("S2", "S3"), ("S1",), ("S2",)]
    for sentence in found:
        assert text[sentence.start : sentence.end] == sentence.text
    assert found[1].text == "Quantisation uses codebooks, e.g. small ones [s2; S3]."
    assert found[1].claim == "Quantisation uses codebooks, e.g. small ones."
    assert found[2].text.endswith("stop. [S1]")
    assert [s.index for s in found] == [0, 1, 2, 3]


def test_final_reader_numbers_map_back_to_source_ids() -> None:
    final = (
        "# T\n\nFirst claim [1]. Second claim [2, 1].\n\n## References\n\n"
        "1. Page two - https://b.example/x\n2. Page one - https://a.example/\n"
    )
    numbers = reader_numbers(final, {"https://a.example": "S1", "https://b.example/x": "S2"})
    assert numbers == {"1": "S2", "2": "S1"}
    assert [s.ids for s in cited_sentences(final, numbers)] == [("S2",), ("S1", "S2")]


def test_final_reader_numbers_map_mcp_references_back_to_source_ids() -> None:
    final = (
        "# T\n\nThe index is rebuilt every night [1], by the search team [2].\n\n## References\n\n"
        "1. search (wiki): query='falcon'. (n.d.). wiki. mcp://wiki/search?query=falcon\n"
        "2. Page one - https://a.example/\n"
    )
    numbers = reader_numbers(final, {"mcp://wiki/search?query=falcon": "S1", "https://a.example": "S2"})
    assert numbers == {"1": "S1", "2": "S2"}
    assert [s.ids for s in cited_sentences(final, numbers)] == [("S1", "S2")]


def test_author_year_citations_map_back_to_source_ids() -> None:
    final = "# T\n\nGraphs index vectors (Malkov & Yashunin, 2018; Jégou et al., 2011). Not a citation (see below).\n"
    labels = {"Malkov & Yashunin, 2018": "S1", "Jégou et al., 2011": "S2"}
    (sentence,) = cited_sentences(final, None, labels)
    assert sentence.ids == ("S1", "S2") and sentence.claim == "Graphs index vectors."


def test_source_windows_cover_the_text_with_offsets() -> None:
    text = "# Heading of the page here\n\nShort.\nA first real sentence of the page. A second one follows it here.\n"
    windows = source_sentences(text)
    assert all(text[w.start : w.end] == w.text for w in windows)
    assert any("second one" in w.text for w in windows)
    # Too short alone: joined with the next.
    assert any("Short." in w.text and "first real" in w.text for w in windows)
    assert not any(w.text == "Short." for w in windows)


@pytest.mark.parametrize(
    ("sentence", "passage", "found"),
    [
        ("Revenue grew 14% in 2019.", "Revenue grew 14 percent in 2019.", True),
        ("Revenue grew 14% in 2019.", "Revenue grew 41% in 2019.", False),
        ("The index holds 1,200 vectors.", "The index holds 1200 vectors.", True),
        ("Nearly half a million adults took part.", "The cohort had 498,000 adults.", True),
        ("It opened in December 2007.", "It opened in December 2004.", False),
        ("The FAO reported it.", "The Food and Agriculture Organization reported it.", True),
        ("It was built by Renzo Piano.", "It was designed by Norman Foster.", False),
    ],
)
def test_facts_must_appear_in_the_passage(sentence: str, passage: str, found: bool) -> None:
    facts = lexical.facts(sentence)
    assert facts, sentence
    hay = lexical.Haystack.of(passage)
    assert all(hay.has(f) for f in facts) is found


def test_a_strong_word_inside_a_quotation_the_page_holds_is_the_pages_own() -> None:
    """Seen on real writing (evidence_real_nll, nll-g030): a sentence quoting two places of a
    page, one of them "ultimately failed to solve", was "stated more strongly than the passage:
    solve" (the passage chosen held the other quotation); the writer claimed no solving. The
    same word in the writer's own words is still a finding."""
    from pensieve.evidence.align import SourceText, Thresholds, assess_sources

    corpus, why = corpus_dir()
    if corpus is None:
        pytest.skip(why)
    (row,) = [r for r in load_real("dev") if r["id"] == "nll-g030"]
    page = SourceText("S1", (corpus / row["source"]).read_text(encoding="utf-8"))
    own = row["sentence"].replace('"ultimately failed to solve"', "completely failed to solve")
    kept, claimed = assess_sources([(row["sentence"], page), (own, page)], get_embedder, Thresholds())
    assert not any("more strongly" in r for r in kept.reasons), kept.reasons
    assert any("more strongly than the passage" in r for r in claimed.reasons), claimed.reasons


def test_stored_summary_is_stale_once_the_article_changes(tmp_path: Path) -> None:
    (tmp_path / "final.md").write_text("# T\n\nText.\n")
    from pensieve.evidence.store import save_entry, summarize, text_sha256

    sentences = [{"verdict": "supported"}, {"verdict": "unsupported"}]
    entry = {"artifact_sha256": text_sha256("# T\n\nText.\n"), "summary": summarize(sentences), "sentences": []}
    save_entry(tmp_path, "final.md", entry, {"supported": 0.55, "weak": 0.4})
    summary = latest_summary(tmp_path)
    assert summary is not None and summary.current and summary.supported_share == 0.5
    assert describe_share(summary) == "50% supported (1/2 cited sentences, final.md)"
    (tmp_path / "final.md").write_text("# T\n\nEdited.\n")
    summary = latest_summary(tmp_path)
    assert summary is not None and not summary.current
    assert "stale" in describe_share(summary)
    (tmp_path / EVIDENCE_FILE).write_text("{not json")
    assert latest_summary(tmp_path) is None  # a damaged file is no figure, never a crash


# -- with the model ---------------------------------------------------------------------------
class CountingEmbedder:
    def __init__(self) -> None:
        self.texts = 0

    def encode(self, texts: list[str]) -> Any:
        self.texts += len(texts)
        return get_embedder().encode(texts)


def _project(tmp_path: Path) -> Project:
    project = Project(open_workspace(tmp_path, "default"), "p")
    project.dir.mkdir(parents=True)
    archive = SourceArchive(project.dir)
    body = (
        f"{ARTICLE_FACT} Each layer is a navigable small-world graph; upper layers are sparse.\n\n"
        "Queries descend layer by layer, refining the candidate set. The method was published in 2016."
    )
    archive.add(
        url="https://a.example/hnsw",
        final_url="https://a.example/hnsw",
        title="HNSW",
        content_type="text/plain",
        body=body.encode(),
        text=body,
    )
    return project


@pytest.mark.slow
def test_alignment_writes_evidence_json_and_reuses_cached_vectors(tmp_path: Path) -> None:
    project = _project(tmp_path)
    draft = article(
        "HNSW builds a layered proximity graph and searches it greedily from the top layer [S1].",
        INVENTED,
        "Queries descend the layers one by one [S1]. Graphs are old news [S9].",
    )
    (project.dir / "draft_v1.md").write_text(draft)
    counter = CountingEmbedder()
    embed: Callable[[], Embedder] = lambda: counter  # noqa: E731
    alignment = align_file(project, "draft_v1.md", Settings(), embed)
    assert alignment is not None and counter.texts > 4  # windows and sentences

    doc = json.loads((project.dir / EVIDENCE_FILE).read_text())
    assert doc["version"] == 1 and doc["thresholds"] == {"supported": 0.55, "weak": 0.4}
    entry = doc["artifacts"]["draft_v1.md"]
    sentences = entry["sentences"]
    assert entry["summary"]["cited_sentences"] == len(sentences) == 4
    assert [s["verdict"] for s in sentences] == ["supported", "unsupported", "supported", "unsupported"]
    assert entry["summary"]["supported_share"] == 0.5
    source_file = (project.dir / "sources" / "S1.md").read_text()
    for sentence in sentences:
        assert draft[sentence["start"] : sentence["end"]] == sentence["text"]
        for citation in sentence["citations"]:
            assert set(citation) == {
                *("source", "verdict", "score", "confidence", "passage", "passages", "missing", "reasons"),
                "judge",
            }
            if citation["passage"]:
                passage = citation["passage"]
                assert source_file[passage["start"] : passage["end"]] == passage["text"]
    invented = sentences[1]
    assert "14 not found in S1" in invented["findings"]
    assert invented["citations"][0]["missing"] == ["14"]
    assert sentences[3]["citations"][0]["passage"] is None
    assert any("S9 is not in the source archive" in f for f in sentences[3]["findings"])

    # Re-checking embeds no source window: the vectors come from sources/.vectors/.
    assert list((project.dir / VECTORS_DIR).glob("*.npy"))
    assert stale_artifacts(project) == []
    again = CountingEmbedder()
    align_file(project, "draft_v1.md", Settings(), lambda: again)
    assert again.texts == 4  # the four sentences, nothing else
    # Up to date: nothing embedded at all.
    third = CountingEmbedder()
    current_evidence(project, Settings(), lambda: third)
    assert third.texts == 0
    # A damaged cache file is recomputed, not trusted.
    for path in (project.dir / VECTORS_DIR).glob("*.npy"):
        path.write_bytes(b"garbage")
    fourth = CountingEmbedder()
    align_file(project, "draft_v1.md", Settings(), lambda: fourth)
    assert fourth.texts > 4


@pytest.mark.slow
def test_detector_stays_above_its_floor_on_the_labelled_set() -> None:
    rows = load_labels()
    assert len(rows) >= 80
    assert {r["category"] for r in rows} >= CATEGORIES  # and "direction" (rose / fell)
    result = score(rows)
    precision, recall, f1 = result.precision, result.recall, result.f1
    assert f1 >= F1_FLOOR, f"F1 {f1:.3f} (precision {precision:.3f}, recall {recall:.3f})"
    # At precision 1.0 the F1 floor still allows recall 0.82; a missed unsupported claim is the
    # costly error, so recall has a floor of its own.
    assert recall >= RECALL_FLOOR, f"recall {recall:.3f} (precision {precision:.3f}, F1 {f1:.3f})"


@pytest.mark.slow
def test_detector_stays_above_its_floor_on_real_writing() -> None:
    """Three articles written end to end over the Rust RFC corpus by a careful writer, every
    cited sentence labelled against its source, plus planted errors (bench/bench_evidence.py
    prints the figures; the floors sit a little under them)."""
    corpus, why = corpus_dir()
    if corpus is None:
        pytest.skip(why)
    rows = load_real()
    genuine = [r for r in rows if r["kind"] == "genuine" and r["label"] == "supported"]
    assert len(genuine) >= 150 and len({r["article"] for r in rows}) >= 3
    assert len([r for r in rows if r["kind"] != "genuine"]) >= 60
    result = score_real(rows, corpus)
    figures = (
        f"false alarms {result.false_alarm_rate:.1%}, planted recall {result.planted_recall:.3f}, "
        f"F1 {result.f1:.3f}, supported share {result.supported_share:.1%}"
    )
    assert result.false_alarm_rate <= REAL_FALSE_ALARMS_CEILING, figures
    assert result.planted_recall >= REAL_RECALL_FLOOR, figures


# -- in the pipeline ----------------------------------------------------------------------------
@pytest.mark.slow
def test_the_reviser_receives_the_drafters_invented_number(web_home: Home, site: FakeSite) -> None:
    pid = web_home.new()
    script_clean_run(web_home, site, draft=article(P1, INVENTED, P2) + TYPED_REFS)
    assert web_home.run("run", pid, "--until", "reviser", "--quiet").exit_code == 0
    doc = json.loads((web_home.project_dir(pid) / EVIDENCE_FILE).read_text())
    draft = doc["artifacts"]["draft_v1.md"]
    assert draft["summary"]["unsupported"] == 1 and draft["summary"]["supported"] == 2
    task = web_home.model.for_stage("reviser")[0].messages[1]["content"]
    assert "could not find support in the cited sources for 1 cited sentence(s) of draft_v1.md" in task
    assert "exactly 14 layers" in task and "14 not found in S1" in task
    assert 'closest passage in S1: "' in task and ARTICLE_FACT in task.split("closest passage in S1:")[1]
    # The reviser's clean draft is aligned too. Its synthesis sentence cites S1 and S2 for a
    # claim neither page makes: each citation is judged on its own, so it is no longer cleared
    # by the better of the two.
    revised = doc["artifacts"]["draft_v2.md"]["sentences"]
    assert [(s["text"], s["findings"]) for s in revised if s["verdict"] != "supported"] == [
        (
            P3,
            [
                "S1 was not found to support it: closest passage of S1 scores 0.31; "
                "most of its words are not in the passage"
            ],
        )
    ]


@pytest.mark.slow
def test_unsupported_final_sends_the_polisher_back_once_then_stays(web_home: Home, site: FakeSite) -> None:
    pid = web_home.new()
    bad_final = article(P1, INVENTED)
    script_clean_run(web_home, site, final=bad_final)
    web_home.model.script("polisher", *write("polisher", "final.md", bad_final))
    web_home.configure(check={"min_supported_share": 0.9})
    assert web_home.run("run", pid, "--quiet").exit_code == 0
    polisher = web_home.model.for_stage("polisher")
    assert len(polisher) == 4  # sent back once, not in a loop
    retry = polisher[2].messages[1]["content"]
    assert (
        "could not find support in the cited sources for 1 cited sentence(s) of final.md" in retry
        and "Start from scratch/final.md" in retry
    )
    # The second pass knows what the first did, and gets one list: its own final.md's.
    assert "This is your second pass. In your first pass you wrote final.md" in retry
    assert retry.count("source=evidence check of") == 1 and "evidence check of draft_v2.md" not in retry
    doc = status_of(web_home, pid)
    assert [p for p in doc["problems"] if "unsupported_citation" in p] == [
        'final.md: unsupported_citation: "HNSW builds its layered proximity graph in exactly 14 layers and searches '
        'it from the top [1]." (14 not found in S1)'
    ]
    assert "evidence: 50% supported (1/2 cited sentences, final.md)" in web_home.run("status", pid).stdout
    shown_status = json.loads(web_home.run("status", pid, "--json").stdout)
    assert shown_status["evidence"] == {
        "artifact": "final.md",
        "current": True,
        "summary": {"cited_sentences": 2, "supported": 1, "weak": 0, "unsupported": 1, "supported_share": 0.5},
    }
    assert shown_status["id"] == pid and shown_status["problems"] == doc["problems"]  # the other keys as they were
    (row,) = json.loads(web_home.run("list", "--json").stdout)
    assert row["supported_share"] == 0.5
    assert "50%" in web_home.run("list").stdout

    check = web_home.run("check", pid)
    assert check.exit_code == 1
    assert "final.md: 1/2 cited sentences supported by their sources (50%)" in check.stdout
    assert "unsupported: HNSW builds its layered proximity graph in exactly 14 layers" in check.stdout
    assert "problem: final.md: low_supported_share: 1 of 2 cited sentences are supported" in check.stdout
    checked = web_home.run("check", pid, "--json")
    report = json.loads(checked.stdout)
    assert report["evidence"]["supported_share"] == 0.5 and len(report["evidence"]["unsupported_sentences"]) == 1
    # The JSON says what the exit status says.
    assert checked.exit_code == 1 and report["ok"] is False
    assert report["problems"] == [
        {
            "file": "final.md",
            "kind": "low_supported_share",
            "detail": "1 of 2 cited sentences are supported by their sources (50%; check.min_supported_share is 90%)",
        }
    ]

    shown = web_home.run("evidence", pid)
    assert shown.exit_code == 0 and "UNSUPPORTED" in shown.stdout and "finding: 14 not found in S1" in shown.stdout
    data = json.loads(web_home.run("evidence", pid, "--json").stdout)
    assert set(data["artifacts"]) == {"draft_v1.md", "draft_v2.md", "final.md"}
    one = json.loads(web_home.run("evidence", pid, "--json", "--file", "draft_v1.md").stdout)
    assert one == {**data, "artifacts": {"draft_v1.md": data["artifacts"]["draft_v1.md"]}}
    assert one["version"] == 1 and one["thresholds"] == {"supported": 0.55, "weak": 0.4}
    assert web_home.run("evidence", pid, "--file", "outline.md").exit_code == 2
    assert web_home.run("evidence", "nope").exit_code == 2

    # A bar that cannot be measured is not met: the article changed, and the embedding
    # model is missing (its package shadowed by an empty one, as a broken install leaves it).
    final = web_home.project_dir(pid) / "final.md"
    final.write_text(final.read_text() + "\nOne more sentence for the record [1].\n")
    shadow = web_home.path / "shadow"
    (shadow / MODEL_PACKAGE).mkdir(parents=True)
    (shadow / MODEL_PACKAGE / "__init__.py").write_text("")
    env = child_env(web_home.path, {"PENSIEVE_CONFIG": str(web_home.config_path)})
    env["PYTHONPATH"] = f"{shadow}{os.pathsep}{env['PYTHONPATH']}"
    unmeasured = subprocess.run(
        [sys.executable, "-m", "pensieve", "check", pid, "--json"], capture_output=True, text=True, env=env, timeout=120
    )
    assert unmeasured.returncode == 1, unmeasured.stderr
    assert "note: the evidence check was skipped" in unmeasured.stderr and "Traceback" not in unmeasured.stderr
    problems = json.loads(unmeasured.stdout)["problems"]
    assert [p["kind"] for p in problems if p["file"] == "evidence.json"] == ["unmeasured_supported_share"]


@pytest.mark.slow
def test_a_damaged_evidence_file_is_aligned_again_never_a_traceback(web_home: Home, site: FakeSite) -> None:
    pid = web_home.new()
    script_clean_run(web_home, site, draft=article(P1, INVENTED, P2) + TYPED_REFS)
    assert web_home.run("run", pid, "--until", "drafter", "--quiet").exit_code == 0
    web_home.configure(check={"min_supported_share": 0.9})
    path = web_home.project_dir(pid) / EVIDENCE_FILE
    good = json.loads(path.read_text())["artifacts"]["draft_v1.md"]
    assert good["summary"]["supported_share"] == 0.667
    for damage, text in damaged_evidence(good, "draft_v1.md").items():
        # Readers show no figure rather than a wrong one, and never fail.
        path.write_text(text)
        status = web_home.run("status", pid)
        assert status.exit_code == 0 and "evidence:" not in status.stdout, damage
        assert json.loads(web_home.run("status", pid, "--json").stdout)["evidence"] is None, damage
        (row,) = json.loads(web_home.run("list", "--json").stdout)
        assert row["supported_share"] is None, damage
        assert web_home.run("list").exit_code == 0, damage
        # `check` aligns the draft again: the bar still holds (a damaged file never passes it).
        check = web_home.run("check", pid)
        assert check.exit_code == 1 and "skipped" not in check.stderr, (damage, check.stderr)
        assert "draft_v1.md: low_supported_share: 2 of 3 cited sentences" in check.stdout, damage
        assert json.loads(path.read_text())["artifacts"]["draft_v1.md"] == good, damage
        # `pensieve evidence` rebuilds it too (what its own error message used to advise).
        path.write_text(text)
        shown = web_home.run("evidence", pid)
        assert shown.exit_code == 0 and "finding: 14 not found in S1" in shown.stdout, (damage, shown.stderr)
        assert json.loads(path.read_text())["artifacts"]["draft_v1.md"] == good, damage
        status = web_home.run("status", pid)
        assert "evidence: 67% supported (2/3 cited sentences, draft_v1.md)" in status.stdout, damage


@pytest.mark.parametrize(
    ("reply", "parsed"),
    [
        ("yes: the passage states it", ("yes", "the passage states it")),
        ("Partly - the year is right, the figure is not.", ("partly", "the year is right, the figure is not.")),
        ("**No**: nothing about layers", ("no", "nothing about layers")),
        ("I think so", None),
    ],
)
def test_judge_answers_are_parsed(reply: str, parsed: tuple[str, str] | None) -> None:
    from pensieve.evidence.judge import parse_answer

    assert parse_answer(reply) == parsed


class JudgeDouble:
    """A ModelClient (pensieve.model.client's seam) answering every question with `answer`."""

    model = "judge-double"
    context_chars = 100_000

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.asked: list[str] = []

    async def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        temperature: float | None = None,
        purpose: str = "agent",
    ) -> LLMReply:
        self.asked.append(messages[1]["content"])
        return LLMReply(self.answer, [], 10, 5, None, self.model)


def _doubtful(*missing: list[str]) -> Alignment:
    """One sentence per entry of `missing`, citing S1 with an `unsupported` pair whose passage
    lacks those numbers (as the alignment leaves it before the judge)."""
    alignment = Alignment("draft_v1.md", "0" * 64, [], [], [])
    for index, numbers in enumerate(missing):
        text = f"Claim {index} with {' and '.join(numbers) or 'no number'} [S1]."
        passage = {"text": f"A passage about claim {index}.", "start": 0, "end": 24}
        reasons = [f"{n} not found in S1" for n in numbers] or ["the passage is about something else"]
        citation = Citation("S1", "unsupported", 0.3, passage, missing=list(numbers), reasons=reasons)
        alignment.sentences.append(
            {"index": index, "text": text, "start": 0, "end": len(text), "verdict": "", "citations": [], "findings": []}
        )
        alignment.citations.append([citation])
        alignment.missing_everywhere.append([f"{n} not found in S1" for n in numbers])
    alignment.refresh()
    return alignment


def test_a_judges_yes_makes_the_pair_supported() -> None:
    from pensieve.evidence.judge import judge

    alignment = _doubtful([])
    client = JudgeDouble("yes: the passage says so in other words")
    assert asyncio.run(judge(alignment, client, 5)) == 1
    (sentence,) = alignment.sentences
    assert sentence["verdict"] == "supported" and sentence["findings"] == []
    assert sentence["citations"][0]["judge"] == {"answer": "yes", "reason": "the passage says so in other words"}
    assert alignment.entry()["summary"]["supported_share"] == 1.0


def test_a_judges_yes_does_not_make_up_for_a_missing_number() -> None:
    from pensieve.evidence.judge import judge

    alignment = _doubtful(["14"])
    assert asyncio.run(judge(alignment, JudgeDouble("yes: close enough"), 5)) == 1
    (sentence,) = alignment.sentences
    assert sentence["verdict"] == "weak" and sentence["citations"][0]["verdict"] == "weak"
    assert sentence["findings"] == ["14 not found in S1"]
    assert alignment.entry()["summary"]["supported"] == 0


def test_the_judge_stops_at_max_judge_calls_and_skips_what_needs_no_judge() -> None:
    from pensieve.evidence.judge import judge

    alignment = _doubtful([], ["7"], [], [])
    alignment.citations[0][0].verdict = "supported"  # nothing to ask
    alignment.citations[1][0].passage = None  # nothing to show: not in the archive
    client = JudgeDouble("no: not said")
    assert asyncio.run(judge(alignment, client, 1)) == 1
    assert len(client.asked) == 1 and "Claim 2" in client.asked[0] and "UNTRUSTED" in client.asked[0]
    assert [c[0].judge for c in alignment.citations] == [None, None, {"answer": "no", "reason": "not said"}, None]


@pytest.mark.slow
def test_the_judge_is_asked_about_doubtful_pairs_and_counted_in_the_stage(web_home: Home, site: FakeSite) -> None:
    from tests.fakes.model_server import text

    pid = web_home.new()
    doubtful = (
        "Product quantisation was introduced in 2011 and cuts memory by 97% [S2].",
        "HNSW was first described by Yury Malkov in 2016 [S1].",
    )
    script_clean_run(web_home, site, draft=article(P1, INVENTED, P2, *doubtful) + TYPED_REFS)
    # The judge is the fact checker's model, whatever the drafter uses.
    web_home.configure(
        evidence={"judge": True, "max_judge_calls": 2}, agents={"fact_checker": {"model": "openai/judge-model"}}
    )
    web_home.model.script("summary", text("no: S1 gives no number of layers"), text("partly: the year is not there"))
    assert web_home.run("run", pid, "--until", "drafter", "--quiet").exit_code == 0
    sentences = json.loads((web_home.project_dir(pid) / EVIDENCE_FILE).read_text())["artifacts"]["draft_v1.md"][
        "sentences"
    ]
    assert sum(s["verdict"] != "supported" for s in sentences) == 3  # three doubtful pairs, two asked
    judged = [c for s in sentences for c in s["citations"] if c["judge"]]
    assert judged == [
        {
            "source": "S1",
            "verdict": "unsupported",
            "score": judged[0]["score"],
            "confidence": 0.9,
            "passage": judged[0]["passage"],
            "passages": judged[0]["passages"],
            "missing": ["14"],
            "reasons": ["14 not found in S1"],
            "judge": {"answer": "no", "reason": "S1 gives no number of layers"},
        },
        {
            "source": "S2",
            "verdict": "unsupported",  # a `partly` is recorded; only a `yes` changes a verdict
            "score": judged[1]["score"],
            "confidence": judged[1]["confidence"],
            "passage": judged[1]["passage"],
            "passages": judged[1]["passages"],
            "missing": judged[1]["missing"],
            "reasons": judged[1]["reasons"],
            "judge": {"answer": "partly", "reason": "the year is not there"},
        },
    ]
    asked = web_home.model.for_stage("summary")
    assert len(asked) == 2 and "exactly 14 layers" in asked[0].messages[1]["content"]
    assert "introduced in 2011" in asked[1].messages[1]["content"]
    assert all("UNTRUSTED" in a.messages[1]["content"] for a in asked)
    assert [a.body["model"] for a in asked] == ["judge-model", "judge-model"]
    assert {r.body["model"] for r in web_home.model.for_stage("drafter")} == {"gpt-4o-mini"}
    drafter = status_of(web_home, pid)["stages"]["drafter"]["usage"]
    assert drafter["calls"] == web_home.model.count("drafter") + 2


@pytest.mark.slow
def test_evidence_a_crash_left_missing_is_computed_when_the_run_resumes(web_home: Home, site: FakeSite) -> None:
    pid = web_home.new()
    script_clean_run(web_home, site, draft=article(P1, INVENTED, P2) + TYPED_REFS)
    assert web_home.run("run", pid, "--until", "drafter", "--quiet").exit_code == 0
    evidence = web_home.project_dir(pid) / EVIDENCE_FILE
    evidence.unlink()  # as if the process died between the commit and the alignment
    assert web_home.run("run", pid, "--until", "reviser", "--quiet").exit_code == 0
    assert json.loads(evidence.read_text())["artifacts"]["draft_v1.md"]["summary"]["unsupported"] == 1
    assert "14 not found in S1" in web_home.model.for_stage("reviser")[0].messages[1]["content"]


# S1 (the HNSW page) also says loosely that an idle worker "takes over some of the pending work"
# of another, S2 (the PQ page) says it closely and in more of its words: the pair of
# test_evidence_patterns.py's wrong-source tests. The draft cites S1 for it.
STEALS = "A worker whose queue is empty steals tasks from another worker chosen at random [S1]."
LOOSELY = (
    "A worker whose own queue of tasks is empty takes over some of the pending work of another worker, "
    "which keeps all cores busy."
)
CLOSELY = (
    "When a worker's local queue is empty, it steals half of the tasks from the queue of another, "
    "randomly chosen worker."
)


@pytest.mark.slow
def test_a_citation_another_source_says_more_closely_is_made_weak_beside_the_next_stage(
    web_home: Home, site: FakeSite
) -> None:
    """The wrong-source look, run beside the stages after the drafter's check: it is finished
    by the end of the run, evidence.json stored again and the events saying so."""
    for path, line in (("/article", LOOSELY), ("/second", CLOSELY)):
        title, body = PAGES[path]
        web_home.monkeypatch.setitem(PAGES, path, (title, f"{body}\n{line}"))
    pid = web_home.new()
    script_clean_run(web_home, site, draft=article(P1, STEALS, P2) + TYPED_REFS)
    assert web_home.run("run", pid, "--until", "reviser", "--quiet").exit_code == 0
    project = web_home.project_dir(pid)
    draft = json.loads((project / EVIDENCE_FILE).read_text())["artifacts"]["draft_v1.md"]
    moved = next(s for s in draft["sentences"] if s["text"] == STEALS)
    (cited,) = moved["citations"]
    assert cited["source"] == "S1" and cited["passage"]["text"] == LOOSELY, cited
    assert cited["verdict"] == moved["verdict"] == "weak", cited
    (reason,) = cited["reasons"]
    assert reason.startswith("S2 says it more closely (") and reason.endswith(
        f"against {cited['score']:.2f}): is S1 the source?"
    ), reason
    # The draft's other sentences are as the check left them.
    others = [
        (s["text"], s["verdict"], [(c["source"], c["verdict"], c["reasons"]) for c in s["citations"]])
        for s in draft["sentences"]
        if s is not moved
    ]
    assert others == [(P1, "supported", [("S1", "supported", [])]), (P2, "supported", [("S2", "supported", [])])]
    assert draft["summary"] == {
        "cited_sentences": 3,
        "supported": 2,
        "weak": 1,
        "unsupported": 0,
        "supported_share": 0.667,
    }
    events = read_events(project / "events.jsonl")
    notes = [str(e.get("message")) for e in events if e["kind"] == "note"]
    assert [n for n in notes if "more closely" in n] == [
        "evidence after drafter: 1 citation(s) another source says more closely (weak)"
    ]
    # The check itself (its event) found all three supported: the look came after it.
    (checked,) = [e for e in events if e["kind"] == "evidence" and e.get("file") == "draft_v1.md"]
    assert checked["summary"]["supported"] == 3 and checked["summary"]["weak"] == 0, checked
    # A weak citation is never sent to a stage: the reviser is told of no sentence of draft_v1.
    task = web_home.model.for_stage("reviser")[0].messages[1]["content"]
    assert "could not find support" not in task and "steals tasks" not in task and "S2 says it" not in task
