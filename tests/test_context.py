"""Conversations stay inside the context window: old tool results are elided, visibly."""

from __future__ import annotations

import json
from typing import Any

from pensieve.run.context import compact, conversation_chars
from tests.conftest import Home
from tests.fakes.model_server import call, text
from tests.fakes.web_site import FakeSite
from tests.test_web_pipeline import CHECK, NOTES
from tests.web_fixtures import script_researcher


def conversation(results: int, size: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "s" * 100}, {"role": "user", "content": "task"}]
    for i in range(results):
        messages.append({"role": "assistant", "content": None, "tool_calls": [{"id": str(i)}]})
        messages.append({"role": "tool", "tool_call_id": str(i), "content": f"result {i} " + "x" * size})
    return messages


def test_small_conversations_are_untouched() -> None:
    messages = conversation(3, 100)
    before = [dict(m) for m in messages]
    assert compact(messages, 10_000) == 0
    assert messages == before


def test_oldest_results_are_elided_first_and_the_latest_kept() -> None:
    messages = conversation(6, 5_000)
    elided = compact(messages, 16_000)
    tools = [m["content"] for m in messages if m["role"] == "tool"]
    assert elided == 4
    assert all(t.startswith("[elided to save context: 5,009 characters. It began: 'result") for t in tools[:4])
    assert tools[4].startswith("result 4 ") and tools[5].startswith("result 5 ")
    assert messages[0]["content"] == "s" * 100 and messages[1]["content"] == "task"


def test_a_long_research_session_is_compacted_in_a_real_run(home: Home) -> None:
    home.configure(llm={"max_context_chars": 10_000})
    pid = home.new("A brief")
    home.model.script(
        "refiner",
        call("write_project_file", {"filename": "scratch/big.md", "content": "z" * 8_000}),
        call("read_project_file", {"filename": "scratch/big.md"}),
        call("write_project_file", {"filename": "scratch/a.md", "content": "note"}),
        call("write_project_file", {"filename": "scratch/b.md", "content": "note"}),
        call("read_project_file", {"filename": "scratch/a.md"}),
    )
    assert home.run("run", pid, "--until", "refiner").exit_code == 0
    last = home.model.for_stage("refiner")[-1]
    results = [m["content"] for m in last.messages if m["role"] == "tool"]
    assert results[1].startswith("[elided to save context")
    assert "read_project_file(filename='scratch/big.md') reads it again" in results[1]
    assert "Wrote scratch/b.md" in results[3]
    context = json.loads((home.project_dir(pid) / "status.json").read_text())["stages"]["refiner"]["context"]
    assert context["elided"] >= 1 and context["requests"] == len(home.model.for_stage("refiner"))
    assert context["chars_sent"] > 8_000


def tool_turn(messages: list[dict[str, Any]], call_id: str, name: str, arguments: str, content: str) -> None:
    function = {"name": name, "arguments": arguments}
    messages.append({"role": "assistant", "content": None, "tool_calls": [{"id": call_id, "function": function}]})
    messages.append({"role": "tool", "tool_call_id": call_id, "content": content})


