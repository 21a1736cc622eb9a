"""MCP servers as research tools: started once per run, their results archived as sources.

A server comes only from the user's configuration (`mcp.servers.<name>`): a stdio server is
a subprocess in its own process group; a streamable HTTP server is a URL. It is started the
first time a stage that may use one of its tools begins (`McpServers.ensure`), its tool list
read then, and it is shut down when the run ends, on Ctrl-C and on failure too
(`McpServers.aclose`, with a last synchronous kill in `kill_leftovers`).

Each connection lives in a task of its own, because the `mcp` client's context managers must
be entered and left by the same task while every stage calls the server. A call has a timeout
(`timeout_s`) and an output cap (`max_result_chars`); what comes back is sanitised, archived in
`sources/` as a source of its own (origin `mcp:<server>/<tool>`) and wrapped as untrusted
text. A server that cannot start, crashes or hangs is a tool error naming the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import tempfile
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any
from urllib.parse import quote, urlencode, urlsplit

from pensieve.article.citations import MCP_SCHEME
from pensieve.project.events import EventKind
from pensieve.project.source_archive import SourceArchive
from pensieve.redact import scrub
from pensieve.tool_matrix import CANONICAL, Column, cap_for, is_pattern, mcp_canonical, mcp_model_name
from pensieve.tools.registry import Tool, ToolContext, ToolError
from pensieve.untrusted import cap, sanitize, wrap

if TYPE_CHECKING:
    import anyio.abc
    from mcp.client.session import ClientSession

    from pensieve.config import McpServerSettings, Settings
    from pensieve.project.events import EventSink

# A message larger than this ends the connection (the result cap applies well before).
MAX_MESSAGE_BYTES = 64_000_000
MAX_SCHEMA_CHARS = 20_000  # a tool's input schema, sent to the model on every turn
STOP_GRACE_S = 2.0  # after stdin closes, before SIGTERM; and again before SIGKILL
_STDERR_TAIL = 300


@dataclass(frozen=True)
class RemoteTool:
    server: str
    name: str  # the server's own name for it
    canonical: str
    description: str
    schema: dict[str, Any]


class _MessageTooLarge(Exception):
    pass


@contextlib.asynccontextmanager
async def _stdio(
    command: list[str], env: dict[str, str], errlog: IO[bytes], server: McpServer
) -> AsyncIterator[tuple[Any, Any]]:
    """The stdio transport: newline-delimited JSON-RPC over the child's pipes. Written here
    (not `mcp.client.stdio`) to hold the process: its exit status names a crash, and its
    process group is what is killed at the end."""
    import anyio
    import mcp_types
    from mcp.shared.message import SessionMessage

    process = await anyio.open_process(command, env=env, stderr=errlog, start_new_session=True)
    server.process = process
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)

    async def reader() -> None:
        assert process.stdout is not None
        pending: list[bytes] = []
        size = 0
        async with read_writer:
            with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
                async for chunk in process.stdout:
                    while chunk:
                        line, newline, chunk = chunk.partition(b"\n")
                        pending.append(line)
                        size += len(line)
                        if size > MAX_MESSAGE_BYTES:
                            server.transport_error = f"sent a message larger than {MAX_MESSAGE_BYTES:,} bytes"
                            return
                        if not newline:
                            break
                        data, pending, size = b"".join(pending), [], 0
                        if not data.strip():
                            continue
                        try:
                            message = mcp_types.jsonrpc_message_adapter.validate_json(data, by_name=False)
                        except ValueError:
                            continue  # a stray line on stdout (a print) is not a message
                        await read_writer.send(SessionMessage(message))

    async def writer() -> None:
        assert process.stdin is not None
        try:
            async with write_reader:
                async for item in write_reader:
                    encoded = item.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await process.stdin.send((encoded + "\n").encode("utf-8"))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await read_writer.aclose()

    async with anyio.create_task_group() as group:
        group.start_soon(reader)
        group.start_soon(writer)
        try:
            yield read_stream, write_stream
        finally:
            with anyio.CancelScope(shield=True):
                await _stop_process(process)
                for stream in (read_stream, write_stream, read_writer, write_reader):
                    await stream.aclose()
            group.cancel_scope.cancel()


async def _wait_exit(process: anyio.abc.Process, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while process.returncode is None and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    return process.returncode is not None


async def _stop_process(process: anyio.abc.Process) -> None:
    """Close stdin, give the server time to exit, then SIGTERM and SIGKILL its group."""
    if process.stdin is not None:
        with contextlib.suppress(Exception):
            await process.stdin.aclose()
    if not await _wait_exit(process, STOP_GRACE_S):
        _signal_group(process.pid, signal.SIGTERM)
        if not await _wait_exit(process, STOP_GRACE_S):
            _signal_group(process.pid, signal.SIGKILL)
            await _wait_exit(process, STOP_GRACE_S)
    else:
        _signal_group(process.pid, signal.SIGKILL)  # anything the server left in its group
    with contextlib.suppress(Exception):
        await process.aclose()


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def static_problem(config: McpServerSettings, environ: Mapping[str, str]) -> tuple[str | None, bool]:
    """What can be known about a server without starting it: (problem, whether it cannot
    start at all). A stdio program that is not found cannot; a variable it is given that is
    not set is only worth saying."""
    import shutil

    if config.command:
        program = config.command[0]
        if shutil.which(program, path=environ.get("PATH")) is None and not os.access(program, os.X_OK):
            return f"cannot run {program!r} (not found or not executable)", True
    missing = [v for v in (*config.env, *config.headers_env.values()) if v not in environ]
    if missing:
        return f"{', '.join(missing)} not set in the environment (passed to it by name)", False
    return None, False


def _listed_twice(tools: list[RemoteTool], skipped: list[str]) -> str | None:
    """The first tool name a server lists more than once (schemas too large included)."""
    seen: set[str] = set()
    for name in [*(t.name for t in tools), *skipped]:
        if name in seen:
            return name
        seen.add(name)
    return None


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside (nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


@dataclass
class McpServer:
    """One configured server's connection for one run."""

    name: str
    settings: McpServerSettings
    environ: Mapping[str, str]
    startup_timeout_s: float
    tools: list[RemoteTool] = field(default_factory=list)
    error: str | None = None
    process: Any = None  # anyio Process of a stdio server
    transport_error: str | None = None
    # Tools not offered because their schema is too large (MAX_SCHEMA_CHARS).
    skipped: list[str] = field(default_factory=list)
    _session: ClientSession | None = None
    _task: asyncio.Task[None] | None = None
    _ready: asyncio.Event = field(default_factory=asyncio.Event)
    _stop: asyncio.Event = field(default_factory=asyncio.Event)
    _errlog: IO[bytes] | None = None
    _last_stderr: str = ""

    @property
    def origin(self) -> str:
        return f"mcp:{self.name}"

    async def start(self) -> None:
        """Start and list the tools (once); on failure `error` says why."""
        if self.error is not None:
            return  # known not to start (see static_problem)
        if self._task is None:
            self._task = asyncio.create_task(self._own(), name=f"mcp server {self.name}")
        await self._ready.wait()

    def _environment(self) -> dict[str, str]:
        """A minimal environment plus the variables the config passes through by name."""
        from mcp.client.stdio import get_default_environment

        env = get_default_environment()
        for name in self.settings.env:
            if name in self.environ:
                env[name] = self.environ[name]
        return env

    async def _own(self) -> None:
        from mcp.client.session import ClientSession

        if self.settings.command:
            # The server's stderr, whose last line explains a failure; closed when the task ends.
            self._errlog = tempfile.TemporaryFile()  # noqa: SIM115
        # Asked after the fact: its TimeoutError reaches us wrapped in the transport's task
        # group, by which time the server has been stopped (a stdio one "exited with -15").
        startup = asyncio.timeout(self.startup_timeout_s)
        try:
            async with contextlib.AsyncExitStack() as stack:
                if self.settings.command:
                    assert self._errlog is not None
                    streams = await stack.enter_async_context(
                        _stdio(list(self.settings.command), self._environment(), self._errlog, self)
                    )
                else:
                    streams = await stack.enter_async_context(self._http())
                session = await stack.enter_async_context(ClientSession(*streams))
                async with startup:
                    await session.initialize()
                    tools = await self._list(session)
                twice = _listed_twice(tools, self.skipped)
                if twice is not None:
                    # Which of the two the server would run is its own affair, and the model
                    # would be shown both descriptions: the server is refused, not guessed at.
                    self.error = self._why(
                        f"lists the tool {sanitize(twice)[:80]!r} more than once; "
                        "each tool must have its own name (fix or update the server)"
                    )
                    return
                self.tools = tools
                self._session = session
                self._ready.set()
                await self._stop.wait()
        except (Exception, BaseExceptionGroup) as exc:
            if startup.expired():
                self.error = self._why(f"did not start within {self.startup_timeout_s:g}s (mcp.startup_timeout_s)")
            else:
                self.error = self._why(self._describe(_leaf(exc)))
        finally:
            self._session = None
            if self.error is None and not self._stop.is_set():
                self.error = self._why("the connection closed")
            self._ready.set()
            log, self._errlog = self._errlog, None
            if log is not None:
                self._last_stderr = self._tail(log)
                log.close()

    @contextlib.asynccontextmanager
    async def _http(self) -> AsyncIterator[tuple[Any, Any]]:
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        from pensieve.web.bounded_http import bounded_httpx2_client

        headers = {}
        for header, variable in self.settings.headers_env.items():
            if variable in self.environ:
                headers[header] = self.environ[variable]
        assert self.settings.url is not None
        # The per-call timeout is ours (timeout_s); the read timeout only has to outlast it.
        timeout = httpx2.Timeout(30.0, read=max(300.0, self.settings.timeout_s * 2))
        async with (
            # Every answer decoded with a bound (stacked gzip would decode to gigabytes).
            bounded_httpx2_client(MAX_MESSAGE_BYTES, headers, timeout) as client,
            streamable_http_client(
                self.settings.url, http_client=client, max_sse_event_size=MAX_MESSAGE_BYTES
            ) as streams,
        ):
            yield streams[0], streams[1]

    async def _list(self, session: ClientSession) -> list[RemoteTool]:
        found: list[RemoteTool] = []
        cursor: str | None = None
        import mcp_types

        for _page in range(50):
            params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None
            listed = await session.list_tools(params=params)
            for item in listed.tools:
                if len(json.dumps(item.input_schema or {}, default=str)) > MAX_SCHEMA_CHARS:
                    self.skipped.append(item.name)  # it would crowd the model's context on every turn
                    continue
                schema = dict(item.input_schema or {})
                schema.setdefault("type", "object")
                schema.setdefault("properties", {})
                schema.pop("title", None)
                description = sanitize(item.description or item.name)[:1000]
                found.append(RemoteTool(self.name, item.name, mcp_canonical(self.name, item.name), description, schema))
            cursor = listed.next_cursor
            if not cursor:
                break
        return found

    def _describe(self, exc: BaseException) -> str:
        if self.transport_error:
            return self.transport_error
        status = getattr(self.process, "returncode", None)
        if status is not None:
            return f"exited with status {status}"
        if isinstance(exc, FileNotFoundError | PermissionError):
            return f"cannot run {self.settings.command[0] if self.settings.command else '?'!r} ({exc.strerror})"
        text = scrub(" ".join(str(exc).split()))[:200] or type(exc).__name__
        if self.settings.url:
            # Where it tried, without credentials or a query that may carry them.
            parts = urlsplit(self.settings.url)
            port = f":{parts.port}" if parts.port else ""
            text = f"{text} ({parts.scheme}://{parts.hostname}{port}{parts.path})"
        return text

    def _why(self, reason: str) -> str:
        """The reason, with the last line the server wrote on stderr."""
        tail = self._stderr_tail()
        return f"{reason} ({tail})" if tail else reason

    def _stderr_tail(self) -> str:
        log = self._errlog
        return self._tail(log) if log is not None else self._last_stderr

    @staticmethod
    def _tail(log: IO[bytes]) -> str:
        try:
            log.seek(0, os.SEEK_END)
            end = log.tell()
            log.seek(max(0, end - 4000))
            lines = [ln for ln in log.read().decode("utf-8", "replace").splitlines() if ln.strip()]
        except (OSError, ValueError):
            return ""
        return scrub(sanitize(lines[-1]))[:_STDERR_TAIL] if lines else ""

    def unavailable(self) -> ToolError:
        return ToolError(f"mcp server {self.name!r} is not available: {self.error}")

    async def call(self, tool: str, arguments: dict[str, Any]) -> Any:
        """One tools/call; ToolError naming the server on any failure."""
        session = self._session
        if self.error is not None or session is None:
            if self.error is None:
                self.error = "it is not running"
            raise self.unavailable()
        timeout = self.settings.timeout_s
        try:
            async with asyncio.timeout(timeout):
                return await session.call_tool(tool, arguments)
        except TimeoutError:
            raise ToolError(
                f"mcp server {self.name!r} did not answer {tool} within {timeout:g}s "
                f"(mcp.servers.{self.name}.timeout_s); try once more later or do without it"
            ) from None
        except Exception as exc:
            if self.process is not None:
                await _wait_exit(self.process, 1.0)
            if self.transport_error or getattr(self.process, "returncode", None) is not None or self._task_done():
                self.error = self.error or self._why(self._describe(exc))
                raise self.unavailable() from None
            message = scrub(" ".join(str(exc).split()))[:300] or type(exc).__name__
            raise ToolError(f"mcp server {self.name!r}: {tool} failed: {message}") from None

    def _task_done(self) -> bool:
        return self._task is not None and self._task.done()

    async def aclose(self) -> None:
        self._stop.set()
        task, self._task = self._task, None
        if task is not None:
            with contextlib.suppress(BaseException):
                await task
        self.kill()

    def kill(self) -> None:
        """The last resort, synchronous: nothing the server started outlives the run. (Once
        the server has exited, `_stop_process` has already killed what was left of its group.)"""
        process = self.process
        if process is not None and process.returncode is None:
            _signal_group(process.pid, signal.SIGKILL)


