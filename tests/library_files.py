"""Real documents made by the tests: PDFs written with pypdf (a text layer in Helvetica,
metadata, page labels, encryption), Word files with python-docx, and hostile files."""

from __future__ import annotations

import io
import textwrap
import zipfile
from pathlib import Path

from pypdf import PdfWriter
from pypdf.generic import ArrayObject, DecodedStreamObject, DictionaryObject, NameObject, NumberObject


def _escape(line: str) -> str:
    return line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def pdf_bytes(
    pages: list[str],
    *,
    title: str = "",
    author: str = "",
    created: str = "",
    password: str = "",
    first_label: int | None = None,
) -> bytes:
    """A PDF whose pages carry `pages` as real text (Helvetica, a few lines each).

    first_label: number the pages from it (/PageLabels), as a chapter of a book is."""
    writer = PdfWriter()
    font = writer._add_object(
        DictionaryObject(
            {
                NameObject("/Type"): NameObject("/Font"),
                NameObject("/Subtype"): NameObject("/Type1"),
                NameObject("/BaseFont"): NameObject("/Helvetica"),
            }
        )
    )
    for text in pages:
        page = writer.add_blank_page(612, 792)
        page[NameObject("/Resources")] = DictionaryObject(
            {NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})}
        )
        ops = ["BT", "/F1 11 Tf", "14 TL", "72 740 Td"]
        for paragraph in text.split("\n\n"):
            ops += [f"({_escape(line)}) Tj T*" for line in textwrap.wrap(paragraph, 85)] + ["T*"]
        ops.append("ET")
        stream = DecodedStreamObject()
        stream.set_data("\n".join(ops).encode("latin-1"))
        page[NameObject("/Contents")] = writer._add_object(stream)
    if first_label is not None:
        labels = DictionaryObject(
            {
                NameObject("/Nums"): ArrayObject(
                    [
                        NumberObject(0),
                        DictionaryObject(
                            {NameObject("/S"): NameObject("/D"), NameObject("/St"): NumberObject(first_label)}
                        ),
                    ]
                )
            }
        )
        writer._root_object[NameObject("/PageLabels")] = labels
    metadata = {k: v for k, v in (("/Title", title), ("/Author", author), ("/CreationDate", created)) if v}
    if metadata:
        writer.add_metadata(metadata)
    if password:
        writer.encrypt(user_password=password, owner_password=password, algorithm="RC4-128")
    buffer = io.BytesIO()
    writer.write(buffer)
    return buffer.getvalue()


def write_pdf(path: Path, pages: list[str], **kwargs: object) -> Path:
    path.write_bytes(pdf_bytes(pages, **kwargs))  # type: ignore[arg-type]
    return path


def scanned_pdf_bytes(count: int = 2) -> bytes:
    """Pages with no text layer at all (what a scanner without OCR makes, minus the image)."""
    writer = PdfWriter()
    for _ in range(count):
        writer.add_blank_page(612, 792)
    buffer = io.BytesIO()
    writer.write(buffer)
    return buffer.getvalue()


def deep_pdf_bytes(depth: int = 10_000) -> bytes:
    """A PDF whose page tree holds an object nested `depth` levels deep."""
    nested = "[" * depth + "]" * depth
    objects = [
        "<< /Type /Catalog /Pages 2 0 R >>",
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Deep {nested} >>",
        "<< /Length 44 >>\nstream\nBT /F1 12 Tf 72 720 Td (Hello deep) Tj ET\nendstream",
    ]
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(f"{number} 0 obj\n{body}\nendobj\n".encode("latin-1"))
    xref = out.tell()
    out.write(f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode())
    for offset in offsets:
        out.write(f"{offset:010d} 00000 n \n".encode())
    out.write(f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode())
    return out.getvalue()


def write_docx(path: Path, sections: list[tuple[str, str]], *, title: str = "", author: str = "") -> Path:
    """A Word file: each (heading, paragraphs) a Heading 1 and its paragraphs."""
    import docx

    document = docx.Document()
    for heading, body in sections:
        document.add_heading(heading, level=1)
        for paragraph in body.split("\n\n"):
            document.add_paragraph(paragraph)
    if title:
        document.core_properties.title = title
    if author:
        document.core_properties.author = author
    document.save(str(path))
    return path


def zip_bomb_docx(path: Path, unpacked_bytes: int) -> Path:
    """A .docx whose one extra part unpacks to `unpacked_bytes` of zeros (a few KB packed)."""
    write_docx(path, [("Title", "A small document.")])
    with zipfile.ZipFile(path, "a", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        chunk = b"\0" * 1_000_000
        with archive.open("word/media/bomb.bin", "w", force_zip64=True) as handle:
            for _ in range(unpacked_bytes // len(chunk)):
                handle.write(chunk)
    return path


def deflate_bomb_pdf_bytes(unpacked: int) -> bytes:
    """A one-page PDF whose content stream is a few hundred KB compressed and `unpacked`
    bytes once inflated (a decompression bomb for the PDF reader)."""
    import zlib

    packer = zlib.compressobj(1)
    chunk = b" " * (1 << 20)
    parts = [packer.compress(b"BT /F1 12 Tf 72 720 Td (Bomb) Tj ET\n")]
    parts += [packer.compress(chunk) for _ in range(unpacked >> 20)]
    stream = b"".join(parts) + packer.flush()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)
