"""Which search providers exist, what kind each is, and what each needs: data only.

Imported by the configuration (no httpx, no parsing here), so `pensieve list` stays fast.
The code that talks to each API is in `search_providers.py` (keyed web APIs) and
`scholarly.py` (SearXNG and the academic APIs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

SEARCH_KEY_ENV = "SEARCH_API_KEY"
S2_KEY_ENV = "S2_API_KEY"
NCBI_KEY_ENV = "NCBI_API_KEY"

Kind = Literal["web", "academic"]
SearchKind = Literal["web", "academic", "all"]


@dataclass(frozen=True)
class ProviderInfo:
    name: str
    kind: Kind
    # The environment variable holding its key; `key_required`: without it the provider is not used.
    key_env: str | None
    key_required: bool
    # Seconds between two requests unless search.min_intervals_s says otherwise; None: search.min_interval_s.
    interval_s: float | None
    interval_with_key_s: float | None = None
    needs_endpoint: bool = False  # no public instance: search.endpoints.<name> is required


CATALOG: dict[str, ProviderInfo] = {
    p.name: p
    for p in (
        ProviderInfo("tavily", "web", SEARCH_KEY_ENV, True, None),
        ProviderInfo("serpapi", "web", SEARCH_KEY_ENV, True, None),
        ProviderInfo("brave", "web", SEARCH_KEY_ENV, True, None),
        ProviderInfo("searxng", "web", None, False, None, needs_endpoint=True),
        # arXiv's API terms: no more than one request every three seconds.
        ProviderInfo("arxiv", "academic", None, False, 3.0),
        # Semantic Scholar: about 1 request/s for the shared unauthenticated pool and for a key.
        ProviderInfo("semantic_scholar", "academic", S2_KEY_ENV, False, 1.0, 1.0),
        # NCBI E-utilities: 3 requests/s without a key, 10 with one.
        ProviderInfo("pubmed", "academic", NCBI_KEY_ENV, False, 0.34, 0.1),
        # OpenAlex and Crossref: the polite pool allows about 10 requests/s.
        ProviderInfo("openalex", "academic", None, False, 0.1),
        ProviderInfo("crossref", "academic", None, False, 0.1),
    )
}

PROVIDER_NAMES: tuple[str, ...] = tuple(CATALOG)
