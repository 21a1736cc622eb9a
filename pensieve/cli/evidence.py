"""`pensieve evidence ID`: each cited sentence, its citations, verdicts and passages; and the
evidence part of `pensieve check`. Registered from cli.py; the alignment (numpy, the
embedding model) is imported inside the commands only."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.text import Text

from pensieve.cli.support import JsonOpt, WorkspaceOpt, err, guarded, out, workspace_of
from pensieve.errors import UsageError
from pensieve.json_text import print_json

if TYPE_CHECKING:
    from pensieve.citations.summary import Problem
    from pensieve.config import Settings
    from pensieve.evidence.schema import ArtifactEvidence
    from pensieve.project.workspace import Project

_MARK = {"supported": "ok", "weak": "weak", "unsupported": "UNSUPPORTED"}


def latest_entry(document: dict[str, Any], project: Project) -> tuple[str, ArtifactEvidence] | None:
    """The latest article on disk and its evidence entry."""
    from pensieve.evidence.store import ALIGNED, well_formed

    for name in reversed(ALIGNED):
        entry = (document.get("artifacts") or {}).get(name)
        if project.file(name).is_file() and well_formed(entry):
            return name, entry
    return None


def one_artifact(document: dict[str, Any], name: str) -> dict[str, Any]:
    """The evidence document cut down to one artifact's entry: the same shape as the whole
    (version, thresholds, artifacts), so whatever reads one reads the other."""
    entry = (document.get("artifacts") or {}).get(name)
    return {**{k: v for k, v in document.items() if k != "artifacts"}, "artifacts": {name: entry}}


def evidence_for_check(project: Project, settings: Settings) -> dict[str, Any] | None:
    """The article's evidence, brought up to date; None when disabled or no article yet."""
    if not settings.evidence.enabled:
        return None
    from pensieve.evidence.hooks import current_evidence

    latest = latest_entry(current_evidence(project, settings), project)
    if latest is None:
        return None
    name, entry = latest
    return {"file": name, "summary": entry["summary"], "sentences": entry["sentences"]}


def share_problem(evidence: dict[str, Any] | None, min_share: float, skipped: str | None = None) -> Problem | None:
    """The article's supported share below check.min_supported_share, as a problem of the
    check (None: the bar is met, or there is nothing to measure). A bar that could not be
    measured (`skipped`: why the evidence check did not run) is not met: a gate that opens
    whenever the embedding model is missing is no gate."""
    from pensieve.citations.summary import Problem

    if evidence is None:
        if skipped is None or min_share <= 0:
            return None
        return Problem(
            "evidence.json",
            "unmeasured_supported_share",
            f"the supported share could not be measured ({skipped}); check.min_supported_share is {min_share:.0%}",
        )
    summary = evidence["summary"]
    share = summary.get("supported_share")
    if share is None or share >= min_share:
        return None
    return Problem(
        evidence["file"],
        "low_supported_share",
        f"{summary['supported']} of {summary['cited_sentences']} cited sentences are supported by their sources "
        f"({share:.0%}; check.min_supported_share is {min_share:.0%})",
    )


def print_check_evidence(evidence: dict[str, Any] | None, problem: Problem | None) -> None:
    """Print the evidence lines of `pensieve check`, and the share's problem if any."""
    if evidence is None:
        if problem is not None:
            out.print(f"problem: {problem}", markup=False)
        return
    summary = evidence["summary"]
    share = summary.get("supported_share")
    if share is None:
        out.print(f"{evidence['file']}: no cited sentences to align with sources", markup=False)
        return
    out.print(
        f"{evidence['file']}: {summary['supported']}/{summary['cited_sentences']} cited sentences supported by "
        f"their sources ({share:.0%}), {summary['weak']} weak, {summary['unsupported']} unsupported",
        markup=False,
    )
    for sentence in evidence["sentences"]:
        if sentence["verdict"] == "unsupported":
            findings = "; ".join(sentence.get("findings") or [])
            out.print(f"unsupported: {' '.join(sentence['text'].split())} ({findings})", markup=False)
    if problem is not None:
        out.print(f"problem: {problem}", markup=False)


def evidence(
    project_id: Annotated[str, typer.Argument(metavar="ID")],
    workspace: WorkspaceOpt = "default",
    as_json: JsonOpt = False,
    file: Annotated[
        str | None, typer.Option("--file", help="draft_v1.md, draft_v2.md or final.md (default: the latest).")
    ] = None,
) -> None:
    """Each cited sentence of the article, its citations, verdicts (supported, weak,
    unsupported) and the source passage found; aligned again only where a file changed.

    Example: pensieve evidence btrees --json
    """

    def action() -> tuple[dict[str, Any], str | None]:
        from pensieve.config import load_settings
        from pensieve.evidence.hooks import current_evidence
        from pensieve.evidence.store import ALIGNED

        if file is not None and file not in ALIGNED:
            raise UsageError(f"--file {file!r}: give one of {', '.join(ALIGNED)}")
        project = workspace_of(workspace).existing_project(project_id)
        document = current_evidence(project, load_settings())
        if file is not None:
            if not project.file(file).is_file():
                raise UsageError(f"{project.id} has no {file} yet")
            return document, file
        latest = latest_entry(document, project)
        return document, latest[0] if latest else None

    document, name = guarded(action)
    if as_json:
        print_json(document if file is None else one_artifact(document, file))
        return
    if name is None:
        err.print(f"{project_id} has no draft yet: evidence is computed for drafts and the final article", markup=False)
        return
    entry = document["artifacts"][name]
    summary = entry["summary"]
    share = summary.get("supported_share")
    shown = f"{share:.0%}" if share is not None else "-"
    out.print(
        f"{name}: {summary['cited_sentences']} cited sentences; {summary['supported']} supported, "
        f"{summary['weak']} weak, {summary['unsupported']} unsupported (supported share {shown})",
        markup=False,
    )
    for sentence in entry["sentences"]:
        out.print("")
        # Article and page text may hold "[...]": Text() keeps rich from reading it as markup.
        out.print(Text(f"[{sentence['index'] + 1}] {_MARK[sentence['verdict']]}: {' '.join(sentence['text'].split())}"))
        for citation in sentence["citations"]:
            passage = citation.get("passage")
            where = f" at {passage['start']}-{passage['end']}" if passage else ""
            if passage and passage.get("page"):
                where += f", p. {passage['page']}"  # a library document's page
            out.print(Text(f"    {citation['source']}: {citation['verdict']}, score {citation['score']:.2f}{where}"))
            if passage:
                text = " ".join(str(passage["text"]).split())
                out.print(Text(f'      "{text[:300]}{" ..." if len(text) > 300 else ""}"'))
            if citation.get("judge"):
                out.print(Text(f"      judge: {citation['judge']['answer']}: {citation['judge'].get('reason', '')}"))
        for finding in sentence.get("findings") or []:
            out.print(Text(f"    finding: {finding}"))
