"""The CLI's interface: new/list/status/show, JSON shapes, configuration and bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from pensieve.stages import STAGE_NAMES
from tests.conftest import Home

REPO = Path(__file__).resolve().parent.parent


def tree(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def test_new_from_argument_file_and_stdin(home: Home, tmp_path: Path) -> None:
    assert home.new("Why B-trees still matter") == "why-b-trees-still-matter"
    assert home.new("Why B-trees still matter") == "why-b-trees-still-matter-2"
    brief_file = tmp_path / "brief.txt"
    brief_file.write_text("Café culture in Vienna\n\nMore detail here.")
    assert home.run("new", "--file", str(brief_file)).stdout.strip() == "cafe-culture-in-vienna"
    from_stdin = home.run("new", "-", "--id", "piped", "-w", "other", input="A brief from stdin\n")
    assert from_stdin.exit_code == 0 and from_stdin.stdout == "piped\n"
    project = home.project_dir("piped", "other")
    assert (project / "brief.md").read_text() == "A brief from stdin\n"
    doc = json.loads((project / "status.json").read_text())
    assert doc["status"] == "pending" and doc["id"] == "piped"
    assert set(doc["stages"]) == set(STAGE_NAMES)
    assert all(s["status"] == "pending" for s in doc["stages"].values())


def test_new_refuses_an_existing_id(home: Home) -> None:
    home.new("First", "--id", "same")
    before = tree(home.path / "workspaces")
    result = home.run("new", "Second", "--id", "same")
    assert result.exit_code == 2
    assert "already exists" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert tree(home.path / "workspaces") == before


def test_list_json_shape(home: Home) -> None:
    pid = home.new("Vector databases\nsecond line")
    home.new("Another one")
    assert home.run("run", pid, "--until", "refiner").exit_code == 0
    result = home.run("list", "--json")
    assert result.exit_code == 0
    rows = json.loads(result.stdout)
    assert [r["id"] for r in rows] == ["another-one", "vector-databases"]
    by_id = {r["id"]: r for r in rows}
    assert by_id["vector-databases"]["status"] == "paused"
    assert by_id["vector-databases"]["brief"] == "Vector databases\nsecond line"
    assert by_id["vector-databases"]["current_stage"] == "researcher"
    assert by_id["another-one"]["status"] == "pending"
    assert all({"id", "brief", "status", "updated_at"} <= set(r) for r in rows)


def test_list_table_and_empty_workspace(home: Home) -> None:
    empty = home.run("list")
    assert empty.exit_code == 0 and empty.stdout == "" and "no projects" in empty.stderr
    assert json.loads(home.run("list", "--json").stdout) == []
    home.new("Tables in terminals")
    table = home.run("list")
    assert "tables-in-terminals" in table.stdout and "pending" in table.stdout and "refiner" in table.stdout


def test_status_json_is_the_status_document(home: Home) -> None:
    pid = home.new()
    assert home.run("run", pid, "--until", "researcher").exit_code == 0
    result = home.run("status", pid, "--json")
    doc = json.loads(result.stdout)
    # status.json as it is, and the evidence summary besides (none: no draft yet).
    assert doc.pop("evidence") is None
    assert doc == json.loads((home.project_dir(pid) / "status.json").read_text())
    assert {"id", "status", "stages", "created_at", "updated_at"} <= set(doc)
    refiner = doc["stages"]["refiner"]
    assert {"status", "started_at", "finished_at", "error", "usage"} <= set(refiner)
    assert set(refiner["usage"]) >= {"calls", "prompt_tokens", "completion_tokens", "cost_usd"}


def test_status_table(home: Home) -> None:
    pid = home.new()
    assert home.run("run", pid, "--until", "refiner").exit_code == 0
    result = home.run("status", pid)
    assert result.exit_code == 0
    assert f"{pid}: paused" in result.stdout
    assert "refiner" in result.stdout and "complete" in result.stdout
    assert "total: 2 model calls, 200 prompt + 40 completion tokens" in result.stdout


def test_show_prints_artifacts_and_refuses_escapes(home: Home) -> None:
    pid = home.new()
    assert home.run("run", pid, "--until", "refiner").exit_code == 0
    assert "the refiner artifact" in home.run("show", pid, "topic_brief.md").stdout
    missing = home.run("show", pid)
    assert missing.exit_code == 2 and "no final.md yet" in missing.stderr
    escape = home.run("show", pid, "../../../configs/pensieve.yaml")
    assert escape.exit_code == 2 and escape.stdout == ""


def test_unknown_project_and_stage_are_usage_errors(home: Home) -> None:
    pid = home.new()
    for args in (
        ("run", "nope"),
        ("status", "nope"),
        ("show", "nope"),
        ("run", pid, "--stage", "editor"),
        ("run", pid, "--until", "editor"),
        ("run", "../etc"),
    ):
        result = home.run(*args)
        assert result.exit_code == 2, args
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "unknown stage 'editor'; stages are: refiner" in home.run("run", pid, "--stage", "editor").stderr
    assert home.model.requests == []


def test_no_model_configured_stops_before_any_stage(home: Home) -> None:
    home.config_path.write_text("llm: {}\n")
    pid = home.new()
    before = tree(home.project_dir(pid))
    result = home.run("run", pid)
    assert result.exit_code == 2
    assert "no model configured" in result.stderr and "PENSIEVE_MODEL" in result.stderr
    assert tree(home.project_dir(pid)) == before


def test_missing_key_names_the_variable(home: Home) -> None:
    home.monkeypatch.delenv("OPENAI_API_KEY")
    # A public server (never contacted: preflight refuses first); one's own needs no key.
    home.configure(llm={"api_base": "https://api.example.com/v1"})
    pid = home.new()
    before = tree(home.project_dir(pid))
    result = home.run("run", pid)
    assert result.exit_code == 2
    assert "OPENAI_API_KEY" in result.stderr
    assert tree(home.project_dir(pid)) == before
    assert home.model.requests == []


def test_environment_overrides_file_and_flag_overrides_environment(home: Home) -> None:
    from pensieve.config import load_settings

    home.monkeypatch.setenv("PENSIEVE_MODEL", "openai/gpt-4o")
    assert load_settings().llm.model == "openai/gpt-4o"
    pid = home.new()
    assert home.run("run", pid, "--until", "refiner").exit_code == 0
    assert home.model.for_stage("refiner")[0].body["model"] == "gpt-4o"
    assert home.run("run", pid, "--stage", "refiner", "--model", "openai/gpt-4.1-mini").exit_code == 0
    assert home.model.for_stage("refiner")[-1].body["model"] == "gpt-4.1-mini"


def test_pensieve_config_names_the_file(home: Home, tmp_path: Path) -> None:
    from pensieve.config import load_settings

    other = tmp_path / "elsewhere.yaml"
    other.write_text("article:\n  target_words: 777\n")
    home.monkeypatch.setenv("PENSIEVE_CONFIG", str(other))
    assert load_settings().article.target_words == 777
    home.monkeypatch.setenv("PENSIEVE_CONFIG", str(tmp_path / "missing.yaml"))
    result = home.run("run", "whatever")
    assert result.exit_code == 2 and "PENSIEVE_CONFIG" in result.stderr


def test_bad_config_names_the_key(home: Home) -> None:
    pid = home.new()
    cases = {
        "llm:\n  modle: x\n": "llm.modle: unknown key",
        "llm:\n  temperature: hot\n": "llm.temperature",
        "search:\n  provider: google\n": "search.provider",
        "agents:\n  editor:\n    model: x\n": "unknown stage 'editor'",
        "fetch:\n  allow_private_hosts: 'yes'\n": "fetch.allow_private_hosts",
        "llm: [unclosed\n": "bad YAML at line",
        "- just\n- a list\n": "top level must be a mapping",
    }
    for text, expected in cases.items():
        home.config_path.write_text(text)
        result = home.run("run", pid)
        assert result.exit_code == 2, text
        assert expected in result.stderr, (text, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1
    assert home.model.requests == []


def test_shipped_default_config_is_valid(home: Home) -> None:
    from pensieve.config import Settings, load_settings

    home.monkeypatch.setenv("PENSIEVE_CONFIG", str(REPO / "configs" / "pensieve.yaml"))
    settings = load_settings()
    assert settings.model_dump() == Settings().model_dump()


def _modules_after(*args: str) -> set[str]:
    code = (
        "import sys, runpy\n"
        f"sys.argv = ['pensieve', *{list(args)!r}]\n"
        "try:\n    runpy.run_module('pensieve', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "print('\\n'.join(sorted(sys.modules)), file=sys.stderr)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    return set(proc.stderr.split())


HEAVY = {"litellm", "torch", "sentence_transformers", "openai", "dbos", "sqlalchemy"}


def test_read_commands_do_not_import_litellm_or_torch(home: Home) -> None:
    pid = home.new()
    for args in (("--help",), ("list",), ("list", "--json"), ("status", pid), ("show", pid, "brief.md")):
        modules = _modules_after(*args)
        # `list --json` is answered by the entry point itself (tests/test_list_fast.py).
        assert ("pensieve.launch" if args == ("list", "--json") else "pensieve.cli.main") in modules, args
        # DBOS and SQLAlchemy belong to batch, worker and queue only (pensieve/cli/batch.py).
        heavy = {m for m in modules if m.split(".")[0] in HEAVY}
        assert not heavy, (args, sorted(heavy)[:5])


def test_python_dash_m_and_version() -> None:
    proc = subprocess.run([sys.executable, "-m", "pensieve", "--version"], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0 and proc.stdout.startswith("pensieve ")
