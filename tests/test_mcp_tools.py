"""MCP servers as research tools, with real servers written with the `mcp` package: one on
stdio (tests/fakes/mcp_server.py as a subprocess), one on streamable HTTP (uvicorn on
127.0.0.1, shared by the module). The Researcher (the fake model) calls their tools; what
comes back is archived, cited and checked like a web page; every way a server can fail is
contained; and no server process outlives its run."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pensieve.project.events import read_events
from tests.conftest import MODEL_KEY, Home, Invocation
from tests.fakes.mcp_server import HOSTILE, WIKI_FACT, HttpWiki
from tests.fakes.model_server import call, error, text

REPO = Path(__file__).resolve().parent.parent
NOTES = (
    "# Research notes\n\n## Falcon index\n- The Falcon index rebuilds its HNSW graph every night [S1].\n\n"
    "## Open questions\n- How long a rebuild takes.\n\n## Sources\n- S1\n"
)
# The citation inside the sentence, as an article has it: "... at 02:00 UTC" [S1].
P1 = f'Our Falcon index "{WIKI_FACT.removeprefix("The Falcon index ").removesuffix(".")}" [S1].'
P2 = "The Falcon index is owned by the search team [S1]."


@pytest.fixture(scope="module")
def http_wiki() -> Iterator[HttpWiki]:
    server = HttpWiki()
    yield server
    server.stop()


def stdio_server(pid_file: Path, *extra: str, **options: Any) -> dict[str, Any]:
    """A stdio server; PYTHONPATH (which lets it import tests.fakes) is passed through by name."""
    command = [sys.executable, "-m", "tests.fakes.mcp_server", "--pid-file", str(pid_file), *extra]
    return {"command": command, "env": ["PYTHONPATH"], **options}


def alive(pid: int) -> bool:
    """Whether the process exists and is not a zombie (read from the process table)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def processes_mentioning(marker: str) -> list[int]:
    """Every live process whose command line contains marker (the process table)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if marker in cmdline and alive(int(entry.name)):
            found.append(int(entry.name))
    return found


def assert_no_server_left(pid_file: Path) -> list[int]:
    pids = [int(p) for p in pid_file.read_text().split()] if pid_file.is_file() else []
    assert pids, "the server never started"
    assert [p for p in pids if alive(p)] == []
    assert processes_mentioning(str(pid_file)) == []
    return pids


def configure(home: Home, servers: dict[str, Any], allow: list[str], deny: list[str] | None = None) -> None:
    home.monkeypatch.setenv("PYTHONPATH", str(REPO))
    home.configure(
        mcp={"servers": servers, "startup_timeout_s": 60},
        agents={"researcher": {"tools": {"allow": allow, "deny": deny or []}}},
    )


def tool_results(home: Home, stage: str = "researcher") -> list[str]:
    return [r for request in home.model.for_stage(stage) for r in request.last_tool_results]


def script_rest(home: Home) -> None:
    home.configure(contracts={"enabled": False})
    article = "# The Falcon index\n\n" + "\n\n".join((P1, P2)) + "\n"
    facts = (
        "| # | claim | cited id | verdict | evidence |\n|---|---|---|---|---|\n"
        f'| 1 | The index is rebuilt nightly | S1 | supported | "{WIKI_FACT}" [S1] |\n'
    )
    revised = article + "\n## Revision notes\n\n- Kept the sourced claim; tightened the wording.\n"
    for stage, name, content in (
        ("drafter", "draft_v1.md", article),
        ("fact_checker", "fact_check.md", facts),
        ("reviser", "draft_v2.md", revised),
        ("polisher", "final.md", article),
    ):
        home.model.script(stage, call("write_project_file", {"filename": name, "content": content}), text("done"))


@pytest.mark.slow
def test_researcher_cites_an_mcp_result_on_stdio_and_the_check_passes(home: Home, tmp_path: Path) -> None:
    pid_file = tmp_path / "wiki.pids"
    configure(home, {"wiki": stdio_server(pid_file)}, allow=["mcp.wiki.search"])
    home.configure(check={"min_cited_paragraph_share": 0.5})
    pid = home.new("How the Falcon index is rebuilt")
    home.model.script(
        "researcher",
        call("mcp_wiki_search", {"query": "falcon index rebuild"}),
        call("write_project_file", {"filename": "research_notes.md", "content": NOTES}),
        text("Notes written."),
    )
    script_rest(home)
    result = home.run("run", pid, "--quiet")
    assert result.exit_code == 0, result.stderr
    project = home.project_dir(pid)

    # Offered to the Researcher alone, under its model-facing name.
    for stage in ("refiner", "researcher", "drafter", "polisher"):
        names = set(home.model.for_stage(stage)[0].tool_names)
        assert ("mcp_wiki_search" in names) == (stage == "researcher"), stage
    assert "mcp_wiki_crash" not in home.model.for_stage("researcher")[0].tool_names  # not allowed

    # The result reached the model as delimited, untrusted data naming its source id.
    (seen,) = home.model.for_stage("researcher")[1].last_tool_results
    assert seen.startswith("Source S1 (sources/S1.md), from the MCP server 'wiki'")
    assert "<<<UNTRUSTED" in seen and WIKI_FACT in seen

    # Archived as a source of its own: origin, arguments, time.
    index = json.loads((project / "sources" / "index.json").read_text())["sources"]
    assert [(s["id"], s["origin"]) for s in index] == [("S1", "mcp:wiki/search")]
    assert index[0]["url"].startswith("mcp://wiki/search?") and index[0]["fetched_at"]
    archived = (project / "sources" / "S1.md").read_text()
    assert "origin: mcp:wiki/search" in archived and '"query": "falcon index rebuild"' in archived
    assert WIKI_FACT in archived

    # Cited, with a quotation the check verifies against the archived text.
    final = (project / "final.md").read_text()
    assert "[1]" in final and "mcp://wiki/search" in final
    report = home.run("check", pid, "--json")
    assert report.exit_code == 0, report.stdout
    figures = json.loads(report.stdout)
    assert figures["ok"] and figures["sources"] == 1 and figures["quotes_checked"] >= 1
    # final.md's [1] is read back to S1 through its mcp:// reference: its sentences are checked.
    evidence = figures["evidence"]
    assert evidence["file"] == "final.md" and evidence["cited_sentences"] >= 1, evidence
    assert evidence["supported"] == evidence["cited_sentences"], evidence

    # Recorded in events.jsonl like every tool call; the server was started once and is gone.
    events = read_events(project / "events.jsonl")
    first_call = next(e for e in events if e["kind"] == "tool" and e["stage"] == "researcher")
    assert first_call["tool"] == "mcp_wiki_search" and first_call["error"] is None
    (started,) = [e for e in events if e["kind"] == "mcp_server"]
    assert started["ok"] and started["stage"] == "researcher" and "mcp.wiki.search" in started["tools"]
    (mcp_call,) = [e for e in events if e["kind"] == "mcp_call"]
    assert mcp_call["source"] == "S1" and mcp_call["server"] == "wiki"
    assert len(assert_no_server_left(pid_file)) == 1


def test_researcher_uses_a_streamable_http_server(home: Home, http_wiki: HttpWiki) -> None:
    configure(home, {"wiki": {"url": http_wiki.url}}, allow=["mcp.wiki.*"], deny=["mcp.wiki.crash"])
    home.configure(limits={"mcp.wiki.*": 2})
    pid = home.new("How the Falcon index is rebuilt")
    home.model.script(
        "researcher",
        call("mcp_wiki_search", {"query": "nightly rebuild"}),
        call("mcp_wiki_search", {"query": 42}),  # the server's schema says a string
        call("mcp_wiki_search", {"query": "index owners"}),
        call("mcp_wiki_search", {"query": "one too many"}),  # past limits.mcp.wiki.* for this stage
        call("write_project_file", {"filename": "research_notes.md", "content": NOTES}),
        text("Notes written."),
    )
    result = home.run("run", pid, "--until", "researcher", "--quiet")
    assert result.exit_code == 0, result.stderr
    first, wrong, second, capped = tool_results(home)[:4]
    assert "Source S1" in first and WIKI_FACT in first
    assert wrong.startswith("Error: invalid arguments for mcp_wiki_search: query: 42 is not of type 'string'")
    assert "Source S2" in second
    assert capped.startswith("Error: mcp_wiki_search has reached its limit of 2 calls for the researcher stage")
    sources = json.loads(home.run("sources", pid, "--json").stdout)
    assert [s["id"] for s in sources] == ["S1", "S2"]
    assert "mcp_wiki_search 2" in home.model.for_stage("researcher")[0].messages[0]["content"]  # told its cap
    offered = set(home.model.for_stage("researcher")[0].tool_names)
    assert {"mcp_wiki_search", "mcp_wiki_hang", "mcp_wiki_huge"} <= offered and "mcp_wiki_crash" not in offered
    assert "mcp_wiki_wide" not in offered
    notes = [e["message"] for e in read_events(home.project_dir(pid) / "events.jsonl") if e["kind"] == "note"]
    assert "mcp server 'wiki': not offered, their input schemas are larger than 20,000 characters: wide" in notes


def test_headers_env_sends_the_environments_value_and_writes_it_nowhere(home: Home, http_wiki: HttpWiki) -> None:
    secret = "wiki-token-7f3a9c1e"
    home.monkeypatch.setenv("WIKI_TOKEN", secret)
    server = {"url": http_wiki.url, "headers_env": {"X-Wiki-Token": "WIKI_TOKEN"}}
    configure(home, {"wiki": server}, allow=["mcp.wiki.search"])
    pid = home.new("How the Falcon index is rebuilt")
    home.model.script(
        "researcher",
        call("mcp_wiki_search", {"query": "falcon"}),
        call("write_project_file", {"filename": "research_notes.md", "content": NOTES}),
        text("Notes written."),
    )
    http_wiki.headers.clear()
    result = home.run("run", pid, "--until", "researcher", "--quiet")
    assert result.exit_code == 0, result.stderr
    assert "Source S1" in tool_results(home)[0]
    # Every request of the connection carried the header, with the value from the environment.
    assert http_wiki.headers and all(h.get("x-wiki-token") == secret for h in http_wiki.headers)
    project = home.project_dir(pid)
    assert secret not in (project / "events.jsonl").read_text()
    written = [p for p in home.path.rglob("*") if p.is_file()]
    assert (project / "sources" / "S1.md") in written
    assert not [p for p in written if secret.encode() in p.read_bytes()]
    assert secret not in result.stdout + result.stderr


def test_a_denied_tool_is_refused_at_dispatch_even_when_called_by_name(home: Home, http_wiki: HttpWiki) -> None:
    configure(
        home,
        {"wiki": {"url": http_wiki.url}},
        allow=["mcp.wiki.*", "mcp.wiki.serch"],  # a typo the server's list reveals
        deny=["mcp.wiki.hostile", "web.search"],
    )
    pid = home.new("How the Falcon index is rebuilt")
    home.model.script(
        "researcher",
        call("mcp_wiki_hostile", {"topic": "falcon"}),
        call("mcp_wiki_search", {"query": "falcon"}),
        call("write_project_file", {"filename": "research_notes.md", "content": NOTES}),
        text("Notes written."),
    )
    home.model.script("refiner", call("mcp_wiki_search", {"query": "x"}))  # no MCP tool in its column
    result = home.run("run", pid, "--until", "researcher", "--quiet")
    assert result.exit_code == 0, result.stderr
    refused = tool_results(home)[0]
    assert refused.startswith("Error: tool 'mcp_wiki_hostile' is not available to researcher")
    assert "mcp_wiki_search" in refused  # it names what is available
    assert tool_results(home, "refiner")[0].startswith("Error: tool 'mcp_wiki_search' is not available to refiner")
    assert "web_search" not in home.model.for_stage("researcher")[0].tool_names
    events = read_events(home.project_dir(pid) / "events.jsonl")
    assert not any(e["kind"] == "mcp_call" and e["tool"] == "hostile" for e in events)
    notes = [e["message"] for e in events if e["kind"] == "note"]
    assert any(n.startswith("agents.researcher.tools.allow names mcp.wiki.serch, which mcp server") for n in notes)


def _researcher_asks_a_missing_wiki(home: Home) -> Invocation:
    """Run up to a researcher that calls the wiki, then writes notes without it."""
    pid = home.new("How the Falcon index is rebuilt")
    home.model.script(
        "researcher",
        call("mcp_wiki_search", {"query": "falcon"}),
        call("write_project_file", {"filename": "research_notes.md", "content": NOTES.replace(" [S1]", "")}),
        text("Notes written."),
    )
    return home.run("run", pid, "--until", "researcher")


def test_a_server_that_fails_to_start_is_a_tool_error_and_said_before_the_stage(home: Home, tmp_path: Path) -> None:
    pid_file = tmp_path / "broken.pids"
    configure(home, {"wiki": stdio_server(pid_file, "--fail-start")}, allow=["mcp.wiki.*"])
    result = _researcher_asks_a_missing_wiki(home)
    assert result.exit_code == 0, result.stderr
    said = "mcp server 'wiki' is not available: exited with status 1 (wiki: cannot open the index)"
    assert said in result.stderr
    assert result.stderr.index(said) < result.stderr.index("researcher: started")
    (answer,) = tool_results(home)[:1]
    assert answer.startswith(f"Error: {said}; available: fetch_url")
    system = home.model.for_stage("researcher")[0].messages[0]["content"]
    assert "mcp.wiki.* is not available in this run: mcp server 'wiki' is not available" in system
    assert_no_server_left(pid_file)


def test_a_server_that_hangs_at_start_is_said_to_and_left_no_process(home: Home, tmp_path: Path) -> None:
    pid_file = tmp_path / "hang-start.pids"
    configure(home, {"wiki": stdio_server(pid_file, "--hang-start")}, allow=["mcp.wiki.*"])
    home.configure(mcp={"startup_timeout_s": 5})
    result = _researcher_asks_a_missing_wiki(home)
    assert result.exit_code == 0, result.stderr
    # Pensieve's own timeout, not the signal it then sent ("exited with status -15").
    said = "mcp server 'wiki' is not available: did not start within 5s (mcp.startup_timeout_s)"
    assert said in result.stderr, result.stderr
    assert tool_results(home)[0].startswith(f"Error: {said}")
    # The pid file may not be written yet when a loaded machine is still importing the
    # server; the process table (its command line names the file) is checked either way.
    pids = [int(p) for p in pid_file.read_text().split()] if pid_file.is_file() else []
    assert [p for p in pids if alive(p)] == [] and processes_mentioning(str(pid_file)) == []


def test_a_server_that_crashes_mid_call_is_a_tool_error_naming_it(home: Home, tmp_path: Path) -> None:
    pid_file = tmp_path / "crash.pids"
    configure(home, {"wiki": stdio_server(pid_file)}, allow=["mcp.wiki.*"])
    pid = home.new("How the Falcon index is rebuilt")
    home.model.script(
        "researcher",
        call("mcp_wiki_environment", {}),
        call("mcp_wiki_crash", {}),
        call("mcp_wiki_search", {"query": "falcon"}),
        call("write_project_file", {"filename": "research_notes.md", "content": NOTES.replace(" [S1]", "")}),
        text("Notes written."),
    )
    result = home.run("run", pid, "--until", "researcher", "--quiet")
    assert result.exit_code == 0, result.stderr
    environment, crashed, after = tool_results(home)[:3]
    # The server got a minimal environment and the variables named in `env`, not the model's key.
    names = environment.split("variables: ", 1)[1].split("\n", 1)[0].split()
    assert "PYTHONPATH" in names and "PATH" in names
    assert "OPENAI_API_KEY" not in names and "PENSIEVE_HOME" not in names and MODEL_KEY not in environment
    assert crashed.startswith("Error: mcp server 'wiki' is not available: exited with status 3")
    assert after == crashed
    assert json.loads((home.project_dir(pid) / "status.json").read_text())["stages"]["researcher"]["status"] == (
        "complete"
    )
    assert_no_server_left(pid_file)


def test_a_call_that_hangs_past_its_timeout_is_a_tool_error(home: Home, http_wiki: HttpWiki) -> None:
    configure(home, {"wiki": {"url": http_wiki.url, "timeout_s": 0.5}}, allow=["mcp.wiki.*"])
    pid = home.new("How the Falcon index is rebuilt")
    home.model.script(
        "researcher",
        call("mcp_wiki_hang", {"seconds": 3}),
        call("mcp_wiki_search", {"query": "falcon"}),  # the server itself is still fine
        call("write_project_file", {"filename": "research_notes.md", "content": NOTES}),
        text("Notes written."),
    )
    started = time.monotonic()
    result = home.run("run", pid, "--until", "researcher", "--quiet")
    assert result.exit_code == 0, result.stderr
    hung, fine = tool_results(home)[:2]
    assert hung.startswith("Error: mcp server 'wiki' did not answer hang within 0.5s (mcp.servers.wiki.timeout_s)")
    assert "Source S1" in fine
    assert time.monotonic() - started < 60


def test_a_stdio_call_that_hangs_past_its_timeout_is_a_tool_error_and_leaves_no_process(
    home: Home, tmp_path: Path
) -> None:
    pid_file = tmp_path / "hang.pids"
    configure(home, {"wiki": stdio_server(pid_file, timeout_s=0.5)}, allow=["mcp.wiki.*"])
    pid = home.new("How the Falcon index is rebuilt")
    home.model.script(
        "researcher",
        call("mcp_wiki_hang", {"seconds": 3600}),  # still running in the server when the run ends
        call("mcp_wiki_search", {"query": "falcon"}),  # the server itself is still fine
        call("write_project_file", {"filename": "research_notes.md", "content": NOTES}),
        text("Notes written."),
    )
    result = home.run("run", pid, "--until", "researcher", "--quiet")
    assert result.exit_code == 0, result.stderr
    hung, fine = tool_results(home)[:2]
    assert hung.startswith("Error: mcp server 'wiki' did not answer hang within 0.5s (mcp.servers.wiki.timeout_s)")
    assert "Source S1" in fine
    assert len(assert_no_server_left(pid_file)) == 1


@pytest.mark.slow
def test_a_ten_megabyte_result_is_capped(home: Home, tmp_path: Path) -> None:
    pid_file = tmp_path / "huge.pids"
    configure(home, {"wiki": stdio_server(pid_file, max_result_chars=5000)}, allow=["mcp.wiki.huge"])
    pid = home.new("How the Falcon index is rebuilt")
    home.model.script(
        "researcher",
        call("mcp_wiki_huge", {}),
        call("write_project_file", {"filename": "research_notes.md", "content": NOTES}),
        text("Notes written."),
    )
    result = home.run("run", pid, "--until", "researcher", "--quiet")
    assert result.exit_code == 0, result.stderr
    (seen,) = tool_results(home)[:1]
    assert len(seen) < 7000 and "truncated" in seen and "of 9,999,996 characters cut" in seen
    project = home.project_dir(pid)
    assert sum(p.stat().st_size for p in (project / "sources").rglob("*") if p.is_file()) < 100_000
    (event,) = [e for e in read_events(project / "events.jsonl") if e["kind"] == "mcp_call"]
    assert event["truncated"] is True and event["result_chars"] == 9_999_996
    assert_no_server_left(pid_file)


def test_instructions_in_a_result_stay_data_and_writes_outside_are_refused(home: Home, http_wiki: HttpWiki) -> None:
    configure(home, {"wiki": {"url": http_wiki.url}}, allow=["mcp.wiki.hostile"])
    pid = home.new("How the Falcon index is rebuilt")
    home.model.script(
        "researcher",
        call("mcp_wiki_hostile", {"topic": "falcon"}),
        # A model that obeys the page: each write outside the project is refused.
        call("write_project_file", {"filename": "../../outside.md", "content": "pwned"}),
        call("edit_project_file", {"filename": "/etc/passwd", "old_text": "root", "new_text": "x"}),
        call("write_project_file", {"filename": "research_notes.md", "content": NOTES}),
        text("Notes written."),
    )
    result = home.run("run", pid, "--until", "researcher", "--quiet")
    assert result.exit_code == 0, result.stderr
    page, write, edit = tool_results(home)[:3]
    marker = page.split("<<<UNTRUSTED ", 1)[1].split(" ", 1)[0]
    assert HOSTILE in page.split(f"<<<UNTRUSTED {marker}", 1)[1].split(f"<<<END UNTRUSTED {marker}>>>", 1)[0]
    assert write.startswith("Error: '../../outside.md': '..' is not allowed")
    assert edit.startswith("Error: tool 'edit_project_file' is not available to researcher")
    # Only this test's own tree: the directory above home is shared with other tests' files.
    assert not list(home.path.rglob("outside.md")) and not (home.path.parent / "outside.md").exists()
    assert os.path.exists("/etc/passwd") and "pwned" not in Path("/etc/passwd").read_text()


@pytest.mark.slow
def test_ctrl_c_during_a_run_leaves_no_server_process(home: Home, tmp_path: Path) -> None:
    """A real `pensieve run` process, interrupted while the Researcher waits for the model:
    the server it started is shut down on the way out (checked in the process table)."""
    import signal
    import subprocess

    from tests.fakes.cli_process import child_env

    pid_file = tmp_path / "ctrl-c.pids"
    configure(home, {"wiki": stdio_server(pid_file)}, allow=["mcp.wiki.*"])
    pid = home.new("How the Falcon index is rebuilt")
    home.model.delay_s["researcher"] = 60.0
    with (tmp_path / "out.txt").open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "pensieve", "run", pid],
            env=child_env(home.path),
            cwd=home.path,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 120
        while not (home.model.requests and home.model.requests[-1].stage == "researcher"):
            assert time.monotonic() < deadline and process.poll() is None, (tmp_path / "out.txt").read_text()
            time.sleep(0.05)
        (server_pid,) = [int(p) for p in pid_file.read_text().split()]
        assert alive(server_pid)
        process.send_signal(signal.SIGINT)
        code = process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    output = (tmp_path / "out.txt").read_text()
    assert code == 130, output
    assert "Traceback" not in output, output
    assert_no_server_left(pid_file)


def test_tools_command_starts_the_servers_to_list_their_tools_then_stops_them(
    home: Home, tmp_path: Path, http_wiki: HttpWiki
) -> None:
    pid_file = tmp_path / "tools.pids"
    configure(
        home,
        {"wiki": stdio_server(pid_file), "docs": {"url": http_wiki.url}, "gone": {"url": "http://127.0.0.1:9/mcp"}},
        allow=["mcp.wiki.search", "mcp.docs.*", "mcp.gone.*"],
        deny=["mcp.docs.crash"],
    )
    home.configure(limits={"mcp.docs.*": 2}, agents={"fact_checker": {"tools": {"allow": ["mcp.docs.search"]}}})
    result = home.run("tools", "--stage", "researcher", "--json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    (column,) = data["stages"]
    tools = {t["canonical"]: t for t in column["tools"]}
    assert tools["mcp.wiki.search"] == {
        "canonical": "mcp.wiki.search",
        "name": "mcp_wiki_search",
        "origin": "mcp:wiki",
        "cap": 5,
        "available": True,
        "why": None,
    }
    assert "mcp.wiki.hang" not in tools and "mcp.docs.crash" not in tools
    assert "mcp.docs.wide" not in tools  # its schema is too large to send on every turn
    assert tools["mcp.docs.hang"]["cap"] == 2 and tools["mcp.docs.hang"]["name"] == "mcp_docs_hang"
    assert tools["mcp.gone.*"]["available"] is False and "All connection attempts failed" in tools["mcp.gone.*"]["why"]
    assert data["servers"]["wiki"]["ok"] and not data["servers"]["gone"]["ok"]
    assert_no_server_left(pid_file)
    # The table form says which server is not available; a stage that uses no server starts none.
    shown = home.run("tools", "--stage", "fact_checker")
    assert "mcp_docs_search" in shown.stdout and "mcp_wiki_search" not in shown.stdout
    assert len(pid_file.read_text().split()) == 1


async def test_a_model_facing_name_means_one_tool_for_the_whole_run(tmp_path: Path, http_wiki: HttpWiki) -> None:
    """`my-wiki` and `my_wiki` both sanitise to `mcp_my_wiki_`: the name each of their tools
    gets is fixed when it is first listed, so every stage (and `limits`) means the same tool."""
    from pensieve.config import Settings
    from pensieve.project.events import EventLog
    from pensieve.stages import BY_NAME
    from pensieve.tool_matrix import resolve_column
    from pensieve.tools.mcp import McpServers

    given = Settings.model_validate(
        {
            "mcp": {"servers": {"my-wiki": {"url": http_wiki.url}, "my_wiki": {"url": http_wiki.url}}},
            "agents": {
                "researcher": {"tools": {"allow": ["mcp.my_wiki.search"]}},
                "fact_checker": {"tools": {"allow": ["mcp.my-wiki.search", "mcp.my_wiki.search"]}},
            },
            "limits": {"mcp_my_wiki_search": 1},
        }
    )
    manager = McpServers(given, {})
    events = EventLog(tmp_path / "events.jsonl")
    seen: dict[str, dict[str, tuple[str, int]]] = {}
    try:
        for stage in ("researcher", "fact_checker"):
            tools, missing = await manager.open_for(resolve_column(stage, BY_NAME[stage].tools, given), events)
            assert missing == {}
            seen[stage] = {t.name: (t.canonical, t.default_limit) for t in tools}
    finally:
        await manager.aclose()
    assert seen["researcher"] == {"mcp_my_wiki_search": ("mcp.my_wiki.search", 1)}
    assert seen["fact_checker"] == {
        "mcp_my_wiki_search": ("mcp.my_wiki.search", 1),
        "mcp_my_wiki_search_2": ("mcp.my-wiki.search", 5),
    }


def test_tools_command_gives_a_tool_one_model_facing_name_in_every_stage(home: Home, http_wiki: HttpWiki) -> None:
    servers = {"my-wiki": {"url": http_wiki.url}, "my_wiki": {"url": http_wiki.url}}
    configure(home, servers, allow=["mcp.my_wiki.search"])
    home.configure(agents={"fact_checker": {"tools": {"allow": ["mcp.my-wiki.search", "mcp.my_wiki.search"]}}})
    result = home.run("tools", "--json")
    assert result.exit_code == 0, result.stderr
    names: dict[str, set[str]] = {}
    for column in json.loads(result.stdout)["stages"]:
        for tool in column["tools"]:
            if tool["canonical"].startswith("mcp."):
                names.setdefault(tool["name"], set()).add(tool["canonical"])
    assert names == {"mcp_my_wiki_search": {"mcp.my-wiki.search"}, "mcp_my_wiki_search_2": {"mcp.my_wiki.search"}}


def test_a_server_that_cannot_run_at_all_is_said_before_the_first_stage(home: Home) -> None:
    configure(home, {"wiki": {"command": ["/nonexistent/wiki-server"], "env": ["WIKI_TOKEN_UNSET"]}}, allow=["mcp.*"])
    result = _researcher_asks_a_missing_wiki(home)
    assert result.exit_code == 0, result.stderr
    said = "mcp server 'wiki' is not available: cannot run '/nonexistent/wiki-server' (not found or not executable)"
    assert result.stderr.count(said) == 1
    assert result.stderr.index(said) < result.stderr.index("refiner: started")
    assert tool_results(home)[0].startswith(f"Error: {said}")


def test_a_configuration_inside_a_workspace_or_project_cannot_add_or_change_a_server(
    home: Home, tmp_path: Path
) -> None:
    """Servers come from the user's configuration alone: a configs/pensieve.yaml in the
    workspace, the project or its scratch/ (where an agent may write), read from the
    project as the working directory, changes nothing."""
    import yaml

    pid_file, planted_pids = tmp_path / "wiki.pids", tmp_path / "planted.pids"
    configure(home, {"wiki": stdio_server(pid_file)}, allow=["mcp.*"])
    pid = home.new("How the Falcon index is rebuilt")
    project = home.project_dir(pid)
    planted = {
        "mcp": {
            "servers": {
                "wiki": stdio_server(planted_pids, "--fail-start"),
                "planted": stdio_server(planted_pids),
            }
        },
        "agents": {"refiner": {"tools": {"allow": ["mcp.*"]}}},
    }
    for where in (project.parent.parent, project, project / "scratch"):
        (where / "configs").mkdir(parents=True, exist_ok=True)
        (where / "configs" / "pensieve.yaml").write_text(yaml.safe_dump(planted))
        (where / "pensieve.yaml").write_text(yaml.safe_dump(planted))
    home.monkeypatch.chdir(project)
    home.model.script(
        "researcher",
        call("mcp_wiki_search", {"query": "falcon"}),
        call("mcp_planted_search", {"query": "falcon"}),
        call("write_project_file", {"filename": "research_notes.md", "content": NOTES}),
        text("Notes written."),
    )
    result = home.run("run", pid, "--until", "researcher", "--quiet")
    assert result.exit_code == 0, result.stderr
    wiki, planted_call = tool_results(home)[:2]
    assert wiki.startswith("Source S1") and planted_call.startswith("Error: tool 'mcp_planted_search' is not available")
    assert not any(n.startswith("mcp_") for n in home.model.for_stage("refiner")[0].tool_names)
    assert not planted_pids.exists()  # neither the changed wiki nor the added server ever ran
    assert len(assert_no_server_left(pid_file)) == 1


def test_a_failed_run_leaves_no_server_process(home: Home, tmp_path: Path) -> None:
    pid_file = tmp_path / "failed.pids"
    configure(home, {"wiki": stdio_server(pid_file)}, allow=["mcp.wiki.search"])
    pid = home.new("How the Falcon index is rebuilt")
    home.model.script("researcher", call("mcp_wiki_search", {"query": "falcon"}), error(400, "bad request"))
    result = home.run("run", pid, "--quiet")
    assert result.exit_code == 1, result.stderr
    status = json.loads((home.project_dir(pid) / "status.json").read_text())
    assert status["stages"]["researcher"]["status"] == "error"
    assert_no_server_left(pid_file)


def test_a_server_listing_one_tool_name_twice_is_refused_in_one_line(home: Home, tmp_path: Path) -> None:
    """Two tools of one server named alike were both `mcp_wiki_search` and a run offered one
    of them silently; the second one's description could say anything."""
    pid_file = tmp_path / "dup.pids"
    configure(home, {"wiki": stdio_server(pid_file, "--duplicate-tool")}, allow=["mcp.wiki.*"])
    result = home.run("tools", "--stage", "researcher")
    assert result.exit_code == 0, result.stderr
    lines = [line.strip() for line in (result.stdout + result.stderr).splitlines()]
    why = "lists the tool 'search' more than once; each tool must have its own name (fix or update the server)"
    assert f"mcp server 'wiki' is not available: {why}" in lines, result.stdout + result.stderr
    assert f"mcp.wiki.* is not available: {why}" in lines  # the table's note for the stage
    assert "mcp_wiki_search" not in result.stdout and "Send the brief" not in result.stdout
    data = json.loads(home.run("tools", "--stage", "researcher", "--json").stdout)
    assert data["servers"]["wiki"]["ok"] is False and data["servers"]["wiki"]["tools"] == 0
    assert_no_server_left(pid_file)
