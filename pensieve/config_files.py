"""Where the configuration is, without pydantic.

`pensieve.config` builds the typed Settings (and re-exports what is here); read-only
commands that only need to know the configuration is valid call
`pensieve.cli.config_check.check_config`, which validates through `pensieve.config` only
when the configuration changed.
"""

from __future__ import annotations

import os
from pathlib import Path

from pensieve.errors import UsageError

__all__ = ["ENV_OVERRIDES", "config_path", "pensieve_home"]


def pensieve_home(environ: dict[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    return Path(env.get("PENSIEVE_HOME") or ".").expanduser().resolve()


def config_path(home: Path, environ: dict[str, str] | None = None) -> Path | None:
    """The config file in force: PENSIEVE_CONFIG, else configs/pensieve.yaml under home."""
    env = os.environ if environ is None else environ
    named = env.get("PENSIEVE_CONFIG")
    if named:
        path = Path(named).expanduser()
        if not path.is_file():
            raise UsageError(f"PENSIEVE_CONFIG names {path}, which is not a file; fix the path or unset it")
        return path
    default = home / "configs" / "pensieve.yaml"
    return default if default.is_file() else None


# Environment variables that override config keys (the env layer sits above the file).
ENV_OVERRIDES: dict[str, tuple[str, str, type]] = {
    "PENSIEVE_MODEL": ("llm", "model", str),
    "PENSIEVE_API_BASE": ("llm", "api_base", str),
    "PENSIEVE_SEARCH_PROVIDER": ("search", "provider", str),
    "PENSIEVE_SEARCH_ENDPOINT": ("search", "endpoint", str),
}
