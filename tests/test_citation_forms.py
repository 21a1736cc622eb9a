"""Citations in the forms models write them, revision notes that never cut an article short,
and topic capture that turns per-project ids into titles and URLs."""

from __future__ import annotations

import re
from datetime import date
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pensieve.article.blocks import split_notes
from pensieve.article.citations import cited_ids, normalize_citations
from pensieve.citations.check import run_check
from pensieve.citations.cited_sources import CitedSource
from pensieve.citations.references import numbered_for_reader, with_references, with_source_list
from pensieve.config import Settings, TopicsSettings
from pensieve.errors import UsageError
from pensieve.project.events import read_events
from pensieve.project.source_archive import SourceArchive
from pensieve.project.status import Status, save_status
from pensieve.project.workspace import Project, Workspace
from pensieve.topics.capture import capture_on_complete, capture_project
from pensieve.topics.library import parse_topic
from tests.conftest import Home
from tests.fakes.web_site import FakeSite
from tests.test_citations import P1, P2, P3, script_clean_run, status_of

SOURCES = {
    sid: CitedSource(sid, f"https://{sid.lower()}.example/page", f"https://{sid.lower()}.example/page", title, "", "")
    for sid, title in (("S1", "First page"), ("S2", "Second page"), ("S3", "Third page"))
}

# -- normalisation ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("written", "canonical"),
    [
        ("A claim (S1).", "A claim [S1]."),
        ("A claim [s1].", "A claim [S1]."),
        ("A claim [S1, p. 4].", "A claim [S1]."),
        ("A claim [S1, pp. 4-5].", "A claim [S1]."),
        ("A claim [^S1].", "A claim [S1]."),
        ("A claim [S1; S2].", "A claim [S1, S2]."),
        ("A claim [S1,S2].", "A claim [S1, S2]."),
        ("A claim [S1, S2].", "A claim [S1, S2]."),
        ("A claim [S1][S2].", "A claim [S1, S2]."),
        ("A claim [S1] [S2].", "A claim [S1, S2]."),
        ("A claim [S1 and S2].", "A claim [S1, S2]."),
        ("A claim [S1-S3].", "A claim [S1, S2, S3]."),
        ("A claim (S1, S2).", "A claim [S1, S2]."),
        ("A claim ([S1]; [s2]).", "A claim [S1, S2]."),
        ("A claim [s1, p. 4; S2][^S3].", "A claim [S1, S2, S3]."),
        ("A claim (S2, p. 7)[S1][S2].", "A claim [S2, S1]."),
        ("A claim [S01].", "A claim [S1]."),
        ("Glued to the word[s2].", "Glued to the word[S2]."),
    ],
)
def test_each_form_becomes_canonical(written: str, canonical: str) -> None:
    assert normalize_citations(written) == canonical
    assert normalize_citations(canonical) == canonical


@pytest.mark.parametrize(
    "text",
    [
        "Audi's (S1 class cars) are fast.",
        "See [Section 1] and [S1 class] and [see S5] and [Sx].",
        "A footnote[^1] and a task [ ] and [x].",
        "A function call f(S1) and a variable (s1).",
        "A link [S1](https://example.com/s1) stays a link.",
        "[^S1]: a footnote definition stays as written\n",
        "[S1]: https://example.com/a-link-definition\n",
        "A range backwards [S3-S1] is not a citation.",
        "Inline code `[s1] (S2) [S1; S2]` is code.",
        "```python\nrows = table[s1]  # (S1)\nprint([S1; S2])\n```\n",
        "~~~\n(S1) [^S2]\n~~~\n",
    ],
)
def test_what_is_not_a_citation_is_left_alone(text: str) -> None:
    assert normalize_citations(text) == text


def test_code_is_left_alone_around_normalised_prose() -> None:
    text = "Prose (S1).\n\n```\ncode (S1) [s2]\n```\n\nMore prose [s2] and `x[s1]`.\n\n```\nunclosed (S3)"
    assert normalize_citations(text) == (
        "Prose [S1].\n\n```\ncode (S1) [s2]\n```\n\nMore prose [S2] and `x[s1]`.\n\n```\nunclosed (S3)"
    )


