"""What the studio reads and changes in a workspace, through the same code as the CLI.

Every path comes from a validated project id and a file name checked against a fixed set
(the stage artifacts) or a listing made here (history/, rejected/, sources/): nothing the
browser sends is joined onto a path as it stands, and symlinks are refused.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pensieve.article.sentences import cited_sentences
from pensieve.errors import CorruptState, ProjectBusy, UsageError, has_lone_surrogate
from pensieve.evidence.schema import ArtifactEvidence
from pensieve.evidence.store import EVIDENCE_FILE
from pensieve.hashing import sha256_of_bytes
from pensieve.project.listing import lock_holder, summarize_projects, validate_brief
from pensieve.project.status import Status, load_status
from pensieve.project.status import status_json as status_object
from pensieve.project.workspace import HISTORY_DIR, REJECTED_DIR, Project, Workspace, atomic_write_text, check_name
from pensieve.stages import ARTICLE_VERSIONS, MARKED_FILES, STAGES, Artifact

EDITABLE: tuple[str, ...] = tuple(a.value for a in Artifact)
_VERSION = re.compile(r"^(history|rejected)/([A-Za-z0-9][A-Za-z0-9._-]{0,120})$")
_SOURCE_ID = re.compile(r"^S[1-9][0-9]{0,5}$")
MAX_TEXT_BYTES = 1_500_000


class NotFound(Exception):
    """Something the request names does not exist (404)."""


class Conflict(Exception):
    """The request clashes with the state on disk (409); `extra` goes into the answer."""

    def __init__(self, message: str, extra: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.extra = extra or {}


class BadRequest(Exception):
    """The request is malformed (400)."""


def checked_text(value: str, key: str) -> str:
    """Text from a JSON body: a "\\ud800" escape makes a lone surrogate, which no file can
    hold (it would fail deep inside a write); refused here, as the CLI refuses one."""
    if has_lone_surrogate(value):
        raise BadRequest(f'"{key}" is not valid text: it holds a lone surrogate (\\ud800-\\udfff)')
    return value


def project_of(workspace: Workspace, project_id: str) -> Project:
    """An existing project by a validated id, whose directory is a real one in the workspace."""
    try:
        project = workspace.project(project_id)
    except UsageError as exc:
        raise BadRequest(str(exc)) from None
    if not project.status_path.is_file() or project.dir.is_symlink():
        raise NotFound(f"unknown project {project_id!r}")
    if project.dir.resolve().parent != workspace.projects_dir.resolve():
        raise NotFound(f"unknown project {project_id!r}")
    # As the CLI: a link anywhere in the project (events.jsonl -> /etc/passwd) would make a
    # page or the live feed read outside the workspace, so the whole project is refused.
    try:
        project.refuse_links()
    except UsageError as exc:
        raise Conflict(str(exc)) from None
    return project


def _inside(project: Project, path: Path) -> Path:
    """`path` if it is a regular file, not a symlink, really inside the project."""
    if path.is_symlink():
        raise BadRequest(f"{path.name} is a symbolic link; the studio does not follow links")
    real = path.resolve()
    if project.dir.resolve() not in real.parents:
        raise BadRequest(f"{path.name} is outside the project")
    return real


# -- the projects list ---------------------------------------------------------------------
def list_json(workspace: Workspace) -> list[dict[str, object]]:
    """The objects of `pensieve list --json`."""
    return [row.to_json() for row in summarize_projects(workspace)]


def list_detail(workspace: Workspace) -> list[dict[str, object]]:
    """`list --json` plus what the projects page shows: title, cost, tokens, supported share."""
    rows = []
    for row in summarize_projects(workspace):
        data = row.to_json()
        # An unreadable project may be a planted link: nothing more is read through it.
        readable = row.status != "unreadable"
        data["title"] = (article_title(workspace.project(row.id)) if readable else None) or row.brief_line
        data["cost_usd"] = row.cost_usd
        data["tokens"] = row.tokens
        data["stages_done"] = row.stages_done
        rows.append(data)
    return rows


def article_title(project: Project) -> str | None:
    """The final article's first heading, if it has one."""
    path = project.file(Artifact.FINAL)
    if not path.is_file() or path.is_symlink():
        return None
    with path.open("r", encoding="utf-8", errors="replace") as handle:
        for _ in range(40):
            line = handle.readline()
            if not line:
                break
            if line.startswith("# "):
                return line[2:].strip()[:200]
    return None


