"""A cheap check that the configuration is valid, for the read-only commands (`list`).

A configuration validated before, unchanged since (the same file, environment overrides and
Pensieve code), is not validated again: no pydantic, no tool modules to import. Here, above
`pensieve.config`, rather than beside the config file's location (`config_files`), which
`config` itself imports: the check calls `config.validate_config` when it must.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING

from pensieve.config_files import ENV_OVERRIDES, config_path, pensieve_home

if TYPE_CHECKING:
    from pensieve.project.workspace import Workspace

__all__ = ["check_config", "checked_workspace", "config_check_record"]


# -- a cheap check for read-only commands ---------------------------------------------------
def config_check_record(home: Path, env: dict[str, str]) -> Path:
    """Where the last valid configuration of `home` is remembered: the user's cache
    directory, never the Pensieve home (a refused command leaves the user's tree as it was)."""
    from pensieve.hashing import sha256_of_bytes

    cache = Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    name = sha256_of_bytes(str(home.resolve()).encode("utf-8", "surrogateescape"))[:24]
    return cache / "pensieve" / f"config-checked-{name}.txt"


def _code_identity() -> list[list[object]]:
    """What the validity of a configuration depends on besides the file: this Pensieve's code
    (the sections here, the stage names, the tool catalog), by file identity."""
    found: list[list[object]] = []
    package = Path(__file__).parent.parent  # pensieve/
    for folder in (package, package / "tools"):
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.name.endswith(".py"):
                    info = entry.stat()
                    found.append([str(folder.name), entry.name, info.st_size, info.st_mtime_ns, info.st_ino])
    return sorted(found, key=lambda item: (str(item[0]), str(item[1])))


def _check_key(path: Path | None, env: dict[str, str]) -> str:
    import json

    from pensieve import __version__
    from pensieve.hashing import sha256_of_bytes

    file: list[object] | None = None
    if path is not None:
        info = path.stat()
        file = [str(path.resolve()), info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns]
    overrides = {var: env.get(var) for var in ENV_OVERRIDES}
    # Stored as a hash: the record says nothing of the configuration or the environment.
    return sha256_of_bytes(json.dumps([__version__, file, overrides, _code_identity()]).encode())


def check_config(home: Path | None = None, environ: dict[str, str] | None = None) -> None:
    """Validate the configuration exactly as load_settings does (UsageError naming the bad
    key), for commands that only need to know it is valid (`list`). A configuration that
    was validated before, unchanged since (the same file, environment overrides and
    Pensieve code), is not validated again: no pydantic, no tool modules to import."""
    env = dict(os.environ if environ is None else environ)
    home = home or pensieve_home(env)
    path = config_path(home, env)
    if path is None and not any(env.get(var) for var in ENV_OVERRIDES):
        return  # nothing to read: nothing to check
    try:
        key = _check_key(path, env)
    except OSError:  # the file went away meanwhile: load_settings says what is wrong
        key = ""
    record = config_check_record(home, env)
    with contextlib.suppress(OSError, ValueError):
        if key and record.read_text(encoding="utf-8") == key:
            return
    from pensieve.config import validate_config

    validate_config(home, env)
    if key:
        from pensieve.project.workspace import atomic_write_text

        with contextlib.suppress(OSError):  # an unwritable cache: checked every time
            record.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(record, key)


def checked_workspace(name: str) -> Workspace:
    """The workspace `name` of this Pensieve home, once the configuration is known valid."""
    from pensieve.project.workspace import open_workspace

    check_config()
    return open_workspace(pensieve_home(), name)
