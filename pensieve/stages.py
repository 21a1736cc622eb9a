"""The ten agents of the pipeline, as data: one row each, one runner for all of them.

`after` names the stages whose artifacts a stage needs; the scheduler starts a stage as
soon as all of them are complete, which is what lets the three reviewers run at once.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Stage:
    name: str
    title: str
    prompt: str  # file name under pensieve/prompts/
    tools: tuple[str, ...]
    reads: tuple[str, ...]
    writes: str
    after: tuple[str, ...]
    optional_reads: tuple[str, ...] = ()


_FILES = ("read_project_file", "write_project_file")

STAGES: tuple[Stage, ...] = (
    Stage(
        name="refiner",
        title="Topic Refiner",
        prompt="refiner.md",
        tools=("search_topics", *_FILES),
        reads=("brief.md",),
        writes="topic_brief.md",
        after=(),
    ),
    Stage(
        name="researcher",
        title="Researcher",
        prompt="researcher.md",
        tools=("web_search", "fetch_url", "search_topics", *_FILES),
        reads=("topic_brief.md",),
        writes="research_notes.md",
        after=("refiner",),
    ),
    Stage(
        name="outliner",
        title="Outliner",
        prompt="outliner.md",
        tools=_FILES,
        reads=("topic_brief.md", "research_notes.md"),
        writes="outline.md",
        after=("researcher",),
    ),
    Stage(
        name="drafter",
        title="Drafter",
        prompt="drafter.md",
        tools=_FILES,
        reads=("topic_brief.md", "research_notes.md", "outline.md"),
        writes="draft_v1.md",
        after=("outliner",),
    ),
    Stage(
        name="content_reviewer",
        title="Content Reviewer",
        prompt="content_reviewer.md",
        tools=_FILES,
        reads=("topic_brief.md", "draft_v1.md"),
        writes="content_review.md",
        after=("drafter",),
    ),
    Stage(
        name="fact_checker",
        title="Fact Checker",
        prompt="fact_checker.md",
        tools=("web_search", "fetch_url", *_FILES),
        reads=("topic_brief.md", "research_notes.md", "draft_v1.md"),
        writes="fact_check.md",
        after=("drafter",),
    ),
    Stage(
        name="style_reviewer",
        title="Style Reviewer",
        prompt="style_reviewer.md",
        tools=_FILES,
        reads=("topic_brief.md", "draft_v1.md"),
        writes="style_review.md",
        after=("drafter",),
    ),
    Stage(
        name="reviser",
        title="Reviser",
        prompt="reviser.md",
        tools=_FILES,
        reads=(
            "topic_brief.md",
            "research_notes.md",
            "draft_v1.md",
            "content_review.md",
            "fact_check.md",
            "style_review.md",
        ),
        writes="draft_v2.md",
        after=("content_reviewer", "fact_checker", "style_reviewer"),
    ),
    Stage(
        name="polisher",
        title="Polisher",
        prompt="polisher.md",
        tools=("text_stats", *_FILES),
        reads=("draft_v2.md",),
        optional_reads=("draft_v1.md",),
        writes="final.md",
        after=("reviser",),
    ),
    Stage(
        name="consistency_checker",
        title="Consistency Checker",
        prompt="consistency_checker.md",
        tools=("list_projects", *_FILES),
        reads=("topic_brief.md", "final.md"),
        writes="consistency_report.md",
        after=("polisher",),
    ),
)

STAGE_NAMES: tuple[str, ...] = tuple(stage.name for stage in STAGES)
BY_NAME: dict[str, Stage] = {stage.name: stage for stage in STAGES}
ARTIFACTS: frozenset[str] = frozenset(stage.writes for stage in STAGES)


def get_stage(name: str) -> Stage:
    from pensieve.errors import UsageError

    try:
        return BY_NAME[name]
    except KeyError:
        raise UsageError(f"unknown stage {name!r}; stages are: {', '.join(STAGE_NAMES)}") from None


def downstream_of(name: str) -> list[str]:
    """The stage and every stage that (transitively) depends on it, in pipeline order."""
    hit = {name}
    for stage in STAGES:
        if any(dep in hit for dep in stage.after):
            hit.add(stage.name)
    return [s for s in STAGE_NAMES if s in hit]
