"""The search APIs, each with its own wire format, normalised to one `SearchResult`.

Keyed web search (SEARCH_API_KEY):
Tavily:  POST {base}/search, JSON body, `Authorization: Bearer <key>`, results in `results`.
SerpAPI: GET {base}/search.json?engine=google&q=...&api_key=<key>, results in `organic_results`.
Brave:   GET {base}/res/v1/web/search?q=...&count=n, `X-Subscription-Token: <key>`,
         results in `web.results`.
SearXNG and the academic APIs (arXiv, Semantic Scholar, PubMed, OpenAlex, Crossref) are
in `scholarly.py`; all of them go through `Call`, which paces, sends and maps HTTP errors.

SerpAPI and E-utilities carry keys in the query string, so no URL of a search request is
ever put in an error message or a log; errors are built from the status and the response
body, and every key is replaced in anything that leaves this module.
"""

from __future__ import annotations

import asyncio
import html
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlsplit

import httpx

from pensieve.project.source_archive import WorkFields, normalize_url
from pensieve.redact import scrub_key
from pensieve.web.bounded_http import megabytes
from pensieve.web.decoding import accepted_encodings
from pensieve.web.fetcher import FetchError, read_capped
from pensieve.web.identifiers import canonical_url
from pensieve.web.ratelimit import Pacer

# Markup in snippets, abstracts and error pages: a doctype or comment, HTML's elements (the
# one-letter ones lowercase only, as providers write them), namespaced tags (JATS's
# <jats:p>) and any tag with an attribute. Not every <...>: "Box<dyn Trait>", "Vec<T>" and
# "<'a>" are the words of a snippet about generics.
_TAGS = re.compile(
    r"<!(?i:doctype|--)[^>]*>"
    r"|</?(?i:abbr|article|blockquote|body|br|caption|center|code|dd|div|dl|dt|em|font|footer|form|h[1-6]|head"
    r"|header|hr|html|img|li|link|main|mark|meta|nav|ol|pre|script|section|small|span|strong|style|sub|sup"
    r"|table|tbody|td|th|thead|title|tr|ul)(?:\s[^<>]*)?/?>"
    r"|</?(?:a|b|i|p|s|u)(?:\s[^<>]*)?/?>"
    r"|</?[A-Za-z][\w.-]*:[\w.-]+(?:\s[^<>]*)?/?>"
    r"|<[A-Za-z][\w:-]*\s+[^<>]*=[^<>]*>"
)
_TITLE_KEY_MIN = 30  # shorter titles ("Introduction") are too common to identify a work
# An answer larger than this once decoded is that provider's error: a few KB of stacked gzip
# would otherwise decode to gigabytes (the largest real answers are well under 1 MB).
MAX_ANSWER_BYTES = 8_000_000


class SearchError(Exception):
    """A failed search, worded for the agent, never containing a key."""


@dataclass(frozen=True)
class SearchResult(WorkFields):
    """One result: the spec's {title, url, snippet}, the provider, and what is known of the work."""

    title: str
    # The canonical identifier URL (doi.org, arxiv.org/abs, PubMed) when the record has an
    # identifier, else the page the provider named, else "": no URL is invented.
    url: str
    snippet: str
    source: str = ""  # the provider(s) that returned it, e.g. "arxiv" or "arxiv, openalex"
    # Then what is known of the work (WorkFields: authors, year, venue, doi, ...), keyword-only.
    landing: str = ""  # the page the provider named for the work, when `url` is an identifier URL

    def dedup_keys(self) -> list[str]:
        """What identifies the work for de-duplication: DOI, arXiv id, PMID, URLs, and a
        long title (providers without a shared identifier still name the paper alike)."""
        keys = [f"doi:{self.doi.lower()}"] if self.doi else []
        keys += [f"arxiv:{self.arxiv_id}"] if self.arxiv_id else []
        keys += [f"pmid:{self.pmid}"] if self.pmid else []
        keys += ["url:" + key for u in (self.url, self.landing) if u and (key := url_key(u))]
        title = re.sub(r"[^\w]+", " ", self.title.casefold()).strip()
        if len(title) >= _TITLE_KEY_MIN:
            keys.append(f"title:{title}")
        return keys

    def merged(self, other: SearchResult) -> SearchResult:
        """This result with the gaps filled from another record of the same work."""
        sources = [s for s in (*self.source.split(", "), *other.source.split(", ")) if s]
        filled: dict[str, Any] = {"source": ", ".join(dict.fromkeys(sources))}
        for name in ("title", "snippet", "authors", "year", "venue", "doi", "arxiv_id", "pmid", "publisher", "landing"):
            if not getattr(self, name) and getattr(other, name):
                filled[name] = getattr(other, name)
        if not self.published and other.published:
            filled["published"] = other.published
        result = replace(self, **filled)
        # An identifier either record knew makes the URL canonical; the pages the providers
        # named stay as the landing page (the first of them), never dropped for nothing.
        canonical = result.identifier_url()
        if not canonical:
            return replace(result, url=self.url or other.url, landing=self.landing)
        pages = [u for u in (self.landing, self.url, other.landing, other.url) if u and u != canonical]
        return replace(result, url=canonical, landing=pages[0] if pages else "")

    def identifier_url(self) -> str:
        return canonical_url(self.doi, self.arxiv_id, self.pmid)


