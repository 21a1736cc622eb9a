"""The pipeline end to end through the CLI, against the fake model over real HTTP."""

from __future__ import annotations

import json
from typing import Any

from pensieve.stages import STAGE_NAMES, STAGES
from tests.conftest import Home
from tests.fakes import artifacts
from tests.fakes.artifacts import DEFAULT_TOPIC
from tests.fakes.model_server import call, calls, error, text

# The spec's tool matrix, written out independently of pensieve.stages.
# The spec's matrix (../shared/spec/agent-tools.md), with the workspace library's two tools
# added to the researcher's and the fact checker's columns (issue 30).
LIBRARY = {"search_library", "read_library_document"}
MATRIX = {
    "refiner": {"search_topics", "read_project_file", "write_project_file"},
    "researcher": {"web_search", "fetch_url", "search_topics", "read_project_file", "write_project_file", *LIBRARY},
    "outliner": {"read_project_file", "write_project_file"},
    "drafter": {"read_project_file", "write_project_file"},
    "content_reviewer": {"read_project_file", "write_project_file"},
    "fact_checker": {"web_search", "fetch_url", "read_project_file", "write_project_file", *LIBRARY},
    "style_reviewer": {"read_project_file", "write_project_file"},
    "reviser": {"read_project_file", "write_project_file"},
    "polisher": {"text_stats", "read_project_file", "write_project_file"},
    "consistency_checker": {"list_projects", "read_project_file", "write_project_file"},
}
LOCAL = {"read_project_file", "write_project_file", "text_stats", "list_projects"}
ARTIFACTS = {
    "refiner": "topic_brief.md",
    "researcher": "research_notes.md",
    "outliner": "outline.md",
    "drafter": "draft_v1.md",
    "content_reviewer": "content_review.md",
    "fact_checker": "fact_check.md",
    "style_reviewer": "style_review.md",
    "reviser": "draft_v2.md",
    "polisher": "final.md",
    "consistency_checker": "consistency_report.md",
}


