"""Findings that act: what a checking stage found in an artifact it cannot change itself.

The consistency checker reads `final.md` but writes only its report. When its verdict is
"needs attention", its numbered findings go to the stage that owns the article
(`Stage.findings_to`: the polisher) for one fix turn, and the checker runs again on the
result. Whatever it still finds stays on the project as problems (`status.problems`, kind
`consistency`), which `status`, `list`, `check` and the studio show, so the writer decides.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pensieve.citations.summary import Problem
from pensieve.project.workspace import Project
from pensieve.stages import STAGES

PROBLEM_KIND = "consistency"
_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")
_VERDICT_LINE = re.compile(r"^\s*(?:\*\*)?verdict(?:\*\*)?\s*:?\s*(?:\*\*)?\s*(.*)$", re.I)
_NEEDS_ATTENTION = re.compile(r"\bneeds?\s+attention\b", re.I)
_ITEM = re.compile(r"^\s{0,3}(\d+)[.)]\s+(.*)$")
_NONE = re.compile(r"^\W*none\W*$", re.I)
MAX_FINDING_CHARS = 600


@dataclass(frozen=True)
class Findings:
    needs_attention: bool
    items: tuple[str, ...]

    @property
    def actionable(self) -> bool:
        return self.needs_attention and bool(self.items)


def _sections(text: str) -> dict[str, list[str]]:
    sections: dict[str, list[str]] = {"": []}
    current = ""
    for line in text.splitlines():
        heading = _HEADING.match(line)
        if heading:
            current = heading.group(1).strip().lower()
            sections.setdefault(current, [])
        else:
            sections[current].append(line)
    return sections


def _verdict(text: str, sections: dict[str, list[str]]) -> str:
    for title, lines in sections.items():
        if title.startswith("verdict"):
            body = " ".join(line.strip() for line in lines if line.strip())
            if body:
                return body
    for line in text.splitlines():
        match = _VERDICT_LINE.match(line)
        if match and match.group(1).strip():
            return match.group(1)
    return ""


def _items(lines: list[str]) -> tuple[str, ...]:
    items: list[str] = []
    for line in lines:
        match = _ITEM.match(line)
        if match:
            items.append(match.group(2).strip())
        elif items and line.strip() and not _NONE.match(line):
            items[-1] = f"{items[-1]} {line.strip()}"  # a finding that runs on over lines
    return tuple(" ".join(item.split())[:MAX_FINDING_CHARS] for item in items if item and not _NONE.match(item))


def parse_findings(report: str) -> Findings:
    """The verdict and numbered findings of a consistency report (`## Verdict`, or a
    `Verdict:` line; `## Findings`)."""
    sections = _sections(report)
    verdict = _verdict(report, sections)
    found = next((lines for title, lines in sections.items() if title.startswith("findings")), [])
    return Findings(bool(_NEEDS_ATTENTION.search(verdict)), _items(found))


def fix_instructions(findings: Findings, report: str, target: str, start_from: str | None = None) -> str:
    """What the stage that owns the article is told, for its one fix turn. `start_from` is
    its previous text with source ids when `target` itself was renumbered for the reader."""
    listed = "\n".join(f"{n}. {item}" for n, item in enumerate(findings.items, 1))
    start = (
        f"Start from {start_from}, your previous text with source ids ({target} itself is renumbered for the "
        f"reader), and write {target} again"
        if start_from
        else f"Read {target} and write it again"
    )
    return (
        f'The consistency checker read {target} and its verdict is "needs attention" ({report}). {start}, '
        "fixing each finding below and changing nothing else: keep every sourced fact and its citation. If a "
        "finding is wrong, or asks for something only the writer can decide, leave that passage as it is and "
        f"say so in your one-line summary.\n{listed}"
    )


def problems(findings: Findings, report: str) -> list[Problem]:
    """The findings as project problems (`<report>: consistency: <finding>`)."""
    if not findings.needs_attention:
        return []
    items = findings.items or ("the verdict is needs attention (no numbered findings)",)
    return [Problem(report, PROBLEM_KIND, item) for item in items]


def is_problem(problem: str) -> bool:
    return f": {PROBLEM_KIND}: " in problem


def report_problems(project: Project) -> list[Problem]:
    """What the checking stages' reports on disk still find, as problems (for `pensieve check`)."""
    found: list[Problem] = []
    for stage in STAGES:
        path = project.file(stage.writes)
        if stage.findings_to is not None and path.is_file():
            found += problems(parse_findings(path.read_text(encoding="utf-8", errors="replace")), stage.writes)
    return found
