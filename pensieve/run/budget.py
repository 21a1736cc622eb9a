"""The shared budget of a stage offered both the web and the library.

Each tool has its own cap (`limits.*`), and the defaults are chosen so that one
gathering's tools (the web's search and fetch, or the library's search and read) fit,
with topic memory, before the round by which the stage's file is due. A stage offered
both would otherwise be told caps adding to more calls than it has rounds (5 + 10 + 6 + 8
against 18 rounds): a researcher that made one call a round and used both would be cut off
by the round limit before it wrote its notes. So the two gatherings share one budget, the
larger of their own totals: a researcher using only the web (or only the library) keeps
every call it had, and one using both splits the same number of calls between them.
"""

from __future__ import annotations

from collections.abc import Mapping

from pensieve.run.dispatch import SharedCap

GATHERINGS: tuple[tuple[str, ...], ...] = (
    ("web_search", "fetch_url"),
    ("search_library", "read_library_document"),
)


def shared_cap(caps: Mapping[str, int]) -> SharedCap | None:
    """The budget shared by the gatherings offered (`caps`: each offered tool's own cap),
    or None when at most one gathering is offered."""
    offered = [[name for name in gathering if name in caps] for gathering in GATHERINGS]
    offered = [names for names in offered if names]
    if len(offered) < 2:
        return None
    ordered = [name for names in offered for name in names]
    total = max(sum(caps[name] for name in names) for names in offered)
    return SharedCap(frozenset(ordered), total, f"{', '.join(ordered[:-1])} and {ordered[-1]}")


def describe(shared: SharedCap | None) -> str:
    """What the stage's prompt says about the shared budget ("" without one)."""
    if shared is None:
        return ""
    return f"; {shared.what} together at most {shared.cap} calls (one budget for the web and the library)"
