"""status.json: the model of a project's progress, its transitions, and safe loading.

A status.json that cannot be read is never silently reset: loading raises CorruptState
after keeping a copy, and the message says how to recover.
"""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from pensieve.citations.summary import CheckSummary
from pensieve.clock import backup_stamp, now_iso, parse_iso
from pensieve.errors import CorruptState, format_validation_error
from pensieve.hashing import sha256_of
from pensieve.project.status_view import SCHEMA_VERSION, ProjectState, StageState
from pensieve.project.workspace import MAX_STATUS_BYTES, Project, atomic_copy, atomic_write_text, read_file_nofollow
from pensieve.stages import STAGE_NAMES


class Usage(BaseModel):
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    # None while no call had a known price; a sum once any did.
    cost_usd: float | None = None
    cost_known: bool = True

    def add(self, prompt_tokens: int, completion_tokens: int, cost_usd: float | None) -> None:
        self.calls += 1
        self.prompt_tokens += prompt_tokens
        self.completion_tokens += completion_tokens
        if cost_usd is None:
            self.cost_known = False
        else:
            self.cost_usd = round((self.cost_usd or 0.0) + cost_usd, 8)

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class ContextStats(BaseModel):
    """What a stage sent the model over all its attempts (a stage sent back, or re-run,
    adds to it): requests, characters (the whole conversation of each request, summed), tool
    results elided to fit the budget, and calls made again because their result had been elided."""

    requests: int = 0
    chars_sent: int = 0
    elided: int = 0
    rereads: int = 0

    def plus(self, other: ContextStats) -> ContextStats:
        return ContextStats(
            requests=self.requests + other.requests,
            chars_sent=self.chars_sent + other.chars_sent,
            elided=self.elided + other.elided,
            rereads=self.rereads + other.rereads,
        )


class StageStatus(BaseModel):
    status: StageState = "pending"
    started_at: str | None = None
    finished_at: str | None = None
    error: str | None = None
    model: str | None = None
    attempts: int = 0
    usage: Usage = Field(default_factory=Usage)
    # Calls the dispatcher ran in the stage's last attempt, by tool.
    tool_calls: dict[str, int] = Field(default_factory=dict)
    # The last attempt's turns that asked for a better artifact (reminder, contract,
    # cut_off), tool calls the model wrote as text, and the contracts its artifact broke.
    repairs: list[str] = Field(default_factory=list)
    text_tool_calls: int = 0
    context: ContextStats = Field(default_factory=ContextStats)
    # Sourced sentences of the version this stage rewrote that its artifact no longer says
    # (pensieve/evidence/lost_facts.py): warnings for the writer, not failures.
    lost_facts: list[str] = Field(default_factory=list)
    violations: list[str] = Field(default_factory=list)
    artifact: str | None = None
    artifact_sha256: str | None = None
    # sha256 of each input file when the stage last started: a later edit makes it stale.
    inputs: dict[str, str] = Field(default_factory=dict)
    # Committed, but its citation check has not run yet: a crash in between is finished
    # by the next run's recovery like the commit itself.
    check_pending: bool = False

    @property
    def duration_s(self) -> float | None:
        start, end = parse_iso(self.started_at), parse_iso(self.finished_at)
        if start and end:
            return (end - start).total_seconds()
        return None


