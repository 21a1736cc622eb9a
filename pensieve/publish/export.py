"""`pensieve export`: one artifact of a project to a file (or an evidence bundle).

Everything is checked before anything is written, and every file is written atomically:
a failed export leaves no partial file behind.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from pensieve.clock import now_iso
from pensieve.errors import UsageError
from pensieve.project.workspace import atomic_write_bytes
from pensieve.publish.document import DEFAULT_ARTIFACT, Article, load_article, without_marks
from pensieve.publish.output import check_replaceable

FORMATS = ("html", "docx", "md", "json")
_BY_SUFFIX = {".html": "html", ".htm": "html", ".docx": "docx", ".md": "md", ".markdown": "md", ".json": "json"}
EXPORT_DIR = "export"


@dataclass(frozen=True)
class ExportResult:
    path: Path
    format: str
    bundle: bool
    references: int
    warnings: list[str] = field(default_factory=list)


def choose_format(fmt: str | None, output: Path | None, bundle: bool) -> str:
    if fmt is not None:
        fmt = fmt.strip().lower()
        if fmt not in FORMATS:
            raise UsageError(f"unknown format {fmt!r}; use one of: {', '.join(FORMATS)}")
        return fmt
    if output is not None and not bundle:
        suffix = output.suffix.lower()
        if suffix == ".zip":
            raise UsageError(f"{output} is a .zip: a zip is an evidence bundle, add --bundle")
        if suffix in _BY_SUFFIX:
            return _BY_SUFFIX[suffix]
    return "html"


def render_format(article: Article, fmt: str, *, exported_at: str, front_matter: bool = False) -> bytes:
    if fmt == "html":
        from pensieve.publish.html import html_page

        return html_page(article, exported_at=exported_at).encode("utf-8")
    if fmt == "md":
        from pensieve.publish.markdown import markdown_export

        return markdown_export(article, exported_at=exported_at, front_matter=front_matter).encode("utf-8")
    if fmt == "json":
        from pensieve.publish.json_export import json_export

        data = json_export(article, exported_at=exported_at)
        return (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    if fmt == "docx":
        from pensieve.publish.docx import docx_export

        return docx_export(article, exported_at=exported_at)
    raise UsageError(f"unknown format {fmt!r}; use one of: {', '.join(FORMATS)}")


def default_output(project_dir: Path, fmt: str, bundle: bool) -> Path:
    name = f"{project_dir.name}-bundle" if bundle else f"{project_dir.name}.{fmt}"
    return project_dir / EXPORT_DIR / name


def export_project(
    project_dir: Path,
    *,
    fmt: str | None = None,
    output: Path | None = None,
    bundle: bool = False,
    name: str = DEFAULT_ARTIFACT,
    front_matter: bool = False,
    evidence_marks: bool = False,
) -> ExportResult:
    chosen = choose_format(fmt, output, bundle)
    target = output if output is not None else default_output(project_dir, chosen, bundle)
    _check_inside_project(project_dir, target)
    if not bundle:
        check_replaceable(target)
    if front_matter and chosen != "md":
        raise UsageError("--front-matter applies to --format md only")
    article = load_article(project_dir, name)
    # Readers get the article, not the check's verdicts: a sound article marked in red looks
    # unreliable. The bundle (made to check the article), JSON (data for a CMS, where each
    # verdict is a field) and --evidence-marks keep them.
    shown = article if evidence_marks or chosen == "json" else without_marks(article)
    exported_at = now_iso()
    bundle_warnings: list[str] = []
    try:
        if bundle:
            from pensieve.publish.bundle import bundle_files, write_bundle

            extra = {}
            if chosen != "html":
                data = render_format(article, chosen, exported_at=exported_at, front_matter=front_matter)
                extra[f"article.{chosen}"] = data
            files = bundle_files(article, exported_at=exported_at, extra=extra, warnings=bundle_warnings)
            write_bundle(files, target)
        else:
            data = render_format(shown, chosen, exported_at=exported_at, front_matter=front_matter)
            atomic_write_bytes(target, data, shared=True)  # made to be shared: not 0600
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise UsageError(f"cannot write {target}: {reason}; choose another --output") from None
    warnings = [*_stage_warnings(project_dir, name), *article.warnings, *bundle_warnings]
    return ExportResult(target, chosen, bundle, len(article.references), warnings)


def _check_inside_project(project_dir: Path, target: Path) -> None:
    """An export never lands on the project's own files (an artifact, sources, status):
    inside the project it goes under export/."""
    project = project_dir.resolve()
    resolved = target.resolve()
    if resolved.is_relative_to(project) and not resolved.is_relative_to(project / EXPORT_DIR):
        raise UsageError(
            f"--output {target} is inside the project {project_dir.name}; write under its {EXPORT_DIR}/ "
            "directory or outside the project"
        )


def _stage_warnings(project_dir: Path, name: str) -> list[str]:
    """A file whose stage is not complete (being re-run, failed since) may be out of date."""
    from pensieve.errors import CorruptState
    from pensieve.project.status import load_status
    from pensieve.project.workspace import STATUS_FILE
    from pensieve.stages import STAGES

    writer = next((stage for stage in STAGES if stage.writes == name), None)
    if writer is None:
        return []
    try:
        status = load_status(project_dir / STATUS_FILE, keep_copy=False)
    except (CorruptState, OSError):
        return []
    state = status.stages[writer.name].status
    if state == "complete":
        return []
    return [f"the {writer.title} is {state} in status.json: {name} may not be its latest version"]
