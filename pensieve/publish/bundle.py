"""The evidence bundle: an article that stays checkable after its cited pages change or vanish.

A directory (or a .zip) holding:

    index.html        the article; each reference links to the live URL and to its copy here
    final.md          the artifact exported, as it is in the project
    sources/S3.txt    the archived text of every cited source (front matter: url, fetched_at,
                      sha256 of the fetched body), exactly as Pensieve archived it
    evidence.json     the project's evidence file (or an empty one when there is none)
    manifest.json     every other file with its sha256 and size, and each source's capture
                      date and fetched-body hash

`verify_bundle` recomputes every hash; a changed, missing or unlisted file fails it, and a
bundle holding a link, a special file, a duplicate zip member or a file over the size caps
is refused before anything is read (see bundle_reader).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from pensieve import __version__
from pensieve.errors import PensieveError, UsageError, shown_name
from pensieve.hashing import sha256_of_bytes
from pensieve.project.workspace import (
    TMP_PREFIX,
    atomic_write_bytes,
    fsync_dir,
    shared_temporary_dir,
    special_file_kind,
)
from pensieve.publish.bundle_reader import (
    MAX_FILE_BYTES,
    MAX_MANIFEST_BYTES,
    MAX_TOTAL_BYTES,
    Bundle,
    digest,
    open_bundle,
    read_small,
)
from pensieve.publish.document import EVIDENCE_FILE, Article
from pensieve.publish.html import html_page
from pensieve.publish.output import check_replaceable
from pensieve.publish.render import bundle_source_path

MANIFEST = "manifest.json"
FORMAT = "pensieve-evidence-bundle"
HTML_FILE = "index.html"


@dataclass(frozen=True)
class BundleResult:
    path: Path
    files: int
    sources: int


def bundle_files(
    article: Article,
    *,
    exported_at: str,
    extra: dict[str, bytes] | None = None,
    warnings: list[str] | None = None,
) -> dict[str, bytes]:
    """Every file of the bundle by its path inside it, manifest.json included; what the
    bundle lacks (a cited source whose archived text is gone) is added to `warnings`."""
    files: dict[str, bytes] = {HTML_FILE: html_page(article, exported_at=exported_at, bundle_links=True).encode()}
    files[article.name] = article.data or article.text.encode("utf-8")
    sources: list[dict[str, Any]] = []
    for ref in article.references:
        entry: dict[str, Any] = {
            "id": ref.source_id,
            "number": ref.number,
            "title": ref.parts.title,
            "url": ref.source.url,
            "final_url": ref.source.final_url,
            "fetched_at": ref.source.fetched_at,
            "fetched_sha256": ref.source.sha256,
            "fetched_bytes": ref.source.size,
            "text_file": None,
        }
        if ref.archived_file is not None:
            data = (article.project_dir / ref.archived_file).read_bytes()
            path = bundle_source_path(ref.source_id)
            files[path] = data
            entry["text_file"] = path
            entry["text_sha256"] = sha256_of_bytes(data)
        elif warnings is not None:
            warnings.append(f"{ref.source_id} is cited but its archived text is missing; not in the bundle")
        sources.append(entry)
    evidence_path = article.project_dir / EVIDENCE_FILE
    if evidence_path.is_file():
        files[EVIDENCE_FILE] = evidence_path.read_bytes()
    else:
        files[EVIDENCE_FILE] = (
            json.dumps({"version": 1, "generated_at": None, "artifacts": {}}, indent=2) + "\n"
        ).encode()
    for name, data in (extra or {}).items():
        files[name] = data
    manifest = {
        "format": FORMAT,
        "version": 1,
        "generator": f"pensieve {__version__}",
        "created_at": exported_at,
        "project": article.project_id,
        "artifact": article.name,
        "artifact_sha256": article.sha256,
        "title": article.title,
        "evidence": {"status": article.evidence.status, "generated_at": article.evidence.generated_at},
        "files": [
            {"path": name, "sha256": sha256_of_bytes(data), "bytes": len(data)} for name, data in sorted(files.items())
        ],
        "sources": sources,
    }
    files[MANIFEST] = (json.dumps(manifest, indent=2, ensure_ascii=False) + "\n").encode()
    return files


def zip_bytes(files: dict[str, bytes]) -> bytes:
    """The bundle as a .zip, in memory (fixed dates: the same files make the same bytes)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in sorted(files.items()):
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, data)
    return buffer.getvalue()


def write_bundle(files: dict[str, bytes], output: Path) -> None:
    """Write the bundle to `output`: a .zip file, or a directory (replacing an earlier bundle
    there, never anything else). Either the whole bundle is there afterwards or nothing changed."""
    if output.suffix.lower() == ".zip":
        check_replaceable(output)
        atomic_write_bytes(output, zip_bytes(files), shared=True)
        return
    kind = special_file_kind(output)
    if kind not in (None, "a directory"):
        raise UsageError(f"{output} is {kind}, not a bundle directory; choose another --output")
    if output.exists() and not (kind == "a directory" and (output / MANIFEST).is_file()):
        raise UsageError(f"{output} exists and is not a Pensieve bundle; choose another --output")
    output.parent.mkdir(parents=True, exist_ok=True)
    # The bundle is made to be shared: its directory and files get the umask's modes.
    staging = shared_temporary_dir(output.parent)
    try:
        for name, data in files.items():
            atomic_write_bytes(staging / name, data, shared=True)
        old = None
        if output.exists():
            old = Path(tempfile.mkdtemp(prefix=TMP_PREFIX, dir=output.parent))
            os.replace(output, old / "previous")
        os.replace(staging, output)
        fsync_dir(output.parent)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