class McpServers:
    """The run's servers, by name; each started once, by the first stage that needs it."""

    def __init__(self, settings: Settings, environ: Mapping[str, str]) -> None:
        self.settings = settings
        self.servers = {
            name: McpServer(name, config, environ, settings.mcp.startup_timeout_s)
            for name, config in settings.mcp.servers.items()
        }
        self._lock = asyncio.Lock()
        self.reported: set[str] = set()
        # Canonical name -> model-facing name, fixed for the whole run when a tool is first
        # listed (servers in config order). Per stage, `my-wiki` and `my_wiki` could swap
        # `mcp_my_wiki_search`, and a limit or an event keyed by it would name another tool.
        self.model_names: dict[str, str] = {}

    def precheck(self, columns: list[Column], events: EventSink) -> None:
        """Before the first stage: the servers these columns may use that cannot run at all
        (marked failed, never started) or lack a variable they are given, said now."""
        needed: list[str] = []
        for column in columns:
            needed.extend(s for s in column.servers(self.servers) if s not in needed)
        for name in needed:
            server = self.servers[name]
            problem, fatal = static_problem(server.settings, server.environ)
            if problem is None:
                continue
            if fatal:
                server.error = problem
                self.reported.add(name)
                events.emit(EventKind.MCP_SERVER, None, server=name, ok=False, error=problem)
                events.emit(EventKind.NOTE, None, message=f"mcp server {name!r} is not available: {problem}")
            else:
                events.emit(EventKind.NOTE, None, message=f"mcp server {name!r}: {problem}")

    async def open_for(self, column: Column, events: EventSink) -> tuple[list[Tool], dict[str, str]]:
        """Start the servers the column may use (those not started yet); its MCP tools, and
        for each server that is not available, why (keyed `mcp.<server>.*`)."""
        names = column.servers(self.servers)
        failures = await self.ensure(names)
        for name in names:
            if name in self.reported:
                continue
            self.reported.add(name)
            server = self.servers[name]
            if server.error:
                events.emit(EventKind.MCP_SERVER, column.stage, server=name, ok=False, error=server.error)
                events.emit(EventKind.NOTE, None, message=f"mcp server {name!r} is not available: {server.error}")
            else:
                listed = [t.canonical for t in server.tools]
                events.emit(EventKind.MCP_SERVER, column.stage, server=name, ok=True, tools=listed)
                if server.skipped:
                    message = (
                        f"mcp server {name!r}: not offered, their input schemas are larger than "
                        f"{MAX_SCHEMA_CHARS:,} characters: {', '.join(sanitize(n)[:80] for n in server.skipped)}"
                    )
                    events.emit(EventKind.NOTE, None, message=message)
        self._note_unknown_names(column, events)
        missing = {f"mcp.{name}.*": f"mcp server {name!r} is not available: {why}" for name, why in failures.items()}
        return self.tools_for(column), missing

    def _note_unknown_names(self, column: Column, events: EventSink) -> None:
        """A name in allow (not a pattern) that its server turned out not to have: said once."""
        for wanted in column.allow:
            parts = wanted.split(".", 2)
            server = self.servers.get(parts[1]) if len(parts) == 3 and parts[0] == "mcp" else None
            if server is None or server.error or is_pattern(wanted):
                continue
            has = [t.canonical for t in server.tools]
            key = f"{column.stage}:{wanted}"
            if wanted not in has and key not in self.reported:
                self.reported.add(key)
                message = (
                    f"agents.{column.stage}.tools.allow names {wanted}, which mcp server {server.name!r} "
                    f"does not have; it has: {', '.join(has) or 'no tools'}"
                )
                events.emit(EventKind.NOTE, None, message=message)

    async def ensure(self, names: list[str]) -> dict[str, str]:
        """Start the named servers not started yet (together); returns the failures."""
        async with self._lock:
            await asyncio.gather(*(self.servers[n].start() for n in names if n in self.servers))
            self._name_tools()
        return {n: self.servers[n].error or "" for n in names if n in self.servers and self.servers[n].error}

    def _name_tools(self) -> None:
        """Give each listed tool not named yet its model-facing name, servers in config order."""
        taken = {*CANONICAL, *self.model_names.values()}
        for server in self.servers.values():
            for remote in server.tools:
                if remote.canonical not in self.model_names:
                    name = mcp_model_name(server.name, remote.name, taken)
                    self.model_names[remote.canonical] = name
                    taken.add(name)

    def tools_for(self, column: Column) -> list[Tool]:
        """The MCP tools of the started servers that the column admits, as Tools."""
        offered: list[Tool] = []
        for server in self.servers.values():
            for remote in server.tools:
                if column.admits(remote.canonical):
                    name = self.model_names[remote.canonical]
                    offered.append(_as_tool(server, remote, name, self.settings))
        return offered

    def available(self, origin: str) -> bool:
        """Whether the server of this origin ("mcp:<name>") is up and answering."""
        server = self.servers.get(origin.removeprefix("mcp:"))
        return server is not None and server.error is None and server.tools != []

    async def aclose(self) -> None:
        await asyncio.gather(*(s.aclose() for s in self.servers.values()), return_exceptions=True)

    def kill_leftovers(self) -> None:
        for server in self.servers.values():
            server.kill()


