"""The one article reader (`pensieve.article`): what it reads, and that it is the only one.

The reader turns an artifact's markdown into blocks, sentences, citations and references for
the citation check, the evidence check, the tools and publishing. These tests pin its rules
(code is not prose, a sentence never ends inside a quotation, a URL, a version number or
after an abbreviation, `[Sn]` and reader numbers `[n]`, the reference section), and walk the
package so that no other module writes a pattern for an article's citation markers or its
reference list again.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

from pensieve.article.blocks import article_extent, code_spans, prose_blocks, reference_section, split_references
from pensieve.article.citations import id_groups, normalize_citations, number_groups, without_marks
from pensieve.article.reference_list import entries, labelled_entries, numbered_list, reader_numbers
from pensieve.article.sentences import body_sentences, cited_sentences, split_sentences
from pensieve.article.summary import opening_paragraph

PACKAGE = Path(__file__).resolve().parent.parent / "pensieve"


def _sentences(text: str) -> list[str]:
    return [span.text for span in split_sentences(text, 0, len(text))]


# -- sentences -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Abbreviations and initials do not end a sentence.
        (
            "Prices rose, e.g. in Jan. and Feb. by 4%. Dr. Smith et al. said so. J. R. Tolkien agreed.",
            ["Prices rose, e.g. in Jan. and Feb. by 4%.", "Dr. Smith et al. said so.", "J. R. Tolkien agreed."],
        ),
        # A version number is one word.
        ("Python 3.11.4 shipped. Version v2.0.1 followed.", ["Python 3.11.4 shipped.", "Version v2.0.1 followed."]),
        # A URL is kept whole, its dots and all.
        (
            "See https://docs.python.org/3/library/re.html. It lists every flag.",
            ["See https://docs.python.org/3/library/re.html.", "It lists every flag."],
        ),
        # A quotation is kept whole: its inner stops do not end the sentence.
        (
            'He wrote "It ends. Then it starts again." and left. Nobody replied.',
            ['He wrote "It ends. Then it starts again." and left.', "Nobody replied."],
        ),
        # So is inline code.
        (
            'Use `open(p, "r"). Read()` with care. Then close it.',
            ['Use `open(p, "r"). Read()` with care.', "Then close it."],
        ),
        # Citations written after the stop stay with the sentence they close.
        (
            "Sales grew 4%. [S3] Costs fell [S1, S2]. Nothing else.",
            ["Sales grew 4%. [S3]", "Costs fell [S1, S2].", "Nothing else."],
        ),
    ],
)
def test_sentences_end_only_where_a_sentence_ends(text: str, expected: list[str]) -> None:
    assert _sentences(text) == expected


def test_sentence_offsets_point_into_the_text() -> None:
    text = "# Title\n\nFirst claim [S1]. Second claim [2].\n\n- A listed claim [S3].\n"
    for span in body_sentences(text):
        assert text[span.start : span.end] == span.text
    assert [s.text for s in body_sentences(text)] == ["First claim [S1].", "Second claim [2].", "A listed claim [S3]."]


def test_cited_sentences_read_source_ids_and_reader_numbers() -> None:
    text = (
        "# T\n\nVectors index text [1]. Graphs are fast [2, 1]. Plain sentence.\n\n"
        "## References\n\n1. Alpha, https://a.example/one\n2. Beta, https://b.example/two\n"
    )
    numbers = reader_numbers(text, {"https://a.example/one": "S4", "https://b.example/two": "S7"})
    assert numbers == {"1": "S4", "2": "S7"}
    found = cited_sentences(text, numbers)
    assert [(s.text, s.ids, s.claim) for s in found] == [
        ("Vectors index text [1].", ("S4",), "Vectors index text."),
        ("Graphs are fast [2, 1].", ("S7", "S4"), "Graphs are fast."),
    ]
    # A draft cites [Sn] in any form a model writes; the claim keeps the words only.
    draft = cited_sentences("Growth was **4%** (S2). Costs fell [s3, p. 4].")
    assert [(s.ids, s.claim) for s in draft] == [(("S2",), "Growth was 4%."), (("S3",), "Costs fell.")]


# -- citations and code --------------------------------------------------------------------


def test_citations_in_code_are_not_citations() -> None:
    text = "Real [S1] and (S2).\n\n```\nx = a[S3]\n```\n\nInline `b(S4)` too.\n"
    assert normalize_citations(text) == "Real [S1] and [S2].\n\n```\nx = a[S3]\n```\n\nInline `b(S4)` too.\n"
    spans = code_spans(text)
    assert [text[a:b] for a, b in spans] == ["```\nx = a[S3]\n```", "`b(S4)`"]
    # A cited sentence is read from prose only: the fenced block is not a block of prose.
    assert [s.ids for s in cited_sentences(text)] == [("S1", "S2")]


def test_citation_groups_and_their_labels() -> None:
    text = "One [S2, S7]. Two [3; 12]. A link [4](https://x.example) and a year [2024]."
    assert [(g.written, g.labels) for g in id_groups(text)] == [("[S2, S7]", ("S2", "S7"))]
    assert [(g.written, g.labels) for g in number_groups(text)] == [("[3; 12]", ("3", "12"))]
    assert without_marks("Fast [1-3] and sure [S2; S4].") == "Fast and sure."


# -- the reference section -----------------------------------------------------------------

ARTICLE = (
    "# Vector search\n\nIt is fast [1]. Indexes help [2].\n\n"
    "## References\n\n1. Alpha, https://a.example/one\n[2] Beta, https://b.example/two\n"
    "- [S9] Gamma\n- Delta, a bullet\n\n## Revision notes\n\n- fixed claim 2\n"
)


def test_the_reference_section_and_where_the_body_ends() -> None:
    body, section = split_references(ARTICLE)
    assert section is not None and section.startswith("## References") and "Delta" in section
    assert "## Revision notes" in body and "Alpha" not in body
    assert (reference_section(ARTICLE) or "").strip() == section[len("## References") :].strip()
    # The body ends before the reference list (and the notes after it).
    assert ARTICLE[: article_extent(ARTICLE)].rstrip().endswith("Indexes help [2].")
    assert not any("Alpha" in ARTICLE[a:b] for a, b in prose_blocks(ARTICLE, 0, article_extent(ARTICLE), []))


def test_reference_entries_as_the_check_and_the_export_read_them() -> None:
    _body, section = split_references(ARTICLE)
    assert section is not None
    assert [label for label, _rest in labelled_entries(section)] == ["1", "2", "S9", "?"]
    assert [(e.kind, e.label) for e in entries(section)] == [
        ("number", "1"),
        ("number", "2"),
        ("id", "S9"),
        ("bullet", ""),
    ]
    assert numbered_list(section) is True
    assert numbered_list("## References\n\n- Smith, A. (2020). A work.\n") is False
    assert numbered_list("## References\n\nno entries\n") is None


def test_the_opening_paragraph_drops_marks_and_skips_what_is_not_prose() -> None:
    text = "# T\n\n| a | b |\n\n```\ncode\n```\n\nVector search is **fast** [1, 2] and cheap [S3].\n"
    assert opening_paragraph(text) == "Vector search is fast and cheap."


# -- the reader is the only one --------------------------------------------------------------

# A citation or reference-list pattern is one that finds the marker in a probe and not in its
# control, which holds the same tokens outside that marker: `\d+` or `S\d+` find both, so a
# pattern for numbers or ids in general is not one; `\[(S\d+)\]` finds only the first.
PROBES = [
    ("Sales grew 5% [S3].", "Sales grew 5% S3 [see]."),
    ("Sales grew 5% [S3, S7].", "Sales grew 5% S3, S7 [see]."),
    ("Sales grew 5% [3].", "Sales grew 5% 3 [x]."),
    ("Sales grew 5% [2, 3].", "Sales grew 5% 2, 3 [x]."),
    ("Sales grew 5% (S3).", "Sales grew 5% S3 (see)."),
    ("[S3] Alpha, https://a.example/one", "Alpha S3 [see], https://a.example/one"),
    ("[3] Alpha, https://a.example/one", "Alpha 3 [x], https://a.example/one"),
    # A heading that is the reference list, not one that mentions references.
    ("## References", "## Notes on references"),
    ("## Revision notes", "## Why revision notes matter"),
]
_RE_FUNCTIONS = {"compile", "search", "match", "fullmatch", "findall", "finditer", "sub", "subn", "split"}


def _patterns(path: Path, module: str) -> list[tuple[int, str, int]]:
    """(line, pattern, flags) of every regex a module writes: literal patterns given to `re`
    (and the LazyPattern of contracts.reading), and module-level patterns built from other
    strings, read from the imported module."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[tuple[int, str, int]] = []
    built: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func = node.func
        is_re = isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "re"
        is_re = is_re and isinstance(func, ast.Attribute) and func.attr in _RE_FUNCTIONS
        is_lazy = isinstance(func, ast.Name) and func.id == "LazyPattern"
        if not (is_re or is_lazy):
            continue
        first = node.args[0]
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            flags = (
                re.I
                if any("re.I" in ast.unparse(a) for a in [*node.args[1:], *[k.value for k in node.keywords]])
                else 0
            )
            found.append((node.lineno, first.value, flags))
        else:
            built.append((node.lineno, ast.unparse(first)))
    if built:
        # Only the names this module assigns: a pattern it imports is the reader's.
        assigned = {
            target.id
            for node in tree.body
            if isinstance(node, ast.Assign)
            for target in node.targets
            if isinstance(target, ast.Name)
        }
        loaded = importlib.import_module(module)
        for name in sorted(assigned):
            value = getattr(loaded, name, None)
            if isinstance(value, re.Pattern) and isinstance(value.pattern, str):
                found.append((0, value.pattern, value.flags))
            elif type(value).__name__ == "LazyPattern":
                compiled: re.Pattern[str] = value.compiled  # type: ignore[union-attr]
                found.append((0, compiled.pattern, compiled.flags))
    return found


