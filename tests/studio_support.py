"""Shared helpers of the studio tests: an app on a home, a real server, fixture projects."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import uvicorn
from starlette.testclient import TestClient

from pensieve.config import pensieve_home
from pensieve.hashing import sha256_of_bytes
from pensieve.project.status import Status
from pensieve.project.workspace import Workspace, open_workspace
from pensieve.stages import STAGES
from pensieve.studio.app import create_app
from pensieve.studio.server import server_config
from tests.fakes import artifacts

TOKEN = "studio-test-token-6d0b1f"
PORT = 8765
BASE = f"http://127.0.0.1:{PORT}"
HOSTILE = (
    "<script>window.__pwned=1</script>"
    '<img src=x onerror="window.__pwned=2">'
    '<iframe src="javascript:window.__pwned=3"></iframe>'
    "[click](javascript:window.__pwned=4)"
)


def workspace() -> Workspace:
    return open_workspace(pensieve_home(), "default")


def client(token: str | None = TOKEN, **kwargs: Any) -> TestClient:
    app = create_app(workspace(), token=TOKEN, host="127.0.0.1", port=PORT)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return TestClient(app, base_url=BASE, headers=headers, follow_redirects=False, **kwargs)


def make_project(
    project_id: str, upto: str = "consistency_checker", brief: str = "How vector databases index embeddings"
) -> Path:
    """A project whose stages up to `upto` are complete, with real-looking artifacts and the
    input hashes a run would have recorded (so edits make later stages stale)."""
    from pensieve.project.listing import new_project

    project = new_project(workspace(), brief, project_id)
    status = Status.new(project_id, "default")
    for stage in STAGES:
        text = artifacts.artifact(stage.name)
        project.file(stage.writes).write_text(text, encoding="utf-8")
        entry = status.stages[stage.name]
        entry.status = "complete"
        entry.artifact = stage.writes
        entry.artifact_sha256 = sha256_of_bytes(text.encode())
        entry.model = "openai/gpt-4o-mini"
        entry.started_at, entry.finished_at = "2026-01-01T00:00:00.000Z", "2026-01-01T00:00:02.500Z"
        entry.usage.add(100, 20, 0.0001)
        status.usage.add(100, 20, 0.0001)
        if stage.name == upto:
            break
    for stage in STAGES:
        entry = status.stages[stage.name]
        if entry.status == "complete":
            entry.inputs = {
                str(name): sha256_of_bytes(project.file(name).read_bytes())
                for name in (*stage.reads, *stage.optional_reads)
                if project.file(name).is_file()
            }
    done = all(s.status == "complete" for s in status.stages.values())
    status.status = "complete" if done else "paused"
    project.status_path.write_text(status.to_json())
    return project.dir


def add_source(project_dir: Path, sid: str, title: str, url: str, text: str, raw: bytes) -> None:
    sources = project_dir / "sources"
    (sources / "raw").mkdir(parents=True, exist_ok=True)
    (sources / f"{sid}.md").write_text(f"---\nid: {sid}\nurl: {url}\n---\n{text}", encoding="utf-8")
    (sources / "raw" / f"{sid}.html").write_bytes(raw)
    index = sources / "index.json"
    data = json.loads(index.read_text()) if index.is_file() else {"sources": []}
    data["sources"].append(
        {
            "id": sid,
            "url": url,
            "final_url": url,
            "title": title,
            "fetched_at": "2026-11-01T10:00:00Z",
            "sha256": sha256_of_bytes(raw),
            "size": len(raw),
            "content_type": "text/html",
            "file": f"sources/{sid}.md",
            "raw_file": f"sources/raw/{sid}.html",
            "also": [],
        }
    )
    index.write_text(json.dumps(data))


def write_evidence(project_dir: Path, name: str, sentences: list[dict[str, Any]], stale: bool = False) -> None:
    text = (project_dir / name).read_bytes()
    supported = sum(1 for s in sentences if s["verdict"] == "supported")
    entry = {
        "artifact_sha256": "0" * 64 if stale else sha256_of_bytes(text),
        "summary": {
            "cited_sentences": len(sentences),
            "supported": supported,
            "weak": sum(1 for s in sentences if s["verdict"] == "weak"),
            "unsupported": sum(1 for s in sentences if s["verdict"] == "unsupported"),
            "supported_share": supported / len(sentences) if sentences else 0.0,
        },
        "sentences": sentences,
    }
    path = project_dir / "evidence.json"
    data: dict[str, Any] = json.loads(path.read_text()) if path.is_file() else {"version": 1, "artifacts": {}}
    data["artifacts"][name] = entry
    path.write_text(json.dumps(data))


def sentence(index: int, text: str, source: str, verdict: str, passage: str | None) -> dict[str, Any]:
    return {
        "index": index,
        "text": text,
        "start": 0,
        "end": len(text),
        "verdict": verdict,
        "citations": [
            {
                "source": source,
                "verdict": verdict,
                "score": 0.7,
                "passage": {"text": passage, "start": 0, "end": len(passage)} if passage else None,
                "missing": [],
                "judge": None,
            }
        ],
        "findings": [],
    }


@contextlib.contextmanager
def real_server(token: str = TOKEN) -> Iterator[str]:
    """The studio under uvicorn on a free port of 127.0.0.1, in a thread; yields its base URL."""
    import socket

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    app = create_app(workspace(), token=token, host="127.0.0.1", port=port)
    server = uvicorn.Server(server_config(app))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "studio did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def wait_for(predicate: Any, timeout_s: float = 60.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"{what} not reached in time"
        time.sleep(0.05)
