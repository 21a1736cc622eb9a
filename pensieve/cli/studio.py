"""`pensieve studio`: the local web app (pensieve/studio/). Imports nothing heavy until run."""

from __future__ import annotations

from typing import Annotated

import typer

from pensieve.cli.support import WorkspaceOpt, err, fail, guarded, out, workspace_of
from pensieve.errors import UsageError


def studio(
    workspace: WorkspaceOpt = "default",
    host: Annotated[
        str, typer.Option("--host", help="Address to serve on. Anything but loopback is reachable by others.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port to serve on (0: any free port).", min=0, max=65535)] = 8765,
    open_browser: Annotated[bool, typer.Option("--open", help="Open the studio in the default browser.")] = False,
) -> None:
    """Start the studio, a local web app to start, watch, read, check, edit and re-run articles.

    Prints the address to open, with its access token. Ctrl-C stops it (runs it started go on).

    Example: pensieve studio --open
    """
    import socket

    from pensieve.studio.security import is_loopback, new_token

    ws = guarded(lambda: workspace_of(workspace))
    from pensieve.studio.app import create_app, token_from_env

    token = guarded(token_from_env) or new_token()
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        probe = socket.socket(family, socket.SOCK_STREAM)
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind((host.strip("[]"), port))
        probe.listen(128)  # connections wait in the backlog until the server takes them
    except OSError as exc:
        fail(UsageError(f"cannot listen on {host}:{port} ({exc.strerror}); choose another --port or --host"))
    extra: tuple[str, ...] = ()
    if not is_loopback(host):
        err.print(
            f"warning: serving on {host}, reachable from other machines; anyone who has the token can spend "
            "your model budget and read your projects. Prefer an SSH tunnel to a studio on 127.0.0.1.",
            markup=False,
        )
        if host in ("0.0.0.0", "::"):  # noqa: S104 - said explicitly, warned above
            extra = tuple(_own_addresses())
    sock_port = probe.getsockname()[1]
    app = create_app(ws, token=token, host=host, port=sock_port, extra_hosts=extra)

    import uvicorn

    from pensieve.studio.runs import STOPPING
    from pensieve.studio.server import server_config

    class _Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: object) -> None:
            STOPPING.set()  # live feeds end, so open connections close at once
            super().handle_exit(sig, frame)  # type: ignore[arg-type]

    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{sock_port}/?token={token}"
    config = server_config(app, timeout_graceful_shutdown=1, server_header=False)
    server = _Server(config)
    out.print(url, markup=False, soft_wrap=True)
    err.print(f"studio for workspace {ws.name!r}; Ctrl-C stops it (runs it started carry on)", markup=False)
    if open_browser:
        import webbrowser

        webbrowser.open(url)
    try:
        server.run(sockets=[probe])
    except KeyboardInterrupt:
        pass
    finally:
        probe.close()
    err.print("studio stopped", markup=False)


def _own_addresses() -> list[str]:
    import socket

    names = {socket.gethostname(), socket.getfqdn()}
    found = set(names)
    for name in names:
        try:
            for info in socket.getaddrinfo(name, None):
                found.add(str(info[4][0]))
        except OSError:
            continue
    return sorted(found)
