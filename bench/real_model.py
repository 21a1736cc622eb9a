"""What a real small model does to the pipeline: every stage complete with a real artifact,
or failed saying why. Opt-in: it needs the local model of ../shared/tools/local-model.sh
(built once with `local-model.sh build`) and minutes of CPU; never part of CI or pytest.

It starts llama.cpp's server on a free loopback port, puts a recording pass-through in
front of it (every request and reply, so prompts and raw replies can be shown), writes a
scratch PENSIEVE_HOME whose configuration points at it (a small article so a tiny model
has a chance, a cap on output tokens and a wall-clock cap per run), and runs the
installed CLI, `pensieve new` and `pensieve run`, on up to three briefs, one after the
other. No web search is configured: the runs see what a user without a search key sees.

Per stage it prints, from status.json and events.jsonl: complete / failed (the contracts
broken, or the error), repair turns (r reminder, c contract, x cut off), tool calls the
model wrote as text, model calls, replies cut off by the output limit, and wall time.
Then the figure that matters: stages that reached `complete` while their artifact breaks
its contract, recomputed here with pensieve.contracts.check_artifact over every committed
artifact, as committed (generated reference lists included). It must be 0: the exit code
is 1 otherwise. As a second opinion it lists complete stages that look like junk by signs
the contracts do not judge (a tool call in call syntax, under 30 words, inputs never read).

With --seed STAGE the artifacts up to STAGE are written by hand (the fake model's, which
meet the default contracts) and `pensieve repair` marks them complete, so a model that
fails the first stage still meets the later ones. With --sources (and --seed) the
project's source archive gets three or four short hand-written pages on the
brief (bench/seed_sources.py; a real researcher, after --seed refiner, may fetch them or
others: fetch.url_policy decides), the seeded research notes cite them as [S1]..: the real
drafter then has sources to cite, evidence.json is computed, and the reviser is given the
unsupported sentences. Per artifact it prints the evidence verdicts (supported / weak /
unsupported), the citation forms the model wrote, ids not in the archive, and numbers of
the text found in none of the sources.

Run: python bench/real_model.py [--model qwen|smollm2] [--briefs N] [--until STAGE]
     [--seed STAGE] [--sources] [--deadline SECONDS] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

# ../shared from the main checkout; ../../shared from a worktree under /work/wt/.
SCRIPT = next(
    (
        p / "shared" / "tools" / "local-model.sh"
        for p in ROOT.parents
        if (p / "shared" / "tools" / "local-model.sh").is_file()
    ),
    ROOT.parent / "shared" / "tools" / "local-model.sh",
)
BRIEFS = (
    "How vector databases index embeddings",
    "Why sourdough bread rises without commercial yeast",
    "How a web browser decides to trust an HTTPS certificate",
)
STAGES = (
    "refiner",
    "researcher",
    "outliner",
    "drafter",
    "content_reviewer",
    "fact_checker",
    "style_reviewer",
    "reviser",
    "polisher",
    "consistency_checker",
)
REPAIR_MARKS = {"reminder": "r", "contract": "c", "cut_off": "x"}
T = TypeVar("T")
_TASK = re.compile(r"^Project: ([A-Za-z0-9._-]+)\. Your stage: ([a-z_]+)", re.M)


# ---------------------------------------------------------------- the model server


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def model_server(model: str, log: Path, wait_s: float = 180.0) -> Iterator[str]:
    """llama-server on a free loopback port (its base URL); stopped on exit, Ctrl-C included."""
    if not SCRIPT.is_file():
        sys.exit(f"{SCRIPT} is missing: this benchmark needs the shared local-model script")
    port = free_port()
    with log.open("wb") as out:
        server = subprocess.Popen(
            ["bash", str(SCRIPT), "serve", model, str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # its own process group: stopped as one, and no Ctrl-C of its own
        )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + wait_s
        while True:
            if server.poll() is not None:
                tail = log.read_text(errors="replace")[-1500:]
                sys.exit(f"the model server exited ({server.returncode}); did `{SCRIPT} build` run?\n{tail}")
            try:
                with urllib.request.urlopen(f"{base}/health", timeout=2) as reply:
                    if reply.status == 200:
                        break
            except (OSError, urllib.error.URLError):
                pass
            if time.monotonic() > deadline:
                sys.exit(f"the model server did not answer /health within {wait_s:g}s; see {log}")
            time.sleep(0.5)
        yield base
    finally:
        stop_group(server)


def stop_group(process: subprocess.Popen[bytes], grace_s: float = 15.0) -> None:
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(grace_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    except ProcessLookupError:
        pass


# ---------------------------------------------------------------- the recording pass-through


@dataclass
class Call:
    project: str | None
    stage: str | None
    status: int
    duration_s: float
    finish_reason: str | None
    text: str
    tool_calls: list[str]
    tokens_per_s: float | None = None  # generation speed the server reports (a loaded machine is slow)


@dataclass
class Recorder:
    """What went over the wire: each call, and the prompts each (project, stage) was given."""

    log: Path
    calls: list[Call] = field(default_factory=list)
    prompts: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, request: bytes, status: int, reply: bytes, duration_s: float) -> None:
        try:
            body = json.loads(request)
            messages = body.get("messages") or []
        except (ValueError, AttributeError):
            messages = []
        system = next((str(m.get("content") or "") for m in messages if m.get("role") == "system"), "")
        task = next((str(m.get("content") or "") for m in messages if m.get("role") == "user"), "")
        match = _TASK.search(task)
        project, stage = (match.group(1), match.group(2)) if match else (None, None)
        finish, text, tools, speed = None, "", [], None
        try:
            decoded = json.loads(reply)
            speed = (decoded.get("timings") or {}).get("predicted_per_second")
            choice = decoded["choices"][0]
            finish = choice.get("finish_reason")
            text = str(choice["message"].get("content") or "")
            tools = [c["function"]["name"] for c in choice["message"].get("tool_calls") or []]
        except (ValueError, KeyError, IndexError, TypeError):
            text = reply.decode("utf-8", errors="replace")[:2000]
        call = Call(project, stage, status, duration_s, finish, text, tools, speed)
        with self.lock:
            self.calls.append(call)
            if project and stage:
                self.prompts[(project, stage)] = (system, task)
            with self.log.open("a", encoding="utf-8") as out:
                line = {**call.__dict__, "request": request.decode("utf-8", errors="replace")}
                out.write(json.dumps(line, ensure_ascii=False) + "\n")


@contextmanager
def recording_proxy(upstream: str, recorder: Recorder, timeout_s: float) -> Iterator[str]:
    """A loopback pass-through to the model server that records every exchange."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _forward(self, method: str) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            request = self.rfile.read(length) if length else b""
            started = time.monotonic()
            outbound = urllib.request.Request(
                upstream + self.path,
                data=request if method == "POST" else None,
                method=method,
                headers={"Content-Type": self.headers.get("Content-Type") or "application/json"},
            )
            try:
                with urllib.request.urlopen(outbound, timeout=timeout_s) as reply:
                    status, data = reply.status, reply.read()
            except urllib.error.HTTPError as exc:
                status, data = exc.code, exc.read()
            except OSError as exc:
                status, data = 502, json.dumps({"error": {"message": f"bench proxy: {exc}"}}).encode()
            if method == "POST":
                recorder.record(request, status, data, time.monotonic() - started)
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except OSError:
                pass  # the client gave up (its timeout): nothing to answer

        def do_POST(self) -> None:
            self._forward("POST")

        def do_GET(self) -> None:
            self._forward("GET")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