def status_of(home: Home, pid: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((home.project_dir(pid) / "status.json").read_text())
    return doc


def test_stage_table_matches_the_spec() -> None:
    assert [s.name for s in STAGES] == list(ARTIFACTS)
    for stage in STAGES:
        assert set(stage.tools) == MATRIX[stage.name], stage.name
        assert stage.writes == ARTIFACTS[stage.name]


def test_full_run_from_new_to_complete(home: Home) -> None:
    pid = home.new()
    result = home.run("run", pid)
    assert result.exit_code == 0, result.stderr
    project = home.project_dir(pid)
    for name, artifact in ARTIFACTS.items():
        body = (project / artifact).read_text()
        assert f"the {name} artifact" in body
    doc = status_of(home, pid)
    assert doc["status"] == "complete"
    for name in STAGE_NAMES:
        stage = doc["stages"][name]
        assert stage["status"] == "complete"
        assert stage["started_at"] and stage["finished_at"]
        # the default fake script: one call writes the artifact, one says done
        assert stage["usage"]["calls"] == 2
        assert stage["usage"]["prompt_tokens"] == 200 and stage["usage"]["completion_tokens"] == 40
        assert stage["usage"]["cost_usd"] > 0  # litellm knows gpt-4o-mini's price
    assert doc["usage"]["calls"] == 20
    events = [json.loads(line) for line in (project / "events.jsonl").read_text().splitlines()]
    kinds = {(e["kind"], e["stage"]) for e in events}
    for name in STAGE_NAMES:
        assert ("model", name) in kinds and ("tool", name) in kinds
    tool_events = [e for e in events if e["kind"] == "tool"]
    assert all(e["tool"] == "write_project_file" and e["error"] is None for e in tool_events)
    assert not (project / ".staging").exists() or not any((project / ".staging").iterdir())
    assert "complete" in result.stderr


def test_each_agent_is_offered_only_its_column(home: Home) -> None:
    pid = home.new()
    assert home.run("run", pid).exit_code == 0
    for name in STAGE_NAMES:
        offered = set(home.model.for_stage(name)[0].tool_names)
        assert offered <= MATRIX[name], name
        assert MATRIX[name] & LOCAL <= offered, name
    # no search provider is configured here: the web tools are not offered at all
    assert "web_search" not in home.model.for_stage("researcher")[0].tool_names


def test_system_prompt_names_the_job_files_and_target(home: Home) -> None:
    home.configure(article={"target_words": 900})
    pid = home.new()
    assert home.run("run", pid, "--until", "drafter").exit_code == 0
    system = home.model.for_stage("drafter")[0].messages[0]["content"]
    assert "Drafter" in system and "draft_v1.md" in system and "900 words" in system
    assert "outline.md" in system and "research_notes.md" in system
    assert "UNTRUSTED" in system  # the untrusted-content rule


def test_tool_outside_the_column_and_unknown_names_are_refused(home: Home) -> None:
    home.model.script("refiner", calls(("fetch_url", {"url": "https://example.org"}), ("delete_everything", {})))
    pid = home.new()
    assert home.run("run", pid, "--until", "refiner").exit_code == 0
    results = home.model.for_stage("refiner")[1].last_tool_results
    assert results[0].startswith("Error: tool 'fetch_url' is not available to refiner; available: ")
    assert "read_project_file" in results[0] and "write_project_file" in results[0]
    assert results[1].startswith("Error: tool 'delete_everything' is not available to refiner")


def test_tools_read_earlier_artifacts(home: Home) -> None:
    home.model.script("outliner", call("read_project_file", {"filename": "topic_brief.md"}))
    pid = home.new()
    assert home.run("run", pid, "--until", "outliner").exit_code == 0
    result = home.model.for_stage("outliner")[1].last_tool_results[0]
    assert "the refiner artifact" in result and "UNTRUSTED" in result


def test_agent_may_not_write_another_stages_artifact(home: Home) -> None:
    home.model.script("researcher", call("write_project_file", {"filename": "outline.md", "content": "hijacked"}))
    pid = home.new()
    assert home.run("run", pid, "--until", "researcher").exit_code == 0
    result = home.model.for_stage("researcher")[1].last_tool_results[0]
    assert result.startswith("Error: researcher may write only 'research_notes.md'")
    assert not (home.project_dir(pid) / "outline.md").exists()


def test_final_message_becomes_the_artifact_when_none_was_written(home: Home) -> None:
    # Not written: one reminder turn; then the final message is the artifact, since it meets the contract.
    outline = artifacts.outline(DEFAULT_TOPIC)
    home.model.script("outliner", text("Here is the outline."), text(f"```markdown\n{outline}\n```"))
    pid = home.new()
    assert home.run("run", pid, "--until", "outliner").exit_code == 0
    assert (home.project_dir(pid) / "outline.md").read_text() == outline.strip() + "\n"
    reminder = home.model.for_stage("outliner")[1].messages[-1]["content"]
    assert reminder.startswith("You have not written `outline.md` yet")
    assert status_of(home, pid)["stages"]["outliner"]["repairs"] == ["reminder"]


def test_stage_fails_when_nothing_was_written_and_nothing_said(home: Home) -> None:
    home.model.script("outliner", text(""), text(""))  # the reminder turn gets nothing either
    pid = home.new()
    result = home.run("run", pid)
    assert result.exit_code == 1
    doc = status_of(home, pid)
    assert doc["status"] == "error"
    assert doc["stages"]["outliner"]["status"] == "error"
    assert "without writing outline.md and without a final message" in doc["stages"]["outliner"]["error"]
    assert not (home.project_dir(pid) / "outline.md").exists()
    assert "outliner" in result.stderr


def test_until_pauses_then_run_resumes_without_repeating(home: Home) -> None:
    pid = home.new()
    first = home.run("run", pid, "--until", "outliner")
    assert first.exit_code == 0
    doc = status_of(home, pid)
    assert doc["status"] == "paused"
    assert [doc["stages"][n]["status"] for n in STAGE_NAMES[:4]] == ["complete"] * 3 + ["pending"]
    assert not (home.project_dir(pid) / "draft_v1.md").exists()
    second = home.run("run", pid)
    assert second.exit_code == 0
    assert status_of(home, pid)["status"] == "complete"
    for name in STAGE_NAMES:
        assert home.model.count(name) == 2, name


def test_failed_stage_then_resume_skips_finished_stages(home: Home) -> None:
    home.model.script("drafter", error(400, headers={}))
    pid = home.new()
    failed = home.run("run", pid)
    assert failed.exit_code == 1
    doc = status_of(home, pid)
    assert doc["status"] == "error"
    assert doc["stages"]["drafter"]["status"] == "error"
    assert "model call failed" in doc["stages"]["drafter"]["error"]
    assert doc["stages"]["content_reviewer"]["status"] == "pending"
    outline = (home.project_dir(pid) / "outline.md").read_text()
    resumed = home.run("run", pid)
    assert resumed.exit_code == 0, resumed.stderr
    assert status_of(home, pid)["status"] == "complete"
    for name in ("refiner", "researcher", "outliner"):
        assert home.model.count(name) == 2, name  # not run again
    assert (home.project_dir(pid) / "outline.md").read_text() == outline


def test_stage_rerun_keeps_the_replaced_artifact_in_history(home: Home) -> None:
    pid = home.new()
    assert home.run("run", pid).exit_code == 0
    project = home.project_dir(pid)
    (project / "draft_v1.md").write_text("# My hand-edited draft\n")
    new_draft = artifacts.article("A new draft about vector databases")
    home.model.script("drafter", call("write_project_file", {"filename": "draft_v1.md", "content": new_draft}))
    result = home.run("run", pid, "--stage", "drafter")
    assert result.exit_code == 0, result.stderr
    assert (project / "draft_v1.md").read_text().startswith(new_draft.strip())
    kept = list((project / "history").glob("draft_v1.*.md"))
    assert [p.read_text() for p in kept] == ["# My hand-edited draft\n"]
    # The re-run took two turns (the write, then the closing line) and the reviser ran again.
    assert home.model.count("drafter") == 4 and home.model.count("reviser") == 2
    assert status_of(home, pid)["stages"]["drafter"]["attempts"] == 2


def test_force_reruns_completed_stages(home: Home) -> None:
    pid = home.new()
    assert home.run("run", pid, "--until", "researcher").exit_code == 0
    assert home.run("run", pid, "--until", "researcher", "--force").exit_code == 0
    assert home.model.count("refiner") == 4 and home.model.count("researcher") == 4
    assert home.model.count("outliner") == 0


def test_a_failed_stage_leaves_the_finished_artifact_untouched(home: Home) -> None:
    pid = home.new()
    assert home.run("run", pid, "--until", "outliner").exit_code == 0
    before = (home.project_dir(pid) / "outline.md").read_text()
    home.model.script("outliner", call("write_project_file", {"filename": "outline.md", "content": "half"}), error(400))
    assert home.run("run", pid, "--stage", "outliner").exit_code == 1
    assert (home.project_dir(pid) / "outline.md").read_text() == before


def test_reviewers_run_concurrently(home: Home) -> None:
    for name in ("content_reviewer", "fact_checker", "style_reviewer"):
        home.model.delay_s[name] = 0.4
    pid = home.new()
    assert home.run("run", pid).exit_code == 0
    spans = {
        name: (min(r.started for r in home.model.for_stage(name)), max(r.finished for r in home.model.for_stage(name)))
        for name in ("content_reviewer", "fact_checker", "style_reviewer", "drafter", "reviser")
    }
    reviewers = [spans[n] for n in ("content_reviewer", "fact_checker", "style_reviewer")]
    # all three were in flight at one moment
    assert max(start for start, _ in reviewers) < min(end for _, end in reviewers)
    assert spans["drafter"][1] <= min(start for start, _ in reviewers)
    assert spans["reviser"][0] >= max(end for _, end in reviewers)


def test_model_flag_overrides_the_configured_model(home: Home) -> None:
    pid = home.new()
    assert home.run("run", pid, "--until", "refiner", "--model", "openai/gpt-4o").exit_code == 0
    assert home.model.for_stage("refiner")[0].body["model"] == "gpt-4o"
    assert status_of(home, pid)["stages"]["refiner"]["model"] == "openai/gpt-4o"


def test_per_stage_model(home: Home) -> None:
    home.configure(agents={"outliner": {"model": "openai/gpt-4o"}})
    pid = home.new()
    assert home.run("run", pid, "--until", "outliner").exit_code == 0
    assert home.model.for_stage("refiner")[0].body["model"] == "gpt-4o-mini"
    assert home.model.for_stage("outliner")[0].body["model"] == "gpt-4o"


def test_max_rounds_fails_the_stage_with_the_reason(home: Home) -> None:
    home.configure(llm={"max_rounds": 2})
    home.model.script(
        "refiner",
        call("read_project_file", {"filename": "brief.md"}),
        call("text_stats", {"text": "x"}),
    )
    pid = home.new()
    assert home.run("run", pid).exit_code == 1
    assert "llm.max_rounds (2)" in status_of(home, pid)["stages"]["refiner"]["error"]


def test_concurrent_tool_calls_in_one_turn(home: Home) -> None:
    home.model.script(
        "drafter",
        calls(
            ("read_project_file", {"filename": "topic_brief.md"}),
            ("read_project_file", {"filename": "research_notes.md"}),
            ("read_project_file", {"filename": "outline.md"}),
        ),
    )
    pid = home.new()
    assert home.run("run", pid, "--until", "drafter").exit_code == 0
    results = home.model.for_stage("drafter")[1].last_tool_results
    assert len(results) == 3
    assert (
        "refiner artifact" in results[0] and "researcher artifact" in results[1] and "outliner artifact" in results[2]
    )


def test_hand_edit_marks_later_stages_stale_and_from_reruns_them(home: Home) -> None:
    pid = home.new()
    assert home.run("run", pid).exit_code == 0
    project = home.project_dir(pid)
    # The edit keeps the title: the drafter's task names the outline's title, and the fake
    # drafter writes from it (the content compared below stays the same).
    outline = "# How vector databases index embeddings\n\n1. A better order\n"
    (project / "outline.md").write_text(outline)
    shown = home.run("status", pid)
    assert "outline.md changed since drafter ran" in shown.stderr
    assert f"pensieve run {pid} --from drafter" in shown.stderr
    rerun = home.run("run", pid, "--from", "drafter")
    assert rerun.exit_code == 0, rerun.stderr
    assert home.model.count("outliner") == 2  # upstream untouched
    assert home.model.count("drafter") == 4 and home.model.count("consistency_checker") == 4
    assert "changed since" not in home.run("status", pid).stderr
    assert (project / "outline.md").read_text() == outline
    assert len(list((project / "history").glob("draft_v1.*.md"))) == 0  # same content: nothing to keep


def test_from_and_stage_cannot_be_combined(home: Home) -> None:
    pid = home.new()
    result = home.run("run", pid, "--stage", "drafter", "--from", "outliner")
    assert result.exit_code == 2 and "--stage runs one stage" in result.stderr
    result = home.run("run", pid, "--from", "polisher", "--until", "drafter")
    assert result.exit_code == 2 and "nothing would run" in result.stderr


def test_run_reports_what_it_spent(home: Home) -> None:
    pid = home.new()
    first = home.run("run", pid, "--until", "refiner")
    assert "this run: 2 model calls, 240 tokens, $" in first.stderr
    second = home.run("run", pid, "--until", "researcher")
    assert "this run: 2 model calls, 240 tokens" in second.stderr and "project total 480 tokens" in second.stderr
    home.configure(llm={"model": "openai/some-unpriced-model"})
    third = home.run("run", pid, "--until", "outliner")
    assert "this run: 2 model calls, 240 tokens, cost unknown" in third.stderr


def test_a_fenced_final_message_is_unwrapped() -> None:
    from pensieve.run.pipeline import unfence

    assert unfence("```markdown\n# Title\n\nBody\n```") == "# Title\n\nBody"
    assert unfence("```\n# Title\n```\n") == "# Title"
    # Fences inside the document are the document's own: left alone.
    text = "# T\n\n```python\nprint(1)\n```"
    assert unfence(text) == text
    assert unfence("```md\nA\n```\n\n```md\nB\n```") == "```md\nA\n```\n\n```md\nB\n```"
    # Small models double the opening fence, or never close it.
    assert unfence("```markdown\n```markdown\n# Title\n\nBody\n```") == "# Title\n\nBody"
    assert unfence("```markdown\n# Title\n\nBody") == "# Title\n\nBody"