def _as_tool(server: McpServer, remote: RemoteTool, name: str, settings: Settings) -> Tool:
    from pydantic import BaseModel

    def check(arguments: dict[str, Any]) -> dict[str, Any]:
        import jsonschema  # type: ignore[import-untyped]

        if not isinstance(arguments, dict):
            raise ToolError("arguments must be a JSON object")
        try:
            jsonschema.validate(arguments, remote.schema)
        except jsonschema.ValidationError as exc:
            where = ".".join(str(p) for p in exc.absolute_path) or "(arguments)"
            raise ToolError(f"{where}: {exc.message[:300]}") from None
        except Exception:
            # The server's own schema is broken (an unresolvable $ref, ...): the server judges.
            return arguments
        return arguments

    async def function(ctx: ToolContext, **arguments: Any) -> str:
        return await _call(ctx, server, remote, arguments)

    default = settings.mcp.default_limit
    limit = cap_for(name, remote.canonical, default, settings)
    description = (
        f"{remote.description}\n(From the MCP server '{server.name}': each result is archived as a source; "
        "cite it by its id.)"
    )
    return Tool(
        name=name,
        function=function,
        description=description,
        schema=remote.schema,
        arguments=BaseModel,
        default_limit=limit,
        canonical=remote.canonical,
        origin=server.origin,
        check=check,
    )


