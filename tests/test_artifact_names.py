"""The stage table owns artifact knowledge: names and groups of artifacts come from its rows.

Outside `pensieve/stages.py` no code spells an artifact's file name or a stage's name (user
messages may: they are text, not string constants of their own), and no code lists artifacts
by hand (`(Artifact.FINAL, Artifact.DRAFT_V2, ...)`): which files are article versions,
which cite, which is final and whose model judges evidence are fields of the rows.
"""

from __future__ import annotations

import ast
from pathlib import Path

from pensieve.stages import (
    ARTICLE_VERSIONS,
    CITING_FILES,
    CLAIMS_TABLE,
    EVIDENCE_CHECKED,
    EVIDENCE_JUDGE,
    FINAL_ARTICLE,
    MARKED_FILES,
    STAGE_NAMES,
    STAGES,
    Artifact,
)

PACKAGE = Path(__file__).resolve().parent.parent / "pensieve"

# Spelled elsewhere on purpose, each for a reason:
ALLOWED = {
    # The brief is the user's file (written by `pensieve new`), named with status.json and the
    # project's other files in the lowest layer, which the stage table imports.
    ("project/workspace.py", "brief.md"),
    # Typer defaults, shown by `--help`, which must not import the stage table.
    ("cli/main.py", "final.md"),
    ("cli/export.py", "final.md"),
}


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _in_fstrings(tree: ast.AST) -> set[int]:
    return {id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for part in ast.walk(node)}


def _is_artifact_member(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "Artifact"


def name_literals(source: str, names: set[str]) -> list[tuple[int, str]]:
    """(line, text) of every string constant that is exactly an artifact or stage name."""
    tree = ast.parse(source)
    skipped = _docstrings(tree) | _in_fstrings(tree)
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names
        if id(node) not in skipped
    ]


def artifact_tuples(source: str) -> list[int]:
    """Lines of every tuple, list or set that names two artifacts or more by hand."""
    tree = ast.parse(source)
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, (ast.Tuple, ast.List, ast.Set))
        and sum(1 for element in node.elts if _is_artifact_member(element)) >= 2
    ]


def _sources() -> list[tuple[str, str]]:
    return [
        (path.relative_to(PACKAGE).as_posix(), path.read_text(encoding="utf-8"))
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name != "stages.py" or path.parent != PACKAGE
    ]


def test_no_artifact_or_stage_name_is_spelled_outside_the_stage_table() -> None:
    names = {a.value for a in Artifact} | set(STAGE_NAMES)
    found = [
        f"{where}:{line}: {text!r}"
        for where, source in _sources()
        for line, text in name_literals(source, names)
        if (where, text) not in ALLOWED
    ]
    assert found == [], "use the stage table (pensieve/stages.py):\n" + "\n".join(found)


def test_no_hand_written_artifact_tuple_outside_the_stage_table() -> None:
    found = [f"{where}:{line}" for where, source in _sources() for line in artifact_tuples(source)]
    assert found == [], "derive the group from the rows (pensieve/stages.py):\n" + "\n".join(found)


def test_the_checks_see_what_they_are_for() -> None:
    sample = '''
"""A docstring naming final.md is prose."""
FINAL = "final.md"
ORDER = (Artifact.FINAL, Artifact.DRAFT_V2)
message = f"see {name} or final.md"
judge = settings.model_for("fact_checker")
'''
    assert name_literals(sample, {"final.md", "fact_checker"}) == [(3, "final.md"), (6, "fact_checker")]
    assert artifact_tuples(sample) == [4]


def test_the_groups_come_from_the_rows() -> None:
    assert [str(a) for a in ARTICLE_VERSIONS] == ["draft_v1.md", "draft_v2.md", "final.md"]
    assert FINAL_ARTICLE == Artifact.FINAL == STAGES[-2].writes
    assert [str(a) for a in CITING_FILES] == ["research_notes.md", "draft_v1.md", "draft_v2.md", "final.md"]
    assert [str(a) for a in MARKED_FILES] == ["research_notes.md", "draft_v1.md", "draft_v2.md"]
    assert EVIDENCE_CHECKED == ARTICLE_VERSIONS
    assert CLAIMS_TABLE == Artifact.FACT_CHECK
    assert EVIDENCE_JUDGE.name == "fact_checker"