# Spelled as before for the callers that knew only web results.
WebSearchResult = SearchResult


@dataclass
class Call:
    """One provider's request machinery for one query: pacing, timeouts, error mapping."""

    client: httpx.AsyncClient
    name: str
    base: str
    timeout_s: float
    pacer: Pacer
    interval_s: float
    max_retry_wait_s: float
    key: str = ""
    key_env: str | None = None
    secrets: tuple[str, ...] = ()

    def scrub(self, text: str) -> str:
        for secret in (self.key, *self.secrets):
            text = scrub_key(text, secret)
        return text

    async def send(self, request: httpx.Request) -> httpx.Response:
        """Send once the provider's pacer allows; one retry after a short Retry-After."""
        request.extensions["timeout"] = httpx.Timeout(self.timeout_s).as_dict()
        for attempt in (1, 2):
            blocked = self.pacer.blocked_for()
            if blocked > self.max_retry_wait_s:
                # A provider that said "retry after 2 minutes" is not waited for: the agent
                # hears so at once and can search another kind or write with what it has.
                raise SearchError(
                    f"{self.name} is rate-limiting requests (HTTP 429, retry after {blocked:.0f}s); "
                    "search less often or try again later"
                )
            await self.pacer.wait_turn(self.interval_s)
            try:
                response = await self._receive(request)
            except httpx.TimeoutException:
                raise SearchError(f"{self.name} did not answer within {self.timeout_s:g}s (search.timeout_s)") from None
            except httpx.HTTPError as exc:
                raise SearchError(self.scrub(f"cannot reach {self.name} ({type(exc).__name__}: {exc})")) from None
            if response.status_code != 429:
                return response
            wait = retry_after(response.headers.get("retry-after"))
            if wait is not None:
                self.pacer.defer(wait)  # every caller of this provider waits, not only this one
            if attempt == 1 and wait is not None and wait <= self.max_retry_wait_s:
                continue
            after = f", retry after {wait:g}s" if wait is not None else ""
            raise SearchError(
                f"{self.name} is rate-limiting requests (HTTP 429{after}); search less often or try again later"
            )
        raise AssertionError("unreachable")  # pragma: no cover

    async def _receive(self, request: httpx.Request) -> httpx.Response:
        """The answer, read whole, its encodings undone by Pensieve with a bound on every
        layer (pensieve.web.decoding), never by httpx."""
        request.headers["Accept-Encoding"] = accepted_encodings()
        response = await self.client.send(request, stream=True)
        try:
            body, truncated = await read_capped(response, MAX_ANSWER_BYTES)
        except FetchError as exc:
            raise SearchError(f"{self.name} sent an answer that cannot be read ({exc})") from None
        finally:
            await response.aclose()
        if truncated:
            raise SearchError(f"{self.name} sent an answer larger than {megabytes(MAX_ANSWER_BYTES)}; it was not read")
        kept = [(k, v) for k, v in response.headers.multi_items() if k not in ("content-encoding", "content-length")]
        return httpx.Response(response.status_code, headers=kept, content=body, request=request)

    async def json(self, request: httpx.Request) -> Any:
        response = await self.send(request)
        self.raise_for_status(response)
        try:
            return response.json()
        except (ValueError, RecursionError):  # not JSON, not UTF-8, or nested past the parser's depth
            raise SearchError(f"{self.name} returned a response that is not valid JSON") from None

    def raise_for_status(self, response: httpx.Response) -> None:
        status = response.status_code
        if status in (401, 403) and self.key_env:
            raise SearchError(f"{self.name} refused the API key (HTTP {status}); check {self.key_env}")
        if status >= 400:
            detail = error_detail(response)
            raise SearchError(self.scrub(f"{self.name} answered HTTP {status}" + (f": {detail}" if detail else "")))


def retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date); None if absent or odd."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def error_detail(response: httpx.Response) -> str:
    try:
        data = response.json()
    except (ValueError, RecursionError):
        return plain(response.text[:200])
    if isinstance(data, dict):
        for key in ("error", "detail", "message"):
            value = data.get(key)
            if isinstance(value, list) and value:  # Crossref: a list of {type, value, message}
                value = value[0]
            if isinstance(value, dict):
                value = value.get("detail") or value.get("message") or value.get("code")
            if value:
                return plain(str(value))[:200]
    return ""


