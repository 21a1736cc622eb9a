"""A scripted fake model speaking the OpenAI chat-completions wire format on 127.0.0.1.

Pensieve reaches it through its normal configuration (`llm.model: openai/...`,
`llm.api_base`), so every request goes through litellm and a real HTTP connection.
Replies are queued per stage; the stage is read from the system prompt. Every request is
recorded so tests can assert what each agent was sent.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections import defaultdict, deque
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from typing import Any

from pensieve.stages import BY_NAME
from tests.fakes.http import QuietHandler, close, serve

_STAGE = re.compile(r"one stage \(`(\w+)`\)")
_PROJECT = re.compile(r"^Project: ([A-Za-z0-9._-]+)\. ", re.MULTILINE)


def text(content: str) -> dict[str, Any]:
    return {"text": content}


def call(name: str, arguments: dict[str, Any] | str, call_id: str | None = None) -> dict[str, Any]:
    """One tool call; `arguments` may be a raw string to send malformed JSON."""
    return {"tool_calls": [{"name": name, "arguments": arguments, "id": call_id}]}


def calls(*items: tuple[str, dict[str, Any] | str]) -> dict[str, Any]:
    return {"tool_calls": [{"name": n, "arguments": a, "id": None} for n, a in items]}


def error(status: int, body: str = "", headers: dict[str, str] | None = None) -> dict[str, Any]:
    """An HTTP error reply. In `body`, `{auth}` is replaced by the request's Authorization
    header, like providers that echo (part of) the key they refused."""
    return {"status": status, "body": body, "headers": headers or {}}


def drop() -> dict[str, Any]:
    """Close the connection without answering (a connection error for the client)."""
    return {"drop": True}


def hang(seconds: float) -> dict[str, Any]:
    """Answer only after `seconds` (longer than llm.timeout_s: a timeout for the client)."""
    return {"text": "too late", "delay": seconds}


def default_artifact(stage: str) -> str:
    title = BY_NAME[stage].title if stage in BY_NAME else stage
    return (
        f"# {title} output\n\nThis is the {stage} artifact, written by the fake model. "
        "It stands in for the real thing in tests.\n"
    )


@dataclass
class Recorded:
    stage: str
    body: dict[str, Any]
    started: float
    finished: float = 0.0
    status: int = 200
    authorization: str = ""
    project: str | None = None  # the project id named in the task message

    def __post_init__(self) -> None:
        first_user = next((m for m in self.messages if m.get("role") == "user"), {})
        match = _PROJECT.search(str(first_user.get("content") or ""))
        self.project = match.group(1) if match else None

    @property
    def tool_names(self) -> list[str]:
        return sorted(t["function"]["name"] for t in self.body.get("tools") or [])

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages") or [])

    @property
    def last_tool_results(self) -> list[str]:
        out = []
        for message in reversed(self.messages):
            if message.get("role") != "tool":
                break
            out.append(str(message.get("content")))
        return list(reversed(out))


@dataclass
class FakeModel:
    scripts: dict[str, deque[dict[str, Any]]] = field(default_factory=lambda: defaultdict(deque))
    requests: list[Recorded] = field(default_factory=list)
    delay_s: dict[str, float] = field(default_factory=dict)
    usage: tuple[int, int] = (100, 20)
    lock: threading.Lock = field(default_factory=threading.Lock)
    server: ThreadingHTTPServer | None = None

    def script(self, stage: str, *replies: dict[str, Any]) -> None:
        self.scripts[stage].extend(replies)

    def for_stage(self, stage: str) -> list[Recorded]:
        return [r for r in self.requests if r.stage == stage and r.status == 200]

    def count(self, stage: str) -> int:
        return len(self.for_stage(stage))

    @property
    def base_url(self) -> str:
        assert self.server is not None
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def _next(self, stage: str, body: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            queue = self.scripts.get(stage)
            if queue:
                return queue.popleft()
        # Default behaviour: write the artifact with the tool, then say so.
        last = (body.get("messages") or [{}])[-1]
        offered = {t["function"]["name"] for t in body.get("tools") or []}
        if last.get("role") != "tool" and "write_project_file" in offered and stage in BY_NAME:
            return call("write_project_file", {"filename": BY_NAME[stage].writes, "content": default_artifact(stage)})
        return text(f"{stage} done.")

    def handle(self, body: dict[str, Any], authorization: str = "") -> tuple[int, dict[str, str], bytes] | None:
        """The reply to one request, or None to drop the connection."""
        system = next((m.get("content", "") for m in body.get("messages", []) if m.get("role") == "system"), "")
        match = _STAGE.search(system or "")
        stage = match.group(1) if match else "summary"
        record = Recorded(stage, body, time.monotonic(), authorization=authorization)
        with self.lock:
            self.requests.append(record)
        reply = self._next(stage, body)
        delay = reply.get("delay", self.delay_s.get(stage, 0.0))
        if delay:
            time.sleep(delay)
        record.finished = time.monotonic()
        if reply.get("drop"):
            record.status = 0
            return None
        if "status" in reply:
            record.status = reply["status"]
            payload = reply["body"].replace("{auth}", authorization) or json.dumps(
                {"error": {"message": f"fake error {reply['status']}", "type": "fake", "code": reply["status"]}}
            )
            return reply["status"], reply["headers"], payload.encode()
        if "raw" in reply:  # a response body exactly as given (malformed on purpose)
            return 200, {}, json.dumps(reply["raw"]).encode()
        message: dict[str, Any] = {"role": "assistant", "content": reply.get("text")}
        if reply.get("tool_calls"):
            message["tool_calls"] = [
                {
                    "id": c["id"] or f"call_{len(self.requests)}_{i}",
                    "type": "function",
                    "function": {
                        "name": c["name"],
                        "arguments": (
                            c["arguments"] if isinstance(c["arguments"], str) else json.dumps(c["arguments"])
                        ).replace("{auth}", authorization.removeprefix("Bearer ")),
                    },
                }
                for i, c in enumerate(reply["tool_calls"])
            ]
        prompt_tokens, completion_tokens = self.usage
        response = {
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "fake"),
            "choices": [
                {"index": 0, "message": message, "finish_reason": "tool_calls" if reply.get("tool_calls") else "stop"}
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }
        return 200, {}, json.dumps(response).encode()

    def start(self) -> FakeModel:
        fake = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                answer = fake.handle(body, self.headers.get("authorization") or "")
                if answer is None:
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                status, headers, payload = answer
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                for key, value in headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(payload)

        class Server(ThreadingHTTPServer):
            def handle_error(self, request: Any, client_address: Any) -> None:
                # A client that gave up (timeout, killed process) is expected here.
                pass

        self.server = serve(Handler, server_class=Server)
        return self

    def stop(self) -> None:
        close(self.server)
