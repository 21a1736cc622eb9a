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
from collections.abc import Sequence
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from typing import Any

from pensieve.stages import BY_NAME
from tests.fakes import artifacts
from tests.fakes.artifacts import DEFAULT_TOPIC
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


def encoded(payload: bytes, encoding: str) -> dict[str, Any]:
    """A 200 whose body is `payload` sent as is with `Content-Encoding: encoding` (a
    compressed bomb: a few KB that decode to hundreds of MB)."""
    return {"payload": payload, "headers": {"Content-Encoding": encoding}}


def hang(seconds: float) -> dict[str, Any]:
    """Answer only after `seconds` (longer than llm.timeout_s: a timeout for the client)."""
    return {"text": "too late", "delay": seconds}


# Misbehaviours of real models, in the OpenAI wire format. Any reply may also carry
# "finish_reason" to override the default ("tool_calls" with tool calls, else "stop").

TEXT_CALL_FORMS = ("bare", "fenced", "tagged", "list", "parameters", "function", "string", "unescaped")


def _call_object(name: str, arguments: dict[str, Any] | str, form: str) -> dict[str, Any]:
    if form == "parameters":  # Llama 3.x style
        return {"name": name, "parameters": arguments}
    if form == "function":  # OpenAI's own wire shape, arguments as a JSON string
        encoded = arguments if isinstance(arguments, str) else json.dumps(arguments)
        return {"type": "function", "function": {"name": name, "arguments": encoded}}
    if form == "string":  # arguments as a JSON string
        return {"name": name, "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments)}
    return {"name": name, "arguments": arguments}


def text_calls(*items: tuple[str, dict[str, Any] | str], form: str = "bare", prose: str = "") -> dict[str, Any]:
    """Tool calls written as message content instead of tool calls (small local models do it).

    Forms: `bare` JSON objects one per line; `fenced` each in a ```json fence; `tagged` each in
    <tool_call> tags (Qwen/Hermes); `list` one JSON list; `parameters` with "parameters"
    for "arguments"; `function` as {"type": "function", "function": {...}}; `string` with the
    arguments as a JSON string; `unescaped` with raw newlines inside strings. `prose` comes
    first, as a model that explains itself writes it.
    """
    if form not in TEXT_CALL_FORMS:
        raise ValueError(f"unknown text_call form {form!r}; one of {TEXT_CALL_FORMS}")
    objects = [_call_object(name, arguments, form) for name, arguments in items]
    if form == "list":
        body = json.dumps(objects, indent=2)
    elif form == "fenced":
        body = "\n\n".join(f"```json\n{json.dumps(o, indent=2)}\n```" for o in objects)
    elif form == "tagged":
        body = "\n".join(f"<tool_call>\n{json.dumps(o)}\n</tool_call>" for o in objects)
    elif form == "unescaped":  # assumes the content holds no literal backslash before an n
        body = "\n".join(json.dumps(o).replace("\\n", "\n") for o in objects)
    else:
        body = "\n".join(json.dumps(o) for o in objects)
    return {"text": f"{prose}\n\n{body}" if prose else body}


def text_call(name: str, arguments: dict[str, Any] | str, form: str = "bare", prose: str = "") -> dict[str, Any]:
    """One tool call written as message content; see `text_calls` for the forms."""
    return text_calls((name, arguments), form=form, prose=prose)


def write(filename: str, content: str) -> dict[str, Any]:
    """A real write_project_file call (for off-topic, too short or oddly cited artifacts)."""
    return call("write_project_file", {"filename": filename, "content": content})


def cut_off(content: str) -> dict[str, Any]:
    """A reply stopped by the output-token limit: `finish_reason: length`."""
    return {"text": content, "finish_reason": "length"}


def echo(what: str = "task", into: str | None = None, template: str = "{prompt}") -> dict[str, Any]:
    """Reply with the request's own prompt: `task` (the first user message), `system` or
    `both`. With `into`, write it to that file with write_project_file instead. `template`
    dresses it: its `{prompt}` is replaced by the prompt (e.g. inside a code fence)."""
    if what not in ("task", "system", "both"):
        raise ValueError(f"echo what={what!r}: one of task, system, both")
    return {"echo": what, "into": into, "template": template}


def think(reasoning: str, content: str = "") -> dict[str, Any]:
    """A reply that starts with a <think> block (reasoning models served without a parser)."""
    return {"text": f"<think>\n{reasoning}\n</think>\n\n{content}".rstrip() + "\n"}


def default_artifact(stage: str, topic: str = DEFAULT_TOPIC, earlier: Sequence[str] = ()) -> str:
    """A real artifact of the stage's kind about `topic`, meeting the default stage contracts
    (see tests/fakes/artifacts.py); `earlier` are the other projects a consistency report names."""
    return artifacts.artifact(stage, topic, earlier)


def _echoed(reply: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    """An `echo()` reply made concrete from the request it answers."""
    if "echo" not in reply:
        return reply
    messages = body.get("messages") or []
    system = next((str(m.get("content") or "") for m in messages if m.get("role") == "system"), "")
    task = next((str(m.get("content") or "") for m in messages if m.get("role") == "user"), "")
    content = {"task": task, "system": system, "both": f"{system}\n\n{task}"}[reply["echo"]]
    content = str(reply.get("template") or "{prompt}").replace("{prompt}", content)
    rest = {k: v for k, v in reply.items() if k not in ("echo", "into", "template")}
    if reply.get("into"):
        return {**rest, **write(reply["into"], content)}
    return {**rest, "text": content}


def _project_of(body: dict[str, Any]) -> str | None:
    first_user: dict[str, Any] = next((m for m in body.get("messages") or [] if m.get("role") == "user"), {})
    match = _PROJECT.search(str(first_user.get("content") or ""))
    return match.group(1) if match else None


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
    # Count usage from the request and the reply instead (4 characters a token, the rule of
    # the by-hand relay): what the estimate benchmark compares its figures with.
    count_tokens: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)
    server: ThreadingHTTPServer | None = None
    # Replies used in turn, round and round, once a stage's script is used up.
    fallbacks: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    fallback_turns: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    # The default artifacts written, by (project id, stage).
    written: dict[tuple[str | None, str], list[str]] = field(default_factory=lambda: defaultdict(list))

    def script(self, stage: str, *replies: dict[str, Any]) -> None:
        self.scripts[stage].extend(replies)

    def always(self, stage: str, *replies: dict[str, Any]) -> None:
        """After the script, answer `stage` with these replies in a cycle instead of the
        default behaviour: a model that never writes, or loops until the round cap."""
        self.fallbacks[stage] = list(replies)

    def for_stage(self, stage: str) -> list[Recorded]:
        return [r for r in self.requests if r.stage == stage and r.status == 200]

    def count(self, stage: str) -> int:
        return len(self.for_stage(stage))

    @property
    def base_url(self) -> str:
        assert self.server is not None
        host, port = self.server.server_address[:2]
        assert isinstance(host, str)  # an AF_INET address (typeshed also allows bytes)
        return f"http://{host}:{port}/v1"

    def _next(self, stage: str, body: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            queue = self.scripts.get(stage)
            if queue:
                return queue.popleft()
            cycle = self.fallbacks.get(stage)
            if cycle:
                turn = self.fallback_turns[stage]
                self.fallback_turns[stage] += 1
                return cycle[turn % len(cycle)]
        # Default behaviour: write the artifact with the tool, then say so.
        last = (body.get("messages") or [{}])[-1]
        offered = {t["function"]["name"] for t in body.get("tools") or []}
        if last.get("role") != "tool" and "write_project_file" in offered and stage in BY_NAME:
            project = _project_of(body)
            with self.lock:
                # Every project seen is named as compared: a superset of those complete before.
                earlier = sorted({r.project for r in self.requests if r.project and r.project != project})
            content = default_artifact(stage, artifacts.topic_of(body), earlier)
            with self.lock:
                self.written[(project, stage)].append(content)
            return call("write_project_file", {"filename": BY_NAME[stage].writes, "content": content})
        return text(f"{stage} done.")

    def artifacts_written(self, project: str | None, stage: str) -> list[str]:
        """Every default artifact this fake wrote for the project's stage, oldest first."""
        with self.lock:
            return list(self.written.get((project, stage), []))

    def handle(self, body: dict[str, Any], authorization: str = "") -> tuple[int, dict[str, str], bytes] | None:
        """The reply to one request, or None to drop the connection."""
        system = next((m.get("content", "") for m in body.get("messages", []) if m.get("role") == "system"), "")
        match = _STAGE.search(system or "")
        stage = match.group(1) if match else "summary"
        record = Recorded(stage, body, time.monotonic(), authorization=authorization)
        with self.lock:
            self.requests.append(record)
        reply = _echoed(self._next(stage, body), body)
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
        if "payload" in reply:  # bytes on the wire, exactly as given
            return 200, reply["headers"], reply["payload"]
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
        if self.count_tokens:
            prompt_tokens = len(json.dumps(body.get("messages") or [])) // 4
            written = len(message.get("content") or "")
            written += sum(len(c["function"]["arguments"]) for c in message.get("tool_calls") or [])
            completion_tokens = written // 4
        finish_reason = reply.get("finish_reason") or ("tool_calls" if reply.get("tool_calls") else "stop")
        response = {
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "fake"),
            "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
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
