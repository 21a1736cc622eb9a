"""Reading citations out of markdown, and the normalisation used to match quotations.

Pure functions over strings: no I/O, no model. Citation ids are those the source archive
assigns (`[S3]`, also `[S3, S7]`); every other form a model writes (`(S3)`, `[s3]`,
`[S3, p. 4]`, `[^S3]`, `[S3; S7]`, `[S3][S7]`...) is made canonical by normalize_citations
before anything reads or rewrites a text. Final articles are renumbered for the reader
(`[1]`) with a generated reference list that maps each number back to its id.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

from pensieve.untrusted import INVISIBLE

CITE_GROUP = re.compile(r"\[((?:S\d+)(?:\s*[,;]\s*S\d+)*)\]")
SOURCE_ID = re.compile(r"S\d+")
# Reader-facing citations: [1], [2, 3]; not links ([1](...)) and not years like [2024].
NUMBER_GROUP = re.compile(r"\[(\d{1,3}(?:\s*[,;]\s*\d{1,3})*)\](?!\()")
# The scheme of the URL Pensieve gives an MCP result (tools/mcp.py, source_url): it is
# archived, listed and cited like a fetched page, so the checks must read it too.
MCP_SCHEME = "mcp"
# Likewise a document of the workspace library (pensieve/library/sources.py): library://<id>.
LIBRARY_SCHEME = "library"
URL_START = rf"(?:https?|{MCP_SCHEME}|{LIBRARY_SCHEME})://"
# A URL written out in text; a pair of parentheses inside it is kept (Foo_(bar)), the
# brackets or parenthesis around it are not.
URL = re.compile(URL_START + r"(?:[^\s<>()\[\]\"'`]|\([^\s<>()\[\]\"'`]*\))+")
REFERENCE_HEADING = re.compile(r"^#{1,6}\s*(references|sources|bibliography|works cited)\s*$", re.I | re.M)
_ANY_HEADING = re.compile(r"^#{1,6}\s", re.M)
# The Reviser's own notes section: exactly the heading reviser.md asks for ("## Revision
# notes", any level, emphasis or a colon allowed), or that phrase alone on a bold line.
_HEADING_LINE = re.compile(r"^(#{1,6})[ \t]+(.*?)[ \t#]*$", re.M)
_NOTES_TITLE = re.compile(r"[*_ \t]*revision notes?[*_ \t]*:?[*_ \t]*", re.I)
_NOTES_LINE = re.compile(
    r"^[ \t]*(?:\*\*|__)?[ \t]*revision notes?[ \t]*:?[ \t]*(?:\*\*|__)?[ \t]*:?[ \t]*$", re.I | re.M
)

_QUOTES = str.maketrans(
    {
        "\u2018": "'",
        "\u2019": "'",
        "\u201a": "'",
        "\u201b": "'",
        "\u2032": "'",
        "`": "'",
        # Double quotes fold into single ones too: a quotation nested in quotes swaps them.
        '"': "'",
        "\u201c": "'",
        "\u201d": "'",
        "\u201e": "'",
        "\u201f": "'",
        "\u2033": "'",
        "\u00ab": "'",
        "\u00bb": "'",
        "\u2013": "-",
        "\u2014": "-",
        "\u2212": "-",
        "\u2010": "-",
        "\u2011": "-",
    }
)


def normalize(text: str) -> str:
    """Case, quotes, dashes, soft hyphens and whitespace folded so a faithful quotation matches."""
    text = unicodedata.normalize("NFKC", text)
    text = INVISIBLE.sub("", text)
    text = text.translate(_QUOTES)
    text = text.casefold()
    return " ".join(text.split())


def strip_markdown_quote(text: str) -> str:
    """A quotation as written in a table cell: drop surrounding quotes, ellipses, emphasis."""
    text = text.strip().strip("*_").strip()
    text = text.strip("\"'\u201c\u201d\u2018\u2019\u00ab\u00bb").strip()
    return text.strip(".\u2026 ").strip()


def strip_code(text: str) -> str:
    """Code blocks and inline code are not prose: brackets there are not citations."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    return re.sub(r"`[^`\n]*`", "", text)


def citation_count(text: str, numbered: bool = False) -> int:
    """How many citations a text makes ([S1, S2] counts two)."""
    pattern, item = (NUMBER_GROUP, r"\d+") if numbered else (CITE_GROUP, r"S\d+")
    return sum(len(re.findall(item, group.group(1))) for group in pattern.finditer(text))


def cited_ids(text: str) -> list[str]:
    """Source ids in order of first use (duplicates removed)."""
    seen: dict[str, None] = {}
    for group in CITE_GROUP.finditer(text):
        for sid in SOURCE_ID.findall(group.group(1)):
            seen.setdefault(sid, None)
    return list(seen)


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


def split_notes(text: str) -> tuple[str, str | None]:
    """(article, revision notes or None).

    Only the Reviser's own notes count: the last `Revision notes` heading, and only when it
    ends the document (later headings may be deeper, or a reference list the model typed).
    Any other heading, `## Changes in the industry` or even a mid-article `Revision notes`,
    is part of the article and never cuts it short.
    """
    code = code_spans(text)
    headings = [(len(m.group(1)), m) for m in _HEADING_LINE.finditer(text) if not _inside(m.start(), code)]
    lines = [(7, m) for m in _NOTES_LINE.finditer(text) if not _inside(m.start(), code)]
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


def _inside(position: int, spans: list[tuple[int, int]]) -> bool:
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


def _in_prose(text: str, rewrite: Callable[[str], str]) -> str:
    """Apply `rewrite` to the prose between code blocks and inline code, keeping code as is."""
    out: list[str] = []
    position = 0
    for start, end in code_spans(text):
        out.append(rewrite(text[position:start]))
        out.append(text[start:end])
        position = end
    out.append(rewrite(text[position:]))
    return "".join(out)


# Citation forms models write, all made canonical `[S1]` (several ids: `[S1, S2]`, the form
# the numbering turns into `[1, 2]`): [s1], [S1, p. 4], [^S1], [S1; S2], [S1 and S2],
# [S1-S3], [S1][S2], [S1] [S2], (S1), (S1, S2), ([S1]).
_LOCATOR = (
    r"(?:pp?|pages?|paras?|paragraphs?|sec(?:tion)?s?|§{1,2}|ch(?:ap(?:ter)?)?s?|ll?|lines?|fig(?:ure)?s?"
    r"|tables?|slides?|at)\.?\s*\d+[a-z]?(?:\s*[-–]\s*\d+[a-z]?)?"
)
_CITED_ITEM = re.compile(rf"\^?(S)0*(\d+)(?:\s*[-–]\s*\^?S?0*(\d+))?(?:\s*[,:]?\s*{_LOCATOR})?", re.I)
_LOCATOR_ITEM = re.compile(_LOCATOR, re.I)
_PAGE_NUMBER = re.compile(r"\d+[a-z]?(?:\s*[-–]\s*\d+[a-z]?)?")
_ITEM_SEPARATOR = re.compile(r"\s*(?:[,;&]|\band\b)\s*", re.I)
_BRACKETED = re.compile(r"\[([^\[\]\n]{1,300})\](?!\()")
_PARENTHESISED = re.compile(r"(?<![\w\]])\(([^()\n]{1,300})\)")
_CANONICAL_RUN = re.compile(r"\[S\d+(?:, S\d+)*\](?:[ \t]*\[S\d+(?:, S\d+)*\])+(?!\()")
_MAX_RANGE = 20
_MAX_PASSES = 5
_MAYBE_CITED = re.compile(r"s\d", re.I)  # no "S" before a digit: nothing to normalise


def _cited(content: str, *, in_parentheses: bool) -> list[str] | None:
    """The ids a bracket's (or parenthesis') content cites, or None if it is not a citation."""
    if in_parentheses:
        content = content.replace("[", "").replace("]", "")
    ids: list[str] = []
    after_locator = False
    for item in _ITEM_SEPARATOR.split(content.strip()):
        if not item:
            continue  # "[S1, ]", "[S1;; S2]"
        cited = _CITED_ITEM.fullmatch(item)
        # In parentheses only the capital form: "(s1)" is more often a variable than a source.
        if cited and not (in_parentheses and cited.group(1) == "s"):
            first = int(cited.group(2))
            last = int(cited.group(3)) if cited.group(3) else first
            if not first <= last <= first + _MAX_RANGE:
                return None
            ids.extend(f"S{n}" for n in range(first, last + 1))
            after_locator = False
        elif ids and _LOCATOR_ITEM.fullmatch(item):
            after_locator = True
        elif after_locator and _PAGE_NUMBER.fullmatch(item):
            continue
        else:
            return None
    return list(dict.fromkeys(ids)) or None


def _canonical(ids: list[str]) -> str:
    return "[" + ", ".join(dict.fromkeys(ids)) + "]"


def _is_definition(text: str, match: re.Match[str]) -> bool:
    """`[^S1]: ...` (or `[S1]: ...`) opening a line defines a footnote or link: not a citation."""
    line_start = text.rfind("\n", 0, match.start()) + 1
    return not text[line_start : match.start()].strip() and text.startswith(":", match.end())


def _normalize_prose(prose: str) -> str:
    def bracketed(match: re.Match[str]) -> str:
        ids = _cited(match.group(1), in_parentheses=False)
        return match.group(0) if ids is None or _is_definition(prose, match) else _canonical(ids)

    def parenthesised(match: re.Match[str]) -> str:
        ids = _cited(match.group(1), in_parentheses=True)
        return match.group(0) if ids is None else _canonical(ids)

    def run(match: re.Match[str]) -> str:
        return _canonical(SOURCE_ID.findall(match.group(0)))

    text = _BRACKETED.sub(bracketed, prose)
    text = _PARENTHESISED.sub(parenthesised, text)
    return _CANONICAL_RUN.sub(run, text)


def normalize_citations(text: str) -> str:
    """Every citation form models write made the canonical `[S1]` / `[S1, S2]`.

    `(S1)`, `[s1]`, `[S1, p. 4]`, `[^S1]`, `[S1; S2]`, `[S1 and S2]`, `[S1-S3]`, `[S1][S2]`
    and their combinations; code blocks, inline code, links (`[S1](url)`), footnote and link
    definitions, and brackets that are not citations ("[Section 1]", "(S1 class cars)") are
    left alone. Idempotent: canonical text is returned unchanged.
    """
    if not _MAYBE_CITED.search(text):
        return text
    for _ in range(_MAX_PASSES):  # nested forms like "((S1))" settle in a pass or two
        normalized = _in_prose(text, _normalize_prose)
        if normalized == text:
            break
        text = normalized
    return text


_FOOTNOTE_DEFINITION = re.compile(r"^[ \t]*\[\^S\d+\]:.*(?:\n[ \t]+\S.*)*\n?", re.I | re.M)


def drop_footnote_definitions(text: str) -> str:
    """`[^S3]: Title, https://...` lines are a reference list the model typed: the generated
    one replaces them (code is left alone)."""
    return _in_prose(text, lambda prose: _FOOTNOTE_DEFINITION.sub("", prose))


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


def bare_urls(text: str) -> list[str]:
    """Every URL written out in text, in order, without the punctuation or emphasis after it."""
    return [u.rstrip(".,;:!?*_") for u in URL.findall(text)]


@dataclass(frozen=True)
class FactRow:
    cells: int  # how many cells the row has, against the header's `columns`: a stray `|` adds one
    columns: int
    number: str
    claim: str
    cited: list[str]
    verdict: str
    evidence: str
    evidence_ids: list[str]


def _column(header: list[str], *names: str) -> int | None:
    for index, title in enumerate(header):
        if any(title == n or title.startswith(n) for n in names):
            return index
    return None


_CELL_ID = re.compile(r"(?<![A-Za-z0-9])S0*(\d+)(?!\d)", re.I)


def _cell_ids(cell: str) -> list[str]:
    """Source ids in the cited-id cell, bare or bracketed, in any case ("S3", "[s3]", "S03")."""
    return list(dict.fromkeys(f"S{n}" for n in _CELL_ID.findall(cell)))


def split_table_row(line: str) -> list[str]:
    """The cells of one markdown table row, stripped.

    A `|` escaped as `\\|` or inside a code span (`` `X | Y` ``) belongs to its cell (models
    write both, and a topic about the `|` operator needs them); escaped pipes come back as
    `|`. Only the row's outer pipes and the unescaped ones outside code are separators."""
    body = line.strip()
    body = body[1:] if body.startswith("|") else body
    cells: list[str] = []
    current: list[str] = []
    ticks = 0  # the length of the backtick run that opened the current code span; 0: outside
    i = 0
    while i < len(body):
        char = body[i]
        if char == "\\" and i + 1 < len(body) and body[i + 1] == "|":
            current.append("|")
            i += 2
            continue
        if char == "`":
            run = len(body[i:]) - len(body[i:].lstrip("`"))
            if ticks == 0 and body.find("`" * run, i + run) != -1:
                ticks = run  # a span opens only where it also closes
            elif ticks == run:
                ticks = 0
            current.append("`" * run)
            i += run
            continue
        if char == "|" and ticks == 0:
            cells.append("".join(current).strip())
            current = []
        else:
            current.append(char)
        i += 1
    last = "".join(current).strip()
    if last or not body.rstrip().endswith("|"):
        cells.append(last)
    return cells


