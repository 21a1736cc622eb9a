"""evidence.json: what the alignment found, per artifact (the format: README, "Claim-level evidence").

Plain JSON in and out: `list`, `status` and `check` read the stored summaries through here
without numpy, torch or the model. An entry whose artifact changed since it was computed
is stale (its artifact_sha256 no longer matches the file) and is never shown as current.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pensieve.clock import now_iso
from pensieve.errors import CorruptState
from pensieve.hashing import sha256_of_bytes
from pensieve.workspace import EVIDENCE_FILE as EVIDENCE_FILE  # its name lives with the other files'
from pensieve.workspace import atomic_write_text, read_file_nofollow

VERSION = 1
# The artifacts aligned, in pipeline order; the last one that exists is the article.
ALIGNED = ("draft_v1.md", "draft_v2.md", "final.md")
VERDICTS = ("supported", "weak", "unsupported")
# Far more than the alignment of the longest article writes; a larger evidence.json was
# planted, and `list` must not read gigabytes to show one share.
MAX_EVIDENCE_BYTES = 64_000_000
# An artifact is at most about 1,000,000 characters (the writes' cap), at most 4 bytes each;
# a larger one was planted and is not hashed (its entry is shown as stale).
MAX_ARTIFACT_BYTES = 16_000_000


def text_sha256(text: str) -> str:
    return sha256_of_bytes(text.encode("utf-8", errors="surrogatepass"))


def summarize(sentences: list[dict[str, Any]]) -> dict[str, Any]:
    counts = {verdict: sum(1 for s in sentences if s["verdict"] == verdict) for verdict in VERDICTS}
    cited = len(sentences)
    return {
        "cited_sentences": cited,
        **counts,
        "supported_share": round(counts["supported"] / cited, 3) if cited else None,
    }


def load_evidence(project_dir: Path) -> dict[str, Any] | None:
    """The stored document, or None if there is none yet. Raises CorruptState if unreadable."""
    path = project_dir / EVIDENCE_FILE
    try:
        raw = read_file_nofollow(path, max_size=MAX_EVIDENCE_BYTES)  # no link, FIFO or giant
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise CorruptState(f"{path}: cannot read ({exc.strerror})") from None
    try:
        data = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise CorruptState(
            f"{path} is not valid JSON ({reason}); delete it and run `pensieve evidence` to rebuild"
        ) from None
    if not isinstance(data, dict) or not isinstance(data.get("artifacts", {}), dict):
        raise CorruptState(f"{path} is not an evidence document; delete it and run `pensieve evidence` to rebuild")
    return data


def save_entry(project_dir: Path, name: str, entry: dict[str, Any], thresholds: dict[str, float]) -> None:
    """Store one artifact's alignment, keeping the others' (a damaged file is replaced)."""
    try:
        data = load_evidence(project_dir) or {}
    except CorruptState:
        data = {}
    artifacts = data.get("artifacts") if isinstance(data.get("artifacts"), dict) else {}
    assert isinstance(artifacts, dict)
    artifacts[name] = entry
    document = {
        "version": VERSION,
        "generated_at": now_iso(),
        "thresholds": thresholds,
        "artifacts": {key: artifacts[key] for key in sorted(artifacts, key=_order)},
    }
    atomic_write_text(project_dir / EVIDENCE_FILE, json.dumps(document, indent=1, ensure_ascii=False) + "\n")


def _order(name: str) -> int:
    return ALIGNED.index(name) if name in ALIGNED else len(ALIGNED)


@dataclass(frozen=True)
class StoredSummary:
    artifact: str
    summary: dict[str, Any]
    current: bool  # False: the artifact changed since (stale)

    @property
    def supported_share(self) -> float | None:
        share = self.summary.get("supported_share")
        return float(share) if isinstance(share, int | float) else None


def artifact_entry(project_dir: Path, name: str, data: dict[str, Any] | None) -> tuple[dict[str, Any] | None, bool]:
    """An artifact's entry in the evidence document `data`, and whether it is current: computed
    on the text now on disk (hashed as the alignment hashed it, so line endings don't matter)."""
    artifacts = (data or {}).get("artifacts")
    entry = artifacts.get(name) if isinstance(artifacts, dict) else None
    if not isinstance(entry, dict):
        return None, False
    try:
        raw = read_file_nofollow(project_dir / name, max_size=MAX_ARTIFACT_BYTES)
    except OSError:
        return entry, False
    text = raw.decode("utf-8", errors="replace")
    return entry, entry.get("artifact_sha256") == text_sha256(text)


def latest_summary(project_dir: Path) -> StoredSummary | None:
    """The summary of the latest article on disk (final.md, else draft_v2.md, else draft_v1.md),
    from evidence.json, never recomputed; None when there is no such entry (or no article)."""
    try:
        data = load_evidence(project_dir)
    except CorruptState:
        return None
    if not data:
        return None
    for name in reversed(ALIGNED):
        if not (project_dir / name).is_file():
            continue
        entry, current = artifact_entry(project_dir, name, data)
        if entry is None or not isinstance(entry.get("summary"), dict):
            return None
        return StoredSummary(name, entry["summary"], current)
    return None


def describe_share(summary: StoredSummary | None) -> str:
    """'83% supported (35/42 cited sentences, final.md)' or '' when unknown."""
    if summary is None:
        return ""
    share = summary.supported_share
    if share is None:
        return f"no cited sentences in {summary.artifact}"
    counts = summary.summary
    text = f"{share:.0%} supported ({counts.get('supported', 0)}/{counts.get('cited_sentences', 0)} cited sentences"
    text += f", {summary.artifact})"
    return text if summary.current else text + " (stale: the file changed since)"
