"""Citations: `[S1]` markers, the reference lists code writes, and the citation check.

An artifact's citations, notes and references are read by `pensieve.article`; `references` writes the
reference entries and lists from the archive (`reference_label`, the reference styles);
`cited_sources` loads the archived sources a project may cite; `check` finds every
citation problem of the citing files, `summary` is its record in status.json, and `hooks`
runs the check for a project (after a stage, and `pensieve check`).
"""

__all__ = ["check", "cited_sources", "hooks", "references", "summary"]