_TOKENS = st.sampled_from(
    [
        "[S1]",
        "[s2]",
        "(S3)",
        "(s4)",
        "[^S5]",
        "[S1, p. 4]",
        "[S1; S2]",
        "[S1,S2]",
        "[S1][S2]",
        "[S1] [S2]",
        "[S1-S4]",
        "([S2])",
        "((S1))",
        "[Section 1]",
        "(S1 class cars)",
        "[S1](http://x.example)",
        "[^S1]:",
        "`[s1]`",
        "```",
        "\n",
        " ",
        "(",
        ")",
        "[",
        "]",
        ";",
        ",",
        "S",
        "s",
        "1",
        "p. 4",
        "and",
        "^",
        "-",
    ]
)
_CITED_TEXT = st.lists(st.one_of(_TOKENS, st.text(max_size=8)), max_size=30).map("".join)


@settings(max_examples=400, deadline=None, database=None)
@given(_CITED_TEXT)
def test_normalisation_is_idempotent(text: str) -> None:
    once = normalize_citations(text)
    assert normalize_citations(once) == once


@settings(max_examples=400, deadline=None, database=None)
@given(st.text(alphabet=st.characters(blacklist_characters="sS"), max_size=200) | st.text(max_size=200))
def test_text_without_citation_tokens_is_unchanged(text: str) -> None:
    if not re.search(r"s\d", text, re.I):
        assert normalize_citations(text) == text


@settings(max_examples=200, deadline=None, database=None)
@given(st.lists(st.integers(min_value=1, max_value=30), min_size=1, max_size=4), st.sampled_from(["; ", ",", " and "]))
def test_any_list_cites_the_same_ids(numbers: list[int], separator: str) -> None:
    ids = list(dict.fromkeys(f"S{n}" for n in numbers))
    assert cited_ids(normalize_citations(f"Claim [{separator.join(ids)}].")) == ids
    assert cited_ids(normalize_citations("Claim " + "".join(f"[{sid.lower()}]" for sid in ids) + ".")) == ids


PARAGRAPHS = (
    "HNSW builds a layered proximity graph and searches it greedily from the top (S1).",
    "Product quantisation splits each vector into sub-vectors with codebooks [s2, p. 4].",
    "Both trade a little accuracy for speed or memory, the bargain of vector search [S1; S2].",
    "Indexes are rebuilt in the background while queries keep running as before [^S2][S1].",
)


def test_transforms_and_the_check_read_every_form() -> None:
    odd = "# Vector search\n\n" + "\n\n".join(PARAGRAPHS) + "\n\n[^S1]: typed by the model https://typed.example\n"
    draft = with_references(odd, SOURCES)
    assert "(S1)" not in draft and "[s2" not in draft and "[^S" not in draft and "typed.example" not in draft
    assert "top [S1]." in draft and "codebooks [S2]." in draft and "search [S1, S2]." in draft
    assert "- [S1] First page" in draft and "- [S2] Second page" in draft
    final = numbered_for_reader(odd, SOURCES)
    assert "top [1]." in final and "codebooks [2]." in final and "search [1, 2]." in final
    assert "running as before [2, 1]." in final
    report = run_check({"draft_v1.md": draft, "final.md": final}, SOURCES, 1.0)
    assert report.ok, report.problems
    assert report.files["final.md"].cited_paragraphs == 4

    # The check itself reads the odd forms, not only the transformed artifacts.
    raw = run_check({"draft_v1.md": odd.replace("[^S1]: typed by the model https://typed.example\n", "")}, SOURCES, 1.0)
    assert {p.kind for p in raw.problems} == {"missing_reference"}
    assert raw.files["draft_v1.md"].cited_paragraphs == 4 and raw.files["draft_v1.md"].citations == 6
    notes = with_source_list("# Notes\n\n- Graphs (S1).\n- Codes [s3].\n", SOURCES)
    assert "Graphs [S1]." in notes and "Codes [S3]." in notes


def test_fact_table_ids_in_any_case() -> None:
    table = (
        "| # | claim | cited id | verdict | evidence |\n|---|---|---|---|---|\n"
        '| 1 | graphs | s1 | supported | "layered graph" (S1) |\n'
    )
    source = CitedSource("S1", "https://s1.example/", "https://s1.example/", "One", "", "A layered graph.")
    report = run_check({"fact_check.md": table}, {"S1": source}, 0.0)
    assert report.ok and report.quotes_checked == 1


# -- revision notes ---------------------------------------------------------------------------