def http_url(value: Any) -> str:
    """An absolute http(s) URL with a host (and a valid port) that a provider gave; else ''."""
    if not isinstance(value, str):
        return ""
    url = value.strip()
    if not url.lower().startswith(("http://", "https://")) or any(c.isspace() or ord(c) < 32 for c in url):
        return ""
    try:
        parts = urlsplit(url)
        _port = parts.port
    except ValueError:
        return ""
    return url if parts.hostname else ""


def url_key(url: str) -> str:
    """The key two URLs of one page share (the archive's), '' for a URL that cannot be read."""
    try:
        return normalize_url(url).rstrip("/")
    except ValueError:
        return ""


def text(value: Any) -> str:
    """A field that should be text: the string, or '' (a number, list or object is no text)."""
    return value if isinstance(value, str) else ""


def text_of(value: Any) -> str:
    """An identifier or a date: a string, or a number written out; anything else ''."""
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return ""


def plain(value: Any) -> str:
    """Text without markup: Brave marks matches with <strong>, Crossref abstracts are JATS."""
    return " ".join(html.unescape(_TAGS.sub(" ", str(value or ""))).split())


def items(value: Any, where: str, name: str) -> list[dict[str, Any]]:
    if value is None:
        return []  # a query with no results omits the list
    if not isinstance(value, list):
        raise SearchError(f"unexpected response from the search provider: {where} is not a list")
    return [item for item in value if isinstance(item, dict)]


# -- the keyed web APIs ----------------------------------------------------------------------


@dataclass(frozen=True)
class Provider:
    name: str
    base_url: str
    run: Callable[[Call, str, int, str], Awaitable[list[SearchResult]]]  # (call, query, n, contact)


def _web_results(call: Call, found: Any, fields: tuple[str, str, str], n: int) -> list[SearchResult]:
    title_key, url_field, snippet_key = fields
    results: list[SearchResult] = []
    for item in found:
        url = http_url(item.get(url_field))
        if not url:
            continue  # no link, or not one a reader (or fetch_url) can follow
        title = plain(text(item.get(title_key)))[:300] or url
        results.append(SearchResult(title, url, plain(text(item.get(snippet_key))), call.name))
        if len(results) >= n:
            break
    return results


async def _object(call: Call, request: httpx.Request) -> dict[str, Any]:
    data = await call.json(request)
    if not isinstance(data, dict):
        raise SearchError(f"{call.name} returned JSON that is not an object")
    return data


async def _tavily(call: Call, query: str, n: int, _contact: str) -> list[SearchResult]:
    request = httpx.Request(
        "POST",
        f"{call.base}/search",
        json={"query": query, "max_results": n, "search_depth": "basic"},
        headers={"Authorization": f"Bearer {call.key}", "Content-Type": "application/json"},
    )
    data = await _object(call, request)
    return _web_results(call, items(data.get("results"), "results", call.name), ("title", "url", "content"), n)


async def _serpapi(call: Call, query: str, n: int, _contact: str) -> list[SearchResult]:
    params = {"engine": "google", "q": query, "num": str(n), "api_key": call.key}
    data = await _object(call, httpx.Request("GET", f"{call.base}/search.json", params=params))
    if data.get("error") and not data.get("organic_results"):
        message = str(data["error"])
        # "Google hasn't returned any results for this query." is an empty result, not a failure.
        if "hasn't returned any results" in message:
            return []
        raise SearchError(call.scrub(f"serpapi: {message}"))
    found = items(data.get("organic_results"), "organic_results", call.name)
    return _web_results(call, found, ("title", "link", "snippet"), n)


async def _brave(call: Call, query: str, n: int, _contact: str) -> list[SearchResult]:
    request = httpx.Request(
        "GET",
        f"{call.base}/res/v1/web/search",
        params={"q": query, "count": str(min(n, 20))},
        headers={"X-Subscription-Token": call.key, "Accept": "application/json"},
    )
    data = await _object(call, request)
    web = data.get("web")
    if web is None:
        return []
    if not isinstance(web, dict):
        raise SearchError("unexpected response from the search provider: web is not an object")
    found = items(web.get("results"), "web.results", call.name)
    return _web_results(call, found, ("title", "url", "description"), n)


PROVIDERS: dict[str, Provider] = {
    "tavily": Provider("tavily", "https://api.tavily.com", _tavily),
    "serpapi": Provider("serpapi", "https://serpapi.com", _serpapi),
    "brave": Provider("brave", "https://api.search.brave.com", _brave),
}


async def gather_settled(
    calls: list[Awaitable[list[SearchResult]]],
) -> list[list[SearchResult] | BaseException]:
    """Every provider's answer or its failure; one failing never cancels the others."""
    return list(await asyncio.gather(*calls, return_exceptions=True))
