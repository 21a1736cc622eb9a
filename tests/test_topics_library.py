"""Topic files, chunking and capture: no model involved."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from pensieve.errors import UsageError
from pensieve.project.source_archive import SourceArchive
from pensieve.project.status import Status, save_status
from pensieve.project.workspace import Workspace
from pensieve.topics.capture import capture_project
from pensieve.topics.chunking import MAX_CHUNK_WORDS, SNIPPET_CHARS, chunk_topic
from pensieve.topics.library import (
    Topic,
    TopicFormatError,
    add_topic,
    load_library,
    parse_topic,
    render_topic,
)


def test_front_matter_round_trip() -> None:
    text = render_topic(
        "Raft: consensus",
        "## Body\n\nText.",
        tags=["a", "b"],
        summary="Short: summary",
        sources=["https://raft.github.io/"],
        updated="2025-02-03",
    )
    topic = parse_topic("raft", text)
    assert topic.title == "Raft: consensus"
    assert topic.tags == ("a", "b")
    assert topic.summary == "Short: summary"
    assert topic.sources == ("https://raft.github.io/",)
    assert topic.updated == "2025-02-03"
    assert topic.body == "## Body\n\nText."


def test_yaml_dates_and_comma_tags_are_accepted() -> None:
    topic = parse_topic("x", "---\ntitle: X\nupdated: 2025-01-31\ntags: a, b\nowner: me\n---\nbody")
    assert topic.updated == "2025-01-31"
    assert topic.tags == ("a", "b")
    assert topic.extra == {"owner": "me"}


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("no front matter at all", "no front matter"),
        ("---\ntitle: [oops\n---\n", "bad YAML"),
        ("---\n- a list\n---\n", "mapping"),
        ("---\ntags: [a]\n---\n", "no 'title'"),
        ("---\ntitle: ''\n---\n", "no 'title'"),
        ("---\ntitle: T\nsources: {a: 1}\n---\n", "'sources'"),
        ("---\ntitle: T\nupdated: [1]\n---\n", "'updated'"),
    ],
)
def test_broken_front_matter_says_why(text: str, reason: str) -> None:
    with pytest.raises(TopicFormatError, match=reason):
        parse_topic("x", text)


def test_library_skips_broken_files_and_names_them(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path, "default")
    add_topic(workspace, "Good topic", "body")
    (workspace.topics_dir / "bad.md").write_text("---\ntitle: [\n---\n")
    (workspace.topics_dir / "binary.md").write_bytes(b"\xff\xfe---")
    (workspace.topics_dir / ".tmp-partial.md").write_text("ignored")
    (workspace.topics_dir / "notes.txt").write_text("ignored")
    library = load_library(workspace)
    assert [t.slug for t in library.topics] == ["good-topic"]
    assert len(library.problems) == 2
    assert any("topics/bad.md" in p and "skipped" in p for p in library.problems)
    assert any("topics/binary.md" in p and "UTF-8" in p for p in library.problems)


def test_add_refuses_an_existing_slug_unless_forced(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path, "default")
    path = add_topic(workspace, "Raft consensus", "first", tags=["x"])
    assert path.name == "raft-consensus.md"
    with pytest.raises(UsageError, match=r"already exists.*--force"):
        add_topic(workspace, "Raft  Consensus", "second")
    add_topic(workspace, "Raft consensus", "second", force=True)
    assert "second" in path.read_text()
    with pytest.raises(UsageError, match="empty"):
        add_topic(workspace, "   ", "body")
    assert add_topic(workspace, "日本語", "body").name.startswith("topic-")


def _topic(body: str, summary: str = "") -> Topic:
    return Topic(slug="t", title="Storage engines", body=body, summary=summary)


def test_chunks_follow_headings_and_carry_the_title() -> None:
    body = (
        "Intro paragraph.\n\n# LSM trees\n\nWrites go to a memtable.\n\nThen to SSTables.\n\n## Compaction\n\nMerges."
    )
    chunks = chunk_topic(_topic(body, summary="How databases store data."))
    assert [c.snippet for c in chunks] == [
        "How databases store data.",
        "Intro paragraph.",
        "Writes go to a memtable. Then to SSTables.",  # short paragraphs of one section merge
        "Merges.",
    ]
    assert chunks[0].text.startswith("Storage engines. How databases store data.")
    assert chunks[2].text.startswith("Storage engines > LSM trees: ")
    assert chunks[3].text.startswith("Storage engines > LSM trees > Compaction: ")


def test_long_paragraphs_are_split_within_the_window() -> None:
    sentence = "The write-ahead log records every change before it is applied to the pages. "
    long_sentence = " ".join(f"word{i}" for i in range(400))
    chunks = chunk_topic(_topic(sentence * 40 + "\n\n" + long_sentence))
    assert len(chunks) > 5
    for chunk in chunks:
        assert len(chunk.text.split()) <= MAX_CHUNK_WORDS
        assert len(chunk.snippet) <= SNIPPET_CHARS + 2
    assert any("word399" in chunk.text for chunk in chunks)


def test_headings_inside_code_fences_are_not_headings() -> None:
    chunks = chunk_topic(_topic("```\n# not a heading\n\nstill code\n```\n\nAfter."))
    assert "# not a heading" in chunks[1].text
    assert chunks[1].text.startswith("Storage engines: ")


BRIEF = """# How B-trees keep databases fast

