"""The three search APIs, each with its own wire format, normalised to {title, url, snippet}.

Tavily:  POST {base}/search, JSON body, `Authorization: Bearer <key>`, results in `results`.
SerpAPI: GET {base}/search.json?engine=google&q=...&api_key=<key>, results in `organic_results`.
Brave:   GET {base}/res/v1/web/search?q=...&count=n, `X-Subscription-Token: <key>`,
         results in `web.results`.

SerpAPI carries the key in the query string, so no URL of a search request is ever put
in an error message or a log; errors are built from the status and the response body,
and the key is replaced in anything that leaves this module.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from pensieve.redact import scrub_key

_TAGS = re.compile(r"<[^>]+>")


class SearchError(Exception):
    """A failed search, worded for the agent, never containing the key."""


@dataclass(frozen=True)
class WebSearchResult:
    title: str
    url: str
    snippet: str


@dataclass(frozen=True)
class Provider:
    name: str
    base_url: str
    build: Callable[[str, str, str, int], httpx.Request]  # (base, query, key, n) -> request
    parse: Callable[[Any], list[dict[str, Any]]]  # JSON body -> raw result items
    fields: tuple[str, str, str]  # keys of title, url, snippet in a raw item


def _tavily_request(base: str, query: str, key: str, n: int) -> httpx.Request:
    return httpx.Request(
        "POST",
        f"{base}/search",
        json={"query": query, "max_results": n, "search_depth": "basic"},
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )


def _serpapi_request(base: str, query: str, key: str, n: int) -> httpx.Request:
    return httpx.Request(
        "GET", f"{base}/search.json", params={"engine": "google", "q": query, "num": str(n), "api_key": key}
    )


def _brave_request(base: str, query: str, key: str, n: int) -> httpx.Request:
    return httpx.Request(
        "GET",
        f"{base}/res/v1/web/search",
        params={"q": query, "count": str(min(n, 20))},
        headers={"X-Subscription-Token": key, "Accept": "application/json"},
    )


def _items(value: Any, where: str) -> list[dict[str, Any]]:
    if value is None:
        return []  # a query with no results omits the list
    if not isinstance(value, list):
        raise SearchError(f"unexpected response from the search provider: {where} is not a list")
    return [item for item in value if isinstance(item, dict)]


def _tavily_parse(data: Any) -> list[dict[str, Any]]:
    return _items(data.get("results"), "results")


def _serpapi_parse(data: Any) -> list[dict[str, Any]]:
    if data.get("error") and not data.get("organic_results"):
        message = str(data["error"])
        # "Google hasn't returned any results for this query." is an empty result, not a failure.
        if "hasn't returned any results" in message:
            return []
        raise SearchError(f"serpapi: {message}")
    return _items(data.get("organic_results"), "organic_results")


def _brave_parse(data: Any) -> list[dict[str, Any]]:
    web = data.get("web")
    if web is None:
        return []
    if not isinstance(web, dict):
        raise SearchError("unexpected response from the search provider: web is not an object")
    return _items(web.get("results"), "web.results")


PROVIDERS: dict[str, Provider] = {
    "tavily": Provider("tavily", "https://api.tavily.com", _tavily_request, _tavily_parse, ("title", "url", "content")),
    "serpapi": Provider(
        "serpapi", "https://serpapi.com", _serpapi_request, _serpapi_parse, ("title", "link", "snippet")
    ),
    "brave": Provider(
        "brave", "https://api.search.brave.com", _brave_request, _brave_parse, ("title", "url", "description")
    ),
}


def _plain(value: Any) -> str:
    # Brave marks matches with <strong>; snippets may carry entities.
    return html.unescape(_TAGS.sub("", str(value or ""))).strip()


def _error_detail(response: httpx.Response) -> str:
    try:
        data = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return response.text[:200].strip()
    if isinstance(data, dict):
        for key in ("error", "detail", "message"):
            value = data.get(key)
            if isinstance(value, dict):
                value = value.get("detail") or value.get("message") or value.get("code")
            if value:
                return str(value)[:200]
    return ""


async def search(
    client: httpx.AsyncClient,
    provider: Provider,
    *,
    query: str,
    key: str,
    max_results: int,
    base_url: str | None,
    timeout_s: float,
) -> list[WebSearchResult]:
    base = (base_url or provider.base_url).rstrip("/")
    request = provider.build(base, query, key, max_results)
    request.extensions["timeout"] = httpx.Timeout(timeout_s).as_dict()
    name = provider.name
    try:
        response = await client.send(request)
    except httpx.TimeoutException:
        raise SearchError(f"{name} did not answer within {timeout_s:g}s (search.timeout_s)") from None
    except httpx.HTTPError as exc:
        raise SearchError(scrub_key(f"cannot reach {name} ({type(exc).__name__}: {exc})", key)) from None
    status = response.status_code
    if status == 429:
        raise SearchError(f"{name} is rate-limiting requests (HTTP 429); search less often or try again later")
    if status in (401, 403):
        raise SearchError(f"{name} refused the API key (HTTP {status}); check SEARCH_API_KEY")
    if status >= 400:
        detail = _error_detail(response)
        raise SearchError(scrub_key(f"{name} answered HTTP {status}" + (f": {detail}" if detail else ""), key))
    try:
        data = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise SearchError(f"{name} returned a response that is not valid JSON") from None
    if not isinstance(data, dict):
        raise SearchError(f"{name} returned JSON that is not an object")
    try:
        items = provider.parse(data)
    except SearchError as exc:
        raise SearchError(scrub_key(str(exc), key)) from None
    title_key, url_key, snippet_key = provider.fields
    results: list[WebSearchResult] = []
    for item in items:
        url = str(item.get(url_key) or "").strip()
        if not url:
            continue
        results.append(WebSearchResult(_plain(item.get(title_key)), url, _plain(item.get(snippet_key))))
        if len(results) >= max_results:
            break
    return results