ARTICLE = (
    "# Batteries\n\n## Background\n\nCells store charge in two electrodes [S1].\n\n"
    "## Changes in the industry\n\nFactories moved to new chemistries over a decade [S2].\n\n"
    "## Changes\n\nPrices fell every year since the first cells shipped [S1].\n\n"
    "## Conclusion\n\nThe next decade belongs to solid-state cells, maybe [S3].\n"
)


def test_a_changes_heading_never_truncates_the_article() -> None:
    assert split_notes(ARTICLE) == (ARTICLE, None)
    for transform in (with_references, numbered_for_reader):
        out = transform(ARTICLE, SOURCES)
        for kept in ("## Changes in the industry", "new chemistries", "## Changes\n", "Prices fell", "## Conclusion"):
            assert kept in out, (transform.__name__, kept)
    final = numbered_for_reader(ARTICLE, SOURCES)
    assert "solid-state cells, maybe [3]." in final and "3. Third page" in final


def test_only_the_revisers_trailing_notes_are_split_off() -> None:
    notes = "## Revision notes\n\n- Claim 2: cited a source.\n\n### Style\n\n- Shorter sentences.\n"
    article, split = split_notes(ARTICLE + "\n" + notes)
    assert article == ARTICLE and split == notes
    final = numbered_for_reader(ARTICLE + "\n" + notes, SOURCES)
    assert "Revision notes" not in final and "Claim 2" not in final and "## Conclusion" in final

    # A model-typed reference list after the notes is neither notes nor article text.
    typed = ARTICLE + "\n" + notes + "\n## References\n\n- [S1] typed https://typed.example\n"
    article, split = split_notes(typed)
    assert split == notes and "## Conclusion" in article and "Claim 2" not in article
    assert "typed.example" not in with_references(typed, SOURCES)
    assert with_references(typed, SOURCES).rstrip().endswith("- Shorter sentences.")

    # A bold line works as well as a heading; any case, a colon.
    article, split = split_notes(ARTICLE + "\n**Revision Notes:**\n\n- Claim 1: removed.\n")
    assert article == ARTICLE and split is not None and "Claim 1" in split

    # "Revision notes" followed by more of the article is a section of the article.
    middle = "# T\n\n## Revision notes\n\nA history of edits.\n\n## Conclusion\n\nEnd.\n"
    assert split_notes(middle) == (middle, None)
    # ... and a heading inside a code block is code.
    fenced = ARTICLE + "\n```markdown\n## Revision notes\n```\n"
    assert split_notes(fenced) == (fenced, None)


def test_revision_notes_are_found_after_a_changes_section() -> None:
    facts = "| # | claim | cited | verdict | evidence |\n|---|---|---|---|---|\n| 1 | prices | S1 | not found | - |\n"
    v2 = with_references(ARTICLE + "\n## Revision notes\n\n- Claim 1: removed the figure.\n", SOURCES)
    report = run_check({"draft_v2.md": v2, "fact_check.md": facts}, SOURCES, 0.0)
    assert not [p for p in report.problems if p.kind == "unaddressed_claim"], report.problems


# -- topic capture ----------------------------------------------------------------------------

BRIEF = "# Topic brief: Solid-state batteries\n\n## Angle\n\nWhy solid electrolytes matter now [S1].\n"
NOTES = (
    "# Research notes\n\n## Chemistry\n\n"
    "- Solid electrolytes replace the liquid one (S1).\n"
    "- Lithium metal anodes double the energy density [S1; S2].\n"
    "- A claim with an id nobody archived [S9].\n"
    "- Dendrites remain the open problem [s2, p. 4][S1].\n\n"
    "## Open questions\n\n- When do prices fall [S2]?\n\n"
    "## Sources\n\n- [S1] Solid-state batteries explained - https://cells.example/solid\n"
    "- [S2] Anode (lithium) [review] - https://journal.example/review(2024)\n"
)


def _complete_project(tmp_path: Path, state: str = "complete") -> Project:
    workspace = Workspace(tmp_path, "default")
    project = workspace.project("batteries")
    project.dir.mkdir(parents=True)
    (project.dir / "topic_brief.md").write_text(BRIEF)
    (project.dir / "research_notes.md").write_text(NOTES)
    archive = SourceArchive(project.dir)
    for url, title in (
        ("https://cells.example/solid", "Solid-state batteries explained"),
        ("https://journal.example/review(2024)", "Anode (lithium) [review]"),
    ):
        archive.add(url=url, final_url=url, title=title, content_type="text/html", body=b"<p>x</p>", text="x")
    status = Status.new(project.id, workspace.name)
    status.status = state  # type: ignore[assignment]
    save_status(project.status_path, status)
    return project