# -- evidence (written by `pensieve evidence`; may be absent) ------------------------------------
def load_evidence(project: Project) -> dict[str, Any]:
    """The project's evidence document; {} when there is none or it cannot be read (a page
    shows no evidence rather than failing)."""
    from pensieve.evidence.store import readable_evidence

    if project.file(EVIDENCE_FILE).is_symlink():
        return {}
    return readable_evidence(project.dir)


def evidence_for(
    project: Project, name: str, evidence: dict[str, Any] | None = None
) -> tuple[ArtifactEvidence | dict[str, Any], bool]:
    """The evidence entry of an artifact and whether it is current (computed on this text)."""
    from pensieve.evidence.store import artifact_entry

    entry, current = artifact_entry(project.dir, name, load_evidence(project) if evidence is None else evidence)
    return entry or {}, current


# -- one project ---------------------------------------------------------------------------------
@dataclass
class ProjectView:
    project: Project
    status: Status
    state: str
    running_pid: int | None
    stale: dict[str, list[str]]
    files: list[str] = field(default_factory=list)

    @property
    def stale_downstream(self) -> list[str]:
        return downstream_stale(self.stale, self.status)


def status_json(project: Project) -> dict[str, Any]:
    """The object of `pensieve status ID --json`, made the same way (a deleted artifact's
    stage shown pending, as the next run will see it; nothing saved)."""
    from pensieve.project.staleness import demote_missing

    try:
        status = load_status(project.status_path, keep_copy=False)
    except CorruptState as exc:
        raise Conflict(str(exc)) from None
    demote_missing(project, status)
    return status_object(project, status)


def view(project: Project) -> ProjectView:
    from pensieve.errors import CorruptState
    from pensieve.project.listing import effective_status
    from pensieve.project.staleness import stale_stages

    try:
        status = load_status(project.status_path, keep_copy=False)
    except CorruptState as exc:
        raise Conflict(str(exc)) from None
    files = [name for name in EDITABLE if project.file(name).is_file()]
    return ProjectView(
        project, status, effective_status(project, status), lock_holder(project), stale_stages(project, status), files
    )


# -- artifacts -----------------------------------------------------------------------------------
def artifact_path(project: Project, name: str) -> Path:
    if name not in EDITABLE:
        raise BadRequest(f"{name!r} is not a stage artifact; artifacts are: {', '.join(EDITABLE)}")
    return project.file(name)


def read_artifact(project: Project, name: str) -> dict[str, str]:
    path = artifact_path(project, name)
    if not path.exists() and not path.is_symlink():
        raise NotFound(f"{project.id} has no {name} yet")
    data = _inside(project, path).read_bytes()
    return {"name": name, "text": data.decode("utf-8", errors="replace"), "sha256": sha256_of_bytes(data)}


