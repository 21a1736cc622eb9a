"""What real models do wrong, scripted in the fake model, end to end through the CLI.

For each misbehaviour: the turn that asks again (a reminder, a repair naming the broken
contract, a request to stay within the output limit), then either a real artifact or a
failed stage whose error names the contract, with the rejected work kept and nothing
captured into the topic memory.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pensieve.project.events import read_events
from tests.conftest import Home
from tests.fakes import artifacts
from tests.fakes.artifacts import DEFAULT_TOPIC
from tests.fakes.model_server import TEXT_CALL_FORMS, call, cut_off, echo, text, text_call, think, write
from tests.fakes.web_site import FakeSite

OUTLINE = artifacts.outline(DEFAULT_TOPIC)


def status_of(home: Home, pid: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((home.project_dir(pid) / "status.json").read_text())
    return data


def followups(home: Home, stage: str) -> list[str]:
    """The user turns the pipeline added after the task message, in order."""
    last = home.model.for_stage(stage)[-1].messages
    return [str(m["content"]) for m in last[2:] if m.get("role") == "user"]


def assert_failed_with_contract(home: Home, pid: str, stage: str, filename: str, contract: str) -> str:
    doc = status_of(home, pid)
    entry = doc["stages"][stage]
    assert doc["status"] == "error" and entry["status"] == "error"
    error = str(entry["error"])
    assert f"{filename} does not meet its contract" in error and contract in error, error
    assert "--model" in error and f"agents.{stage}.model" in error  # the remedy
    assert any(v.startswith(f"{contract}:") for v in entry["violations"]), entry["violations"]
    rejected = home.project_dir(pid) / "rejected" / filename
    assert rejected.is_file() and rejected.read_text().strip(), "the rejected artifact is kept"
    assert f"rejected/{filename}" in error
    assert not (home.project_dir(pid) / filename).exists()
    return error


def test_never_writes_gets_one_reminder_then_repairs_then_fails_naming_the_contract(home: Home) -> None:
    home.configure(topics={"capture": True})
    home.model.always("outliner", text("I will now write the outline."))
    pid = home.new()
    result = home.run("run", pid)
    assert result.exit_code == 1
    asked = followups(home, "outliner")
    assert asked[0].startswith("You have not written `outline.md` yet")
    assert len(asked) == 3 and all("does not meet its contract" in a for a in asked[1:])
    assert status_of(home, pid)["stages"]["outliner"]["repairs"] == ["reminder", "contract", "contract"]
    assert "outliner: the model did not write its file; reminding it" in result.stderr
    assert result.stderr.count("outliner: the artifact does not meet its contract; asking the model to fix it") == 2
    error = assert_failed_with_contract(home, pid, "outliner", "outline.md", "sections")
    assert "does not meet its contract" in result.stderr and error.split(":")[0] in result.stderr
    assert home.model.count("drafter") == 0
    assert not list((home.path / "workspaces" / "default" / "topics").glob("*.md")), "nothing captured"


def test_claims_to_have_written_then_writes_after_the_reminder(home: Home) -> None:
    home.model.script("outliner", text("I have written outline.md."), write("outline.md", OUTLINE), text("Done."))
    pid = home.new()
    assert home.run("run", pid, "--until", "outliner").exit_code == 0
    assert (home.project_dir(pid) / "outline.md").read_text().strip() == OUTLINE.strip()
    entry = status_of(home, pid)["stages"]["outliner"]
    assert entry["status"] == "complete" and entry["repairs"] == ["reminder"]


@pytest.mark.parametrize("form", TEXT_CALL_FORMS)
def test_a_tool_call_written_as_text_is_run_as_a_call(home: Home, form: str) -> None:
    home.model.script(
        "outliner",
        text_call("write_project_file", {"filename": "outline.md", "content": OUTLINE}, form=form, prose="Sure."),
        text("Outline written."),
    )
    pid = home.new()
    assert home.run("run", pid, "--until", "outliner").exit_code == 0
    assert (home.project_dir(pid) / "outline.md").read_text().strip() == OUTLINE.strip()
    entry = status_of(home, pid)["stages"]["outliner"]
    assert entry["text_tool_calls"] == 1 and entry["repairs"] == []
    assert entry["tool_calls"] == {"write_project_file": 1}
    events = read_events(home.project_dir(pid) / "events.jsonl")
    assert any(e["kind"] == "text_tool_calls" and e["tools"] == ["write_project_file"] for e in events)
    # The conversation stays well-formed: the call and its result are in the next request.
    result = home.model.for_stage("outliner")[1].last_tool_results[0]
    assert "outline.md" in result and not result.startswith("Error")


def test_a_text_call_to_a_tool_the_agent_lacks_is_refused_like_any_other(home: Home) -> None:
    home.model.script("outliner", text_call("web_search", {"query": "vector databases"}, form="tagged"))
    pid = home.new()
    assert home.run("run", pid, "--until", "outliner").exit_code == 0
    result = home.model.for_stage("outliner")[1].last_tool_results[0]
    assert result.startswith("Error: tool 'web_search' is not available to outliner")


def test_a_reply_cut_off_by_the_output_limit_is_never_the_artifact(home: Home) -> None:
    home.model.script("outliner", cut_off(OUTLINE[:200]))  # then the default: a real outline
    pid = home.new()
    assert home.run("run", pid, "--until", "outliner").exit_code == 0
    asked = followups(home, "outliner")
    assert asked[0].startswith("Your reply was cut off by the output limit")
    # The cut-off text never became the file: the outline came from the next, whole write.
    assert (home.project_dir(pid) / "outline.md").read_text().strip() == OUTLINE.strip()
    assert status_of(home, pid)["stages"]["outliner"]["tool_calls"] == {"write_project_file": 1}
    assert status_of(home, pid)["stages"]["outliner"]["repairs"] == ["cut_off"]


def test_replies_always_cut_off_fail_the_stage_saying_so(home: Home) -> None:
    home.configure(llm={"max_output_tokens": 300})
    home.model.always("outliner", cut_off(OUTLINE[:200]))
    pid = home.new()
    assert home.run("run", pid).exit_code == 1
    error = status_of(home, pid)["stages"]["outliner"]["error"]
    assert "cut off by the output limit" in error and "llm.max_output_tokens 300" in error
    assert not (home.project_dir(pid) / "outline.md").exists()


def test_a_prompt_echo_is_repaired(home: Home) -> None:
    home.model.script("outliner", echo("both", into="outline.md"))  # then the default: a real outline
    pid = home.new()
    assert home.run("run", pid, "--until", "outliner").exit_code == 0
    asked = followups(home, "outliner")
    assert "not_echo" in asked[0]
    assert status_of(home, pid)["stages"]["outliner"]["repairs"] == ["contract"]


def test_a_draft_too_short_fails_with_the_figures_and_is_kept(home: Home) -> None:
    short = "# Vector databases\n\n## What they are\n\nThey index embeddings.\n\n## Why\n\nSpeed.\n"
    home.model.always("drafter", write("draft_v1.md", short), text("Done."))
    pid = home.new()
    assert home.run("run", pid).exit_code == 1
    asked = followups(home, "drafter")
    assert "the target is at least 900" in asked[0]
    error = assert_failed_with_contract(home, pid, "drafter", "draft_v1.md", "length")
    assert "words, the target is at least 900" in error
    assert (home.project_dir(pid) / "rejected" / "draft_v1.md").read_text() == short
    assert (home.project_dir(pid) / "outline.md").is_file(), "earlier work untouched"


def test_a_refusal_is_repaired_then_a_real_artifact_is_committed(home: Home) -> None:
    home.model.script("outliner", write("outline.md", "I'm sorry, but I can't help with that request."))
    pid = home.new()
    assert home.run("run", pid, "--until", "outliner").exit_code == 0
    assert "not_refusal" in followups(home, "outliner")[0]


def test_think_blocks_never_reach_the_artifact(home: Home) -> None:
    home.model.script("outliner", think("Let me plan the sections first.", OUTLINE))
    pid = home.new()
    assert home.run("run", pid, "--until", "outliner").exit_code == 0
    written = (home.project_dir(pid) / "outline.md").read_text()
    assert "<think>" not in written and "Let me plan" not in written
    assert written.strip() == OUTLINE.strip()


def test_looping_until_the_round_cap_commits_a_valid_staged_artifact_with_a_warning(home: Home) -> None:
    home.configure(llm={"max_rounds": 5})
    reads = [call("read_project_file", {"filename": name}) for name in ("brief.md", "research_notes.md")]
    home.model.script("outliner", write("outline.md", OUTLINE), *reads, *reads)
    pid = home.new()
    result = home.run("run", pid, "--until", "outliner")
    assert result.exit_code == 0, result.stderr
    assert "reached llm.max_rounds (5)" in result.stderr and "meets its contract" in result.stderr
    assert (home.project_dir(pid) / "outline.md").read_text().strip() == OUTLINE.strip()


def test_looping_until_the_round_cap_without_an_artifact_fails_and_was_warned(home: Home) -> None:
    home.configure(llm={"max_rounds": 5})
    names = ("brief.md", "topic_brief.md", "research_notes.md", "nope-1.md", "nope-2.md")
    home.model.script("outliner", *[call("read_project_file", {"filename": n}) for n in names])
    pid = home.new()
    assert home.run("run", pid).exit_code == 1
    error = status_of(home, pid)["stages"]["outliner"]["error"]
    assert "llm.max_rounds (5)" in error and "outline.md was never written" in error
    warned = [m for r in home.model.for_stage("outliner") for m in r.messages if m.get("role") == "user"]
    assert any("Only two model turns are left" in str(m["content"]) for m in warned)


def test_a_loop_stopped_by_the_guard_keeps_the_staged_work(home: Home) -> None:
    short = "# Outline\n\n## Intro\n"
    same = call("read_project_file", {"filename": "brief.md"})
    home.model.script("outliner", write("outline.md", short), same, same, same, same)
    pid = home.new()
    assert home.run("run", pid).exit_code == 1
    error = status_of(home, pid)["stages"]["outliner"]["error"]
    assert "repeated the same read_project_file call 4 times" in error
    assert "rejected/outline.md" in error
    assert (home.project_dir(pid) / "rejected" / "outline.md").read_text() == short


@pytest.mark.slow
def test_an_off_topic_topic_brief_fails_on_topic(home: Home) -> None:
    home.configure(llm={"repair_turns": 1})
    off_topic = artifacts.topic_brief("Baking sourdough bread at home")
    home.model.always("refiner", write("topic_brief.md", off_topic), text("Done."))
    pid = home.new()
    assert home.run("run", pid).exit_code == 1
    assert "not about the brief" in followups(home, "refiner")[0]
    assert_failed_with_contract(home, pid, "refiner", "topic_brief.md", "on_topic")


def test_a_rejected_artifact_is_replaced_not_lost_when_the_stage_runs_again(home: Home, tmp_path: Path) -> None:
    short = "# Outline\n\n## Intro\n"
    home.model.script("outliner", write("outline.md", short), text("ok"), write("outline.md", short), text("ok"))
    home.model.script("outliner", write("outline.md", short), text("ok"))
    pid = home.new()
    assert home.run("run", pid).exit_code == 1
    assert (home.project_dir(pid) / "rejected" / "outline.md").is_file()
    # The next run starts the stage again (the default fake writes a real outline) and succeeds.
    assert home.run("run", pid, "--until", "outliner").exit_code == 0
    assert (home.project_dir(pid) / "outline.md").is_file()
    assert status_of(home, pid)["stages"]["outliner"]["violations"] == []


def test_a_fence_around_the_whole_written_document_is_removed(home: Home) -> None:
    home.model.script("outliner", write("outline.md", f"```markdown\n{OUTLINE}\n```"))
    pid = home.new()
    assert home.run("run", pid, "--until", "outliner").exit_code == 0
    assert (home.project_dir(pid) / "outline.md").read_text().strip() == OUTLINE.strip()
    assert status_of(home, pid)["stages"]["outliner"]["repairs"] == []


ODD_FORMS = ("(S1)", "[s2]", "[S1, p. 4]", "[^S2]", "[S1; S2]", "[S1][S2]", "[S1, S2]")


def test_citations_in_the_forms_models_write_them_are_checked_and_listed(web_home: Home, site: FakeSite) -> None:
    notes = (
        "# Research notes\n\n## How HNSW indexes embeddings\n- HNSW builds a layered graph (S1).\n"
        "- Product quantisation compresses vectors with codebooks [s2].\n\n"
        "## Open questions\n- How recall changes as the index grows.\n"
    )
    paragraphs = artifacts.article(DEFAULT_TOPIC).split("\n\n")
    prose = [i for i, p in enumerate(paragraphs) if p and not p.startswith(("#", "<!--"))]
    for index, form in zip(prose, ODD_FORMS, strict=False):
        paragraphs[index] = paragraphs[index].rstrip() + f" {form}"
    draft = "\n\n".join(paragraphs)
    web_home.model.script(
        "researcher",
        call("fetch_url", {"url": site.url("/article")}),
        call("fetch_url", {"url": site.url("/second")}),
        write("research_notes.md", notes),
        text("Notes written."),
    )
    web_home.model.script("drafter", write("draft_v1.md", draft), text("Draft written."))
    pid = web_home.new()
    result = web_home.run("run", pid, "--until", "drafter", "--quiet")
    assert result.exit_code == 0, result.stderr
    committed = (web_home.project_dir(pid) / "draft_v1.md").read_text()
    for form in ("(S1)", "[s2]", "p. 4", "[^S2]", "[S1; S2]", "[S1][S2]"):
        assert form not in committed, form
    assert "[S1]" in committed and "[S1, S2]" in committed
    # The generated reference list names both pages; the check finds every id in the archive.
    references = committed.split("## References", 1)[1]
    assert "S1" in references and "S2" in references
    report = json.loads(web_home.run("check", pid, "--json").stdout)
    assert [p for p in report["problems"] if p["kind"] == "unknown_citation"] == []
    assert report["citations_checked"] >= len(ODD_FORMS)


def test_no_changes_needed_from_a_reviewer_that_never_read_the_draft_is_repaired(home: Home) -> None:
    review = "# Style review\n\nNo changes needed.\n"
    home.model.script(
        "style_reviewer",
        write("style_review.md", review),
        text("Done."),
        call("read_project_file", {"filename": "draft_v1.md"}),
        call("read_project_file", {"filename": "topic_brief.md"}),
        write("style_review.md", review),
        text("Done."),
    )
    pid = home.new()
    assert home.run("run", pid, "--until", "style_reviewer").exit_code == 0
    asked = followups(home, "style_reviewer")
    assert 'says "No changes needed" but never read topic_brief.md, draft_v1.md' in asked[0]
    entry = status_of(home, pid)["stages"]["style_reviewer"]
    assert entry["status"] == "complete" and entry["repairs"] == ["contract"]
    assert (home.project_dir(pid) / "style_review.md").read_text() == review


def test_a_tool_call_in_function_syntax_is_no_artifact(home: Home) -> None:
    junk = 'write_project_file(style_review.md, "```markdown\\n# Style review\\nThe draft has no changes needed.")'
    home.model.always("style_reviewer", text(junk))
    pid = home.new()
    assert home.run("run", pid).exit_code == 1
    assert_failed_with_contract(home, pid, "style_reviewer", "style_review.md", "not_tool_call")


def test_each_final_message_after_the_reminder_is_judged_anew(home: Home) -> None:
    home.model.script("outliner", text("Done"), text("outline.md"), text("Still working."), text(OUTLINE))
    pid = home.new()
    assert home.run("run", pid, "--until", "outliner").exit_code == 0
    assert (home.project_dir(pid) / "outline.md").read_text().strip() == OUTLINE.strip()
    assert status_of(home, pid)["stages"]["outliner"]["repairs"] == ["reminder", "contract", "contract"]


def test_out_of_rounds_with_a_broken_artifact_records_the_contract(home: Home) -> None:
    home.configure(llm={"max_rounds": 4})
    reads = [call("read_project_file", {"filename": name}) for name in ("brief.md", "topic_brief.md", "x.md")]
    home.model.script("outliner", write("outline.md", "# Outline\n\n## Intro\n"), *reads)
    pid = home.new()
    assert home.run("run", pid).exit_code == 1
    entry = status_of(home, pid)["stages"]["outliner"]
    assert entry["error"].startswith("outliner reached llm.max_rounds (4)")
    assert any(v.startswith("sections:") for v in entry["violations"])
    assert ".." not in entry["error"] and "rejected/outline.md" in entry["error"]
