"""Which finished stages are out of date because a file they read was edited since."""

from __future__ import annotations

from pensieve.hashing import sha256_of
from pensieve.project.status import Status
from pensieve.project.workspace import Project
from pensieve.stages import STAGES, Stage


def input_hashes(project: Project, stage: Stage) -> dict[str, str]:
    files = (*stage.reads, *stage.optional_reads)
    return {name: sha256_of(project.file(name)) for name in files if project.file(name).is_file()}


def stale_stages(project: Project, status: Status) -> dict[str, list[str]]:
    """Complete stages whose input files changed since they ran (e.g. edited by hand).

    A missing input is not a change: its stage runs again (`missing_artifacts`)."""
    stale: dict[str, list[str]] = {}
    for stage in STAGES:
        entry = status.stages[stage.name]
        if entry.status != "complete" or not entry.inputs:
            continue
        now = input_hashes(project, stage)
        changed = [name for name, digest in entry.inputs.items() if name in now and now[name] != digest]
        if changed:
            stale[stage.name] = changed
    return stale


def missing_artifacts(project: Project, status: Status) -> dict[str, str]:
    """Complete stages whose artifact is no longer in the project: {stage: artifact}."""
    missing: dict[str, str] = {}
    for stage in STAGES:
        entry = status.stages[stage.name]
        if entry.status == "complete" and not project.file(stage.writes).is_file():
            missing[stage.name] = str(stage.writes)
    return missing


def demote_missing(project: Project, status: Status) -> dict[str, str]:
    """Make every complete stage whose artifact was deleted pending again (in memory; the
    caller saves), so that it runs again instead of a later stage running without its input."""
    missing = missing_artifacts(project, status)
    for name, artifact in missing.items():
        entry = status.stages[name]
        entry.status = "pending"
        entry.error = f"{artifact} was missing from the project; the stage runs again"
        entry.check_pending = False
    if missing and status.status == "complete":
        status.status = "paused"
    return missing