def save_artifact(project: Project, name: str, text: object, base_sha256: object) -> dict[str, Any]:
    """An edit, as editing the file by hand: atomic, the previous text kept under history/,
    refused (409) when the file changed since `base_sha256` or while the project runs."""
    from pensieve.project.staleness import stale_stages
    from pensieve.run.commit import keep_in_history

    path = artifact_path(project, name)
    if not isinstance(text, str):
        raise BadRequest('"text" must be a string')
    checked_text(text, "text")  # else saved with "?" in its place: refused, never changed
    if not isinstance(base_sha256, str) or not re.fullmatch(r"[0-9a-f]{64}|", base_sha256):
        raise BadRequest('"base_sha256" must be the sha256 (hex) of the text the edit started from ("" for a new file)')
    data = text.encode("utf-8", errors="replace")
    if len(data) > MAX_TEXT_BYTES:
        raise BadRequest(f"the text is {len(data):,} bytes; the limit is {MAX_TEXT_BYTES:,}")
    if name == Artifact.BRIEF:  # the CLI's rules for a brief (not empty, at most 100,000 bytes)
        try:
            validate_brief(text)
        except UsageError as exc:
            raise BadRequest(str(exc)) from None
    try:
        with project.run_lock():  # never while a run holds the project, and no run starts meanwhile
            exists = path.exists() or path.is_symlink()
            current = _inside(project, path).read_bytes() if exists else b""
            current_sha = sha256_of_bytes(current) if exists else ""
            if current_sha != base_sha256:
                raise Conflict(
                    f"{name} changed on disk since this edit began; compare the two versions and save again",
                    {
                        "current": {"text": current.decode("utf-8", "replace"), "sha256": current_sha},
                        "yours": {"text": text, "base_sha256": base_sha256},
                    },
                )
            if exists and current == data:
                stale, downstream = _stale(project, stale_stages)
                return {
                    "name": name,
                    "sha256": current_sha,
                    "changed": False,
                    "stale": stale,
                    "stale_downstream": downstream,
                }
            if exists:
                keep_in_history(project, path)
            atomic_write_text(path, text)
    except ProjectBusy:
        raise Conflict(f"project {project.id} is running; stop the run (or wait for it) before editing") from None
    stale, downstream = _stale(project, stale_stages)
    return {
        "name": name,
        "sha256": sha256_of_bytes(data),
        "changed": True,
        "stale": stale,
        "stale_downstream": downstream,
    }


def _stale(project: Project, stale_stages: Any) -> tuple[dict[str, list[str]], list[str]]:
    status = load_status(project.status_path, keep_copy=False)
    stale = dict(stale_stages(project, status))
    return stale, downstream_stale(stale, status)


def downstream_stale(stale: dict[str, list[str]], status: Status) -> list[str]:
    """The finished stages a re-run from the stale ones would run again, in pipeline order."""
    from pensieve.stages import STAGE_NAMES, downstream_of

    hit = {name for stage in stale for name in downstream_of(stage)}
    return [name for name in STAGE_NAMES if name in hit and status.stages[name].status == "complete"]


# -- versions and diffs ------------------------------------------------------------------------
def versions(project: Project, name: str | None = None) -> list[dict[str, str]]:
    """Every readable version: the artifacts, then history/ and rejected/ (newest first)."""
    found: list[dict[str, str]] = []
    for artifact in EDITABLE:
        if (name is None or artifact == name) and project.file(artifact).is_file():
            found.append({"version": artifact, "artifact": artifact, "label": f"{artifact} (current)"})
    for folder in (HISTORY_DIR, REJECTED_DIR):
        directory = project.dir / folder
        if not directory.is_dir() or directory.is_symlink():
            continue
        for path in sorted(directory.iterdir(), key=lambda p: p.name, reverse=True):
            if path.is_symlink() or not path.is_file() or path.name.startswith("."):
                continue
            of = _artifact_of(path.name)
            if of is None or (name is not None and of != name):
                continue
            found.append({"version": f"{folder}/{path.name}", "artifact": of, "label": f"{folder}/{path.name}"})
    return found


def _artifact_of(file_name: str) -> str | None:
    for artifact in EDITABLE:
        stem, suffix = artifact.rsplit(".", 1)
        if file_name == artifact or (file_name.startswith(stem + ".") and file_name.endswith("." + suffix)):
            return artifact
    return None


def read_version(project: Project, version: str) -> str:
    if version in EDITABLE:
        return read_artifact(project, version)["text"]
    match = _VERSION.match(version)
    if not match or ".." in version:
        raise BadRequest(f"{version!r} is not a version of an artifact (e.g. draft_v1.md or history/<file>)")
    path = project.dir / match.group(1) / match.group(2)
    if not path.is_file():
        raise NotFound(f"{project.id} has no {version}")
    return _inside(project, path).read_text(encoding="utf-8", errors="replace")


_TOKEN = re.compile(r"\s+|\w+|[^\w\s]", re.UNICODE)


