"""Scholarly identifiers (DOI, arXiv id, PMID): read from what providers and pages give,
and turned into their canonical URLs. Nothing here invents an identifier: a value that
does not look like one is dropped, and no identifier means no URL.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

_DOI = re.compile(r"\b(10\.\d{4,9}/\S+)", re.I)
_DOI_PREFIX = re.compile(r"^(?:https?://(?:dx\.)?doi\.org/|doi:\s*)", re.I)
# New-style (2101.00001, optional version) and old-style (hep-th/9901001, cs.DS/0101001) ids.
_ARXIV_NEW = re.compile(r"(?<![\d.])(\d{4}\.\d{4,5})(?:v\d+)?(?![\d])")
_ARXIV_OLD = re.compile(r"\b([a-z-]+(?:\.[A-Z]{2})?/\d{7})(?:v\d+)?\b")
_ARXIV_PREFIX = re.compile(r"^(?:https?://(?:export\.|www\.)?arxiv\.org/(?:abs|pdf)/|arxiv:\s*)", re.I)
_PMID = re.compile(r"^(?:https?://pubmed\.ncbi\.nlm\.nih\.gov/|pmid:\s*)?(\d{1,9})/?$", re.I)


def normalize_doi(value: str | None) -> str:
    """'https://doi.org/10.1109/X.1' or 'doi:10.1109/x.1' -> '10.1109/X.1'; '' if not a DOI."""
    if not value:
        return ""
    text = unquote(_DOI_PREFIX.sub("", str(value).strip()))
    match = _DOI.search(text)
    if not match:
        return ""
    return match.group(1).rstrip(".,;)]}>\"'")


def normalize_arxiv_id(value: str | None) -> str:
    """'http://arxiv.org/abs/1603.09320v4' or 'arXiv:1603.09320' -> '1603.09320'; '' if none."""
    if not value:
        return ""
    text = _ARXIV_PREFIX.sub("", str(value).strip())
    text = re.sub(r"\.pdf$", "", text)
    for pattern in (_ARXIV_NEW, _ARXIV_OLD):
        match = pattern.fullmatch(text) or pattern.match(text)
        if match:
            return match.group(1)
    return ""


def normalize_pmid(value: str | None) -> str:
    if not value:
        return ""
    match = _PMID.match(str(value).strip())
    return match.group(1).lstrip("0") if match and match.group(1).lstrip("0") else ""


def doi_url(doi: str) -> str:
    return f"https://doi.org/{doi}" if doi else ""


def arxiv_url(arxiv_id: str) -> str:
    return f"https://arxiv.org/abs/{arxiv_id}" if arxiv_id else ""


def pubmed_url(pmid: str) -> str:
    return f"https://pubmed.ncbi.nlm.nih.gov/{pmid}/" if pmid else ""


def canonical_url(doi: str = "", arxiv_id: str = "", pmid: str = "") -> str:
    """The identifier URL a reader can follow: DOI first, then arXiv, then PubMed; '' if none."""
    return doi_url(doi) or arxiv_url(arxiv_id) or pubmed_url(pmid)


def canonical_urls(doi: str = "", arxiv_id: str = "", pmid: str = "") -> list[str]:
    """Every identifier URL a record has (a reference may name any of them)."""
    return [u for u in (doi_url(doi), arxiv_url(arxiv_id), pubmed_url(pmid)) if u]


def year_of(value: object) -> int | None:
    """The year in '2018', '2018-03-30', '2018 Mar 30', 2018; None if there is none."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value if 1000 <= value <= 2999 else None
    match = re.search(r"(?<!\d)(1\d{3}|2\d{3})(?!\d)", str(value or ""))
    return int(match.group(1)) if match else None
