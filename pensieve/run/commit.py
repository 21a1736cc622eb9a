"""The two-step commit of a stage's artifact, which survives a crash between any two
instructions.

The agent writes into `.staging/<stage>/`; on success a COMMIT marker (the artifact's
sha256 and time) is written there, then the previous artifact is copied to `history/`,
the new one renamed into place and status.json updated. A run that finds a COMMIT marker
finishes that commit instead of running the stage again, so a finished stage is never
paid for twice.
"""

from __future__ import annotations

import contextlib
import errno
import json
from dataclasses import asdict, dataclass
from pathlib import Path

from pensieve.clock import history_stamp, now_iso
from pensieve.hashing import sha256_of
from pensieve.project.status import StageStatus
from pensieve.project.workspace import Project, atomic_copy, atomic_move, atomic_write_text, remove_tree
from pensieve.stages import Stage

COMMIT_MARKER = "COMMIT.json"


@dataclass(frozen=True)
class CommitMarker:
    artifact: str
    sha256: str
    finished_at: str


def staging_dir(project: Project, stage: Stage) -> Path:
    return project.staging_dir / stage.name


def staged_artifact(project: Project, stage: Stage) -> Path:
    return staging_dir(project, stage) / stage.writes


def clear_staging(project: Project, stage: Stage) -> None:
    # Never through a link: rmtree below a linked .staging would delete outside the project.
    if project.staging_dir.is_symlink() or staging_dir(project, stage).is_symlink():
        raise OSError(
            errno.ELOOP, "is a symbolic link; Pensieve does not delete through links", str(project.staging_dir)
        )
    # remove_tree, not shutil.rmtree: a planted deep tree must not raise RecursionError.
    with contextlib.suppress(OSError):  # as ignore_errors did: what is left is cleared next time
        remove_tree(staging_dir(project, stage))


def mark_committed(project: Project, stage: Stage) -> CommitMarker:
    """Step one: from here on the stage counts as finished, whatever happens next."""
    marker = CommitMarker(str(stage.writes), sha256_of(staged_artifact(project, stage)), now_iso())
    atomic_write_text(staging_dir(project, stage) / COMMIT_MARKER, json.dumps(asdict(marker)))
    return marker


def pending_commit(project: Project, stage: Stage) -> CommitMarker | None:
    """A commit a crash interrupted after step one, if there is one."""
    path = staging_dir(project, stage) / COMMIT_MARKER
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        marker = CommitMarker(str(data["artifact"]), str(data["sha256"]), str(data["finished_at"]))
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        return None  # written atomically by us, so only a hand could damage it: the stage runs again
    return marker if marker.artifact == stage.writes else None


def move_into_place(project: Project, stage: Stage, marker: CommitMarker, entry: StageStatus) -> None:
    """Step two (idempotent): the artifact into place, the replaced one kept in history/,
    the stage's entry marked complete. The caller saves status.json, then clears staging."""
    staged = staged_artifact(project, stage)
    target = project.file(stage.writes)
    if staged.is_file():
        if target.is_file() and sha256_of(target) != marker.sha256:
            keep_in_history(project, target)
        atomic_move(staged, target)
    entry.status = "complete"
    entry.error = None
    entry.finished_at = marker.finished_at
    entry.artifact = stage.writes
    entry.artifact_sha256 = marker.sha256
    entry.check_pending = stage.citation_check


def keep_in_history(project: Project, target: Path) -> None:
    kept = project.history_dir / f"{target.stem}.{history_stamp()}{target.suffix}"
    # Atomic too: a crash mid-copy must not leave a truncated "kept" version behind.
    atomic_copy(target, kept)
