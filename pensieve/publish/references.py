"""How one archived source is cited: the only place a reference entry is put together.

Every format (HTML, DOCX, Markdown, JSON) takes its reference entries from
`reference_parts`, so a richer label (authors, year, venue from the metadata of the
bibliographic issue) changes in one place. Fields added to ArchivedSource later are read
with getattr, so this works with or without them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from pensieve.publish.links import safe_link
from pensieve.untrusted import INVISIBLE

# Control characters (but tab and newline), which also make XML (DOCX) unwritable.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ufffe\uffff]")


def clean_text(value: object) -> str:
    """A one-line plain string: control, zero-width and bidi-override characters dropped
    (a page title cannot reorder the text around it), whitespace collapsed."""
    return " ".join(INVISIBLE.sub("", _CONTROL.sub("", str(value or ""))).split())


def site_of(url: str) -> str:
    try:
        host = urlsplit(clean_text(url)).hostname or ""
    except ValueError:
        host = ""
    return host.removeprefix("www.")


def _names(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return (clean_text(value),) if value.strip() else ()
    if isinstance(value, (list, tuple)):
        return tuple(clean_text(v) for v in value if clean_text(v))
    return ()


@dataclass(frozen=True)
class ReferenceParts:
    """One reference entry's pieces, every one plain text (escaped by each format)."""

    label: str  # authors, else publisher, else the site
    authors: tuple[str, ...]
    title: str
    site: str
    fetched: str  # YYYY-MM-DD: the day Pensieve fetched the page
    fetched_at: str  # the full capture time as archived
    url: str  # the live URL (after redirects)
    link: str | None  # the URL when it is safe to link (http/https), else None
    year: str = ""
    venue: str = ""
    publisher: str = ""
    published: str = ""
    doi: str = ""
    # A library document's pages of the cited passages: "p. 12", "pp. 3, 12" ('' for a page).
    pages: str = ""

    @property
    def dated_label(self) -> str:
        """The label with the year after it, unless the label holds it already ("" without a label)."""
        return self.label + (f" ({self.year})" if self.label and self.year and self.year not in self.label else "")

    def middle(self) -> list[tuple[str, str]]:
        """(kind, text) of what stands between the title and the DOI, in this order, each
        format marking it up its own way: venue, pages, site (unless it is the label), fetched."""
        found = [("venue", self.venue), ("pages", self.pages)]
        if self.site != self.label:
            found.append(("site", self.site))
        found.append(("fetched", self.fetched))
        return [(kind, value) for kind, value in found if value]

    def text(self) -> str:
        """The entry on one line of plain text: `Label. Title. Site. Fetched DATE. URL`."""
        pieces = [self.dated_label or self.year, self.title]
        pieces += [f"Fetched {value}" if kind == "fetched" else value for kind, value in self.middle()]
        out = ". ".join(p.rstrip(".") for p in pieces if p) + "."
        if self.doi:
            out += f" doi:{self.doi}"
        return f"{out} {self.url}".strip()


LIBRARY_SCHEME = "library://"


def pages_text(pages: list[str]) -> str:
    """'p. 12' or 'pp. 3, 12' (in order of first appearance, each once)."""
    unique = list(dict.fromkeys(p for p in pages if p))
    if not unique:
        return ""
    return ("p. " if len(unique) == 1 else "pp. ") + ", ".join(unique)


def reference_parts(source: Any) -> ReferenceParts:
    """The reference entry for an archived source (ArchivedSource or anything shaped like it).

    The label is the citation code's `reference_label` (authors + year, else publication + year,
    ... else the site), so an exported reference and the article's own list name a source alike;
    when it would fall back to the title, the site names the entry instead (the title follows)."""
    from pensieve.citations.references import reference_label

    url = clean_text(getattr(source, "final_url", "") or getattr(source, "url", ""))
    site = site_of(url)
    fetched_at = clean_text(getattr(source, "fetched_at", ""))
    if url.startswith(LIBRARY_SCHEME):
        # A document of the writer's own library: no site, no link, and it was added, not fetched.
        url, site, fetched_at = "", "", ""
    authors = _names(getattr(source, "authors", ()))
    publisher = clean_text(getattr(source, "publisher", ""))
    year = clean_text(getattr(source, "year", "") or "")
    venue = clean_text(getattr(source, "venue", ""))
    return ReferenceParts(
        label=(clean_text(reference_label(source)) if authors or venue or publisher else "") or site,
        authors=authors,
        title=clean_text(getattr(source, "title", "")) or "(untitled)",
        site=site,
        fetched=fetched_at[:10],
        fetched_at=fetched_at,
        url=url,
        link=safe_link(url, in_document=False),
        year="" if year in ("0", "None") else year,
        venue=venue,
        publisher=publisher,
        published=clean_text(getattr(source, "published", "")),
        doi=clean_text(getattr(source, "doi", "")),
    )
