"""`pensieve export`: publish a finished article as HTML, DOCX, Markdown or JSON, or as an
evidence bundle; `--verify` checks a bundle's hashes. Loads no model."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pensieve.cli.support import WorkspaceOpt, err, fail, guarded, out, workspace_of
from pensieve.errors import UsageError


def export(
    project_id: Annotated[str | None, typer.Argument(metavar="ID", help="The project to export.")] = None,
    workspace: WorkspaceOpt = "default",
    fmt: Annotated[
        str | None,
        typer.Option("--format", help="html, docx, md or json (default: from --output's extension, else html)."),
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Where to write (default: <project>/export/<id>.<ext>)."),
    ] = None,
    bundle: Annotated[
        bool,
        typer.Option("--bundle", help="Write an evidence bundle (HTML, sources, evidence, manifest)."),
    ] = False,
    file: Annotated[str, typer.Option("--file", help="The artifact to export.")] = "final.md",
    verify: Annotated[
        Path | None, typer.Option("--verify", metavar="BUNDLE", help="Re-check a bundle's hashes (exit 1 on mismatch).")
    ] = None,
    front_matter: Annotated[
        bool, typer.Option("--front-matter", help="Markdown only: start with YAML front matter.")
    ] = False,
    evidence_marks: Annotated[
        bool,
        typer.Option(
            "--evidence-marks",
            help="Mark weak and unsupported citations and show the evidence summary (off: readers see the article).",
        ),
    ] = False,
) -> None:
    """Export a finished article; prints the path written.

    Examples: pensieve export btrees; pensieve export btrees --format docx;
    pensieve export btrees --bundle --output btrees.zip; pensieve export --verify btrees.zip
    """
    if verify is not None:
        _verify(verify, project_id)
        return

    def action() -> Path:
        from pensieve.publish.export import export_project

        if project_id is None:
            raise UsageError("no project given: pensieve export ID (or --verify BUNDLE)")
        project = workspace_of(workspace).existing_project(project_id)
        result = export_project(
            project.dir,
            fmt=fmt,
            output=output,
            bundle=bundle,
            name=file,
            front_matter=front_matter,
            evidence_marks=evidence_marks,
        )
        for warning in result.warnings:
            err.print(f"warning: {warning}", markup=False)
        return result.path

    out.print(str(guarded(action)), markup=False)


def _verify(path: Path, project_id: str | None) -> None:
    from pensieve.publish.bundle import verify_bundle

    if project_id is not None:
        fail(UsageError("--verify checks a bundle on its own; drop the project id"))
    report = guarded(lambda: verify_bundle(path))
    if report.ok:
        out.print(f"bundle OK: {report.checked} files match manifest.json ({path})", markup=False)
        return
    for problem in report.problems:
        err.print(f"mismatch: {problem}", markup=False)
    err.print(f"error: bundle {path} failed verification ({len(report.problems)} problem(s))", markup=False)
    raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("export")(export)