def _modules_outside_the_reader() -> list[tuple[str, Path]]:
    modules = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[:2] == ["pensieve", "article"]:
            continue
        if parts[-1] == "__init__":
            parts.pop()
        modules.append((".".join(parts), path))
    return modules


def test_no_other_module_writes_a_citation_or_reference_list_pattern() -> None:
    offenders = []
    for module, path in _modules_outside_the_reader():
        for line, pattern, flags in _patterns(path, module):
            try:
                compiled = re.compile(pattern, flags & (re.I | re.M | re.S | re.X))
            except re.error:
                continue
            for probe, control in PROBES:
                if compiled.search(probe) and not compiled.search(control):
                    offenders.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {pattern!r} reads {probe!r}")
                    break
    assert not offenders, "read these through pensieve.article instead:\n" + "\n".join(offenders)


def test_the_rule_finds_a_reader_written_elsewhere(tmp_path: Path) -> None:
    """The walk above would catch a module that reads citations its own way again."""
    planted = tmp_path / "planted.py"
    planted.write_text(
        'import re\nCITED = re.compile(r"\\[(S\\d+)\\]")\nre.sub(r"^#+\\s*references\\s*$", "", "x", flags=re.I)\n'
    )
    patterns = [pattern for _line, pattern, _flags in _patterns(planted, "planted")]
    assert patterns == [r"\[(S\d+)\]", r"^#+\s*references\s*$"]
    flagged = [
        p
        for p in patterns
        if any(re.search(p, probe, re.I) and not re.search(p, control, re.I) for probe, control in PROBES)
    ]
    assert flagged == patterns


def test_only_the_renderers_parse_markdown_with_markdown_it() -> None:
    """Reading an article is the reader's; markdown-it only renders one (publish/ and the
    studio's renderer)."""
    importers = sorted(
        str(path.relative_to(PACKAGE))
        for _module, path in _modules_outside_the_reader()
        if re.search(r"^\s*(?:from|import) markdown_it\b", path.read_text(encoding="utf-8"), re.M)
    )
    assert importers and all(p.startswith("publish/") or p == "studio/render.py" for p in importers), importers
