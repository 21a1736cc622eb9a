"""An article's blocks: code (never prose), prose blocks and paragraphs, the title, the
reference section and the Reviser's notes, and so where the article's body ends.

Offsets always refer to the text given, so the sentence reader built on these blocks can
report spans a reader highlights in the file.
"""

from __future__ import annotations

import re
from collections.abc import Callable

# The reference list's heading (the last one counts: an article may discuss "sources" earlier).
REFERENCE_HEADING = re.compile(r"^#{1,6}\s*(references|sources|bibliography|works cited)\s*$", re.I | re.M)
_ANY_HEADING = re.compile(r"^#{1,6}\s", re.M)
# The article's `# Title` (a level-one ATX heading).
TITLE_HEADING = re.compile(r"^#[ \t]+(.+?)[ \t#]*$", re.M)
# The Reviser's own notes section: exactly the heading reviser.md asks for ("## Revision
# notes", any level, emphasis or a colon allowed), or that phrase alone on a bold line.
_HEADING_LINE = re.compile(r"^(#{1,6})[ \t]+(.*?)[ \t#]*$", re.M)
_NOTES_TITLE = re.compile(r"[*_ \t]*revision notes?[*_ \t]*:?[*_ \t]*", re.I)
_NOTES_LINE = re.compile(
    r"^[ \t]*(?:\*\*|__)?[ \t]*revision notes?[ \t]*:?[ \t]*(?:\*\*|__)?[ \t]*:?[ \t]*$", re.I | re.M
)
_LIST_MARKER = re.compile(r"^[ \t]*(?:[-*+]|\d{1,3}[.)]|>)[ \t]+")


def split_references(text: str) -> tuple[str, str | None]:
    """(body, reference section or None). The reference section runs to the next heading."""
    # The last such heading: an article may discuss "sources" earlier on.
    match = next(reversed(list(REFERENCE_HEADING.finditer(text))), None)
    if match is None:
        return text, None
    rest = text[match.end() :]
    following = _ANY_HEADING.search(rest)
    end = match.end() + following.start() if following else len(text)
    body = text[: match.start()] + text[end:]
    return body.rstrip() + "\n", text[match.start() : end]


def reference_section(text: str) -> str | None:
    """The entries under the last reference heading (the heading line itself left out), up to
    the next heading; None without a reference heading."""
    references = list(REFERENCE_HEADING.finditer(text))
    if not references:
        return None
    section = text[references[-1].end() :]
    following = _ANY_HEADING.search(section)
    return section[: following.start()] if following else section


def is_reference_section(section: str) -> bool:
    """Whether a piece of the article starts with a reference heading."""
    return REFERENCE_HEADING.match(section) is not None


def split_notes(text: str) -> tuple[str, str | None]:
    """(article, revision notes or None).

    Only the Reviser's own notes count: the last `Revision notes` heading, and only when it
    ends the document (later headings may be deeper, or a reference list the model typed).
    Any other heading, `## Changes in the industry` or even a mid-article `Revision notes`,
    is part of the article and never cuts it short.
    """
    code = code_spans(text)
    headings = [(len(m.group(1)), m) for m in _HEADING_LINE.finditer(text) if not inside(m.start(), code)]
    lines = [(7, m) for m in _NOTES_LINE.finditer(text) if not inside(m.start(), code)]
    candidates = [(level, m) for level, m in headings if _NOTES_TITLE.fullmatch(m.group(2))] + lines
    if not candidates:
        return text, None
    level, notes = max(candidates, key=lambda c: c[1].start())
    end = len(text)
    for later_level, later in headings:
        if later.start() <= notes.start() or later_level > level:
            continue
        if not REFERENCE_HEADING.fullmatch(later.group(0)):
            return text, None  # a section of the article follows: these are not the notes
        end = min(end, later.start())
    article = text[: notes.start()].rstrip() + "\n"
    if end < len(text):
        article += "\n" + text[end:].strip() + "\n"
    return article, text[notes.start() : end].rstrip() + "\n"


