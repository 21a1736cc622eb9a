"""Budgets counted across runs, loop detection and per-stage tool caps, through the fake model."""

from __future__ import annotations

import json
from typing import Any

from tests.conftest import Home
from tests.fakes.model_server import call

# The fake model reports 100 prompt + 20 completion tokens per call.
TOKENS_PER_CALL = 120


def load(home: Home, pid: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((home.project_dir(pid) / "status.json").read_text())
    return doc


def test_token_budget_stops_before_the_next_call_and_survives_a_resume(home: Home) -> None:
    home.configure(budget={"max_tokens": 300})
    pid = home.new()
    first = home.run("run", pid)
    assert first.exit_code == 1
    # refiner: 2 calls (240 tokens); researcher: 1 call brings it to 360 >= 300, then stop.
    assert home.model.count("refiner") == 2
    assert home.model.count("researcher") == 1
    status = load(home, pid)
    assert status["stages"]["refiner"]["status"] == "complete"
    assert status["stages"]["researcher"]["status"] == "error"
    assert "budget exceeded" in status["stages"]["researcher"]["error"]
    assert status["usage"]["prompt_tokens"] + status["usage"]["completion_tokens"] == 3 * TOKENS_PER_CALL
    assert "budget exceeded" in first.stderr

    # A resume does not reset the count: still over budget, no model call at all.
    second = home.run("run", pid)
    assert second.exit_code == 1
    assert len(home.model.requests) == 3
    assert "budget exceeded" in load(home, pid)["stages"]["researcher"]["error"]

    # A higher budget continues where it stopped; finished stages are not run again.
    home.configure(budget={"max_tokens": 100_000})
    third = home.run("run", pid)
    assert third.exit_code == 0, third.stderr
    assert home.model.count("refiner") == 2
    status = load(home, pid)
    assert status["status"] == "complete"
    assert status["usage"]["calls"] == len(home.model.requests)


def test_cost_budget_counts_across_runs(home: Home) -> None:
    pid = home.new()
    assert home.run("run", pid, "--until", "refiner").exit_code == 0
    spent = load(home, pid)["usage"]["cost_usd"]
    assert spent and spent > 0, "gpt-4o-mini has a known price: the cost must be counted"
    per_call = spent / 2
    # Allow a little more than what is spent: the next stage may make one call, not two.
    home.configure(budget={"max_cost_usd": spent + per_call * 0.5})
    result = home.run("run", pid)
    assert result.exit_code == 1
    assert home.model.count("researcher") == 1
    status = load(home, pid)
    assert "budget exceeded" in status["stages"]["researcher"]["error"]
    assert "budget.max_cost_usd" in status["stages"]["researcher"]["error"]
    home.configure(budget={"max_cost_usd": 10.0})
    assert home.run("run", pid).exit_code == 0
    assert load(home, pid)["status"] == "complete"


def test_the_third_identical_call_is_warned_and_the_fourth_ends_the_stage(home: Home) -> None:
    same = call("read_project_file", {"filename": "brief.md"})
    home.model.script("refiner", same, same, same, same)
    pid = home.new()
    result = home.run("run", pid)
    assert result.exit_code == 1
    requests = home.model.for_stage("refiner")
    assert len(requests) == 4  # the fourth identical call got no answer: the stage ended
    results = [r.last_tool_results for r in requests[1:]]
    assert "How vector databases index embeddings" in results[0][0]
    assert "How vector databases index embeddings" in results[1][0]
    assert results[2][0].startswith("Error: you have made this exact read_project_file call 3 times")
    status = load(home, pid)
    assert status["stages"]["refiner"]["status"] == "error"
    assert "repeated the same read_project_file call 4 times" in status["stages"]["refiner"]["error"]
    assert home.model.count("researcher") == 0


def test_different_arguments_are_not_a_loop(home: Home) -> None:
    home.model.script(
        "refiner",
        *[call("read_project_file", {"filename": name}) for name in ("brief.md", "./brief.md", "brief.md", "x.md")],
    )
    pid = home.new()
    assert home.run("run", pid, "--until", "refiner").exit_code == 0


def test_tool_caps_are_per_stage_and_answered_with_an_error(home: Home) -> None:
    home.configure(limits={"read_project_file": 2})
    home.model.script(
        "refiner",
        call("read_project_file", {"filename": "brief.md"}),
        call("read_project_file", {"filename": "./brief.md"}),
        call("read_project_file", {"filename": "a.md"}),
    )
    home.model.script(
        "researcher",
        call("read_project_file", {"filename": "topic_brief.md"}),
        call("read_project_file", {"filename": "./topic_brief.md"}),
        call("read_project_file", {"filename": "b.md"}),
    )
    pid = home.new()
    result = home.run("run", pid, "--until", "researcher")
    assert result.exit_code == 0, result.stderr
    for stage in ("refiner", "researcher"):
        requests = home.model.for_stage(stage)
        first, second, third = (r.last_tool_results[0] for r in requests[1:4])
        assert not first.startswith("Error") and not second.startswith("Error")
        assert third.startswith("Error: read_project_file has reached its limit of 2 calls")
        assert "limits.read_project_file" in third


def test_the_same_refused_call_repeated_is_a_loop_too(home: Home) -> None:
    # Seen from a real small model: list_projects called with its own schema as arguments, refused
    # as invalid 22 times until the round cap.
    bad = call("read_project_file", {"type": "object", "properties": {}})
    home.model.script("refiner", bad, bad, bad, bad)
    pid = home.new()
    assert home.run("run", pid).exit_code == 1
    requests = home.model.for_stage("refiner")
    assert len(requests) == 4
    assert requests[1].last_tool_results[0].startswith("Error: invalid arguments for read_project_file")
    assert requests[3].last_tool_results[0].startswith("Error: you have made this exact read_project_file call 3")
    assert "repeated the same read_project_file call 4 times" in load(home, pid)["stages"]["refiner"]["error"]
