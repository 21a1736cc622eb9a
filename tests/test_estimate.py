"""`pensieve estimate` and `pensieve run --dry-run`: what a run will do and cost, before it
spends anything, with no key, no network and no litellm import."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pensieve.estimate.prices import PRICE_FILE, price_file, price_of
from pensieve.stages import STAGE_NAMES
from tests.conftest import Home


def estimate_json(home: Home, pid: str, *args: str) -> dict[str, object]:
    result = home.run("estimate", pid, "--json", *args)
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert isinstance(data, dict)
    return data


def test_estimate_needs_no_model_no_key_and_says_unknown_price(home: Home) -> None:
    pid = home.new()
    home.configure(llm={"model": None})
    home.monkeypatch.delenv("OPENAI_API_KEY")
    result = home.run("estimate", pid)
    assert result.exit_code == 0, result.stderr
    for name in STAGE_NAMES:
        assert name in result.stdout
    assert "unknown price" in result.stdout
    assert "basis:" in result.stdout and "no finished project" in result.stdout
    assert home.model.requests == []  # no model was asked
    data = estimate_json(home, pid)
    stages = data["stages"]
    assert isinstance(stages, list) and [s["stage"] for s in stages] == list(STAGE_NAMES)
    for stage in stages:
        assert stage["cost_usd"] is None and stage["price"] == "unknown price"
        for key in ("calls", "input_tokens", "output_tokens", "total_tokens"):
            low, expected, high = (stage[key][k] for k in ("low", "expected", "high"))
            assert 0 < low <= expected <= high, (stage["stage"], key)
        assert stage["total_tokens"]["high"] <= 3 * stage["total_tokens"]["low"] + 1  # never wider than 3x
        assert stage["system_prompt"] and stage["task"]  # the prompts each stage would be sent


def test_costs_come_from_litellms_price_map_file(home: Home) -> None:
    path = price_file()
    assert path is not None and path.name == PRICE_FILE
    table = json.loads(path.read_text(encoding="utf-8"))
    price = price_of("openai/gpt-4o-mini")
    assert price is not None and price.entry == "gpt-4o-mini"
    assert price.input_per_token == table["gpt-4o-mini"]["input_cost_per_token"]
    assert price_of("ollama_chat/llama3.1") == price_of("ollama/llama3.1")  # priced as Ollama's
    assert price_of("openai/my-own-server-model") is None
    assert price_of("groq/gpt-4o-mini") is None  # not another provider's price
    pid = home.new()
    data = estimate_json(home, pid, "--model", "openai/gpt-4o-mini")
    stages = data["stages"]
    assert isinstance(stages, list)
    drafter = next(s for s in stages if s["stage"] == "drafter")
    inputs, outputs = drafter["input_tokens"]["low"], drafter["output_tokens"]["low"]
    low = inputs * price.input_per_token + outputs * price.output_per_token
    assert drafter["cost_usd"]["low"] == pytest.approx(low, rel=1e-3, abs=1e-6)
    assert drafter["model"] == "openai/gpt-4o-mini"


def test_estimate_imports_no_litellm(home: Home) -> None:
    pid = home.new()
    code = (
        "import sys\n"
        "from pensieve.cli.main import app\n"
        "try:\n"
        f"    app(['estimate', '{pid}', '--json'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('LOADED', 'litellm' in sys.modules, 'torch' in sys.modules, file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=home.path, timeout=120)
    assert "LOADED False False" in done.stderr, done.stderr
    assert json.loads(done.stdout)["project"] == pid


def test_the_prompts_estimated_are_the_prompts_sent(home: Home) -> None:
    pid = home.new()
    data = estimate_json(home, pid)
    stages = data["stages"]
    assert isinstance(stages, list)
    refiner = stages[0]
    result = home.run("run", pid, "--until", "refiner", "--quiet")
    assert result.exit_code == 0, result.stderr
    sent = home.model.for_stage("refiner")[0].messages
    assert sent[0]["content"] == refiner["system_prompt"]
    assert sent[1]["content"] == refiner["task"]
    # The complete stage is not estimated again: the rest is.
    after = estimate_json(home, pid)["stages"]
    assert isinstance(after, list) and [s["stage"] for s in after] == list(STAGE_NAMES[1:])


def test_the_estimate_follows_the_projects_and_the_workspaces_web_setting(home: Home) -> None:
    """A project made with `--no-web`, or in a workspace whose config.yaml turns the web off,
    is estimated as the run will go: no web tools for its researcher, even with search set up."""
    home.monkeypatch.setenv("SEARCH_API_KEY", "test-key")
    home.configure(search={"provider": "tavily", "endpoint": "http://127.0.0.1:9/search"})

    def researcher_tools(pid: str, *args: str) -> list[str]:
        stages = estimate_json(home, pid, *args)["stages"]
        assert isinstance(stages, list)
        tools = next(s["tools"] for s in stages if s["stage"] == "researcher")
        assert isinstance(tools, list)
        return tools

    assert "web_search" in researcher_tools(home.new())
    offline = researcher_tools(home.new("How sourdough rises", "--no-web"))
    assert "web_search" not in offline and "fetch_url" not in offline
    workspace = home.path / "workspaces" / "private"
    assert home.run("new", "How vector clocks order events", "-w", "private").exit_code == 0
    (workspace / "config.yaml").write_text("research:\n  web: false\n", encoding="utf-8")
    pid = next(p.name for p in (workspace / "projects").iterdir())
    assert "web_search" not in researcher_tools(pid, "-w", "private")


def test_dry_run_prints_the_plan_and_changes_nothing(home: Home) -> None:
    pid = home.new()
    status = (home.project_dir(pid) / "status.json").read_bytes()
    result = home.run("run", pid, "--dry-run", "--until", "drafter")
    assert result.exit_code == 0, result.stderr
    assert "4 stage(s) to run: refiner, researcher, outliner, drafter" in result.stdout
    assert "writes draft_v1.md" in result.stdout and "reviser" not in result.stdout
    assert "no model was called and nothing changed" in result.stderr
    assert home.model.requests == []
    assert (home.project_dir(pid) / "status.json").read_bytes() == status
    assert not (home.project_dir(pid) / "events.jsonl").exists()


def test_dry_run_says_why_a_run_would_be_refused(home: Home) -> None:
    pid = home.new()
    home.configure(llm={"model": None})
    result = home.run("run", pid, "--dry-run")
    assert result.exit_code == 2
    assert "10 stage(s) to run" in result.stdout  # the plan is shown all the same
    assert "a run would be refused: no model configured" in result.stderr
    assert home.model.requests == []


@pytest.mark.slow
def test_finished_projects_bring_the_estimate_within_range(home: Home) -> None:
    """What bench/bench_estimate.py measures, on the fake pipeline: with one finished project
    in the workspace, every stage's actual tokens fall in its range (target >= 8 of 10)."""
    home.model.count_tokens = True
    first = home.new("How B-trees keep databases fast")
    assert home.run("run", first, "--quiet").exit_code == 0
    second = home.new("Why sourdough starters need regular feeding")
    estimate = estimate_json(home, second)
    assert estimate["history"] == [first]
    assert home.run("run", second, "--quiet").exit_code == 0
    status = json.loads((home.project_dir(second) / "status.json").read_text())
    stages = estimate["stages"]
    assert isinstance(stages, list)
    inside = []
    for stage in stages:
        actual = status["stages"][stage["stage"]]["usage"]
        total = actual["prompt_tokens"] + actual["completion_tokens"]
        inside.append(stage["total_tokens"]["low"] <= total <= stage["total_tokens"]["high"])
        assert stage["total_tokens"]["high"] <= 3 * stage["total_tokens"]["low"] + 1
    assert sum(inside) >= 8, inside


def test_a_bad_model_string_is_refused(home: Home) -> None:
    pid = home.new()
    result = home.run("estimate", pid, "--model", " ")
    assert result.exit_code == 2 and "--model is empty" in result.stderr
    assert home.run("estimate", "no-such-project").exit_code == 2


def test_the_estimate_module_reads_prices_without_the_network(tmp_path: Path) -> None:
    # The price map is a file of the installed package; nothing is fetched.
    path = price_file()
    assert path is not None and path.is_file() and str(path).endswith(f"litellm/{PRICE_FILE}")
