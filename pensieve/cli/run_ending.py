"""`pensieve run`'s last act: the run_end event saying how the process ended.

Written once the project is known, so the studio learns a child run's outcome from the
project's event log, never from the run's output.
"""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING

from pensieve.errors import PensieveError

if TYPE_CHECKING:
    from pensieve.project.run_outcome import Outcome
    from pensieve.project.workspace import Project


def record_ending(
    workspace: str,
    project_id: str,
    project: Project | None,
    outcome: Outcome,
    exit_code: int,
    *,
    error: PensieveError | str | None = None,
    failed_stage: str | None = None,
    message: str | None = None,
) -> None:
    """Append the run_end event to the project's events.jsonl (best effort: nothing here
    may change how the run ends). An ending by error only when the run's starter asked for
    it: a run refused in a terminal leaves every file as it was. A refusal before the
    project was opened looks it up without the configuration, which may be what was refused."""
    from pensieve.project.run_outcome import RECORD_ERRORS_ENV, RunEnd, record_run_end

    if outcome == "error" and os.environ.get(RECORD_ERRORS_ENV) != "1":
        return
    project = project or _project_quietly(workspace, project_id)
    if project is None:
        return  # no such project, or a name that is not one: nowhere to say it
    kind = error.kind.value if isinstance(error, PensieveError) else None
    end = RunEnd(
        outcome=outcome,
        exit_code=exit_code,
        pid=os.getpid(),
        error=None if error is None else str(error),
        error_kind=kind,
        failed_stage=failed_stage,
        message=message,
    )
    record_run_end(project, end)


def _project_quietly(workspace: str, project_id: str) -> Project | None:
    from pensieve.config_files import pensieve_home
    from pensieve.project.workspace import open_workspace

    with contextlib.suppress(PensieveError, OSError, ValueError):
        return open_workspace(pensieve_home(), workspace).existing_project(project_id)
    return None
