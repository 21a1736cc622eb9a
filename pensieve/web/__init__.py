"""Reaching the web safely: the SSRF guard, robots.txt, the guarded fetcher, extraction,
and the search providers. Tools in `pensieve.tools.web` put these together."""

__all__ = [
    "bounded_http",
    "catalog",
    "extract",
    "fetcher",
    "guard",
    "identifiers",
    "page_meta",
    "robots",
    "search",
    "search_providers",
    "url_policy",
]
