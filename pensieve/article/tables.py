"""The fact check's claims table: | # | claim | cited id | verdict | evidence |, read row by
row (escaped pipes and code spans kept in their cell), and the quotations of its evidence."""

from __future__ import annotations

import re
from dataclasses import dataclass

from pensieve.article.citations import CITE_GROUP, SOURCE_ID
from pensieve.article.words import normalize, strip_markdown_quote


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
