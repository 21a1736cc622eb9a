"""Split a topic into chunks that each fit the embedding model's window.

all-MiniLM-L6-v2 reads at most 256 word pieces and was trained on pieces of about 128,
so a chunk is one heading's paragraphs merged up to MAX_CHUNK_WORDS words (English runs
about 1.3 word pieces per word, which leaves room for the title prefix). A paragraph
longer than that is split on sentences, and a sentence longer than that on words. Each
chunk is embedded with its topic title and heading path in front, so "## Limits" in a
topic about Raft still reads as being about Raft.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pensieve.topics.library import Topic

# Bump when chunking changes: the index then re-embeds everything.
CHUNKER_VERSION = 1
MAX_CHUNK_WORDS = 120
SNIPPET_CHARS = 320

HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")  # a markdown ATX heading: level, text
_FENCE = re.compile(r"^\s*(```|~~~)")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])")


@dataclass(frozen=True)
class Chunk:
    # What the model embeds (title and headings in front of the text).
    text: str
    # The passage itself, as shown in a search result.
    snippet: str


def _words(text: str) -> int:
    return len(text.split())


def _split_long(block: str, limit: int) -> list[str]:
    """A block over the limit, cut on sentence ends, then on words as a last resort."""
    pieces: list[str] = []
    current: list[str] = []
    count = 0
    for sentence in _SENTENCE_END.split(block):
        words = sentence.split()
        while len(words) > limit:  # one huge sentence (a list without punctuation, a table row...)
            if current:
                pieces.append(" ".join(current))
                current, count = [], 0
            pieces.append(" ".join(words[:limit]))
            words = words[limit:]
        if count + len(words) > limit and current:
            pieces.append(" ".join(current))
            current, count = [], 0
        current.extend(words)
        count += len(words)
    if current:
        pieces.append(" ".join(current))
    return pieces


def _sections(body: str) -> list[tuple[tuple[str, ...], list[str]]]:
    """(heading path, paragraphs) per section; fenced code stays one paragraph."""
    sections: list[tuple[tuple[str, ...], list[str]]] = []
    path: list[tuple[int, str]] = []
    paragraphs: list[str] = []
    lines: list[str] = []
    in_fence = False

    def end_paragraph() -> None:
        if lines:
            paragraphs.append("\n".join(lines).strip())
            lines.clear()

    def end_section() -> None:
        end_paragraph()
        if any(paragraphs):
            sections.append((tuple(title for _, title in path), [p for p in paragraphs if p]))
        paragraphs.clear()

    for line in body.splitlines():
        if _FENCE.match(line):
            in_fence = not in_fence
            lines.append(line)
            continue
        heading = None if in_fence else HEADING.match(line)
        if heading:
            end_section()
            level = len(heading.group(1))
            while path and path[-1][0] >= level:
                path.pop()
            path.append((level, heading.group(2)))
        elif not in_fence and not line.strip():
            end_paragraph()
        else:
            lines.append(line)
    end_section()
    return sections


def trim_snippet(text: str, limit: int = SNIPPET_CHARS) -> str:
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0]
    return cut.rstrip(",;:") + " …"


def chunk_topic(topic: Topic, max_words: int = MAX_CHUNK_WORDS) -> list[Chunk]:
    """The chunks of one topic, in file order; the first one is its title and summary."""
    title = topic.title
    head_parts = [title]
    if topic.summary:
        head_parts.append(topic.summary)
    if topic.tags:
        head_parts.append("Tags: " + ", ".join(topic.tags))
    head = ". ".join(head_parts)
    chunks = [Chunk(text=head, snippet=trim_snippet(topic.summary or title))]

    for headings, paragraphs in _sections(topic.body):
        prefix = " > ".join((title, *headings))
        budget = max(20, max_words - _words(prefix))
        pieces: list[str] = []
        for paragraph in paragraphs:
            pieces.extend(_split_long(paragraph, budget) if _words(paragraph) > budget else [paragraph])
        # Merge short neighbouring paragraphs of one section up to the budget.
        merged: list[str] = []
        count = 0
        for piece in pieces:
            n = _words(piece)
            if merged and count + n <= budget:
                merged[-1] = f"{merged[-1]}\n\n{piece}"
                count += n
            else:
                merged.append(piece)
                count = n
        for passage in merged:
            chunks.append(Chunk(text=f"{prefix}: {' '.join(passage.split())}", snippet=trim_snippet(passage)))
    return chunks
