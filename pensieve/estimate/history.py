"""What finished projects actually used, against what the estimate would have said for them.

For each finished project of the workspace, each complete stage is planned again from
that project's own files (its real prompts and the real sizes of what it read and wrote)
and simulated; the stage's recorded usage divided by that prediction is how far the
conversation model is off for this stage, with these settings and this model. The
estimate of a new project is corrected by those ratios, and its range spans them.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field

from pensieve.config import Settings
from pensieve.errors import PensieveError
from pensieve.estimate.conversation import Figures, simulate
from pensieve.estimate.plan import StagePlan, file_size, shape_of
from pensieve.project.source_archive import SourceArchive
from pensieve.project.status import load_status
from pensieve.project.workspace import BRIEF_FILE, Project
from pensieve.stages import ARTIFACTS, STAGES

# Without history: the range is the prediction divided and multiplied by this (2.9x wide).
NO_HISTORY_SPREAD = 1.7
# With history: the observed ratios, widened by this margin (more with a single project).
MARGIN = {1: 1.4}
DEFAULT_MARGIN = 1.2
# No range is wider than this (high / low): a range that says nothing is no estimate.
MAX_SPREAD = 2.9
# The most recent finished projects read; older ones add little and cost time.
MAX_PROJECTS = 10


@dataclass(frozen=True)
class Observation:
    project: str
    predicted: Figures
    actual: Figures


@dataclass
class History:
    projects: list[str] = field(default_factory=list)
    by_stage: dict[str, list[Observation]] = field(default_factory=dict)
    # Each artifact's size in the finished projects (the expected size of one not yet written).
    sizes: dict[str, list[int]] = field(default_factory=dict)

    def expected_size(self, name: str) -> int | None:
        found = self.sizes.get(name)
        return int(statistics.median(found)) if found else None


def project_sizes(project: Project) -> dict[str, int]:
    sizes = {}
    for name in (BRIEF_FILE, *ARTIFACTS):
        size = file_size(project, name)
        if size is not None:
            sizes[name] = size
    return sizes


def read_history(projects: list[Project], settings: Settings, plan_for: Callable[[str], StagePlan]) -> History:
    """Observations from the finished projects among `projects` (unreadable ones skipped).

    Each finished stage is simulated with the prompts of the project being estimated
    (`plan_for`, by stage) and the finished project's own file sizes: the prompts differ
    between projects by a title and an id, the files by thousands of characters, and
    rendering every stage's prompts again for ten projects would take seconds."""
    history = History()
    finished: list[tuple[str, Project]] = []
    for project in projects:
        try:
            status = load_status(project.status_path, keep_copy=False)
        except (PensieveError, OSError):
            continue
        if status.status == "complete":
            finished.append((status.updated_at, project))
    for _updated, project in sorted(finished, key=lambda item: item[0], reverse=True)[:MAX_PROJECTS]:
        status = load_status(project.status_path, keep_copy=False)
        sizes = project_sizes(project)
        sourced = bool(SourceArchive(project.dir).entries())
        history.projects.append(project.id)
        for name, size in sizes.items():
            history.sizes.setdefault(name, []).append(size)
        for stage in STAGES:
            entry = status.stages[stage.name]
            if entry.status != "complete" or entry.usage.calls == 0:
                continue
            predicted = simulate(shape_of(plan_for(stage.name), sizes, settings, sourced=sourced))
            usage = entry.usage
            actual = Figures(usage.calls, usage.prompt_tokens, usage.completion_tokens)
            history.by_stage.setdefault(stage.name, []).append(Observation(project.id, predicted, actual))
    return history


def band(value: float, ratios: list[float]) -> tuple[float, float, float]:
    """(low, expected, high) for a predicted value, given actual/predicted ratios seen."""
    if value <= 0:
        return 0.0, 0.0, 0.0
    if not ratios:
        return value / NO_HISTORY_SPREAD, value, value * NO_HISTORY_SPREAD
    margin = MARGIN.get(len(ratios), DEFAULT_MARGIN)
    expected = value * statistics.median(ratios)
    low, high = value * min(ratios) / margin, value * max(ratios) * margin
    if high > MAX_SPREAD * low:
        # Projects that differ this much: the range keeps its middle and the widest spread.
        centre, half = math.sqrt(low * high), math.sqrt(MAX_SPREAD)
        low, high = centre / half, centre * half
    return low, min(max(expected, low), high), high


def ratios(observations: list[Observation], pick: Callable[[Figures], float]) -> list[float]:
    return [pick(o.actual) / pick(o.predicted) for o in observations if pick(o.predicted) > 0]