class Status(BaseModel):
    schema_version: int = SCHEMA_VERSION
    id: str
    workspace: str
    status: ProjectState = "pending"
    current_stage: str | None = None
    created_at: str = Field(default_factory=now_iso)
    updated_at: str = Field(default_factory=now_iso)
    stages: dict[str, StageStatus] = Field(default_factory=lambda: {name: StageStatus() for name in STAGE_NAMES})
    # Counted across every run and never reset, so budgets survive a resume.
    usage: Usage = Field(default_factory=Usage)
    error: str | None = None
    # The latest citation check: figures and problems (see pensieve.citations.check).
    problems: list[str] = Field(default_factory=list)
    check: CheckSummary | None = None

    @classmethod
    def new(cls, project_id: str, workspace: str) -> Status:
        return cls(id=project_id, workspace=workspace)

    def to_json(self) -> str:
        return json.dumps(self.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n"

    def touch(self) -> None:
        self.updated_at = now_iso()

    def first_unfinished(self) -> str | None:
        for name in STAGE_NAMES:
            if self.stages[name].status != "complete":
                return name
        return None


def status_json(project: Project, status: Status) -> dict[str, Any]:
    """The object `pensieve status ID --json` prints and the studio's GET /api/projects/ID
    answers: status.json's fields and `evidence`, the latest article's stored evidence
    summary (None when there is none; read, never recomputed)."""
    from pensieve.evidence.store import latest_summary

    summary = latest_summary(project.dir)
    return {**status.model_dump(mode="json"), "evidence": summary.as_json() if summary is not None else None}


def load_status(path: Path, *, keep_copy: bool = True) -> Status:
    """Read status.json, refusing (never resetting) anything unreadable."""
    try:
        raw = read_file_nofollow(path, max_size=MAX_STATUS_BYTES)
    except FileNotFoundError:
        raise CorruptState(f"{path} is missing; the project directory is incomplete") from None
    except OSError as exc:
        if exc.errno == errno.EFBIG:  # planted: never read whole, nor copied
            raise CorruptState(
                f"{path} is larger than {MAX_STATUS_BYTES:,} bytes, far more than a status file. "
                f"Run `pensieve repair {path.parent.name}` to rebuild it from the artifacts"
            ) from None
        # A link (ELOOP), a directory, a file we may not read: refused, never followed or reset.
        raise CorruptState(f"{path} cannot be read ({exc.strerror}); it must be a regular file") from None
    try:
        # The usual case in one pass (JSON straight into the model); anything else takes the
        # step-by-step path below, which says precisely what is wrong.
        quick = Status.model_validate_json(raw)
    except ValueError:  # ValidationError is one
        quick = None
    if quick is not None and "schema_version" in quick.model_fields_set and quick.schema_version == SCHEMA_VERSION:
        for name in STAGE_NAMES:
            quick.stages.setdefault(name, StageStatus())
        return quick
    problem: str | None = None
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        problem = f"is not valid JSON ({exc.__class__.__name__}: {exc})" if raw.strip() else "is empty"
        data = None
    except RecursionError:
        problem, data = "is nested too deeply to be a status file", None
    if problem is None:
        version = data.get("schema_version") if isinstance(data, dict) else None
        if version != SCHEMA_VERSION:
            problem = f"has unknown schema version {version!r} (this Pensieve reads version {SCHEMA_VERSION})"
    if problem is None:
        try:
            status = Status.model_validate(data)
        except ValidationError as exc:
            problem = f"does not match the status schema at {format_validation_error(exc, noun='field', limit=1)}"
        except RecursionError:
            problem = "is nested too deeply to be a status file"
        else:
            for name in STAGE_NAMES:
                status.stages.setdefault(name, StageStatus())
            return status
    backup = path.with_name(f"status.corrupt-{backup_stamp()}.json")
    kept = ""
    if keep_copy:
        if not backup.exists():
            atomic_copy(path, backup)
        kept = f"; a copy was kept as {backup.name}"
    raise CorruptState(
        f"{path} {problem}{kept}. "
        f"Fix the file by hand, or run `pensieve repair {path.parent.name}` to rebuild it from the artifacts"
    )


def save_status(path: Path, status: Status) -> None:
    status.touch()
    atomic_write_text(path, status.to_json())


def _keep_aside(path: Path, backup: Path) -> None:
    """Keep the replaced status.json: a copy, or for one larger than a status file can be (a
    planted, maybe sparse, multi-gigabyte file) a hard link, so it is never written out whole."""
    if path.stat().st_size <= MAX_STATUS_BYTES:
        atomic_copy(path, backup)
    else:
        os.link(path, backup, follow_symlinks=False)


def rebuild_status(project: Project) -> Status:
    """Rebuild status.json from the artifacts on disk: a stage whose artifact exists (and
    whose predecessors are complete) is complete. The unreadable file is kept aside."""
    from pensieve.stages import STAGES

    path = project.status_path
    if path.is_file():
        _keep_aside(path, path.with_name(f"status.replaced-{backup_stamp()}.json"))
    status = Status.new(project.id, project.workspace.name)
    for stage in STAGES:
        artifact = project.file(stage.writes)
        deps_done = all(status.stages[dep].status == "complete" for dep in stage.after)
        if deps_done and artifact.is_file():
            entry = status.stages[stage.name]
            entry.status = "complete"
            entry.artifact = stage.writes
            entry.artifact_sha256 = sha256_of(artifact)
    done = all(s.status == "complete" for s in status.stages.values())
    status.status = (
        "complete" if done else ("paused" if any(s.status == "complete" for s in status.stages.values()) else "pending")
    )
    status.current_stage = status.first_unfinished()
    save_status(path, status)
    return status
