"""Search the topic library: bring the index up to date, embed the query, rank topics.

What `pensieve topics search`, `topics reindex` and the search_topics tool share.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pensieve.errors import UsageError
from pensieve.project.workspace import Workspace
from pensieve.topics.embedder import Embedder, get_embedder
from pensieve.topics.index import Hit, UpdateReport, update_index

# Longer queries add nothing: the model reads 256 word pieces at most.
MAX_QUERY_CHARS = 2_000


@dataclass
class TopicSearchResult:
    """The topics a query found, and the index update made first."""

    hits: list[Hit]
    report: UpdateReport


def clean_query(query: str) -> str:
    query = " ".join(query.split())
    if not query:
        raise UsageError("the query is empty; describe a topic or concept, e.g. 'how consensus survives failures'")
    return query[:MAX_QUERY_CHARS]


def search_topic_library(
    workspace: Workspace,
    query: str,
    *,
    k: int,
    min_score: float,
    embedder: Callable[[], Embedder] = get_embedder,
) -> TopicSearchResult:
    """Up to k topics whose best chunk scores at least min_score, best first."""
    query = clean_query(query)
    if k < 1:
        raise UsageError(f"k must be at least 1, not {k}")
    report = update_index(workspace, embedder)
    if not report.index.vectors.shape[0]:
        return TopicSearchResult([], report)
    vector = embedder().encode([query])[0]
    return TopicSearchResult(report.index.query(vector, k, min_score), report)


def reindex_library(workspace: Workspace, embedder: Callable[[], Embedder] = get_embedder) -> UpdateReport:
    return update_index(workspace, embedder)
