"""Reading citations out of markdown, and the normalisation used to match quotations.

Pure functions over strings: no I/O, no model. Citation ids are those the source archive
assigns (`[S3]`, also `[S3, S7]` and `[S3][S7]`); final articles are renumbered for the
reader (`[1]`) with a generated reference list that maps each number back to its id.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

CITE_GROUP = re.compile(r"\[((?:S\d+)(?:\s*[,;]\s*S\d+)*)\]")
SOURCE_ID = re.compile(r"S\d+")
# Reader-facing citations: [1], [2, 3]; not links ([1](...)) and not years like [2024].
NUMBER_GROUP = re.compile(r"\[(\d{1,3}(?:\s*[,;]\s*\d{1,3})*)\](?!\()")
URL = re.compile(r"https?://[^\s<>\)\]\"'`]+")
_REFERENCE_HEADING = re.compile(r"^#{1,6}\s*(references|sources|bibliography|works cited)\s*$", re.I | re.M)
_NOTES_HEADING = re.compile(r"^#{1,6}\s*(revision notes|change notes|changes)\s*$", re.I | re.M)
_ANY_HEADING = re.compile(r"^#{1,6}\s", re.M)

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
_INVISIBLE = re.compile("[\u00ad\u200b-\u200f\u2060\ufeff]")


def normalize(text: str) -> str:
    """Case, quotes, dashes, soft hyphens and whitespace folded so a faithful quotation matches."""
    text = unicodedata.normalize("NFKC", text)
    text = _INVISIBLE.sub("", text)
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
    match = next(reversed(list(_REFERENCE_HEADING.finditer(text))), None)
    if match is None:
        return text, None
    rest = text[match.end() :]
    following = _ANY_HEADING.search(rest)
    end = match.end() + following.start() if following else len(text)
    body = text[: match.start()] + text[end:]
    return body.rstrip() + "\n", text[match.start() : end]


def split_notes(text: str) -> tuple[str, str | None]:
    """(article, revision notes or None): the notes run to the end of the document."""
    match = _NOTES_HEADING.search(text)
    if match is None:
        return text, None
    return text[: match.start()].rstrip() + "\n", text[match.start() :]


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
    return [u.rstrip(".,;:") for u in URL.findall(text)]


@dataclass(frozen=True)
class FactRow:
    number: str
    claim: str
    cited: list[str]
    verdict: str
    evidence: str
    evidence_ids: list[str]


VERDICTS = ("supported", "contradicted", "not found", "uncited")


def _column(header: list[str], *names: str) -> int | None:
    for index, title in enumerate(header):
        if any(title == n or title.startswith(n) for n in names):
            return index
    return None


def parse_fact_table(text: str) -> list[FactRow]:
    """Rows of the fact check table: | # | claim | cited id | verdict | evidence |."""
    rows: list[FactRow] = []
    header: list[str] | None = None
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("|"):
            header = None
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
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
                number=cell("#", "no", "n") or str(len(rows) + 1),
                claim=cell("claim"),
                cited=SOURCE_ID.findall(cell("cited", "source", "citation")),
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
