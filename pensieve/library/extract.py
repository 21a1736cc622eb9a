"""Text, a page or heading map and metadata from the bytes of one document.

PDF with pypdfium2 (PDFium, in a child process: `isolation`), Word (.docx) with python-docx,
HTML with trafilatura (the fetcher's own extractor), Markdown and plain text as they are.
Why PDFium: docs/library.md (measured against pypdf and pdfminer.six). Every refusal is an
`ExtractionError` whose message is one line saying what is wrong and what to do; nothing is
stored for a refused file.

The map says where each page (PDF) or heading (the other kinds) starts in the extracted
text, so a passage found at an offset can be cited "p. 12". Each page's text is
sanitised on its own (control, zero-width and bidi characters dropped, whitespace
collapsed) before the offsets are taken, so the offsets hold for the stored text.
"""

from __future__ import annotations

import io
import json
import re
import sys
import threading
import zipfile
from dataclasses import asdict
from datetime import date, datetime
from pathlib import PurePath
from typing import Any

from pensieve.library.extracted import Extracted as Extracted
from pensieve.library.extracted import ExtractionError as ExtractionError
from pensieve.library.extracted import Kind as Kind
from pensieve.library.extracted import Limits as Limits
from pensieve.untrusted import sanitize
from pensieve.web.identifiers import normalize_doi, year_of

KINDS: tuple[Kind, ...] = ("pdf", "docx", "html", "markdown", "text")
SUFFIXES: dict[str, Kind] = {
    ".pdf": "pdf",
    ".docx": "docx",
    ".html": "html",
    ".htm": "html",
    ".xhtml": "html",
    ".md": "markdown",
    ".markdown": "markdown",
    ".txt": "text",
    ".text": "text",
}
MEDIA_TYPES: dict[Kind, str] = {
    "pdf": "application/pdf",
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "html": "text/html",
    "markdown": "text/markdown",
    "text": "text/plain",
}
PAGE_SEPARATOR = "\n\n"
_DOI_IN_TEXT = re.compile(r"\b(?:doi[:\s]*|https?://(?:dx\.)?doi\.org/)?(10\.\d{4,9}/[^\s\"<>]+)", re.I)
_ISBN_IN_TEXT = re.compile(r"\bISBN(?:-1[03])?:?\s*((?:97[89][-\s]?)?(?:\d[-\s]?){9}[\dXx])\b")
_SECTION_NAMES = {
    *("summary", "abstract", "introduction", "overview", "contents", "table of contents", "background"),
    *("motivation", "preface", "foreword", "tl;dr", "tldr", "synopsis", "description", "about"),
}
_MD_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$", re.M)
# Metadata is looked for on the first page (or the first few thousand characters).
_FIRST_PAGE_CHARS = 4_000


def kind_of(name: str, data: bytes, media_type: str = "") -> Kind:
    """What a file is, by its content first (a PDF or a zip named .txt is still one), then
    by its name or media type. Raises ExtractionError for a kind the library does not read."""
    if data[:1024].lstrip().startswith(b"%PDF-") or media_type == "application/pdf":
        return "pdf"
    suffix = PurePath(name).suffix.lower()
    if data[:4] == b"PK\x03\x04":
        if suffix == ".docx" or media_type == MEDIA_TYPES["docx"]:
            return "docx"
        raise ExtractionError(
            "is a zip archive but not a Word document (.docx); the library reads PDF, DOCX, HTML, Markdown and text"
        )
    if suffix in SUFFIXES and SUFFIXES[suffix] not in ("pdf", "docx"):
        return SUFFIXES[suffix]
    if media_type in ("text/html", "application/xhtml+xml"):
        return "html"
    if media_type in ("text/plain", "text/markdown"):
        return "markdown" if media_type == "text/markdown" else "text"
    if suffix in (".pdf", ".docx"):
        raise ExtractionError(f"is named {suffix} but is not a valid {suffix[1:].upper()} file (damaged?)")
    if suffix == ".doc":
        raise ExtractionError("is an old Word file (.doc); save it as .docx or PDF and add that")
    raise ExtractionError(
        f"has a kind the library does not read ({suffix or 'no suffix'}); it reads .pdf, .docx, .html, .md and .txt"
    )