def article_extent(text: str) -> int:
    """Where the article's body ends: before its reference list or the revision notes."""
    end = len(text)
    _article, notes = split_notes(text)
    if notes:
        found = text.rfind(notes.strip()[:200])
        if found != -1:
            end = found
    references = list(REFERENCE_HEADING.finditer(text, 0, end))
    if references:
        end = min(end, references[-1].start())
    return end


def inside(position: int, spans: list[tuple[int, int]]) -> bool:
    """Whether `position` falls in one of the (start, end) spans."""
    return any(start <= position < end for start, end in spans)


_FENCE_OPEN = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})", re.M)
_INLINE_CODE = re.compile(r"(?<!`)(`+)(?!`)[^\n]*?(?<!`)\1(?!`)")


def code_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of every fenced code block (an unclosed fence runs to the end) and
    every inline code span: text that is code, not prose."""
    fenced: list[tuple[int, int]] = []
    position = 0
    while opening := _FENCE_OPEN.search(text, position):
        fence = opening.group(1)
        line_end = text.find("\n", opening.end())
        closing = (
            re.compile(rf"^[ \t]{{0,3}}{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$", re.M).search(text, line_end + 1)
            if line_end != -1
            else None
        )
        end = closing.end() if closing else len(text)
        fenced.append((opening.start(), end))
        position = max(end, opening.end())
    spans: list[tuple[int, int]] = []
    start = 0
    for block_start, block_end in [*fenced, (len(text), len(text))]:
        spans.extend((start + m.start(), start + m.end()) for m in _INLINE_CODE.finditer(text[start:block_start]))
        spans.append((block_start, block_end))
        start = block_end
    return [span for span in spans if span[0] < span[1]]


def in_prose(text: str, rewrite: Callable[[str], str]) -> str:
    """Apply `rewrite` to the prose between code blocks and inline code, keeping code as is."""
    out: list[str] = []
    position = 0
    for start, end in code_spans(text):
        out.append(rewrite(text[position:start]))
        out.append(text[start:end])
        position = end
    out.append(rewrite(text[position:]))
    return "".join(out)


def strip_code(text: str) -> str:
    """Code blocks and inline code are not prose: brackets there are not citations."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    return re.sub(r"`[^`\n]*`", "", text)


def paragraphs(text: str) -> list[str]:
    """Prose paragraphs: not headings, tables, code, rules or reference lines."""
    body, _ = split_references(text)
    body = re.sub(r"```.*?```", "", body, flags=re.S)
    out = []
    for block in re.split(r"\n\s*\n", body):
        block = block.strip()
        if not block or block.startswith(("#", "|", "---", "***", "<!--")):
            continue
        if len(block.split()) < 8:  # captions, bylines, one-line lead-ins
            continue
        out.append(block)
    return out


def prose_blocks(text: str, start: int, end: int, skip: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """(start, end) of each block of prose lines in text[start:end]: paragraphs and list
    items; headings, tables, rules, comments and code are not prose."""
    blocks: list[tuple[int, int]] = []
    current: tuple[int, int] | None = None
    position = start
    for line in text[start:end].splitlines(keepends=True):
        line_start, line_end = position, position + len(line.rstrip("\r\n"))
        position += len(line)
        stripped = line.strip()
        in_code = any(a <= line_start < b and b - a > len(line) for a, b in skip)
        prose = bool(stripped) and not in_code and not stripped.startswith(("#", "|", "<!--", "---", "***", "___"))
        if not prose:
            if current:
                blocks.append(current)
            current = None
            continue
        marker = _LIST_MARKER.match(line)
        if marker:
            if current:
                blocks.append(current)
            current = (line_start + marker.end(), line_end)
        elif current:
            current = (current[0], line_end)
        else:
            current = (line_start + (len(line) - len(line.lstrip())), line_end)
    if current:
        blocks.append(current)
    return blocks
