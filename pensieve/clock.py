"""Every timestamp Pensieve writes, one function per purpose, all in UTC.

The formats differ because each is already on disk and read back: status.json and
events.jsonl carry milliseconds, a source's front matter carries seconds, and file names
carry compact stamps (a copy of status.json per second, an artifact history entry per
microsecond so two edits in one second never collide).
"""

from __future__ import annotations

from datetime import UTC, datetime


def now_iso() -> str:
    """`2025-01-31T12:00:00.123Z`: status.json and events.jsonl times."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_iso(value: str | None) -> datetime | None:
    """A time written by `now_iso` or `fetched_at_stamp`; None for none."""
    if not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def fetched_at_stamp() -> str:
    """`2025-01-31T12:00:00Z`: when a source was fetched (its front matter and index)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def backup_stamp() -> str:
    """`20250131T120000`: the name of a copy of status.json kept aside (corrupt, replaced)."""
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S")


def history_stamp() -> str:
    """`20250131T120000123456Z`: the name of an artifact's earlier version under history/."""
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
