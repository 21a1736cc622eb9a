"""How the citation machinery plugs into the pipeline.

Which stage's artifact is transformed, and after which stages the check runs, are fields
of the stage rows (pensieve.stages); this module does the work for any row.
"""

from __future__ import annotations

from pensieve.citations.check import CheckReport, Problem, run_check
from pensieve.citations.cited_sources import load_sources
from pensieve.config import Settings
from pensieve.project.workspace import Project
from pensieve.stages import CITING_FILES, CLAIMS_TABLE, Stage

# Every file the check reads when it exists; `upto` limits which of them must be consistent.
_INPUTS = (*CITING_FILES, CLAIMS_TABLE)


def transform_artifact(project: Project, stage: Stage, text: str, settings: Settings | None = None) -> str:
    if stage.transform is None:
        return text
    style = settings.article.reference_style if settings is not None else "numbered"
    return stage.transform(text, load_sources(project.dir), style)


def check_project(project: Project, settings: Settings, upto: str | None = None) -> CheckReport:
    texts = {}
    for name in _INPUTS:
        path = project.file(name)
        if path.is_file():
            texts[str(name)] = path.read_text(encoding="utf-8", errors="replace")
    return run_check(
        texts,
        load_sources(project.dir),
        settings.check.min_cited_paragraph_share,
        upto,
        style=settings.article.reference_style,
    )


def resend_instructions(report: CheckReport, stage: Stage) -> str | None:
    """What to tell a stage whose own artifact failed the check, if it can fix it."""
    fixable = [p for p in report.problems if p.file == stage.writes and _fixable(p, report)]
    if not fixable:
        return None
    listed = "\n".join(f"- {p.kind}: {p.detail}" for p in fixable)
    return (
        f"The citation check found problems in {stage.writes}. Start from scratch/{stage.writes}, your previous "
        f"text with source ids ({stage.writes} itself is renumbered for the reader), and write {stage.writes} "
        "again, fixing each one: "
        "cite only source ids that exist in sources/index.md (as [S3]); never write URLs or a reference list "
        "yourself (it is generated); make sure most paragraphs cite a source.\n" + listed
    )


def _fixable(problem: Problem, report: CheckReport) -> bool:
    # Without any archived source, no rewrite can raise the share of cited paragraphs.
    return problem.kind != "low_citation_share" or report.sources > 0
