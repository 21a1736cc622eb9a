"""web_search over several providers: which are usable, querying them at once, merging.

Each provider is paced by its own process-wide pacer (its API's limit, not a run's), so a
slow academic API never holds back a web search. Results are interleaved provider by
provider (each provider's best first) and de-duplicated by DOI, arXiv id, PMID and URL;
a duplicate fills the gaps of the record kept. A provider that fails is named with its
reason; the others still answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import httpx

from pensieve.web import scholarly, search_providers
from pensieve.web.catalog import CATALOG, NCBI_KEY_ENV, S2_KEY_ENV, SEARCH_KEY_ENV, SearchKind
from pensieve.web.ratelimit import pacer_for
from pensieve.web.search_providers import Call, Provider, SearchError, SearchResult

if TYPE_CHECKING:
    from pensieve.config import SearchSettings

IMPLEMENTATIONS: dict[str, Provider] = {**search_providers.PROVIDERS, **scholarly.PROVIDERS}


def usable(settings: SearchSettings, environ: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
    """(providers that can be queried now, {provider: why not} for the others)."""
    ready: list[str] = []
    skipped: dict[str, str] = {}
    for name in settings.configured():
        info = CATALOG[name]
        if info.key_required and info.key_env and not environ.get(info.key_env):
            skipped[name] = f"{info.key_env} is not set"
        else:
            ready.append(name)
    return ready, skipped


def for_kind(names: list[str], kind: SearchKind) -> list[str]:
    return [n for n in names if kind == "all" or CATALOG[n].kind == kind]


def interval_for(settings: SearchSettings, name: str, environ: Mapping[str, str]) -> float:
    if name in settings.min_intervals_s:
        return settings.min_intervals_s[name]
    info = CATALOG[name]
    if info.interval_s is None:
        return settings.min_interval_s
    if info.interval_with_key_s is not None and info.key_env and environ.get(info.key_env):
        return info.interval_with_key_s
    return info.interval_s


@dataclass
class Outcome:
    results: list[SearchResult]
    errors: dict[str, str] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)  # results per provider before merging


async def search_all(
    client: httpx.AsyncClient,
    settings: SearchSettings,
    environ: Mapping[str, str],
    names: list[str],
    query: str,
) -> Outcome:
    calls = []
    for name in names:
        info = CATALOG[name]
        provider = IMPLEMENTATIONS[name]
        key = environ.get(info.key_env, "") if info.key_env else ""
        call = Call(
            client=client,
            name=name,
            base=(settings.endpoint_for(name) or provider.base_url).rstrip("/"),
            timeout_s=settings.timeout_s,
            pacer=pacer_for(name),
            interval_s=interval_for(settings, name, environ),
            max_retry_wait_s=settings.max_retry_wait_s,
            key=key,
            key_env=info.key_env,
            secrets=tuple(environ[n] for n in (SEARCH_KEY_ENV, S2_KEY_ENV, NCBI_KEY_ENV) if environ.get(n)),
        )
        calls.append(provider.run(call, query, settings.max_results_per_query, settings.contact_email or ""))
    answers = await search_providers.gather_settled(calls)
    outcome = Outcome([])
    lists: list[list[SearchResult]] = []
    for name, answer in zip(names, answers, strict=True):
        if isinstance(answer, SearchError):
            outcome.errors[name] = str(answer)
        elif isinstance(answer, BaseException):
            raise answer  # a bug in our code, not the provider's failure
        else:
            outcome.counts[name] = len(answer)
            lists.append(answer)
    outcome.results = merge(lists)
    return outcome


def merge(lists: list[list[SearchResult]]) -> list[SearchResult]:
    """Round-robin over the providers' lists, one record per work."""
    merged: list[SearchResult] = []
    where: dict[str, int] = {}  # dedup key -> index in merged
    longest = max((len(r) for r in lists), default=0)
    for rank in range(longest):
        for results in lists:
            if rank >= len(results):
                continue
            result = results[rank]
            keys = result.dedup_keys()
            hit = next((where[k] for k in keys if k in where), None)
            if hit is None:
                hit = len(merged)
                merged.append(result)
            else:
                merged[hit] = merged[hit].merged(result)
            for key in (*keys, *merged[hit].dedup_keys()):
                where.setdefault(key, hit)
    return merged