# -- verification ------------------------------------------------------------------------


@dataclass
class VerifyReport:
    path: Path
    checked: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def _safe_member(name: str) -> bool:
    pure = PurePosixPath(name)
    return bool(name) and not pure.is_absolute() and ".." not in pure.parts and "\\" not in name


_Listed = dict[str, tuple[str, int]]


def read_manifest(raw: bytes, bundle: Path) -> tuple[_Listed, list[dict[str, Any]]]:
    """manifest.json's file list (path -> (sha256, bytes)) and its source entries, every
    field of the expected type: a bundle comes from anywhere, and a tampered manifest fails
    the verification in one line (exit 1), never the verifier."""

    def malformed(where: str, why: str) -> PensieveError:
        return PensieveError(f"{MANIFEST}: {where} is malformed ({why}); bundle {bundle} cannot be verified")

    try:
        manifest = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise malformed("the file", f"not JSON: {exc}") from None
    if not isinstance(manifest, dict):
        raise malformed("the file", f"{_json_type(manifest)}, not an object")

    def field(entry: dict[str, Any], where: str, key: str, kind: type, optional: bool = False) -> Any:
        """entry[key], checked to be a `kind` (or null or absent when optional)."""
        if key not in entry:
            if optional:
                return None
            raise malformed(f"{where}{key}", "missing")
        value = entry[key]
        if (value is None and optional) or (isinstance(value, kind) and not isinstance(value, bool)):
            return value
        expected = {str: "a string", int: "an integer", list: "a list"}[kind] + (" or null" if optional else "")
        raise malformed(f"{where}{key}", f"{_json_type(value)}, expected {expected}")

    listed: _Listed = {}
    for index, entry in enumerate(field(manifest, "", "files", list)):
        where = f"files[{index}]"
        if not isinstance(entry, dict):
            raise malformed(where, f"{_json_type(entry)}, expected an object")
        listed[field(entry, f"{where}.", "path", str)] = (
            field(entry, f"{where}.", "sha256", str),
            field(entry, f"{where}.", "bytes", int),
        )
    sources = field(manifest, "", "sources", list, optional=True) or []
    for index, source in enumerate(sources):
        where = f"sources[{index}]"
        if not isinstance(source, dict):
            raise malformed(where, f"{_json_type(source)}, expected an object")
        field(source, f"{where}.", "id", str)
        field(source, f"{where}.", "text_file", str, optional=True)
        field(source, f"{where}.", "text_sha256", str, optional=True)
    return listed, sources


def _json_type(value: Any) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")


def _check_sizes(listed: _Listed, bundle: Path) -> None:
    """Refuse a manifest whose sizes no bundle has, before a byte of any file is read."""
    for name, (_, size) in sorted(listed.items()):
        if size < 0 or size > MAX_FILE_BYTES:
            raise PensieveError(
                f"bundle {bundle}: {MANIFEST} lists {name} at {size:,} bytes, outside 0 to {MAX_FILE_BYTES:,}; "
                "it is not verified"
            )
    total = sum(size for _, size in listed.values())
    if total > MAX_TOTAL_BYTES:
        raise PensieveError(
            f"bundle {bundle}: {MANIFEST} lists {total:,} bytes in all, "
            f"more than {MAX_TOTAL_BYTES:,}; it is not verified"
        )


def _check_file(bundle: Bundle, name: str, expected: str, size: int) -> str | None:
    """What is wrong with one listed file, or None: its declared size is compared first, so
    a file (or zip member) of another size is never read, and no more than `size` + 1
    bytes of any file are."""
    declared = bundle.size(name)
    if declared is None:
        return "missing"
    if declared != size:
        return f"sha256 differs from the manifest (the file was changed: {declared:,} bytes, listed as {size:,})"
    found = digest(bundle, name, size)
    if isinstance(found, str):
        return found
    if found != (expected, size):
        return "sha256 differs from the manifest (the file was changed)"
    return None


def verify_bundle(path: Path) -> VerifyReport:
    if not path.exists():
        raise UsageError(
            f"no bundle at {shown_name(str(path))}; give the directory or .zip that `pensieve export --bundle` wrote"
        )
    if not (path.is_dir() or path.is_file()):  # reading a FIFO would wait forever
        kind = special_file_kind(path)
        raise UsageError(f"{shown_name(str(path))} is {kind}: neither a bundle directory nor a zip file")
    report = VerifyReport(path)
    with open_bundle(path) as bundle:
        raw = read_small(bundle, MANIFEST, MAX_MANIFEST_BYTES)
        if raw is None:
            report.problems.append(f"{MANIFEST} is missing: this is not a Pensieve bundle, or it was damaged")
            return report
        listed, sources = read_manifest(raw, path)
        _check_sizes(listed, path)
        for name, (expected, size) in sorted(listed.items()):
            if not _safe_member(name):
                report.problems.append(f"{name}: the manifest names a path outside the bundle")
                continue
            report.checked += 1
            problem = _check_file(bundle, name, expected, size)
            if problem:
                report.problems.append(f"{name}: {problem}")
        for source in sources:
            text_file = source.get("text_file")
            if text_file is None:  # the bundle cannot back this source's citations
                report.problems.append(f"{source['id']}: cited, but its archived text is not in the bundle")
            elif text_file and text_file in listed and listed[text_file][0] != source.get("text_sha256"):
                report.problems.append(f"{text_file}: the manifest's source entry and file list disagree")
            elif text_file and text_file not in listed:
                report.problems.append(f"{text_file}: named by a source but not in the file list")
        for name in sorted(bundle.names - set(listed) - {MANIFEST}):
            report.problems.append(f"{name}: not in the manifest (added after the bundle was made)")
    return report
