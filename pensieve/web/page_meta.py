"""A page's own description of itself as a work: citation_* (Highwire/Google Scholar) meta
tags, Dublin Core, JSON-LD, and Open Graph, in that order of trust.

Everything read here is untrusted page content: values are sanitised, capped, and an
identifier is kept only when it looks like one.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pensieve.project.source_archive import SourceMeta
from pensieve.untrusted import sanitize
from pensieve.web.identifiers import normalize_arxiv_id, normalize_doi, normalize_pmid, year_of

_MAX_AUTHORS = 50
_DOI_NAMED = re.compile(r"^(?:https?://(?:dx\.)?doi\.org/|doi:\s*|10\.\d{4,9}/)", re.I)
_ARTICLE_TYPES = {
    "scholarlyarticle",
    "article",
    "newsarticle",
    "blogposting",
    "techarticle",
    "report",
    "medicalscholarlyarticle",
    "book",
    "chapter",
    "thesis",
    "creativework",
}


def _clean(value: Any, limit: int = 200) -> str:
    text = " ".join(sanitize(str(value or "")).split())[:limit].strip()
    return "" if text.startswith(("http://", "https://")) else text


def _iso_date(value: str) -> str:
    text = value.strip().replace("/", "-")
    match = re.match(r"(\d{4})(?:-(\d{1,2}))?(?:-(\d{1,2}))?", text)
    if not match:
        return ""
    year, month, day = match.groups()
    parts = [year] + [f"{int(p):02d}" for p in (month, day) if p]
    return "-".join(parts)


def _meta_tags(root: Any) -> dict[str, list[str]]:
    tags: dict[str, list[str]] = {}
    for element in root.iter("meta"):
        name = (element.get("name") or element.get("property") or "").strip().lower()
        content = element.get("content")
        if name and content and content.strip():
            tags.setdefault(name, []).append(content.strip())
    return tags


def _first(tags: dict[str, list[str]], *names: str) -> str:
    for name in names:
        for value in tags.get(name, []):
            if value.strip():
                return value.strip()
    return ""


def _names(value: Any) -> list[str]:
    """Author names from JSON-LD: a string, {name}, {givenName, familyName}, or a list."""
    if isinstance(value, list):
        return [n for v in value for n in _names(v)]
    if isinstance(value, dict):
        if value.get("familyName"):
            given = str(value.get("givenName") or "").strip()
            return [f"{value['familyName']}, {given}".strip(", ")]
        return [str(value["name"])] if value.get("name") else []
    return [str(value)] if isinstance(value, str) and value.strip() else []


def _name_of(value: Any) -> str:
    if isinstance(value, list):
        value = value[0] if value else ""
    if isinstance(value, dict):
        value = value.get("name") or ""
    return str(value) if isinstance(value, str) else ""


def _json_ld(root: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for script in root.iter("script"):
        if (script.get("type") or "").strip().lower() != "application/ld+json" or not script.text:
            continue
        try:
            data = json.loads(script.text)
        except ValueError:
            continue  # malformed JSON-LD is common; the other tags still count
        stack = data if isinstance(data, list) else [data]
        while stack:
            item = stack.pop(0)
            if not isinstance(item, dict):
                continue
            if isinstance(item.get("@graph"), list):
                stack.extend(item["@graph"])
            kinds = item.get("@type")
            kinds = kinds if isinstance(kinds, list) else [kinds]
            if any(isinstance(k, str) and k.lower() in _ARTICLE_TYPES for k in kinds):
                found.append(item)
    return found


def page_meta(body: bytes, media_type: str, charset: str | None = None) -> SourceMeta:
    """The metadata a page declares; empty for text, unparsable pages or pages without any."""
    if media_type not in ("text/html", "application/xhtml+xml") or not body.strip():
        return SourceMeta()
    import lxml.html  # type: ignore[import-untyped]

    from pensieve.web.extract import decode

    try:
        root = lxml.html.fromstring(decode(body[:2_000_000], charset))
    except ValueError:  # an XML encoding declaration in a str: let lxml read the bytes
        try:
            root = lxml.html.fromstring(body[:2_000_000])
        except Exception:  # lxml's ParserError on odd input
            return SourceMeta()
    except Exception:  # lxml's ParserError on empty or odd input
        return SourceMeta()
    tags = _meta_tags(root)
    ld = _json_ld(root)
    article = ld[0] if ld else {}

    authors = tags.get("citation_author", [])
    if not authors and tags.get("citation_authors"):
        authors = [a for a in re.split(r";", tags["citation_authors"][0]) if a.strip()]
    if not authors:
        authors = _names(article.get("author"))
    if not authors:
        authors = tags.get("dc.creator", []) or tags.get("dcterms.creator", [])
    if not authors:
        authors = [a for a in tags.get("author", []) + tags.get("article:author", []) if not a.startswith("http")]

    date = _first(
        tags,
        "citation_publication_date",
        "citation_date",
        "citation_online_date",
        "citation_cover_date",
        "citation_year",
    ) or str(article.get("datePublished") or "")
    date = date or _first(tags, "dcterms.issued", "dc.date.issued", "dc.date", "dcterms.date", "article:published_time")

    venue = _first(
        tags,
        "citation_journal_title",
        "citation_conference_title",
        "citation_book_title",
        "citation_inbook_title",
        "citation_series_title",
    ) or _name_of(article.get("isPartOf"))
    venue = venue or _first(tags, "dc.relation.ispartof", "dcterms.ispartof", "dc.source")

    publisher = _first(tags, "citation_publisher", "dc.publisher", "dcterms.publisher") or _name_of(
        article.get("publisher")
    )
    publisher = publisher or _first(tags, "og:site_name")

    identifiers = [_first(tags, "citation_doi"), *tags.get("dc.identifier", []), *tags.get("dcterms.identifier", [])]
    identifiers += [str(v) for key in ("identifier", "sameAs", "@id") for v in _as_list(article.get(key))]
    # Only what names itself a DOI: a page URL with "10.1234/" in its path is not one.
    named = [i.strip() for i in identifiers if _DOI_NAMED.match(i.strip())]
    doi = next((d for d in (normalize_doi(i) for i in named) if d), "")
    arxiv = normalize_arxiv_id(_first(tags, "citation_arxiv_id"))
    pmid = normalize_pmid(_first(tags, "citation_pmid"))

    published = _iso_date(date) if date else ""
    return SourceMeta(
        authors=tuple(dict.fromkeys(a for a in (_clean(x, 120) for x in authors[:_MAX_AUTHORS]) if a)),
        year=year_of(published) or year_of(date[:40]),
        venue=_clean(venue),
        doi=doi[:200],
        publisher=_clean(publisher),
        published=published,
        arxiv_id=arxiv,
        pmid=pmid,
    )


def _as_list(value: Any) -> list[Any]:
    if isinstance(value, list):
        return [v if not isinstance(v, dict) else v.get("value") or v.get("@id") or "" for v in value]
    if isinstance(value, dict):
        return [value.get("value") or value.get("@id") or ""]
    return [value] if value else []
