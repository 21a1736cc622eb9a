"""What `list` shows of a status.json, read without pydantic.

`list`, the studio's projects page and the list_projects tool read every project's
status.json; over thousands of projects building the full model (`pensieve.project.status`,
pydantic) costs more than the reading, and a `list` that needs no model should not import
pydantic at all. This reads the fields a row shows and checks each of them as the model
does: a file whose shown fields do not hold is `unreadable` here as it is for
`load_status`. The rest of the file is checked by `load_status` when the project is opened
(`run`, `status`, `show`), which says precisely what is wrong.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal, get_args

SCHEMA_VERSION = 1

ProjectState = Literal["pending", "running", "paused", "complete", "error"]
StageState = Literal["pending", "running", "complete", "error", "interrupted"]
PROJECT_STATES: frozenset[str] = frozenset(get_args(ProjectState))
STAGE_STATES: frozenset[str] = frozenset(get_args(StageState))


@dataclass(frozen=True, slots=True)
class StatusView:
    status: str
    current_stage: str | None  # the stage in progress, else the first one not complete
    updated_at: str | None
    problems: int  # citation problems found by the last check
    stages_done: int
    cost_usd: float | None
    tokens: int


class _Unreadable(Exception):
    pass


def read_status_view(raw: bytes, stage_names: tuple[str, ...]) -> StatusView | None:
    """The row fields of a status.json's bytes; None when the file is not a status file
    this Pensieve reads (not JSON, another schema version, a shown field of the wrong type)."""
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        return None
    try:
        return _view(data, stage_names)
    except _Unreadable:
        return None


def _view(data: Any, stage_names: tuple[str, ...]) -> StatusView:
    if not isinstance(data, dict):
        raise _Unreadable
    version = data.get("schema_version")
    if type(version) is not int or version != SCHEMA_VERSION:
        raise _Unreadable
    _field(data, "id", str)
    _field(data, "workspace", str)
    status = _field(data, "status", str, "pending")
    if status not in PROJECT_STATES:
        raise _Unreadable
    current = _field(data, "current_stage", (str, type(None)))
    updated = _field(data, "updated_at", str)
    problems = _field(data, "problems", list, [])
    if not all(isinstance(problem, str) for problem in problems):
        raise _Unreadable
    stages = _field(data, "stages", dict)
    states: dict[str, str] = {}
    for name, entry in (stages or {}).items():
        if not isinstance(entry, dict):
            raise _Unreadable
        state = _field(entry, "status", str, "pending")
        if state not in STAGE_STATES:
            raise _Unreadable
        states[name] = state
    if stages is None:  # the model's default: every stage pending
        states = dict.fromkeys(stage_names, "pending")
    usage = _field(data, "usage", dict, {})
    tokens = _field(usage, "prompt_tokens", int, 0) + _field(usage, "completion_tokens", int, 0)
    cost = _field(usage, "cost_usd", (int, float, type(None)))
    if not current:
        current = next((name for name in stage_names if states.get(name, "pending") != "complete"), None)
    return StatusView(
        status=status,
        current_stage=current,
        updated_at=updated,
        problems=len(problems),
        stages_done=sum(1 for state in states.values() if state == "complete"),
        cost_usd=float(cost) if cost is not None else None,
        tokens=tokens,
    )


def _field(data: dict[str, Any], key: str, kind: type | tuple[type, ...], default: Any = None) -> Any:
    """data[key] if it is of `kind` (a bool is not a number), `default` when absent."""
    if key not in data:
        return default
    value = data[key]
    if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
        raise _Unreadable
    if not isinstance(value, kind):
        raise _Unreadable
    return value
