"""The article as a Word document (python-docx): real headings, paragraphs, lists, tables,
links, and the references as a numbered endnote list (python-docx has no footnote API).

Built from the same markdown-it token stream as the HTML, so both agree on structure.
Citations are `[1]` runs linked to a bookmark on their reference; a weak or unsupported
one says so in the text. Nothing from content is interpreted: text goes into runs (control
characters dropped, which XML cannot hold), links only to http(s) URLs.
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from docx import Document
from docx.enum.text import WD_ALIGN_PARAGRAPH
from docx.opc.constants import RELATIONSHIP_TYPE
from docx.oxml import OxmlElement
from docx.oxml.ns import qn
from docx.shared import Pt, RGBColor
from docx.text.paragraph import Paragraph
from markdown_it.token import Token

from pensieve import __version__
from pensieve.publish.document import PLACEHOLDER, Article, CiteItem
from pensieve.publish.links import safe_link
from pensieve.publish.references import clean_text
from pensieve.publish.render import markdown_parser

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ufffe\uffff]")
_LINK_BLUE = RGBColor(0x1A, 0x5F, 0xB4)
_MONO = "Courier New"


def _xml_text(text: str) -> str:
    return _CONTROL.sub("", text)


def _bookmark(number: int) -> str:
    return f"ref_{number}"


# Markdown's emphasis tokens (on at *_open, off at *_close), by the _Style field each sets.
_EMPHASIS = {
    f"{tag}_{edge}": attribute
    for tag, attribute in (("strong", "bold"), ("em", "italic"), ("s", "strike"))
    for edge in ("open", "close")
}


@dataclass
class _Style:
    bold: bool = False
    italic: bool = False
    strike: bool = False
    code: bool = False
    link: str | None = None  # an external URL
    anchor: str | None = None  # a bookmark in the document


@dataclass
class _Inline:
    """Writes one inline token's children into a paragraph."""

    article: Article
    paragraph: Paragraph
    style: _Style = field(default_factory=_Style)
    _link_element: Any = None

    def run(self, text: str, *, superscript: bool = False, colour: RGBColor | None = None, bold: bool = False) -> None:
        text = _xml_text(text)
        if not text:
            return
        target = self._link_element
        run = self.paragraph.add_run(text) if target is None else None
        if run is None:
            element = OxmlElement("w:r")
            t = OxmlElement("w:t")
            t.text = text
            t.set(qn("xml:space"), "preserve")
            element.append(t)
            target.append(element)
            from docx.text.run import Run

            run = Run(element, self.paragraph)
        if self.style.bold or bold:
            run.bold = True
        if self.style.italic:
            run.italic = True
        if self.style.strike:
            run.font.strike = True
        if self.style.code:
            run.font.name = _MONO
        if superscript:
            run.font.superscript = True
        if self._link_element is not None:
            run.font.color.rgb = _LINK_BLUE
            run.font.underline = True
        elif colour is not None:
            run.font.color.rgb = colour

    def open_link(self, url: str | None = None, anchor: str | None = None) -> None:
        element = OxmlElement("w:hyperlink")
        if url is not None:
            rel = self.paragraph.part.relate_to(url, RELATIONSHIP_TYPE.HYPERLINK, is_external=True)
            element.set(qn("r:id"), rel)
        if anchor is not None:
            element.set(qn("w:anchor"), anchor)
        self.paragraph._p.append(element)
        self._link_element = element

    def close_link(self) -> None:
        self._link_element = None

    def text_with_citations(self, text: str) -> None:
        position = 0
        for match in PLACEHOLDER.finditer(text):
            self.run(text[position : match.start()])
            self.citation(self.article.citations[int(match.group(1))].items)
            position = match.end()
        self.run(text[position:])

    def citation(self, items: Sequence[CiteItem]) -> None:
        inside_link = self._link_element is not None
        for position, item in enumerate(items):
            if position:
                self.run(" ", superscript=True)
            if item.number is None:
                self.run(f"[{item.label}?]", superscript=True, colour=RGBColor(0xA5, 0x1D, 0x2D))
                continue
            if not inside_link:
                self.open_link(anchor=_bookmark(item.number))
            self.run(f"[{item.number}]", superscript=True)
            if not inside_link:
                self.close_link()
            if item.verdict in ("weak", "unsupported"):
                colour = RGBColor(0xA5, 0x1D, 0x2D) if item.verdict == "unsupported" else RGBColor(0x8A, 0x5A, 0x00)
                self.run(f" ({item.verdict})", superscript=True, colour=colour, bold=True)

    def render(self, children: Sequence[Token]) -> None:
        for child in children:
            kind = child.type
            if kind == "text":
                self.text_with_citations(child.content)
            elif kind == "code_inline":
                code, self.style.code = self.style.code, True
                self.run(child.content)
                self.style.code = code
            elif kind in ("softbreak",):
                self.run(" ")
            elif kind == "hardbreak":
                self.paragraph.add_run().add_break()
            elif kind in _EMPHASIS:  # strong, em and s: on at their open token, off at the close
                setattr(self.style, _EMPHASIS[kind], kind.endswith("_open"))
            elif kind == "link_open":
                url = safe_link(str(child.attrGet("href") or ""), in_document=False)
                if url is not None and self._link_element is None:
                    self.open_link(url=url)
            elif kind == "link_close":
                self.close_link()
            elif kind == "image":
                alt = PLACEHOLDER.sub("", "".join(c.content for c in child.children or [])).strip() or "image"
                url = safe_link(str(child.attrGet("src") or ""), in_document=False)
                if url is not None and self._link_element is None:
                    self.open_link(url=url)
                    self.run(f"[image: {alt}]")
                    self.close_link()
                else:
                    self.run(f"[image: {alt}]")


