"""What each stage is sent: requests, characters, elided tool results and re-reads, per stage.

Two sources of figures:

- the fake pipeline (default): a full run against the fake model, the fixture website and
  `llm.max_context_chars` low enough that the Researcher's and the Fact Checker's pages do
  not all fit, where both read twelve long pages; it prints status.json's `context` of each
  stage and whether the Fact Checker still had its draft in its last request;
- `--relay DIR` (repeatable): the requests a run by hand sent through
  ../shared/tools/model-by-hand/relay.py (DIR/NNNN.json), grouped by stage, with the
  "[elided to save context" stubs in the last request of each stage and the calls made again
  after their result was elided; and `--project DIR`: a project's status.json `context`.

Run: python bench/bench_stage_context.py [--relay DIR ...] [--project DIR ...]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import yaml

from pensieve.stages import STAGE_NAMES
from tests.fakes.model_server import FakeModel, call, text
from tests.fakes.web_site import FakeSite

_STAGE = re.compile(r"Your stage: ([a-z_]+) ")
ELIDED = "[elided to save context"
HEADER = f"{'stage':<20} {'requests':>8} {'chars sent':>12} {'elided':>7} {'re-reads':>8}"


def _row(stage: str, figures: dict[str, Any]) -> str:
    return (
        f"{stage:<20} {figures.get('requests', 0):>8} {figures.get('chars_sent', 0):>12,} "
        f"{figures.get('elided', 0):>7} {figures.get('rereads', 0):>8}"
    )


def _print_table(title: str, rows: dict[str, dict[str, Any]]) -> None:
    print(f"\n{title}\n{HEADER}")
    total: dict[str, int] = defaultdict(int)
    for stage in STAGE_NAMES:
        if stage in rows:
            print(_row(stage, rows[stage]))
            for key, value in rows[stage].items():
                total[key] += int(value)
    print(_row("total", total))


def from_project(project: Path) -> dict[str, dict[str, Any]]:
    status = json.loads((project / "status.json").read_text())
    return {name: entry.get("context") or {} for name, entry in status["stages"].items() if entry.get("context")}


def _calls(message: dict[str, Any]) -> list[tuple[str, str]]:
    found = []
    for tool_call in message.get("tool_calls") or []:
        function = tool_call.get("function") or {}
        found.append((str(function.get("name")), str(function.get("arguments"))))
    return found


def from_relay(directory: Path) -> dict[str, dict[str, Any]]:
    """Per stage: requests, characters of the conversations sent, elided stubs in its last
    request, calls repeated after their result had been elided."""
    rows: dict[str, dict[str, Any]] = defaultdict(lambda: {"requests": 0, "chars_sent": 0, "elided": 0, "rereads": 0})
    last: dict[str, list[dict[str, Any]]] = {}
    for path in sorted(directory.glob("[0-9][0-9][0-9][0-9].json")):
        body = json.loads(path.read_text())
        messages = body.get("messages") or []
        task = next((str(m.get("content") or "") for m in messages if m.get("role") == "user"), "")
        match = _STAGE.search(task)
        stage = match.group(1) if match else "summary"
        rows[stage]["requests"] += 1
        rows[stage]["chars_sent"] += sum(
            len(str(m.get("content") or "")) + len(str(m.get("tool_calls") or "")) for m in messages
        )
        last[stage] = messages
    for stage, messages in last.items():
        by_id = {c.get("id"): _calls({"tool_calls": [c]})[0] for m in messages for c in m.get("tool_calls") or []}
        elided_calls = [
            by_id.get(m.get("tool_call_id"))
            for m in messages
            if m.get("role") == "tool" and str(m.get("content") or "").startswith(ELIDED)
        ]
        rows[stage]["elided"] = len(elided_calls)
        made = [c for m in messages for c in _calls(m)]
        rows[stage]["rereads"] = sum(max(0, made.count(c) - 1) for c in set(elided_calls) if c is not None)
    return dict(rows)


def fake_pipeline() -> tuple[dict[str, dict[str, Any]], bool]:
    model, site = FakeModel().start(), FakeSite().start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            home = Path(tmp)
            (home / "configs").mkdir()
            config = {
                "llm": {"model": "openai/gpt-4o-mini", "api_base": model.base_url, "max_context_chars": 60_000},
                "fetch": {"allow_private_hosts": True, "url_policy": "any"},
                "limits": {"fetch_url": 20},
                "evidence": {"enabled": False},
            }
            (home / "configs" / "pensieve.yaml").write_text(yaml.safe_dump(config))
            env = {**os.environ, "PENSIEVE_HOME": str(home), "OPENAI_API_KEY": "sk-bench"}
            pages = [call("fetch_url", {"url": site.url(f"/long/{n}")}) for n in range(12)]
            notes = "# Research notes\n\n## Findings\n- Each layer is a graph [S1].\n\n## Sources\n- S1\n"
            model.script(
                "researcher",
                *pages,
                call("write_project_file", {"filename": "research_notes.md", "content": notes}),
                text("Notes written."),
            )
            check = (
                "| # | claim | cited id | verdict | evidence |\n|---|---|---|---|---|\n| 1 | x | S1 | supported | - |\n"
            )
            model.script(
                "fact_checker",
                call("read_project_file", {"filename": "draft_v1.md"}),
                *pages,
                call("write_project_file", {"filename": "fact_check.md", "content": check}),
                text("Checked."),
            )
            command = [sys.executable, "-m", "pensieve"]
            new = subprocess.run(
                [*command, "new", "How vector databases index embeddings"],
                env=env,
                cwd=tmp,
                capture_output=True,
                text=True,
                check=True,
            )
            pid = new.stdout.strip()
            subprocess.run([*command, "run", pid, "--quiet"], env=env, cwd=tmp, capture_output=True, check=False)
            project = home / "workspaces" / "default" / "projects" / pid
            draft = (project / "draft_v1.md").read_text()[:200]
            last = model.for_stage("fact_checker")[-1]
            kept = any(draft in str(m.get("content") or "") for m in last.messages if m.get("role") == "tool")
            return from_project(project), kept
    finally:
        model.stop()
        site.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--relay", type=Path, action="append", default=[], help="a model-by-hand relay directory")
    parser.add_argument("--project", type=Path, action="append", default=[], help="a project directory")
    parser.add_argument("--no-fake", action="store_true", help="skip the fake pipeline")
    args = parser.parse_args()
    if not args.no_fake:
        rows, kept = fake_pipeline()
        _print_table(
            "fake pipeline (12 long pages read by the researcher and the fact checker, 60,000-char budget)", rows
        )
        print(f"fact checker still had draft_v1.md in its last request: {'yes' if kept else 'NO'}")
    for directory in args.relay:
        _print_table(f"by hand, from the relay: {directory}", from_relay(directory))
    for project in args.project:
        _print_table(f"project status.json: {project}", from_project(project))


if __name__ == "__main__":
    main()