def test_pages_go_first_then_other_results_and_the_stage_inputs_never() -> None:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "s"}, {"role": "user", "content": "task"}]
    tool_turn(messages, "a", "read_project_file", '{"filename": "draft_v1.md"}', "DRAFT " + "d" * 9_000)
    tool_turn(messages, "b", "web_search", '{"query": "hnsw"}', "RESULTS " + "r" * 5_000)
    tool_turn(messages, "c", "fetch_url", '{"url": "https://a.example/x"}', "PAGE1 " + "p" * 9_000)
    tool_turn(messages, "d", "read_project_file", '{"filename": "sources/S2.md"}', "PAGE2 " + "q" * 9_000)
    tool_turn(messages, "e", "write_project_file", '{"filename": "scratch/n.md"}', "Wrote scratch/n.md")
    tool_turn(messages, "f", "write_project_file", '{"filename": "scratch/m.md"}', "Wrote scratch/m.md")
    forgotten: list[str] = []
    # Room for the draft and the search results, not for the pages.
    elided = compact(messages, 20_000, forget=lambda name, args: forgotten.append(name), inputs={"draft_v1.md"})
    tools = {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}
    assert elided == 2 and forgotten == ["fetch_url", "read_project_file"]
    assert tools["c"].startswith("[elided") and "fetch_url(url='https://a.example/x') returns it again" in tools["c"]
    assert tools["d"].startswith("[elided") and "read_project_file(filename='sources/S2.md')" in tools["d"]
    assert tools["b"].startswith("RESULTS") and tools["a"].startswith("DRAFT")
    # Tighter: the search results go too, and the draft still stays, whatever the budget.
    compact(messages, 1_000, inputs={"draft_v1.md"})
    tools = {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}
    assert "web_search(query='hnsw') runs the search again" in tools["b"]
    assert tools["a"].startswith("DRAFT")


def test_an_input_read_twice_keeps_only_its_latest_copy() -> None:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "s"}, {"role": "user", "content": "task"}]
    for call_id in ("a", "b"):
        tool_turn(messages, call_id, "read_project_file", '{"filename": "draft_v1.md"}', "DRAFT " + "d" * 9_000)
    tool_turn(messages, "c", "text_stats", '{"filename": "draft_v1.md"}', "{}")
    tool_turn(messages, "d", "text_stats", '{"filename": "draft_v1.md"}', "{}")
    assert compact(messages, 12_000, inputs={"draft_v1.md"}) == 1
    tools = {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}
    assert tools["a"].startswith("[elided") and tools["b"].startswith("DRAFT")


def test_a_fact_checker_that_reads_twelve_long_pages_still_sees_its_draft(web_home: Home, site: FakeSite) -> None:
    """What a careful checker does (seen by hand: the draft was elided after ten sources and
    had to be read again): the draft and the notes stay, the pages make room."""
    web_home.configure(llm={"max_context_chars": 60_000}, fetch={"url_policy": "any"}, limits={"fetch_url": 20})
    pid = web_home.new()
    script_researcher(web_home, site, NOTES)
    result = web_home.run("run", pid, "--until", "drafter", "--quiet")
    assert result.exit_code == 0, result.stderr
    pages = [call("fetch_url", {"url": site.url(f"/long/{n}")}) for n in range(12)]
    web_home.model.script(
        "fact_checker",
        call("read_project_file", {"filename": "draft_v1.md"}),
        call("read_project_file", {"filename": "research_notes.md"}),
        *pages,
        call("write_project_file", {"filename": "fact_check.md", "content": CHECK}),
        text("Checked."),
    )
    result = web_home.run("run", pid, "--stage", "fact_checker", "--quiet")
    assert result.exit_code == 0, result.stderr
    draft = (web_home.project_dir(pid) / "draft_v1.md").read_text()
    last = web_home.model.for_stage("fact_checker")[-1]
    results = [m["content"] for m in last.messages if m["role"] == "tool"]
    assert draft.strip()[:200] in results[0] and not results[0].startswith("[elided")
    assert not results[1].startswith("[elided")
    assert any(r.startswith("[elided") and "/long/0" in r for r in results[2:])
    context = json.loads((web_home.project_dir(pid) / "status.json").read_text())["stages"]["fact_checker"]["context"]
    assert context["elided"] >= 1 and context["rereads"] == 0


def test_compaction_leaves_room_so_the_history_is_not_rewritten_every_turn() -> None:
    messages = conversation(8, 5_000)
    assert compact(messages, 30_000) == 4  # down to 80% of the budget, not just under it
    assert conversation_chars(messages) <= 24_000
    messages.append({"role": "assistant", "content": None, "tool_calls": [{"id": "n"}]})
    messages.append({"role": "tool", "tool_call_id": "n", "content": "x" * 4_000})
    before = [dict(m) for m in messages]
    assert compact(messages, 30_000) == 0 and messages == before  # the next turn fits as it is
