"""evidence.json: what the alignment found, per artifact (the format: README, "Claim-level evidence").

Plain JSON in and out: `list`, `status` and `check` read the stored summaries through here
without numpy, torch or the model. An entry whose artifact changed since it was computed
is stale (its artifact_sha256 no longer matches the file) and is never shown as current.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard

from pensieve.clock import now_iso
from pensieve.errors import CorruptState
from pensieve.evidence.schema import ArtifactEvidence, EvidenceSummary
from pensieve.hashing import sha256_of_bytes
from pensieve.project.workspace import EVIDENCE_FILE as EVIDENCE_FILE  # its name lives with the other files'
from pensieve.project.workspace import atomic_write_text, read_file_nofollow
from pensieve.stages import EVIDENCE_CHECKED

VERSION = 1
# The artifacts aligned, in pipeline order; the last one that exists is the article.
ALIGNED: tuple[str, ...] = tuple(str(name) for name in EVIDENCE_CHECKED)
VERDICTS = ("supported", "weak", "unsupported")
# Far more than the alignment of the longest article writes; a larger evidence.json was
# planted, and `list` must not read gigabytes to show one share.
MAX_EVIDENCE_BYTES = 64_000_000
# An artifact is at most about 1,000,000 characters (the writes' cap), at most 4 bytes each;
# a larger one was planted and is not hashed (its entry is shown as stale).
MAX_ARTIFACT_BYTES = 16_000_000


def text_sha256(text: str) -> str:
    return sha256_of_bytes(text.encode("utf-8", errors="surrogatepass"))


def summarize(sentences: Sequence[Mapping[str, Any]]) -> EvidenceSummary:
    counts = {verdict: sum(1 for s in sentences if s["verdict"] == verdict) for verdict in VERDICTS}
    cited = len(sentences)
    return {
        "cited_sentences": cited,
        "supported": counts["supported"],
        "weak": counts["weak"],
        "unsupported": counts["unsupported"],
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
        raise CorruptState(f"{path} is not valid JSON ({reason}); `pensieve evidence` rebuilds it") from None
    if not isinstance(data, dict) or not isinstance(data.get("artifacts", {}), dict):
        raise CorruptState(f"{path} is not an evidence document; `pensieve evidence` rebuilds it")
    return data


def readable_evidence(project_dir: Path) -> dict[str, Any]:
    """The stored document; {} when there is none or it cannot be read (every entry is then
    absent: recomputed by whoever aligns, no figure for whoever only reads)."""
    try:
        return load_evidence(project_dir) or {}
    except CorruptState:
        return {}


def well_formed(entry: object) -> TypeGuard[ArtifactEvidence]:
    """Whether an artifact's entry has every field, of the type, its readers use (`evidence`,
    `check`, `status`, `list`, the studio, the repair list). A hand edit or another program
    may leave anything in the file: an entry that is not well formed counts as absent, so it
    is aligned again rather than read."""
    if not isinstance(entry, dict) or not isinstance(entry.get("artifact_sha256"), str):
        return False
    summary, sentences = entry.get("summary"), entry.get("sentences")
    return _summary_ok(summary) and isinstance(sentences, list) and all(_sentence_ok(s) for s in sentences)


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _number(value: object) -> bool:
    # NaN and the infinities are valid in Python's JSON but are no score or share.
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _summary_ok(summary: object) -> bool:
    if not isinstance(summary, dict) or not all(_count(summary.get(k)) for k in ("cited_sentences", *VERDICTS)):
        return False
    share = summary.get("supported_share")
    return share is None or (_number(share) and 0 <= share <= 1)


def _sentence_ok(sentence: object) -> bool:
    if not isinstance(sentence, dict):
        return False
    citations, findings = sentence.get("citations"), sentence.get("findings")
    return (
        all(_count(sentence.get(k)) for k in ("index", "start", "end"))
        and isinstance(sentence.get("text"), str)
        and sentence.get("verdict") in VERDICTS
        and isinstance(findings, list)
        and all(isinstance(f, str) for f in findings)
        and isinstance(citations, list)
        and all(_citation_ok(c) for c in citations)
    )


def _citation_ok(citation: object) -> bool:
    if not isinstance(citation, dict):
        return False
    passage, judge, missing = citation.get("passage"), citation.get("judge"), citation.get("missing", [])
    return (
        isinstance(citation.get("source"), str)
        and citation.get("verdict") in VERDICTS
        and _number(citation.get("score"))
        and (passage is None or _passage_ok(passage))
        and (judge is None or (isinstance(judge, dict) and isinstance(judge.get("answer"), str)))
        and isinstance(missing, list)
        and all(isinstance(m, str) for m in missing)
    )


def _passage_ok(passage: object) -> bool:
    return (
        isinstance(passage, dict)
        and isinstance(passage.get("text"), str)
        and _count(passage.get("start"))
        and _count(passage.get("end"))
    )


def save_entry(project_dir: Path, name: str, entry: dict[str, Any], thresholds: dict[str, float]) -> None:
    """Store one artifact's alignment, keeping the others' (a damaged file is replaced)."""
    artifacts = readable_evidence(project_dir).get("artifacts", {})
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
    summary: EvidenceSummary
    current: bool  # False: the artifact changed since (stale)

    @property
    def supported_share(self) -> float | None:
        share = self.summary["supported_share"]
        return None if share is None else float(share)

    def as_json(self) -> dict[str, Any]:
        """The `evidence` object of `status --json`: the artifact, whether its evidence is
        current (False: the file changed since), and the summary's counts and share."""
        keys = ("cited_sentences", *VERDICTS, "supported_share")
        summary: Mapping[str, object] = self.summary
        return {"artifact": self.artifact, "current": self.current, "summary": {k: summary.get(k) for k in keys}}


def artifact_entry(
    project_dir: Path, name: str, data: Mapping[str, Any] | None
) -> tuple[ArtifactEvidence | None, bool]:
    """An artifact's entry in the evidence document `data`, and whether it is current: computed
    on the text now on disk (hashed as the alignment hashed it, so line endings don't matter).
    An entry that is not well formed is None (absent)."""
    artifacts = (data or {}).get("artifacts")
    entry = artifacts.get(name) if isinstance(artifacts, dict) else None
    if not well_formed(entry):
        return None, False
    try:
        raw = read_file_nofollow(project_dir / name, max_size=MAX_ARTIFACT_BYTES)
    except OSError:
        return entry, False
    text = raw.decode("utf-8", errors="replace")
    return entry, entry["artifact_sha256"] == text_sha256(text)


def latest_summary(project_dir: Path) -> StoredSummary | None:
    """The summary of the latest article on disk (final.md, else draft_v2.md, else draft_v1.md),
    from evidence.json, never recomputed; None when there is no such entry (or no article)."""
    data = readable_evidence(project_dir)
    if not data:
        return None
    for name in reversed(ALIGNED):
        if not (project_dir / name).is_file():
            continue
        entry, current = artifact_entry(project_dir, name, data)
        if entry is None:
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