def extract(name: str, data: bytes, limits: Limits, media_type: str = "", url: str = "") -> Extracted:
    """Extract a document; raises ExtractionError with the one-line reason."""
    kind = kind_of(name, data, media_type)
    try:
        if kind == "pdf":
            from pensieve.library.isolation import extract_pdf

            found = extract_pdf(data, limits)
        elif kind == "docx":
            found = _docx(data, limits)
        elif kind == "html":
            found = _html(data, url)
        else:
            found = _plain(kind, data)
    except ExtractionError:
        raise
    except RecursionError:
        raise ExtractionError("is nested too deeply to be read (a damaged or hostile file); not added") from None
    except MemoryError:
        raise ExtractionError("needs more memory than the machine has to be read; not added") from None
    if not found.text.strip():
        if kind == "pdf":
            raise ExtractionError(
                "has no text layer (a scanned PDF?); make it searchable with OCR (e.g. ocrmypdf) and add that file"
            )
        raise ExtractionError("has no text to read")
    if len(found.text) > limits.max_text_chars:
        raise ExtractionError(
            f"has {len(found.text):,} characters of text, more than library.max_text_chars "
            f"({limits.max_text_chars:,}); split it or raise the limit"
        )
    return _with_identifiers(found)


def _with_identifiers(found: Extracted) -> Extracted:
    """DOI and ISBN from the first page when the file's metadata had none (a PDF's first
    page ends where its second starts: a number on page 2 may be a cited book's)."""
    end = _FIRST_PAGE_CHARS
    if found.mark_kind == "page" and len(found.marks) > 1:
        end = min(end, found.marks[1][0])
    head = found.text[:end]
    doi = found.doi
    if not doi:
        match = _DOI_IN_TEXT.search(head)
        doi = normalize_doi(match.group(1)) if match else ""
    isbn = found.isbn
    if not isbn:
        for match in _ISBN_IN_TEXT.finditer(head):
            digits = re.sub(r"[-\s]", "", match.group(1)).upper()
            if _isbn_ok(digits):
                isbn = digits
                break
    return Extracted(**{**found.__dict__, "doi": doi[:200], "isbn": isbn})


def _isbn_ok(digits: str) -> bool:
    if len(digits) == 10:
        total = sum((10 - i) * (10 if c == "X" else int(c)) for i, c in enumerate(digits) if c.isdigit() or c == "X")
        return "X" not in digits[:9] and total % 11 == 0
    if len(digits) == 13 and digits.isdigit():
        return sum(int(c) * (1 if i % 2 == 0 else 3) for i, c in enumerate(digits)) % 10 == 0
    return False


def _join(parts: list[tuple[str, str]]) -> tuple[str, tuple[tuple[int, str], ...]]:
    """Texts with their labels joined; the offset each part starts at."""
    pieces: list[str] = []
    marks: list[tuple[int, str]] = []
    offset = 0
    for label, text in parts:
        if pieces:
            pieces.append(PAGE_SEPARATOR)
            offset += len(PAGE_SEPARATOR)
        marks.append((offset, label))
        pieces.append(text)
        offset += len(text)
    return "".join(pieces), tuple(marks)


def _clean_meta(value: Any, limit: int = 300) -> str:
    return " ".join(sanitize(str(value or "")).split())[:limit]


def _authors(value: Any) -> tuple[str, ...]:
    """'A. Author; B. Author' or 'A. Author and B. Author' as names (a 'Family, Given' stays one)."""
    text = _clean_meta(value, 2_000)
    if not text:
        return ()
    parts = re.split(r"\s*;\s*|\s+and\s+|\s*&\s*", text)
    return tuple(dict.fromkeys(p.strip() for p in parts if p.strip()))[:50]


def _iso(value: Any) -> str:
    if isinstance(value, datetime | date):
        return value.date().isoformat() if isinstance(value, datetime) else value.isoformat()
    text = _clean_meta(value, 40)
    match = re.search(r"(\d{4})(?:-?(\d{2}))?(?:-?(\d{2}))?", text.removeprefix("D:"))
    if not match or not year_of(match.group(1)):
        return ""
    return "-".join(g for g in match.groups() if g)


# -- PDF ------------------------------------------------------------------------------------------