def test_capture_cites_sources_by_title_and_url(tmp_path: Path) -> None:
    captured = capture_project(_complete_project(tmp_path), today=date(2026, 1, 2))
    text = captured.path.read_text()
    assert not re.search(r"\[\^?s\d+", text, re.I), text  # no per-project id survives
    topic = parse_topic(captured.slug, text)
    first = "[Solid-state batteries explained](https://cells.example/solid)"
    second = "[Anode (lithium) (review)](https://journal.example/review%282024%29)"
    assert f"- Solid electrolytes replace the liquid one ({first})." in topic.body
    assert f"- Lithium metal anodes double the energy density ({first}; {second})." in topic.body
    assert f"- Dendrites remain the open problem ({second}; {first})." in topic.body
    assert "- A claim with an id nobody archived." in topic.body
    assert f"- When do prices fall ({second})?" in topic.body
    assert topic.title == "Solid-state batteries"
    assert topic.summary == "Why solid electrolytes matter now."
    assert "https://cells.example/solid" in topic.sources


@pytest.mark.parametrize("state", ["pending", "paused", "running", "error"])
def test_capture_refuses_a_project_that_is_not_complete(tmp_path: Path, state: str) -> None:
    project = _complete_project(tmp_path, state)
    with pytest.raises(UsageError, match=rf"project batteries is {state}, not complete"):
        capture_project(project)
    assert not project.workspace.topics_dir.exists()


async def test_the_completion_hook_never_captures_a_failed_project(tmp_path: Path) -> None:
    project = _complete_project(tmp_path, "error")
    await capture_on_complete(project, Settings(topics=TopicsSettings(capture=True)))
    assert not project.workspace.topics_dir.exists()
    (event,) = [e for e in read_events(project.events_path) if e["kind"] == "topic_capture_failed"]
    assert "not complete" in event["error"]


# -- through the pipeline -----------------------------------------------------------------------


def test_a_run_with_odd_citations_and_a_changes_section_keeps_the_whole_article(web_home: Home, site: FakeSite) -> None:
    # Contracts (word counts, sections) and evidence repairs (a sentence judged per citation
    # may send the polisher back) are tested elsewhere; this run is about citations.
    web_home.configure(topics={"capture": True}, contracts={"enabled": False}, evidence={"repair": False})
    pid = web_home.new()
    odd = (
        "# Vector search\n\n## Graphs\n\n" + P1.replace("[S1]", "(S1)") + "\n\n"
        "## Changes in the industry\n\n" + P2.replace("[S2]", "[s2, p. 4]") + "\n\n"
        "## Changes\n\n" + P3.replace("[S1, S2]", "[S1; S2]") + "\n\n"
        "## Outlook\n\nEvery index will keep trading accuracy for speed, as it always has [^S2][S1].\n"
    )
    script_clean_run(web_home, site, draft=odd, final=odd)
    result = web_home.run("run", pid, "--quiet")
    assert result.exit_code == 0, result.stderr
    final = (web_home.project_dir(pid) / "final.md").read_text()
    for kept in ("## Changes in the industry", "codebooks [2].", "## Changes\n", "## Outlook", "has [2, 1]."):
        assert kept in final, kept
    assert "top layer [1]." in final and "vector search [1, 2]." in final
    # Every citation form resolved: no citation problem. (The last sentence's "always" is not
    # in its source: judged per citation, the evidence check reports it, as it should.)
    problems = status_of(web_home, pid)["problems"]
    assert [p for p in problems if ": unsupported_citation: " not in p] == [], problems
    topics = (web_home.path / "workspaces" / "default" / "topics").glob("*.md")
    (topic,) = [t for t in topics if t.name != "fixture-site.md"]  # web_home's own topic names the pages
    captured = topic.read_text()
    assert not re.search(r"\[\^?s\d+", captured, re.I), captured
    assert f"HNSW is a layered graph ([How HNSW works]({site.url('/article')}))." in captured
