"""Topic memory inside a run: the Refiner and Researcher search it, finished projects feed it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pensieve.project.events import read_events
from pensieve.topics import embedder
from tests.conftest import Home
from tests.fakes.model_server import call, text
from tests.test_topics_library import BRIEF, NOTES
from tests.topic_library import TOPICS, write_library

_WRAPPED = re.compile(r"<<<UNTRUSTED (\w+) source=workspace topic library>>>\n(.*)\n<<<END UNTRUSTED \1>>>", re.S)


def _topics_dir(home: Home) -> Path:
    return home.path / "workspaces" / "default" / "topics"


def _hits(tool_result: str) -> list[dict[str, str]]:
    match = _WRAPPED.search(tool_result)
    assert match, tool_result
    hits: list[dict[str, str]] = json.loads(match.group(2))
    return hits


def _search_then_write(stage: str, query: str, filename: str, content: str) -> list[dict[str, object]]:
    return [
        call("search_topics", {"query": query}),
        call("write_project_file", {"filename": filename, "content": content}),
        text(f"{stage} done."),
    ]


def test_only_refiner_and_researcher_are_offered_search_topics(home: Home) -> None:
    pid = home.new()
    assert home.run("run", pid).exit_code == 0
    for stage in ("refiner", "researcher"):
        assert "search_topics" in home.model.for_stage(stage)[0].tool_names
    for stage in ("outliner", "drafter", "polisher"):
        assert "search_topics" not in home.model.for_stage(stage)[0].tool_names


@pytest.mark.slow
def test_refiner_and_researcher_see_topics_and_finished_projects_feed_the_library(home: Home) -> None:
    home.configure(topics={"capture": True})
    write_library(_topics_dir(home), TOPICS[:8])
    pid = home.new("Why B-trees still matter")
    home.model.script(
        "refiner", *_search_then_write("refiner", "disk-based sorted key lookup", "topic_brief.md", BRIEF)
    )
    home.model.script(
        "researcher", *_search_then_write("researcher", "replicas electing a leader", "research_notes.md", NOTES)
    )
    result = home.run("run", pid)
    assert result.exit_code == 0, result.stderr

    refiner_hits = _hits(home.model.for_stage("refiner")[1].last_tool_results[0])
    assert refiner_hits[0]["slug"] == "btree"
    assert set(refiner_hits[0]) == {"slug", "title", "snippet"}
    assert refiner_hits[0]["title"] == "B-tree indexes in databases"
    researcher_hits = _hits(home.model.for_stage("researcher")[1].last_tool_results[0])
    assert researcher_hits[0]["slug"] == "raft"

    # The finished project was captured, so the next article's Refiner finds it.
    captured = _topics_dir(home) / "how-b-trees-keep-databases-fast.md"
    assert captured.is_file()
    assert any(e["kind"] == "topic_captured" for e in read_events(home.project_dir(pid) / "events.jsonl"))
    assert "topic memory: the article was captured as how-b-trees-keep-databases-fast" in result.stderr
    # On the same subject, so the scripted topic brief meets its on-topic contract.
    second = home.new("B-trees and fast databases, revisited")
    home.model.script(
        "refiner",
        *_search_then_write(
            "refiner", "a half-century-old structure underneath nearly all databases", "topic_brief.md", BRIEF
        ),
    )
    assert home.run("run", second).exit_code == 0
    hits = _hits(home.model.for_stage("refiner")[-2].last_tool_results[0])
    assert hits[0]["slug"] == "how-b-trees-keep-databases-fast"


def test_nothing_relevant_is_an_empty_list(home: Home) -> None:
    pid = home.new()
    home.model.script("refiner", *_search_then_write("refiner", "anything at all", "topic_brief.md", BRIEF))
    assert home.run("run", pid).exit_code == 0  # empty library: no model needed
    assert home.model.for_stage("refiner")[1].last_tool_results == ["[]"]


def test_capture_is_off_when_configured_off(home: Home) -> None:
    pid = home.new()  # conftest sets topics.capture: false
    assert home.run("run", pid).exit_code == 0
    assert not _topics_dir(home).exists()


def test_capture_on_completion_uses_the_artifacts(home: Home) -> None:
    home.configure(topics={"capture": True})
    pid = home.new()
    assert home.run("run", pid).exit_code == 0
    (captured,) = _topics_dir(home).glob("*.md")
    assert captured.name == "how-vector-databases-index-embeddings.md"  # the fake model's brief title
    assert f"project: {pid}" in captured.read_text()


def test_a_broken_model_install_is_an_error_the_agent_sees(
    home: Home, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_library(_topics_dir(home), TOPICS[:2])
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "model.safetensors").write_bytes(b"swapped")
    monkeypatch.setattr(embedder, "_loaded", None)
    monkeypatch.setattr(embedder, "model_dir", lambda: tmp_path / "model")
    pid = home.new()
    home.model.script("refiner", *_search_then_write("refiner", "leader election", "topic_brief.md", BRIEF))
    assert home.run("run", pid).exit_code == 0
    (result,) = home.model.for_stage("refiner")[1].last_tool_results
    assert result.startswith("Error: topic memory is unavailable: refusing to load")