def parse_fact_table(text: str) -> list[FactRow]:
    """Rows of the fact check table: | # | claim | cited id | verdict | evidence |."""
    rows: list[FactRow] = []
    header: list[str] | None = None
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("|"):
            header = None
            continue
        cells = split_table_row(line)
        if header is None:
            lowered = [normalize(c).strip("*_ ") for c in cells]
            if any(c.startswith("verdict") for c in lowered) and any(c.startswith("claim") for c in lowered):
                header = lowered
            continue
        if all(set(c) <= set("-: ") for c in cells):
            continue

        def cell(*names: str, cells: list[str] = cells, header: list[str] = header) -> str:
            index = _column(header, *names)
            return cells[index] if index is not None and index < len(cells) else ""

        evidence = cell("evidence", "quote")
        rows.append(
            FactRow(
                cells=len(cells),
                columns=len(header),
                number=cell("#", "no", "n") or str(len(rows) + 1),
                claim=cell("claim"),
                cited=_cell_ids(cell("cited", "source", "citation")),
                verdict=normalize(cell("verdict")).strip("*_ "),
                evidence=evidence,
                evidence_ids=SOURCE_ID.findall(evidence),
            )
        )
    return rows


def quoted_spans(evidence: str) -> list[str]:
    """The quotations inside an evidence cell ("..." or “...”); the whole cell if none."""
    spans = re.findall(r"[\"\u201c\u00ab]([^\"\u201d\u00bb]{3,})[\"\u201d\u00bb]", evidence)
    if spans:
        return [strip_markdown_quote(s) for s in spans]
    stripped = strip_markdown_quote(CITE_GROUP.sub("", evidence))
    return [stripped] if stripped and stripped not in {"-", "n/a", "none"} else []


def shorten(text: str, limit: int) -> str:
    """One line of at most about `limit` characters, cut at a word and marked with " …"."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    # A cut inside "[S1, S2]" would leave a citation no one can resolve: cut before it.
    return re.sub(r"\s*\[[^\]]*$", "", text[:limit].rsplit(" ", 1)[0]) + " …"