def word_diff(old: str, new: str) -> list[tuple[str, str]]:
    """(op, text) runs where op is "=", "-" or "+": a word-level diff."""
    a, b = _TOKEN.findall(old), _TOKEN.findall(new)
    runs: list[tuple[str, str]] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            runs.append(("=", "".join(a[i1:i2])))
            continue
        if tag in ("delete", "replace"):
            runs.append(("-", "".join(a[i1:i2])))
        if tag in ("insert", "replace"):
            runs.append(("+", "".join(b[j1:j2])))
    return runs


# -- sources --------------------------------------------------------------------------------


def citing_sentences(project: Project) -> dict[str, list[dict[str, Any]]]:
    """Per source id, the sentences that cite it: from evidence.json where it exists (with
    verdicts and passages), else from the drafts' [Sn] markers."""
    found: dict[str, list[dict[str, Any]]] = {}
    evidence = load_evidence(project)
    for name in reversed(ARTICLE_VERSIONS):
        entry, current = evidence_for(project, name, evidence)
        if not entry:
            continue
        for sentence in entry.get("sentences") or []:
            if not isinstance(sentence, dict):
                continue
            for cite in sentence.get("citations") or []:
                if not isinstance(cite, dict) or not isinstance(cite.get("source"), str):
                    continue
                passage = cite.get("passage") if isinstance(cite.get("passage"), dict) else None
                found.setdefault(cite["source"], []).append(
                    {
                        "artifact": str(name),
                        "text": str(sentence.get("text", "")),
                        "verdict": str(cite.get("verdict", "")),
                        "score": cite.get("score"),
                        "passage": str(passage.get("text", "")) if passage else "",
                        # A library document's page of the passage (pensieve/library/).
                        "page": str(passage.get("page") or "") if passage else "",
                        "stale": not current,
                    }
                )
        if found:
            return found
    for name in reversed(MARKED_FILES):
        path = project.file(name)
        if not path.is_file() or path.is_symlink():
            continue
        # The alignment's own reading of an article: code, links and the reference list skipped.
        for sentence in cited_sentences(path.read_text(encoding="utf-8", errors="replace")):
            for sid in sentence.ids:
                found.setdefault(sid, []).append(
                    {
                        "artifact": str(name),
                        "text": sentence.text.strip(),
                        "verdict": "",
                        "passage": "",
                        "page": "",
                        "stale": False,
                    }
                )
        if found:
            break
    return found


def source_entry(project: Project, source_id: str) -> Any:
    from pensieve.project.source_archive import list_sources

    if not _SOURCE_ID.match(source_id):
        raise BadRequest(f"{source_id!r} is not a source id (S1, S2, ...)")
    for source in list_sources(project.dir):
        if source.id == source_id:
            return source
    raise NotFound(f"{project.id} has no source {source_id}")


def source_text(project: Project, source_id: str) -> str:
    from pensieve.front_matter import split_front_matter
    from pensieve.project.source_archive import SOURCES_DIR

    source_entry(project, source_id)
    path = project.dir / SOURCES_DIR / f"{source_id}.md"
    if not path.is_file():
        raise NotFound(f"{project.id} has no archived text for {source_id}")
    return split_front_matter(_inside(project, path).read_text(encoding="utf-8", errors="replace"))[1]


def source_raw(project: Project, source_id: str) -> tuple[bytes, str]:
    source = source_entry(project, source_id)
    if not source.raw_file or not re.fullmatch(r"sources/raw/S\d+\.[a-z]{2,6}", source.raw_file):
        raise NotFound(f"{project.id} keeps no raw copy of {source_id}")
    path = project.dir / source.raw_file
    if not path.is_file():
        raise NotFound(f"{project.id} keeps no raw copy of {source_id}")
    return _inside(project, path).read_bytes(), Path(source.raw_file).name


def stage_titles() -> list[tuple[str, str, str]]:
    return [(s.name, s.title, str(s.writes)) for s in STAGES]


def validate_id(project_id: str) -> str:
    try:
        return check_name("project id", project_id)
    except UsageError as exc:
        raise BadRequest(str(exc)) from None
