"""Conversations stay inside the context window: old tool results are elided, visibly."""

from __future__ import annotations

from typing import Any

from pensieve.run.context import compact
from tests.conftest import Home
from tests.fakes.model_server import call


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
    pid = home.new("A brief\n" + "z" * 8_000)
    home.model.script(
        "refiner",
        call("read_project_file", {"filename": "brief.md"}),
        call("write_project_file", {"filename": "scratch/a.md", "content": "note"}),
        call("write_project_file", {"filename": "scratch/b.md", "content": "note"}),
        call("read_project_file", {"filename": "scratch/a.md"}),
    )
    assert home.run("run", pid, "--until", "refiner").exit_code == 0
    last = home.model.for_stage("refiner")[-1]
    results = [m["content"] for m in last.messages if m["role"] == "tool"]
    assert results[0].startswith("[elided to save context")
    assert "Wrote scratch/b.md" in results[2]