class _Writer:
    def __init__(self, article: Article) -> None:
        self.article = article
        self.doc = Document()
        self.lists: list[str] = []  # "bullet" | "number", innermost last
        self.quote = 0
        self.item_first: list[bool] = []
        self._restart_number: int | None = None  # the start of a numbered list just opened
        self._num_ids: dict[int, int] = {}
        self._styles: dict[str, Any] = {}

    def style(self, name: str) -> Any:
        """A paragraph style by name, looked up once (python-docx scans every style per lookup)."""
        if name not in self._styles:
            self._styles[name] = self.doc.styles[name]
        return self._styles[name]

    def add(self, style: str = "Normal") -> Paragraph:
        """A new paragraph with the style set by id (python-docx's own setter scans the styles)."""
        paragraph = self.doc.add_paragraph()
        if style != "Normal":
            paragraph._p.style = self.style(style).style_id
        return paragraph

    def heading(self, level: int) -> Paragraph:
        return self.add("Title" if level == 0 else f"Heading {level}")

    # -- blocks -----------------------------------------------------------------------
    def paragraph_style(self) -> str:
        if self.lists:
            depth = min(len(self.lists), 3)
            kind = "List Bullet" if self.lists[-1] == "bullet" else "List Number"
            if self.item_first and not self.item_first[-1]:
                kind = "List Continue"
            return kind if depth == 1 else f"{kind} {depth}"
        return "Quote" if self.quote else "Normal"

    def add_paragraph(self, inline: Token) -> None:
        style = self.paragraph_style()
        paragraph = self.add(style)
        if style.startswith("List Number") and self.item_first and self.item_first[-1]:
            self._number(paragraph, style)
        if self.item_first:
            self.item_first[-1] = False
        _Inline(self.article, paragraph).render(inline.children or [])

    def _number(self, paragraph: Paragraph, style_name: str) -> None:
        """Each numbered list starts at its own first number (Word would otherwise continue
        the previous list's numbering)."""
        if self._restart_number is None:
            paragraph_num = self._num_ids.get(len(self.lists))
            if paragraph_num is not None:
                self._set_num(paragraph, paragraph_num)
            return
        start, self._restart_number = self._restart_number, None
        numbering = self.doc.part.numbering_part.element
        style = self.style(style_name)
        num_pr = style.element.pPr.numPr if style.element.pPr is not None else None
        if num_pr is None or num_pr.numId is None:
            return
        base = numbering.num_having_numId(num_pr.numId.val)
        num = numbering.add_num(base.abstractNumId.val)
        override = num.add_lvlOverride(ilvl=0)
        override.add_startOverride(start)
        self._num_ids[len(self.lists)] = num.numId
        self._set_num(paragraph, num.numId)

    @staticmethod
    def _set_num(paragraph: Paragraph, num_id: int) -> None:
        num_pr = paragraph._p.get_or_add_pPr().get_or_add_numPr()
        num_pr.get_or_add_ilvl().val = 0
        num_pr.get_or_add_numId().val = num_id

    def code_block(self, content: str) -> None:
        for line in content.rstrip("\n").split("\n"):
            paragraph = self.add("No Spacing")
            run = paragraph.add_run(_xml_text(line) or " ")
            run.font.name = _MONO
            run.font.size = Pt(9)
        self.add("No Spacing")

    def table(self, tokens: Sequence[Token], start: int) -> int:
        rows: list[list[Token]] = []
        index = start + 1
        while tokens[index].type != "table_close":
            token = tokens[index]
            if token.type == "tr_open":
                rows.append([])
            elif token.type == "inline":
                rows[-1].append(token)
            index += 1
        columns = max((len(r) for r in rows), default=0)
        if rows and columns:
            table = self.doc.add_table(rows=len(rows), cols=columns)
            table.style = "Table Grid"
            for r, row in enumerate(rows):
                for c, inline in enumerate(row):
                    cell = table.cell(r, c)
                    writer = _Inline(self.article, cell.paragraphs[0])
                    writer.style.bold = r == 0
                    writer.render(inline.children or [])
        return index

    def body(self, tokens: Sequence[Token]) -> None:
        index = 0
        while index < len(tokens):
            token = tokens[index]
            kind = token.type
            if kind == "heading_open":
                level = max(1, min(int(token.tag[1:]) - 1, 9))
                heading = self.heading(level)
                _Inline(self.article, heading).render(tokens[index + 1].children or [])
                index += 3
                continue
            if kind == "inline":
                self.add_paragraph(token)
            elif kind == "bullet_list_open":
                self.lists.append("bullet")
            elif kind == "ordered_list_open":
                self.lists.append("number")
                try:
                    self._restart_number = max(0, int(str(token.attrGet("start") or 1)))
                except ValueError:
                    self._restart_number = 1
            elif kind in ("bullet_list_close", "ordered_list_close"):
                self.lists.pop()
            elif kind == "list_item_open":
                self.item_first.append(True)
            elif kind == "list_item_close":
                self.item_first.pop()
            elif kind == "blockquote_open":
                self.quote += 1
            elif kind == "blockquote_close":
                self.quote -= 1
            elif kind in ("fence", "code_block"):
                self.code_block(token.content)
            elif kind == "table_open":
                index = self.table(tokens, index)
            elif kind == "hr":
                self.doc.add_paragraph("* * *").alignment = WD_ALIGN_PARAGRAPH.CENTER
            index += 1

    # -- references ---------------------------------------------------------------------
    def references(self) -> None:
        if not self.article.references:
            return
        self.heading(1).add_run("References")
        for ref in self.article.references:
            parts = ref.parts
            paragraph = self.add()
            paragraph.paragraph_format.left_indent = Pt(22)
            paragraph.paragraph_format.first_line_indent = Pt(-22)
            _add_bookmark(paragraph, _bookmark(ref.number), ref.number)
            writer = _Inline(self.article, paragraph)
            writer.run(f"{ref.number}.\t")
            if parts.label:
                writer.run(f"{parts.dated_label.rstrip('.')}. ")
            writer.style.italic = True
            writer.run(parts.title.rstrip("."))
            writer.style.italic = False
            writer.run(". ")
            for kind, value in parts.middle():
                shown = {"venue": value.rstrip("."), "fetched": f"Fetched {value}"}.get(kind, value)
                writer.run(f"{shown}. ")
            if parts.doi:
                writer.run(f"doi:{parts.doi} ")
            if parts.link:
                writer.open_link(url=parts.link)
                writer.run(parts.url)
                writer.close_link()
            else:
                writer.run(parts.url)

    def evidence_note(self) -> None:
        flagged = [
            (item, citation)
            for citation in self.article.citations
            for item in citation.items
            if item.verdict in ("weak", "unsupported")
        ]
        state = self.article.evidence.status
        if state == "stale":
            self.doc.add_paragraph(
                "The evidence check is out of date for this text; citations are not marked.", style="Intense Quote"
            )
        if flagged:
            self.doc.add_paragraph(
                f"{len(flagged)} citation(s) were found weak or unsupported by the evidence check and are "
                "marked in the text.",
                style="Intense Quote",
            )


def _add_bookmark(paragraph: Paragraph, name: str, bookmark_id: int) -> None:
    start = OxmlElement("w:bookmarkStart")
    start.set(qn("w:id"), str(bookmark_id))
    start.set(qn("w:name"), name)
    end = OxmlElement("w:bookmarkEnd")
    end.set(qn("w:id"), str(bookmark_id))
    paragraph._p.append(start)
    paragraph._p.append(end)


def docx_export(article: Article, *, exported_at: str) -> bytes:
    writer = _Writer(article)
    doc = writer.doc
    doc.core_properties.title = _xml_text(clean_text(article.title))[:250]
    doc.core_properties.author = "Pensieve"
    doc.core_properties.comments = _xml_text(f"Exported by Pensieve {__version__} from {article.name} on {exported_at}")
    writer.heading(0).add_run(_xml_text(article.title))
    subtitle = doc.add_paragraph(style="Subtitle")
    subtitle.add_run(f"{article.sources_note()} · exported {exported_at[:10]}")
    writer.evidence_note()
    writer.body(markdown_parser().parse(article.markdown))
    writer.references()
    buffer = io.BytesIO()
    doc.save(buffer)
    return buffer.getvalue()