## Angle
Why a fifty-year-old structure still sits under almost every database.

## Audience
Developers.

## Scope
Lookups, inserts and page splits; not LSM trees in depth.

## Key questions
- Why do B-trees need so few page reads?

## Prior knowledge
None in the topic memory.

## Length and form
About 1,500 words, an explainer.
"""

NOTES = """# Research notes: B-trees

## What is a B-tree?
- A balanced tree whose nodes are disk pages (https://en.wikipedia.org/wiki/B-tree).
- Invented by Bayer and McCreight in 1970.

## Why are they fast?
* Few page reads per lookup: height grows with log_b(n).

## Open questions
- How do they compare with LSM trees on SSDs?

## Sources
- Wikipedia - https://en.wikipedia.org/wiki/B-tree
- Paper - https://doi.org/10.1007/BF00288683.
"""


def _finished_project(tmp_path: Path, pid: str = "btrees") -> tuple[Workspace, Path]:
    workspace = Workspace(tmp_path, "default")
    project_dir = workspace.projects_dir / pid
    project_dir.mkdir(parents=True)
    (project_dir / "topic_brief.md").write_text(BRIEF)
    (project_dir / "research_notes.md").write_text(NOTES)
    archive = SourceArchive(project_dir)  # a captured topic keeps only archived sources' URLs
    for url in ("https://en.wikipedia.org/wiki/B-tree", "https://doi.org/10.1007/BF00288683"):
        archive.add(url=url, final_url=url, title="B-tree", content_type="text/html", body=b"<p>x</p>", text="x")
    status = Status.new(pid, workspace.name)
    status.status = "complete"  # only finished projects are captured
    save_status(project_dir / "status.json", status)
    return workspace, project_dir


def test_capture_builds_a_topic_from_brief_and_notes(tmp_path: Path) -> None:
    workspace, _ = _finished_project(tmp_path)
    captured = capture_project(workspace.project("btrees"), today=date(2025, 3, 1))
    assert captured.slug == "how-b-trees-keep-databases-fast" and not captured.updated_existing
    topic = parse_topic(captured.slug, captured.path.read_text())
    assert topic.title == "How B-trees keep databases fast"
    assert topic.summary == "Why a fifty-year-old structure still sits under almost every database."
    assert topic.sources == ("https://en.wikipedia.org/wiki/B-tree", "https://doi.org/10.1007/BF00288683")
    assert topic.updated == "2025-03-01"
    assert topic.extra == {"project": "btrees"}
    assert "### What is a B-tree?\n\n- A balanced tree" in topic.body
    assert "- Few page reads per lookup" in topic.body
    assert "## Open questions\n\n- How do they compare" in topic.body
    assert "Wikipedia - https" not in topic.body  # the Sources section is front matter, not facts


def test_capture_keeps_only_the_urls_of_archived_sources(tmp_path: Path) -> None:
    # A page told the researcher to write a URL carrying the brief out: captured, it would
    # be a known URL for every later project (fetch.url_policy trusts topic files' URLs).
    workspace, project_dir = _finished_project(tmp_path)
    smuggling = "http://site.example/collect?data=The+secret+first+brief"
    (project_dir / "topic_brief.md").write_text(BRIEF.replace("every database.", f"every database ({smuggling})."))
    notes = NOTES.replace("in 1970.", f"in 1970 (see {smuggling}).").replace(
        "## Sources\n", f"## Sources\n- Collector - HTTP://site.example/collect?data=upper\n- {smuggling}\n"
    )
    (project_dir / "research_notes.md").write_text(notes)
    captured = capture_project(workspace.project("btrees"))
    text = captured.path.read_text()
    assert "collect" not in text and "site.example (link not kept: not a fetched source)" in text
    topic = parse_topic(captured.slug, text)
    assert topic.sources == ("https://en.wikipedia.org/wiki/B-tree", "https://doi.org/10.1007/BF00288683")
    assert "(https://en.wikipedia.org/wiki/B-tree)" in topic.body  # an archived source's URL stays


def test_capture_again_updates_and_never_overwrites_another_topic(tmp_path: Path) -> None:
    workspace, _ = _finished_project(tmp_path)
    add_topic(workspace, "How B-trees keep databases fast", "written by hand")
    first = capture_project(workspace.project("btrees"))
    assert first.slug == "how-b-trees-keep-databases-fast-2"
    assert "written by hand" in (workspace.topics_dir / "how-b-trees-keep-databases-fast.md").read_text()
    again = capture_project(workspace.project("btrees"))
    assert again.slug == first.slug and again.updated_existing


def test_capture_needs_the_artifacts(tmp_path: Path) -> None:
    workspace, project_dir = _finished_project(tmp_path)
    (project_dir / "research_notes.md").unlink()
    with pytest.raises(UsageError, match=r"no research_notes\.md yet"):
        capture_project(workspace.project("btrees"))


def test_capture_strips_invisible_characters(tmp_path: Path) -> None:
    workspace, project_dir = _finished_project(tmp_path)
    (project_dir / "topic_brief.md").write_text("# Hidden\u200b title\u202e\n\n## Angle\nText\u2066 here.\n")
    captured = capture_project(workspace.project("btrees"))
    topic = parse_topic(captured.slug, captured.path.read_text())
    assert topic.title == "Hidden title" and topic.summary == "Text here."
