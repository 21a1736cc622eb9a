"""How the citation machinery plugs into the pipeline.

Transforms rewrite a stage's artifact before it is committed (reference lists generated
by code). Checks run after the Drafter, the Reviser and the Polisher; a failed check after
the Polisher sends it back once with the list of problems.
"""

from __future__ import annotations

from collections.abc import Callable

from pensieve.citations.check import CheckReport, Problem, run_check
from pensieve.citations.references import numbered_for_reader, with_references, with_source_list
from pensieve.citations.sources import Source, load_sources
from pensieve.config import Settings
from pensieve.workspace import Project

Transform = Callable[[str, dict[str, Source]], str]

TRANSFORMS: dict[str, Transform] = {
    "researcher": with_source_list,
    "drafter": with_references,
    "reviser": with_references,
    "polisher": numbered_for_reader,
}

# The check after each stage covers the citing files that exist up to its artifact.
CHECKED_AFTER: dict[str, str] = {"drafter": "draft_v1.md", "reviser": "draft_v2.md", "polisher": "final.md"}
_INPUTS = ("research_notes.md", "draft_v1.md", "draft_v2.md", "final.md", "fact_check.md")


def transform_artifact(project: Project, stage: str, text: str) -> str:
    transform = TRANSFORMS.get(stage)
    if transform is None:
        return text
    return transform(text, load_sources(project.dir))


def check_project(project: Project, settings: Settings, upto: str | None = None) -> CheckReport:
    texts = {}
    for name in _INPUTS:
        path = project.file(name)
        if path.is_file():
            texts[name] = path.read_text(encoding="utf-8", errors="replace")
    return run_check(texts, load_sources(project.dir), settings.check.min_cited_paragraph_share, upto)


def repolish_instructions(report: CheckReport) -> str | None:
    """What to tell the Polisher when the final article failed the check, if it can fix it."""
    fixable = [p for p in report.problems if p.file == "final.md" and _fixable(p, report)]
    if not fixable:
        return None
    listed = "\n".join(f"- {p.kind}: {p.detail}" for p in fixable)
    return (
        "The citation check found problems in the final article. Write final.md again, fixing each one: "
        "cite only source ids that exist in sources/index.md (as [S3]); never write URLs or a reference list "
        "yourself (it is generated); make sure most paragraphs cite a source.\n" + listed
    )


def _fixable(problem: Problem, report: CheckReport) -> bool:
    # Without any archived source, no rewrite can raise the share of cited paragraphs.
    return problem.kind != "low_citation_share" or report.sources > 0
