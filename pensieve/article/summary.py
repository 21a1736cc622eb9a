"""An article summed up on one line each: its title and its opening paragraph, as
list_projects shows the other articles of a workspace and a stage's task names its project.
Everything here was written by a user or a model: it is sanitised and capped."""

from __future__ import annotations

import re
from collections.abc import Iterator

from pensieve.article.citations import without_marks
from pensieve.article.words import shorten
from pensieve.untrusted import sanitize

TITLE_CHARS = 200
SUMMARY_CHARS = 300
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
# Emphasis and code marks; an underscore only at a word's edge (`_x_`), never inside a name:
# "try_trait_v2" stayed "trytraitv2" in every stage's task (seen by hand).
_EMPHASIS = re.compile(r"[*`]+|(?<!\w)_+|_+(?!\w)")


def _one_line(text: str, limit: int) -> str:
    return shorten(sanitize(text), limit)


def document_title(text: str, *, first_line: bool = False) -> str:
    """The `# Title` of a markdown text; with first_line, else its first non-blank line ("" if none)."""
    fallback = ""
    for line in text.splitlines():
        match = _HEADING.match(line)
        if match and len(match.group(1)) == 1:
            return _one_line(_EMPHASIS.sub("", match.group(2)), TITLE_CHARS)
        if not fallback and line.strip() and not line.lstrip().startswith("<!--"):
            fallback = _EMPHASIS.sub("", match.group(2) if match else line)
    return _one_line(fallback, TITLE_CHARS) if first_line else ""


_PARAGRAPH_BREAK = re.compile(r"\n\s*\n")


def _paragraphs(text: str) -> Iterator[str]:
    """The text's blocks between blank lines, found one at a time: the first prose paragraph
    is near the top, and splitting a whole article for it cost list_projects a tenth of a
    second over 10,000 projects."""
    start = 0
    for match in _PARAGRAPH_BREAK.finditer(text):
        yield text[start : match.start()]
        start = match.end()
    yield text[start:]


def opening_paragraph(text: str, limit: int = SUMMARY_CHARS) -> str:
    """The first prose paragraph of an article (headings, tables, code and comments skipped),
    on one line without emphasis or citation marks."""
    for block in _paragraphs(text):
        block = block.strip()
        if not block or block.startswith(("#", "|", "```", "~~~", "<!--", "---", "***")):
            continue
        return _one_line(without_marks(_EMPHASIS.sub("", block)), limit)
    return ""
