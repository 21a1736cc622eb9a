"""The evidence check's names for the article reader's sentences (`pensieve.article`):
the cited sentences of an artifact, every sentence of its body, a source's sentence windows,
and a claim's words. The segmentation itself lives in `pensieve.article.sentences`, the one
place an article's sentences are read; this module keeps the names the evidence wing imports.
"""

from __future__ import annotations

from pensieve.article.blocks import article_extent
from pensieve.article.reference_list import reader_numbers
from pensieve.article.sentences import (
    CitedSentence,
    Span,
    body_sentences,
    cited_sentences,
    claim_text,
    source_sentences,
    split_sentences,
)

__all__ = [
    "CitedSentence",
    "Span",
    "article_extent",
    "body_sentences",
    "cited_sentences",
    "claim_text",
    "reader_numbers",
    "source_sentences",
    "split_sentences",
]