# PDFium (Chrome's PDF engine, fuzzed continuously) bounds its own parser's recursion; a
# file that nests arrays or dictionaries hundreds of levels deep in plain sight is refused
# before it is opened, with a reason (no real document nests like that).
_DEEP_ARRAYS = re.compile(rb"(?:\[[^\[\]]{0,16}){256}")
_DEEP_DICTS = re.compile(rb"(?:<<[^<>\[\]]{0,48}){256}")
# PDFium is not safe to call from two threads at once (the studio may add two uploads).
_PDFIUM = threading.Lock()


def _pdf(data: bytes, limits: Limits) -> Extracted:
    if _DEEP_ARRAYS.search(data) or _DEEP_DICTS.search(data):
        raise ExtractionError("nests objects hundreds of levels deep (a damaged or hostile PDF); not added")
    import pypdfium2 as pdfium
    import pypdfium2.raw as pdfium_c

    with _PDFIUM:
        try:
            document = pdfium.PdfDocument(data)
        except pdfium.PdfiumError as exc:
            if getattr(exc, "err_code", None) == pdfium_c.FPDF_ERR_PASSWORD:
                raise ExtractionError(
                    "is encrypted with a password; save an unprotected copy (or print it to PDF) and add that"
                ) from None
            raise ExtractionError("is not a readable PDF (damaged?); not added") from None
        try:
            count = len(document)
            if count > limits.max_pages:
                raise ExtractionError(
                    f"has {count:,} pages, more than library.max_pages ({limits.max_pages:,}); "
                    "split it or raise the limit"
                )
            parts: list[tuple[str, str]] = []
            for number in range(count):
                page = document[number]
                try:
                    textpage = page.get_textpage()
                    try:
                        text = textpage.get_text_range()
                    finally:
                        textpage.close()
                finally:
                    page.close()
                parts.append((_page_label(document, number), sanitize(text or "")))
            info = document.get_metadata_dict()
        except pdfium.PdfiumError:
            raise ExtractionError("is not a readable PDF (a damaged page?); not added") from None
        finally:
            document.close()
    text, marks = _join(parts)
    return Extracted(
        "pdf",
        text,
        marks,
        "page",
        title=_clean_meta(info.get("Title")),
        authors=_authors(info.get("Author")),
        published=_iso(info.get("CreationDate")),
    )


def _page_label(document: Any, number: int) -> str:
    """The page number printed on the page (/PageLabels: 'iv', '12'), else its position."""
    try:
        label = _clean_meta(document.get_page_label(number), 20)
    except Exception:  # a damaged /PageLabels tree: the physical number is still right
        label = ""
    return label or str(number + 1)


# -- Word ------------------------------------------------------------------------------------------


def _docx(data: bytes, limits: Limits) -> Extracted:
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        infos = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError):
        raise ExtractionError("is not a readable Word document (damaged zip); not added") from None
    # A zip bomb announces itself: the sizes the entries unpack to are in the directory, and
    # zipfile never unpacks past them. Refuse before python-docx unpacks anything.
    unpacked = sum(info.file_size for info in infos)
    if unpacked > limits.max_unpacked_bytes:
        raise ExtractionError(
            f"unpacks to {unpacked:,} bytes, more than library.max_unpacked_bytes ({limits.max_unpacked_bytes:,}) "
            "(a zip bomb?); not added"
        )
    if len(infos) > 10_000:
        raise ExtractionError(f"holds {len(infos):,} entries, far more than a Word document has; not added")
    import docx
    from docx.opc.exceptions import PackageNotFoundError

    try:
        document = docx.Document(io.BytesIO(data))
        parts: list[tuple[str, str]] = []
        current = ""
        lines: list[str] = []
        for block in document.iter_inner_content():
            if isinstance(block, docx.table.Table):
                for row in block.rows:
                    cells = list(dict.fromkeys(sanitize(cell.text) for cell in row.cells))
                    lines.append(" | ".join(c for c in cells if c))
                continue
            text = sanitize(block.text)
            style = (block.style.name if block.style is not None else "") or ""
            if text and style.startswith(("Heading", "Title")):
                if lines or current:
                    parts.append((current, "\n".join(line for line in lines if line)))
                current, lines = text[:200], [text]
                continue
            lines.append(text)
        parts.append((current, "\n".join(line for line in lines if line)))
        core = document.core_properties
        title, authors, published = _clean_meta(core.title), _authors(core.author), _iso(core.created)
        identifier = _clean_meta(core.identifier)
    except (PackageNotFoundError, KeyError, ValueError, zipfile.BadZipFile, OSError, EOFError) as exc:
        raise ExtractionError(f"is not a readable Word document ({type(exc).__name__}); not added") from None
    except Exception as exc:  # lxml's XMLSyntaxError and kin from a damaged part
        if type(exc).__module__.startswith("lxml"):
            raise ExtractionError("is not a readable Word document (damaged XML); not added") from None
        raise
    parts = [(label, text) for label, text in parts if text]
    text, marks = _join(parts)
    headed = tuple((offset, label) for offset, label in marks if label)
    first_heading = next((label for _, label in headed), "")
    return Extracted(
        "docx",
        text,
        headed,
        "heading" if headed else "",
        title=title or first_heading,
        authors=authors,
        published=published,
        doi=normalize_doi(identifier),
    )