def _result_text(result: Any) -> tuple[str, bool]:
    """The text of a CallToolResult (text blocks; other blocks named, not inlined)."""
    parts: list[str] = []
    for block in getattr(result, "content", None) or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(str(getattr(block, "text", "")))
        elif kind == "resource":
            inner = getattr(block, "resource", None)
            parts.append(str(getattr(inner, "text", "") or f"[resource {getattr(inner, 'uri', '')}]"))
        else:
            parts.append(f"[{kind or 'unknown'} content not shown]")
    if not parts and getattr(result, "structured_content", None) is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False, indent=1))
    return "\n\n".join(parts), bool(getattr(result, "is_error", False))


def source_url(server: str, tool: str, arguments: Mapping[str, Any]) -> str:
    """The archive key of an MCP result, readable in a reference list:
    `mcp://<server>/<tool>?<argument>=<value>&...` (values other than strings as JSON)."""
    pairs = sorted(
        (str(k), v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, sort_keys=True))
        for k, v in arguments.items()
    )
    query = urlencode(pairs, quote_via=quote)
    return f"{MCP_SCHEME}://{quote(server)}/{quote(tool)}" + (f"?{query}" if query else "")


async def _call(ctx: ToolContext, server: McpServer, remote: RemoteTool, arguments: dict[str, Any]) -> str:
    started = time.monotonic()
    stage = ctx.stage.name
    try:
        result = await server.call(remote.name, arguments)
    except ToolError as exc:
        ctx.events.emit(EventKind.MCP_CALL, stage, server=server.name, tool=remote.name, error=str(exc)[:300])
        raise
    raw, is_error = _result_text(result)
    limit = server.settings.max_result_chars
    received = len(raw)
    # Sanitised only as far as it can be shown: a 10 MB answer costs no 10 MB of work.
    text = sanitize(raw[: limit * 2], collapse_whitespace=False)[:limit]
    if received > limit:
        cut = received - limit
        text += (
            f"\n[... truncated: {cut:,} of {received:,} characters cut (mcp.servers.{server.name}.max_result_chars)]"
        )
    if is_error:
        ctx.events.emit(EventKind.MCP_CALL, stage, server=server.name, tool=remote.name, error=text[:300])
        raise ToolError(f"mcp server {server.name!r}: {remote.name} answered with an error: {cap(text, 1000)}")
    if not text.strip():
        return f"The MCP tool {remote.canonical} returned nothing."
    title = f"{remote.name} ({server.name}): {_argument_line(arguments)}"[:300]
    body = (
        f"origin: {server.origin}/{remote.name}\n"
        f"arguments: {json.dumps(arguments, ensure_ascii=False, sort_keys=True)}\n\n{text}"
    )
    url = source_url(server.name, remote.name, arguments)
    source, is_new = SourceArchive(ctx.project.dir).add(
        url=url,
        final_url=url,
        title=sanitize(title),
        content_type="text/plain",
        body=raw.encode("utf-8", "replace")[: limit * 4],
        text=body,
        origin=f"{server.origin}/{remote.name}",
    )
    ctx.events.emit(
        EventKind.MCP_CALL,
        stage,
        server=server.name,
        tool=remote.name,
        source=source.id,
        new_source=is_new,
        result_chars=received,
        truncated=received > limit,
        duration_s=round(time.monotonic() - started, 3),
    )
    header = (
        f"Source {source.id} ({source.file}), from the MCP server '{server.name}' ({remote.canonical}); "
        f"fetched_at {source.fetched_at}."
    )
    return f"{header}\n{wrap(f'{server.origin}/{remote.name}', text)}"


def _argument_line(arguments: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" if isinstance(v, str) else f"{k}={json.dumps(v)}" for k, v in arguments.items())
