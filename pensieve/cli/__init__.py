"""The command line: every `pensieve` command, thin.

Each module parses one family of commands, calls the layer below (`run`, `batch`, `project`,
`publish`, `evidence`, `topics`, `studio`) and renders what it returns; none holds logic of
its own. `main.app` is the Typer application; `launch` (one level up) answers `list --json`
before Typer is imported. Nothing imports this package but `launch` and the tests.
"""

__all__ = ["batch", "config_check", "evidence", "export", "main", "progress", "studio", "support", "tools", "topics"]