# -- HTML, Markdown, text --------------------------------------------------------------------------


def _html(data: bytes, url: str) -> Extracted:
    from pensieve.web.extract import extract as extract_page
    from pensieve.web.page_meta import page_meta

    try:
        page = extract_page(data, "text/html", None, url)
        meta = page_meta(data, "text/html")
    except (ValueError, TypeError, LookupError) as exc:
        raise ExtractionError(f"is not readable HTML ({type(exc).__name__}); not added") from None
    return Extracted(
        "html",
        sanitize(page.text),
        (),
        "",
        title=_clean_meta(page.title),
        authors=meta.authors,
        published=meta.published,
        doi=meta.doi,
    )


def _plain(kind: Kind, data: bytes) -> Extracted:
    try:
        raw = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ExtractionError("is not UTF-8 text; save it as UTF-8 and add it again") from None
    if "\x00" in raw[:8192]:
        raise ExtractionError("looks binary, not text; the library reads .pdf, .docx, .html, .md and .txt")
    title = ""
    body = raw
    if kind == "markdown":
        from pensieve.front_matter import FrontMatterError, parse_front_matter

        try:
            parsed = parse_front_matter(raw)
        except FrontMatterError:
            parsed = None
        if parsed is not None and isinstance(parsed[0], dict):
            title = _clean_meta(parsed[0].get("title"))
            body = parsed[1]
    text = sanitize(body)
    marks: tuple[tuple[int, str], ...] = ()
    if kind == "markdown":
        marks = tuple((m.start(), _clean_meta(m.group(2), 200)) for m in _MD_HEADING.finditer(text))
    if not title and marks:
        # A section's name ("Summary", "Introduction") is no title: the file name says more
        # (a design document "0001-private-fields.md" opens with "# Summary").
        title = "" if marks[0][1].strip(" :.").lower() in _SECTION_NAMES else marks[0][1]
    elif not title:
        title = _clean_meta(next((line for line in text.splitlines() if line.strip()), ""), 120)
    return Extracted(kind, text, marks, "heading" if marks else "", title=title)


def pdf_child(argv: list[str]) -> int:
    """`python -m pensieve.library.extract OPTIONS`: the PDF reader's child process
    (pensieve.library.isolation): limit itself, read the PDF from stdin, answer one JSON line."""
    import resource

    options = json.loads(argv[0])
    address_space = int(options["address_space_mb"]) * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
    resource.setrlimit(resource.RLIMIT_CPU, (int(options["cpu_s"]), int(options["cpu_s"]) + 1))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a crash leaves no core file behind
    data = sys.stdin.buffer.read()
    limits = Limits(
        max_pages=int(options["max_pages"]),
        max_unpacked_bytes=int(options["max_unpacked_bytes"]),
        max_text_chars=int(options["max_text_chars"]),
    )
    try:
        found = _pdf(data, limits)
        answer: dict[str, Any] = {"ok": asdict(found)}
    except ExtractionError as exc:
        answer = {"error": str(exc)}
    except RecursionError:
        answer = {"error": "is nested too deeply to be read (a damaged or hostile file); not added"}
    except MemoryError:
        answer = {
            "error": f"needs more than library.extract_memory_mb ({options['memory_mb']:,} MB) to be read; "
            "not added, or raise the limit"
        }
    sys.stdout.write(json.dumps(answer, ensure_ascii=False))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(pdf_child(sys.argv[1:]))
