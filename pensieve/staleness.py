"""Which finished stages are out of date because a file they read was edited since."""

from __future__ import annotations

from pensieve.hashing import sha256_of
from pensieve.stages import STAGES, Stage
from pensieve.status import Status
from pensieve.workspace import Project


def input_hashes(project: Project, stage: Stage) -> dict[str, str]:
    files = (*stage.reads, *stage.optional_reads)
    return {name: sha256_of(project.file(name)) for name in files if project.file(name).is_file()}


def stale_stages(project: Project, status: Status) -> dict[str, list[str]]:
    """Complete stages whose input files changed since they ran (e.g. edited by hand)."""
    stale: dict[str, list[str]] = {}
    for stage in STAGES:
        entry = status.stages[stage.name]
        if entry.status != "complete" or not entry.inputs:
            continue
        now = input_hashes(project, stage)
        changed = [name for name, digest in entry.inputs.items() if now.get(name) != digest]
        if changed:
            stale[stage.name] = changed
    return stale