# ---------------------------------------------------------------- running the CLI


def write_config(home: Path, alias: str, api_base: str, args: argparse.Namespace) -> dict[str, Any]:
    from pensieve.config import LLMSettings

    llm: dict[str, Any] = {
        "model": f"openai/{alias}",
        "api_base": f"{api_base}/v1",
        "max_output_tokens": args.max_output_tokens,
        "timeout_s": args.timeout,
        "retries": 1,  # a timed-out call at 20 tokens/s is not worth paying for twice
        "max_context_chars": 24_000,  # ~7k tokens: the server's 16k-token cache is shared by concurrent stages
    }
    if "context_window" in LLMSettings.model_fields:
        llm["context_window"] = 16384
    config = {
        "llm": llm,
        "article": {"target_words": args.target_words},
        "run": {"deadline_s": float(args.deadline)},
    }
    import yaml

    (home / "configs").mkdir(parents=True, exist_ok=True)
    (home / "configs" / "pensieve.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return config


def cli() -> list[str]:
    installed = Path(sys.executable).with_name("pensieve")
    return [str(installed)] if installed.is_file() else [sys.executable, "-m", "pensieve"]


@dataclass
class Run:
    brief: str
    project: str
    returncode: int | None
    wall_s: float
    stderr: str
    hung: bool = False


def run_brief(brief: str, env: dict[str, str], args: argparse.Namespace, logs: Path, index: int) -> Run:
    created = subprocess.run([*cli(), "new", brief], env=env, capture_output=True, text=True, check=False)
    if created.returncode != 0:
        return Run(brief, "", created.returncode, 0.0, created.stderr)
    project = created.stdout.strip().splitlines()[-1]
    if args.seed:
        seed(project_dir(Path(env["PENSIEVE_HOME"]), project), brief, args)
        subprocess.run([*cli(), "repair", project], env=env, capture_output=True, check=True)
    command = [*cli(), "run", project, "--quiet"] + (["--until", args.until] if args.until else [])
    err_path = logs / f"run-{index}.stderr"
    started = time.monotonic()
    hung = False
    with err_path.open("w") as err:
        process = subprocess.Popen(command, env=env, stdout=err, stderr=err, stdin=subprocess.DEVNULL)
        try:
            # run.deadline_s bounds the run; past it plus a grace, the CLI has hung.
            process.wait(args.deadline + 180)
        except subprocess.TimeoutExpired:
            hung = True
            process.send_signal(signal.SIGINT)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        except KeyboardInterrupt:
            process.send_signal(signal.SIGINT)
            process.wait(30)
            raise
    wall = time.monotonic() - started
    return Run(brief, project, process.returncode, wall, err_path.read_text(errors="replace"), hung)


def seed(folder: Path, brief: str, args: argparse.Namespace) -> None:
    """Hand-written artifacts for the stages up to --seed (the fake model's, which meet the
    default contracts), so that a model that fails early still meets the later stages."""
    from tests.fakes.artifacts import artifact

    for name in STAGES[: STAGES.index(args.seed) + 1]:
        text = artifact(name, brief).replace("About 1500 words", f"About {args.target_words} words")
        if name == "refiner" and args.sources:
            from bench.seed_sources import seed_sources

            seed_sources(folder, brief)  # a real researcher finds them in sources/index.md
        if name == "researcher" and args.sources:
            from bench.seed_sources import research_notes

            text = research_notes(brief)
        if name == "drafter" and args.sources:
            from bench.seed_sources import draft

            text = draft(brief)  # cited, with planted errors for the evidence check
        if name == "reviser" and args.sources:
            from bench.seed_sources import draft

            # The same errors left in: the polisher is given them, and sent back once if it keeps them.
            notes = text[text.index("## Revision notes") :]
            text = draft(brief).rstrip() + "\n\n" + notes
        (folder / _artifact(name)).write_text(text)


# ---------------------------------------------------------------- reading the results


@dataclass
class StageRow:
    brief: int
    stage: str
    result: str
    repairs: str
    text_calls: int
    model_calls: int
    cut_off: int
    wall_s: float | None
    detail: str
    error: str = ""
    rejected: str = ""
    tools: dict[str, int] = field(default_factory=dict)  # calls the dispatcher ran (status.json)
    breaks: list[str] = field(default_factory=list)  # recomputed for a complete stage
    suspect: list[str] = field(default_factory=list)  # junk signs the contract does not judge
    notes: list[str] = field(default_factory=list)


def _seconds(start: str | None, end: str | None) -> float | None:
    if not start or not end:
        return None
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


def _why(error: str, violations: list[str]) -> str:
    if violations:
        return "contract " + ",".join(dict.fromkeys(v.split(":", 1)[0] for v in violations))
    lowered = error.lower()
    for needle, label in (
        ("run.deadline_s", "run deadline"),
        ("cut off by the output limit", "cut off"),
        ("max_rounds", "out of rounds"),
        ("timed out", "model timeout"),
        ("timeout", "model timeout"),
        ("internal error", "INTERNAL ERROR"),
        ("does not meet its contract", "contract"),
        ("never written", "no artifact"),
        ("without writing", "no artifact"),
    ):
        if needle in lowered:
            return label
    return error[:40]


def project_dir(home: Path, project: str) -> Path:
    return home / "workspaces" / "default" / "projects" / project


def read_stages(home: Path, index: int, run: Run, recorder: Recorder, args: argparse.Namespace) -> list[StageRow]:
    from pensieve.project.events import read_events

    folder = project_dir(home, run.project)
    status = json.loads((folder / "status.json").read_text())
    events = read_events(folder / "events.jsonl")
    rows = []
    last = STAGES.index(args.until) if args.until else len(STAGES) - 1
    seeded = STAGES[: STAGES.index(args.seed) + 1] if args.seed else ()
    for name in STAGES[: last + 1]:
        entry = status["stages"][name]
        mine = [e for e in events if e.get("stage") == name]
        repairs = [str(e.get("reason")) for e in mine if e.get("kind") == "repair"]
        text_calls = sum(len(e.get("tools") or []) for e in mine if e.get("kind") == "text_tool_calls")
        calls = [c for c in recorder.calls if c.project == run.project and c.stage == name]
        result = {"complete": "complete", "error": "FAILED", "pending": "not run"}.get(entry["status"], entry["status"])
        if name in seeded:
            result = "seeded"
        error = str(entry.get("error") or "")
        violations = [str(v) for v in entry.get("violations") or []]
        row = StageRow(
            brief=index,
            stage=name,
            result=result,
            repairs="".join(REPAIR_MARKS.get(r, "?") for r in repairs) or "-",
            text_calls=text_calls,
            model_calls=int(entry["usage"]["calls"]),
            cut_off=sum(1 for c in calls if c.finish_reason == "length"),
            wall_s=_seconds(entry.get("started_at"), entry.get("finished_at")),
            detail=_why(error, violations) if entry["status"] == "error" else "",
            error=error,
            tools={str(k): int(v) for k, v in (entry.get("tool_calls") or {}).items()},
        )
        if entry["status"] == "error":
            kept = folder / "rejected" / f"{_artifact(name)}"
            if kept.is_file():
                row.rejected = kept.read_text(errors="replace")
        # status.json keeps the last attempt, events.jsonl all of them: within one run they agree.
        if int(entry.get("attempts") or 0) == 1 and list(entry.get("repairs") or []) != repairs:
            row.notes.append(f"status.json repairs {entry.get('repairs')} but events.jsonl {repairs}")
        if int(entry.get("attempts") or 0) == 1 and int(entry.get("text_tool_calls") or 0) != text_calls:
            row.notes.append(f"status.json text_tool_calls {entry.get('text_tool_calls')} but events {text_calls}")
        if entry["status"] == "complete" and violations:
            row.notes.append(f"complete, yet status.json lists violations: {violations}")
        rows.append(row)
    return rows


def _artifact(stage: str) -> str:
    from pensieve.stages import BY_NAME

    return str(BY_NAME[stage].writes)


def _with_retries(what: str, action: Callable[[], T], attempts: int = 6) -> T:
    """The package may be mid-edit while this runs: a half-written module is retried."""
    for attempt in range(attempts - 1):
        try:
            return action()
        except (ImportError, SyntaxError) as exc:
            print(f"({what}: {type(exc).__name__}: {exc}; retry {attempt + 1} in 30 s)", file=sys.stderr)
            time.sleep(30)
    return action()


def recheck(home: Path, runs: list[Run], rows: list[StageRow], recorder: Recorder) -> None:
    """check_artifact over every complete stage's committed artifact, as committed."""
    from pensieve.citations.cited_sources import load_sources
    from pensieve.config import load_settings
    from pensieve.contracts import check_artifact
    from pensieve.stages import BY_NAME
    from pensieve.tools import offered_tools

    env = {"PENSIEVE_HOME": str(home), "PENSIEVE_CONFIG": str(home / "configs" / "pensieve.yaml")}
    settings = load_settings(home=home, environ=env)
    finished = _finished_articles(home)
    for row in rows:
        if row.result != "complete":
            continue
        run = runs[row.brief - 1]
        folder = project_dir(home, run.project)
        stage = BY_NAME[row.stage]
        text = (folder / stage.writes).read_text(errors="replace")
        # As the agent loop judges: sources are required with web search; earlier articles
        # are known to a stage that can list the projects.
        tools, _missing = offered_tools(stage.tools, settings, env)
        web = any(t.name == "web_search" for t in tools)
        system, task = recorder.prompts.get((run.project, row.stage), (None, None))
        if system is None:
            row.notes.append("no recorded prompt: the echo check ran without it")
        started = json.loads((folder / "status.json").read_text())["stages"][row.stage]["started_at"] or ""
        earlier = {pid: title for pid, (title, done) in finished.items() if pid != run.project and done < started}
        listed = "list_projects" in stage.tools
        violations = check_artifact(
            stage,
            text,
            settings=settings,
            brief_text=(folder / "brief.md").read_text(errors="replace"),
            prompt=system,
            task_message=task,
            web_sources=len(load_sources(folder)) if web else None,
            earlier_articles=earlier if listed else None,
        )
        row.breaks = [str(v) for v in violations]
        row.suspect = suspicions(text, row)


_CALL_SYNTAX = re.compile(
    r"\b(write_project_file|read_project_file|web_search|fetch_url|search_topics|text_stats|list_projects)\s*\("
)


def suspicions(text: str, row: StageRow) -> list[str]:
    """Signs of junk beside the contract, from outside it: a second opinion, not the figure."""
    found = []
    call = _CALL_SYNTAX.search(text)
    if call:
        found.append(f"holds a tool call in call syntax: {one_line(text[call.start() :], 60)!r}")
    words = len(re.findall(r"\w+", text))
    if words < 30:
        found.append(f"{words} words: {one_line(text, 60)!r}")
    if not row.tools.get("read_project_file"):
        found.append("never called read_project_file: its inputs were not read")
    return found


def _finished_articles(home: Path) -> dict[str, tuple[str, str]]:
    """id -> (title, when it completed) of every complete project of the scratch home."""
    found = {}
    for status_path in (home / "workspaces" / "default" / "projects").glob("*/status.json"):
        status = json.loads(status_path.read_text())
        if status.get("status") != "complete":
            continue
        final = status_path.with_name("final.md")
        heading = re.search(r"^#\s+(.+)$", final.read_text(errors="replace"), re.M) if final.is_file() else None
        title = heading.group(1).strip() if heading else ""
        done = max((s.get("finished_at") or "" for s in status["stages"].values()), default="")
        found[status["id"]] = (title, done)
    return found


# ---------------------------------------------------------------- the report


def one_line(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def report(model: str, runs: list[Run], rows: list[StageRow], wall_s: float, recorder: Recorder) -> int:
    print(
        f"{'#':<2} {'stage':<20} {'result':<9} {'repairs':<8} {'tools':>5} {'txt':>4} {'calls':>5} {'cut':>4} "
        f"{'wall s':>7}  why"
    )
    for row in rows:
        wall = f"{row.wall_s:.0f}" if row.wall_s is not None else "-"
        why = row.detail or ("BREAKS " + ",".join(v.split(":", 1)[0] for v in row.breaks) if row.breaks else "")
        print(
            f"{row.brief:<2} {row.stage:<20} {row.result:<9} {row.repairs:<8} {sum(row.tools.values()):>5} "
            f"{row.text_calls:>4} "
            f"{row.model_calls:>5} {row.cut_off:>4} {wall:>7}  {why}"
        )
    print(
        "repairs: r reminder, c contract, x cut off; tools: tool calls run; txt: of them written as text; "
        "calls: model calls; cut: replies cut off"
    )
    print()
    for index, run in enumerate(runs, 1):
        state = "HUNG (killed)" if run.hung else f"exit {run.returncode}"
        print(f"brief {index}: {run.brief!r} -> {run.project or '(not created)'}: {state}, {run.wall_s:.0f} s")
        if "Traceback" in run.stderr:
            print("  TRACEBACK in the CLI's stderr:\n    " + "\n    ".join(run.stderr.strip().splitlines()[-12:]))
    failed = [r for r in rows if r.result == "FAILED"]
    for row in failed:
        print(f"  {row.brief}/{row.stage}: {one_line(row.error, 400)}")
        if row.rejected:
            print(f"    rejected {_artifact(row.stage)}: {one_line(row.rejected, 160)!r}")
    breaking = [r for r in rows if r.breaks]
    for row in breaking:
        print(f"  COMPLETE BUT BREAKS ITS CONTRACT {row.brief}/{row.stage}: {'; '.join(row.breaks)[:400]}")
    suspect = [r for r in rows if r.suspect]
    for row in suspect:
        print(f"  suspect complete {row.brief}/{row.stage}: {'; '.join(row.suspect)}")
    for row in rows:
        for note in row.notes:
            print(f"  note {row.brief}/{row.stage}: {note}")
    complete = sum(r.result == "complete" for r in rows)
    ran = [r for r in rows if r.result not in ("not run", "seeded")]
    kinds = Counter(r.detail for r in failed)
    repairs = sum(len(r.repairs.strip("-")) for r in rows)
    text_calls = sum(r.text_calls for r in rows)
    cut = sum(1 for c in recorder.calls if c.finish_reason == "length")
    speeds = sorted(c.tokens_per_s for c in recorder.calls if c.tokens_per_s)
    speed = f", median {speeds[len(speeds) // 2]:.1f} tokens/s generated" if speeds else ""
    print(
        f"\n{model}: {len(runs)} brief(s), {len(ran)} stages ran: {complete} complete, {len(failed)} failed"
        + (f" ({', '.join(f'{k} {n}' for k, n in kinds.most_common())})" if failed else "")
        + f"; {repairs} repair turns, {text_calls} tool calls parsed from text, {len(recorder.calls)} model calls "
        f"({cut} cut off{speed}); complete but breaking the contract: {len(breaking)} "
        f"(suspect by other signs: {len(suspect)}); wall {wall_s / 60:.1f} min"
    )
    hung = any(r.hung for r in runs)
    return 1 if breaking or hung else 0


# ---------------------------------------------------------------- evidence (--sources)

_CITE_FORM = re.compile(r"\[[^\]\n]{0,40}\]|\([^)\n]{0,40}\)|\[\^[^\]\n]{1,20}\]")
_NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*")


def citation_forms(text: str) -> Counter[str]:
    """The shapes of the citations a text uses: [S1], [S1, S2], (S1), [1], [^1]... with the digits as n."""
    forms: Counter[str] = Counter()
    for match in _CITE_FORM.finditer(text):
        inner = match.group(0)
        if not re.search(r"\bS\s*\d|^\[\^?\d+\]$|source", inner, re.I):
            continue
        forms[re.sub(r"\d+", "n", inner)] += 1
    return forms


def evidence_report(home: Path, runs: list[Run], recorder: Recorder) -> None:
    """Per aligned artifact: verdict counts, citation forms, ids not archived, numbers in no source."""
    from pensieve.evidence.store import ALIGNED, load_evidence
    from pensieve.project.events import read_events
    from pensieve.project.source_archive import SourceArchive

    print("\nevidence (--sources):")
    for index, run in enumerate(runs, 1):
        if not run.project:
            continue
        folder = project_dir(home, run.project)
        archive = SourceArchive(folder)
        archived = {s.id for s in archive.entries()}
        source_text = " ".join((folder / s.file).read_text(errors="replace") for s in archive.entries())
        notes = folder / "research_notes.md"
        known_numbers = set(_NUMBER.findall(source_text + (notes.read_text() if notes.is_file() else "")))
        data = load_evidence(folder) or {}
        for name in ALIGNED:
            path = folder / name
            if not path.is_file():
                continue
            text = path.read_text(errors="replace")
            entry = (data.get("artifacts") or {}).get(name)
            summary = entry.get("summary") if isinstance(entry, dict) else None
            verdicts = (
                f"{summary['cited_sentences']} cited: {summary['supported']} supported, {summary['weak']} weak, "
                f"{summary['unsupported']} unsupported"
                if summary
                else "NO EVIDENCE ENTRY"
            )
            ids = set(re.findall(r"\bS(\d+)\b", text))
            invented = sorted({f"S{i}" for i in ids} - archived, key=lambda s: int(s[1:]))
            numbers = sorted({n for n in _NUMBER.findall(re.sub(r"\[[^\]]*\]", " ", text))} - known_numbers)
            forms = ", ".join(f"{form} x{n}" for form, n in citation_forms(text).most_common(6)) or "none"
            print(f"  {index}/{name}: {verdicts}")
            print(f"    citation forms: {forms}; ids not archived: {', '.join(invented) or 'none'}")
            print(f"    numbers in no source or note: {', '.join(numbers[:15]) or 'none'}")
        fetches = [e for e in read_events(folder / "events.jsonl") if e.get("kind") == "fetch"]
        if fetches:
            refused = [str(e.get("url")) for e in fetches if "url_policy" in str(e.get("error") or "")]
            print(
                f"  {index}/fetch_url: {len(fetches)} fetches, {len(refused)} refused by fetch.url_policy"
                + (f" ({', '.join(refused[:4])})" if refused else "")
            )
        for stage in ("reviser", "polisher"):
            system, task = recorder.prompts.get((run.project, stage), ("", ""))
            if system or task:
                # The list arrives wrapped as data (evidence.hooks.repair_instructions).
                told = "source=evidence check of " in system + task
                print(f"  {index}/{stage}: {'was given' if told else 'was NOT given'} the unsupported sentences")


# ---------------------------------------------------------------- main


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM too stops the model server on the way out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--model", choices=("qwen", "smollm2"), default="qwen")
    parser.add_argument("--briefs", type=int, default=3, choices=range(1, len(BRIEFS) + 1), metavar="N")
    parser.add_argument("--until", choices=STAGES, help="stop each run after this stage")
    parser.add_argument(
        "--seed",
        choices=STAGES[:-1],
        help="write the artifacts up to this stage by hand (the test fakes'), so the model starts after it",
    )
    parser.add_argument(
        "--sources",
        action="store_true",
        help="archive hand-written source pages and seed research notes citing them (needs --seed researcher or later)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the scratch PENSIEVE_HOME and print its path")
    parser.add_argument("--deadline", type=int, default=900, help="run.deadline_s of each run (default 900)")
    parser.add_argument("--target-words", type=int, default=400, help="article.target_words (default 400)")
    parser.add_argument("--max-output-tokens", type=int, default=1024, help="llm.max_output_tokens (default 1024)")
    parser.add_argument("--timeout", type=float, default=240, help="llm.timeout_s (default 240)")
    args = parser.parse_args()
    if args.seed and args.until and STAGES.index(args.until) <= STAGES.index(args.seed):
        parser.error(f"--until {args.until} does not come after --seed {args.seed}: nothing would run")
    if args.sources and not args.seed:
        parser.error("--sources seeds the source archive with the first stages: give --seed STAGE")

    home = Path(tempfile.mkdtemp(prefix="pensieve-real-model-"))
    logs = home / "bench-logs"
    logs.mkdir()
    recorder = Recorder(logs / "model-calls.jsonl")
    started = time.monotonic()
    runs: list[Run] = []
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        with (
            model_server(args.model, logs / "llama-server.log") as upstream,
            recording_proxy(upstream, recorder, args.timeout + 2) as proxy,  # gives up when Pensieve does
        ):
            config = _with_retries("config", lambda: write_config(home, args.model, proxy, args))
            print(
                f"{args.model} at {upstream} (recorded through {proxy}); scratch home {home}\n"
                f"config: {json.dumps(config)}",
                file=sys.stderr,
            )
            env = {
                **os.environ,
                "PENSIEVE_HOME": str(home),
                "PENSIEVE_CONFIG": str(home / "configs" / "pensieve.yaml"),
                "OPENAI_API_KEY": "unused",  # in case a loopback api_base still asks for a key
            }
            for name in ("PENSIEVE_MODEL", "PENSIEVE_API_BASE", "SEARCH_API_KEY", "PENSIEVE_SEARCH_PROVIDER"):
                env.pop(name, None)
            for index, brief in enumerate(BRIEFS[: args.briefs], 1):
                print(f"brief {index}/{args.briefs}: {brief!r} ...", file=sys.stderr, flush=True)
                run = run_brief(brief, env, args, logs, index)
                runs.append(run)
                print(f"  {run.project}: exit {run.returncode} after {run.wall_s:.0f} s", file=sys.stderr)
        rows: list[StageRow] = []
        for index, run in enumerate(runs, 1):
            if run.project:
                rows += _with_retries("status", partial(read_stages, home, index, run, recorder, args))
        _with_retries("contracts", lambda: recheck(home, runs, rows, recorder))
        code = report(args.model, runs, rows, time.monotonic() - started, recorder)
        if args.sources:
            _with_retries("evidence", lambda: evidence_report(home, runs, recorder))
        return code
    except KeyboardInterrupt:
        print("interrupted; the model server is stopped", file=sys.stderr)
        return 130
    finally:
        if args.keep:
            print(f"scratch home kept: {home} (model calls in {logs / 'model-calls.jsonl'})", file=sys.stderr)
        else:
            shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
