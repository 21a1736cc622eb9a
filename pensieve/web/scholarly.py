"""SearXNG and the academic APIs, each in its own wire format, normalised to SearchResult.

SearXNG:          GET {endpoint}/search?q=...&format=json; results in `results` (a self-hosted
                  instance must list `json` under `search.formats`, else it answers 403).
arXiv:            GET {base}/api/query?search_query=all:...; an Atom feed, errors as an
                  Atom entry whose id is .../api/errors#...
Semantic Scholar: GET {base}/graph/v1/paper/search?query=...&fields=...; `data`, optional
                  `x-api-key` (S2_API_KEY).
PubMed:           GET {base}/esearch.fcgi?db=pubmed&retmode=json (ids), then
                  GET {base}/esummary.fcgi?db=pubmed&id=...&retmode=json (records);
                  optional `api_key` (NCBI_API_KEY), `tool` and `email`.
OpenAlex:         GET {base}/works?search=...&mailto=...; `results`, abstracts as an inverted index.
Crossref:         GET {base}/works?query=...&mailto=...; `message.items`.

A record's URL is the canonical identifier URL (doi.org, arxiv.org/abs, PubMed) when it has
an identifier (the page the provider named is kept as its landing page), else that page,
else none: no URL is made up. Malformed records (not an object, no title, fields of the
wrong type) are skipped or lose the bad field, never fatal; an answer whose envelope is
malformed (a list where an object belongs, an HTML page for an Atom feed) is that
provider's SearchError, and the other providers still answer.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
from lxml import etree  # type: ignore[import-untyped]

from pensieve.web.identifiers import canonical_url, normalize_arxiv_id, normalize_doi, normalize_pmid, year_of
from pensieve.web.search_providers import (
    Call,
    Provider,
    SearchError,
    SearchResult,
    http_url,
    items,
    plain,
    text,
    text_of,
)

_ATOM = "{http://www.w3.org/2005/Atom}"
_ARXIV = "{http://arxiv.org/schemas/atom}"
_SNIPPET_WORDS = 80
_USER_AGENT = "Pensieve (research assistant)"


def _snippet(value: Any) -> str:
    words = plain(text(value)).split()
    return " ".join(words[:_SNIPPET_WORDS]) + (" …" if len(words) > _SNIPPET_WORDS else "")


def _headers(contact: str) -> dict[str, str]:
    # Crossref's and OpenAlex's etiquette: say who you are and how to reach you.
    agent = f"{_USER_AGENT}; mailto:{contact}" if contact else _USER_AGENT
    return {"User-Agent": agent, "Accept": "application/json"}


def _date(value: Any) -> str:
    """An ISO date (or its year-month / year prefix) from the forms APIs use."""
    written = text_of(value).strip().replace("/", "-")
    match = re.match(r"(\d{4})(?:-(\d{2}))?(?:-(\d{2}))?", written)
    if not match:
        return ""
    return "-".join(part for part in match.groups() if part)


def _result(call: Call, title: str, snippet: Any, landing: Any, **meta: Any) -> SearchResult:
    doi = normalize_doi(text_of(meta.pop("doi", "")))
    arxiv_id = normalize_arxiv_id(text_of(meta.pop("arxiv_id", "")))
    pmid = normalize_pmid(text_of(meta.pop("pmid", "")))
    landing = http_url(landing)
    url = canonical_url(doi, arxiv_id, pmid) or landing
    return SearchResult(
        title=plain(title)[:300] or landing,
        url=url,
        landing=landing if landing != url else "",
        snippet=_snippet(snippet),
        source=call.name,
        doi=doi,
        arxiv_id=arxiv_id,
        pmid=pmid,
        **meta,
    )


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _field(value: Any) -> str:
    """A text field of a record, markup dropped; '' when it is not text."""
    return plain(text(value))


def _names(value: Any, key: str = "name") -> tuple[str, ...]:
    """Author names from a list of {key: name} objects (or of names)."""
    names = []
    for author in value if isinstance(value, list | Iterator) else ():
        raw = author.get(key) if isinstance(author, dict) else author
        name = plain(raw) if isinstance(raw, str) else ""  # a number is no name
        if name:
            names.append(name)
    return tuple(names)


async def _works(call: Call, params: dict[str, str], contact: str) -> dict[str, Any]:
    """A works search of OpenAlex or Crossref (the same endpoint name and etiquette)."""
    if contact:
        params["mailto"] = contact
    request = httpx.Request("GET", f"{call.base}/works", params=params, headers=_headers(contact))
    return _object(call, await call.json(request))


def _object(call: Call, data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise SearchError(f"{call.name} returned JSON that is not an object")
    return data


# -- SearXNG ------------------------------------------------------------------------------------


async def _searxng(call: Call, query: str, n: int, _contact: str) -> list[SearchResult]:
    request = httpx.Request(
        "GET", f"{call.base}/search", params={"q": query, "format": "json", "pageno": "1"}, headers=_headers("")
    )
    response = await call.send(request)
    if response.status_code == 403:
        raise SearchError(
            "searxng refused the JSON format (HTTP 403); list json under search.formats in the instance's settings.yml"
        )
    call.raise_for_status(response)
    try:
        data = _object(call, response.json())
    except ValueError:
        raise SearchError(f"{call.name} returned a response that is not valid JSON") from None
    results: list[SearchResult] = []
    for item in items(data.get("results"), "results", call.name):
        page = http_url(item.get("url"))
        if not page:
            continue
        # Its science engines (arxiv, crossref, pubmed...) add the record's fields; a DOI
        # (or an arXiv or PubMed page) makes the URL canonical, the page stays as landing.
        results.append(
            _result(
                call,
                _field(item.get("title")),
                item.get("content"),
                page,
                doi=item.get("doi"),
                arxiv_id=page if "arxiv.org/" in page else "",
                pmid=page if "pubmed.ncbi.nlm.nih.gov/" in page else "",
                authors=_names(item.get("authors")),
                year=year_of(text_of(item.get("publishedDate"))),
                venue=_field(item.get("journal")),
                publisher=_field(item.get("publisher")),
                published=_date(item.get("publishedDate")),
            )
        )
        if len(results) >= n:
            break
    return results


# -- arXiv ----------------------------------------------------------------------------------------


def _text(element: Any) -> str:
    return " ".join("".join(element.itertext()).split()) if element is not None else ""


async def _arxiv(call: Call, query: str, n: int, _contact: str) -> list[SearchResult]:
    words = re.findall(r"[\w.+-]+", query)
    search_query = " AND ".join(f"all:{w}" for w in words) or "all:" + query
    params = {"search_query": search_query, "start": "0", "max_results": str(n), "sortBy": "relevance"}
    response = await call.send(httpx.Request("GET", f"{call.base}/api/query", params=params))
    try:
        # No entities, no network, no huge trees: the feed is untrusted.
        parser = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False)
        feed = etree.fromstring(response.content, parser=parser)
    except etree.XMLSyntaxError:
        call.raise_for_status(response)
        raise SearchError("arxiv returned a feed that is not valid XML") from None
    if feed.tag != f"{_ATOM}feed":
        # A 200 HTML page (a proxy's, a maintenance notice) is no "no results".
        call.raise_for_status(response)
        root = etree.QName(feed).localname if isinstance(feed.tag, str) else "?"
        raise SearchError(f"arxiv returned <{plain(root)[:40]}> instead of an Atom feed")
    entries = feed.findall(f"{_ATOM}entry")
    for entry in entries:
        if "/api/errors" in _text(entry.find(f"{_ATOM}id")):
            detail = _text(entry.find(f"{_ATOM}summary")) or "error"
            raise SearchError(call.scrub(f"arxiv refused the query: {detail[:200]}"))
    call.raise_for_status(response)
    results: list[SearchResult] = []
    for entry in entries:
        title = _text(entry.find(f"{_ATOM}title"))
        arxiv_id = normalize_arxiv_id(_text(entry.find(f"{_ATOM}id")))
        if not title or not arxiv_id:
            continue  # malformed entry
        published = _date(_text(entry.find(f"{_ATOM}published")))
        # A journal reference ("IEEE TPAMI 42(4), 824-836 (2018)") dates the published version.
        journal_ref = _text(entry.find(f"{_ARXIV}journal_ref"))
        results.append(
            _result(
                call,
                title,
                _text(entry.find(f"{_ATOM}summary")),
                "",
                arxiv_id=arxiv_id,
                doi=_text(entry.find(f"{_ARXIV}doi")),
                authors=tuple(name for a in entry.findall(f"{_ATOM}author") if (name := _text(a.find(f"{_ATOM}name")))),
                year=year_of(journal_ref) or year_of(published),
                venue=journal_ref or "arXiv",
                published=published,
            )
        )
    return results[:n]


# -- Semantic Scholar -------------------------------------------------------------------------------

_S2_FIELDS = "title,url,abstract,authors,year,venue,externalIds,publicationDate,journal"


async def _semantic_scholar(call: Call, query: str, n: int, _contact: str) -> list[SearchResult]:
    headers = {"Accept": "application/json"}
    if call.key:
        headers["x-api-key"] = call.key
    params = {"query": query, "limit": str(min(n, 100)), "fields": _S2_FIELDS}
    data = _object(
        call,
        await call.json(httpx.Request("GET", f"{call.base}/graph/v1/paper/search", params=params, headers=headers)),
    )
    results: list[SearchResult] = []
    for item in items(data.get("data"), "data", call.name):
        title = item.get("title")
        if not isinstance(title, str) or not title.strip():
            continue
        ids = _dict(item.get("externalIds"))
        journal = _dict(item.get("journal"))
        results.append(
            _result(
                call,
                title,
                item.get("abstract"),
                item.get("url"),
                doi=ids.get("DOI"),
                arxiv_id=ids.get("ArXiv"),
                pmid=ids.get("PubMed"),
                authors=_names(item.get("authors")),
                year=year_of(item.get("year")),
                venue=_field(journal.get("name")) or _field(item.get("venue")),
                published=_date(item.get("publicationDate")),
            )
        )
    return results[:n]


def _is_author(entry: Any) -> bool:
    """An E-utilities author entry for a person (not a collective's "CollectiveName")."""
    return isinstance(entry, dict) and entry.get("authtype", "Author") == "Author"


# -- PubMed (E-utilities) -----------------------------------------------------------------------------


async def _pubmed(call: Call, query: str, n: int, contact: str) -> list[SearchResult]:
    common = {"db": "pubmed", "retmode": "json", "tool": "pensieve"}
    if contact:
        common["email"] = contact
    if call.key:
        common["api_key"] = call.key
    found = _object(
        call,
        await call.json(
            httpx.Request("GET", f"{call.base}/esearch.fcgi", params={**common, "term": query, "retmax": str(n)})
        ),
    )
    if found.get("error"):
        raise SearchError(call.scrub(f"pubmed: {_field(found['error'])[:200] or 'error'}"))
    result = found.get("esearchresult")
    if not isinstance(result, dict):
        raise SearchError("unexpected response from the search provider: esearchresult is not an object")
    if result.get("ERROR"):
        raise SearchError(call.scrub(f"pubmed refused the query: {_field(result['ERROR'])[:200] or 'error'}"))
    idlist = result.get("idlist")
    if idlist is not None and not isinstance(idlist, list):
        raise SearchError("unexpected response from the search provider: esearchresult.idlist is not a list")
    ids = list(dict.fromkeys(i for i in _list(idlist) if isinstance(i, str) and i.isdigit()))[:n]
    if not ids:
        return []
    summary = _object(
        call,
        await call.json(httpx.Request("GET", f"{call.base}/esummary.fcgi", params={**common, "id": ",".join(ids)})),
    )
    records = summary.get("result")
    if not isinstance(records, dict):
        if summary.get("error"):
            raise SearchError(call.scrub(f"pubmed: {_field(summary['error'])[:200] or 'error'}"))
        raise SearchError("unexpected response from the search provider: result is not an object")
    results: list[SearchResult] = []
    for uid in ids:
        record = records.get(uid)
        title = _field(record.get("title")) if isinstance(record, dict) else ""
        if not isinstance(record, dict) or record.get("error") or not title:
            continue  # "cannot get document summary", or a malformed record
        article_ids = _list(record.get("articleids"))
        doi = next((a.get("value") for a in article_ids if isinstance(a, dict) and a.get("idtype") == "doi"), "")
        venue = _field(record.get("fulljournalname")) or _field(record.get("source"))
        pubdate = _field(record.get("pubdate"))
        published = _date(record.get("sortpubdate")) or _date(pubdate)
        results.append(
            _result(
                call,
                title.rstrip("."),
                f"{venue}, {pubdate}".strip(", "),
                "",
                pmid=uid,
                doi=doi,
                authors=_names(a for a in _list(record.get("authors")) if _is_author(a)),
                year=year_of(pubdate) or year_of(published),
                venue=venue,
                published=published,
            )
        )
    return results


# -- OpenAlex -------------------------------------------------------------------------------------------


def _abstract(inverted: Any) -> str:
    """OpenAlex ships abstracts as {word: [positions]}; put the words back in order."""
    if not isinstance(inverted, dict):
        return ""
    placed: dict[int, str] = {}
    for word, positions in inverted.items():
        if isinstance(positions, list):
            for position in positions:
                if isinstance(position, int) and position < 2000:
                    placed[position] = str(word)
    return " ".join(placed[i] for i in sorted(placed))


async def _openalex(call: Call, query: str, n: int, contact: str) -> list[SearchResult]:
    data = await _works(call, {"search": query, "per-page": str(min(n, 200))}, contact)
    results: list[SearchResult] = []
    for item in items(data.get("results"), "results", call.name):
        title = _field(item.get("title")) or _field(item.get("display_name"))
        if not title:
            continue
        ids = _dict(item.get("ids"))
        location = _dict(item.get("primary_location"))
        source = _dict(location.get("source"))
        landing = http_url(location.get("landing_page_url"))
        authorships = [_dict(a.get("author")) for a in _list(item.get("authorships")) if isinstance(a, dict)]
        results.append(
            _result(
                call,
                title,
                _abstract(item.get("abstract_inverted_index")),
                landing,
                doi=text_of(item.get("doi")) or text_of(ids.get("doi")),
                pmid=ids.get("pmid"),
                arxiv_id=landing if "arxiv.org/" in landing else "",
                authors=_names(authorships, "display_name"),
                year=year_of(item.get("publication_year")),
                venue=_field(source.get("display_name")),
                publisher=_field(source.get("host_organization_name")),
                published=_date(item.get("publication_date")),
            )
        )
    return results[:n]


# -- Crossref ---------------------------------------------------------------------------------------------


def _first(value: Any) -> str:
    if isinstance(value, list):
        value = next((v for v in value if isinstance(v, str) and v.strip()), "")
    return plain(value) if isinstance(value, str) else ""


def _date_parts(value: Any) -> str:
    parts = value.get("date-parts") if isinstance(value, dict) else None
    if not (isinstance(parts, list) and parts and isinstance(parts[0], list)):
        return ""
    numbers = [p for p in parts[0] if isinstance(p, int)]
    if not numbers:
        return ""
    return "-".join([f"{numbers[0]:04d}", *(f"{p:02d}" for p in numbers[1:3])])


async def _crossref(call: Call, query: str, n: int, contact: str) -> list[SearchResult]:
    data = await _works(call, {"query": query, "rows": str(min(n, 100))}, contact)
    if data.get("status") not in (None, "ok"):
        raise SearchError(f"crossref answered status {_field(data.get('status'))[:40] or '?'}")
    message = data.get("message")
    if not isinstance(message, dict):
        raise SearchError("unexpected response from the search provider: message is not an object")
    results: list[SearchResult] = []
    for item in items(message.get("items"), "message.items", call.name):
        title = _first(item.get("title"))
        doi = normalize_doi(text_of(item.get("DOI")))
        if not title or not doi:
            continue
        names = []
        for author in _list(item.get("author")):
            if not isinstance(author, dict):
                continue
            family, given = _field(author.get("family")), _field(author.get("given"))
            name = f"{family}, {given}" if family and given else family or _field(author.get("name"))
            if name:
                names.append(name)
        published = _date_parts(item.get("published")) or _date_parts(item.get("issued"))
        results.append(
            _result(
                call,
                title,
                item.get("abstract"),
                "",
                doi=doi,
                authors=tuple(names),
                year=year_of(published),
                venue=_first(item.get("container-title")),
                publisher=_field(item.get("publisher")),
                published=published,
            )
        )
    return results[:n]


PROVIDERS: dict[str, Provider] = {
    "searxng": Provider("searxng", "", _searxng),  # no public default: search.endpoints.searxng
    "arxiv": Provider("arxiv", "https://export.arxiv.org", _arxiv),
    "semantic_scholar": Provider("semantic_scholar", "https://api.semanticscholar.org", _semantic_scholar),
    "pubmed": Provider("pubmed", "https://eutils.ncbi.nlm.nih.gov/entrez/eutils", _pubmed),
    "openalex": Provider("openalex", "https://api.openalex.org", _openalex),
    "crossref": Provider("crossref", "https://api.crossref.org", _crossref),
}
