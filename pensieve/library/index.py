"""The library's search index and its hybrid search.

Passages are windows of at most PASSAGE_WORDS words that never cross a page (or heading)
boundary, so each has one page. Each is embedded with all-MiniLM-L6-v2, the model topic
memory already loads and verifies (`pensieve.topics.embedder`), as its words without the
English stop words and without the punctuation around them (`embedding_text`; the query
too); BM25 reads the passage as written, and the document's title. These cut the model's
work without changing what is found (measured in docs/library.md, rounds 4 and 5):
embedding is 95% of adding a document. The vectors and the passages'
(document, start, end, page) live in one file, `library/.index/library.npz`, replaced
atomically under a lock. Documents never change (an id is a content hash), so an update
embeds the documents the index lacks and drops the removed ones: incremental, like the
topic index.

BM25 (bm25s, measured against rank-bm25 in docs/library.md) is built in memory from the
passages when a process first searches, and kept while the index file is unchanged. The
two rankings are fused by reciprocal rank (RRF): a passage found by both comes first, and
a passage only one of them finds still counts, so exact terms (a name, a figure) and
paraphrases are both found.
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from pensieve.errors import UsageError
from pensieve.library.store import CATALOG_FILE, Document, Library, LibraryBusy
from pensieve.project.index_file import Identity as FileIdentity
from pensieve.project.index_file import file_identity, pack, unpack, update_lock
from pensieve.project.workspace import atomic_write_bytes
from pensieve.topics.embedder import DIMENSION, MODEL_NAME, WEIGHTS_SHA256, Embedder

INDEX_DIR = ".index"
INDEX_FILE = "library.npz"
LOCK_FILE = "library.lock"
FORMAT_VERSION = 1
PASSAGE_WORDS = 120
# Passages embedded between two progress reports (~5 s of two cores in float32).
EMBED_PART = 500
# 2: passages and queries embedded without stop words, and without the title in front.
# 3: ... and without the punctuation around words.
CHUNKER_VERSION = 3
EMBEDDING_ID = f"{MODEL_NAME}@{WEIGHTS_SHA256[:16]}/library-v{CHUNKER_VERSION}"
# Reciprocal rank fusion's constant (the usual 60: ranks far down each list still count a little).
RRF_K = 60
# Candidates taken from each ranking before fusing.
CANDIDATES = 100
# Below this cosine a passage that BM25 did not find is no match at all (MiniLM: unrelated
# text scores about 0.0-0.2, a paraphrase 0.4 and up; see tests/topic_library.py).
MIN_COSINE = 0.25
# At most this many passages of one document in one answer: room for the others.
PER_DOCUMENT = 3
MAX_QUERY_CHARS = 2_000
_WORD = re.compile(r"\S+")
# The English stop words BM25 drops (bm25s's "en", Lucene's list), but for "no" and "not",
# which carry a passage's meaning. Dropping them cut the tokens the model reads by 14-21% (RFCs).
STOP_WORDS = frozenset(
    "a an and are as at be but by for if in into is it of on or such that the their then there "  # noqa: SIM905
    "these they this to was will with".split()
)
_EDGES = "\"'`.,;:!?()[]{}*_"

Vectors = npt.NDArray[np.float32]


@dataclass(frozen=True)
class Passage:
    doc: str
    start: int
    end: int
    page: str


@dataclass(frozen=True)
class Hit:
    doc: Document
    passage: Passage
    text: str
    score: float
    bm25_rank: int | None
    vector_rank: int | None


@dataclass
class LibraryIndex:
    docs: list[str]  # document ids, in row order
    passages: list[Passage]
    vectors: Vectors
    embedding_id: str = EMBEDDING_ID
    # Built on first search (bm25s) and the passages' texts, per process.
    _bm25: Any = field(default=None, repr=False)
    _texts: list[str] = field(default_factory=list, repr=False)

    @classmethod
    def empty(cls) -> LibraryIndex:
        return cls([], [], np.zeros((0, DIMENSION), dtype=np.float32))

    def to_bytes(self) -> bytes:
        manifest = {
            "format": FORMAT_VERSION,
            "embedding_id": self.embedding_id,
            "docs": self.docs,
            "passages": [[p.doc, p.start, p.end, p.page] for p in self.passages],
        }
        return pack(self.vectors, manifest)

    @classmethod
    def from_file(cls, path: Path) -> LibraryIndex:
        vectors, manifest = unpack(path, FORMAT_VERSION)
        passages = [Passage(str(d), int(s), int(e), str(p)) for d, s, e, p in manifest["passages"]]
        if vectors.ndim != 2 or vectors.shape[1] != DIMENSION or vectors.shape[0] != len(passages):
            raise ValueError(f"vectors have shape {vectors.shape} for {len(passages)} passages")
        return cls([str(d) for d in manifest["docs"]], passages, vectors, str(manifest["embedding_id"]))


def passages_of(doc: Document, text: str) -> list[Passage]:
    """Windows of at most PASSAGE_WORDS words, each inside one page (or heading section)."""
    bounds = [start for start, _ in doc.marks] or [0]
    if bounds[0] != 0:
        bounds.insert(0, 0)
    labels = {start: label for start, label in doc.marks}
    out: list[Passage] = []
    for number, start in enumerate(bounds):
        end = bounds[number + 1] if number + 1 < len(bounds) else len(text)
        page = labels.get(start, "")
        words = list(_WORD.finditer(text, start, end))
        for first in range(0, len(words), PASSAGE_WORDS):
            window = words[first : first + PASSAGE_WORDS]
            out.append(Passage(doc.id, window[0].start(), window[-1].end(), page))
    return out


@dataclass
class UpdateReport:
    index: LibraryIndex
    embedded: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    passages_embedded: int = 0
    # The embedding that had built the index, when it was another (everything re-embedded).
    replaced_embedding: str = ""

    def note(self) -> str:
        """One line for the writer when the index was rebuilt for another embedding, else ""."""
        if not self.replaced_embedding:
            return ""
        return (
            f"the library index had been built by another embedding ({self.replaced_embedding[:80]}); "
            f"re-embedded its {self.passages_embedded:,} passages with {EMBEDDING_ID}"
        )


def index_path(library: Library) -> Path:
    return library.root / INDEX_DIR / INDEX_FILE


def _index_lock(library: Library, timeout_s: float = 600.0) -> contextlib.AbstractContextManager[None]:
    path = library.root / INDEX_DIR / LOCK_FILE

    def busy(_holder: str) -> LibraryBusy:
        return LibraryBusy(f"the library index {path.parent} is being updated by another process; try again")

    return update_lock(path, busy, timeout_s)


# The index this process last read or wrote, per path, with the file's identity then.
_cache: dict[Path, tuple[FileIdentity, LibraryIndex]] = {}
# Per index path: the (index, catalog) identities when the index last matched the catalog.
# While neither file changed, a search needs no lock and no comparison (bench_library.py).
_current: dict[Path, tuple[FileIdentity, FileIdentity]] = {}
# The last queries' vectors, per embedder: an agent often searches the same words again.
QUERY_CACHE = 256
_queries: OrderedDict[tuple[int, str], tuple[Embedder, Vectors]] = OrderedDict()
_queries_lock = threading.Lock()

_identity = file_identity


def load_index(path: Path) -> LibraryIndex:
    """The stored index; an empty one if there is none or it is unusable (it is rebuilt)."""
    return _read_index(path)[0]


def _read_index(path: Path) -> tuple[LibraryIndex, str]:
    """The stored index, and the embedding that built it when that is not EMBEDDING_ID (the
    index is then empty: its vectors cannot be compared with this model's, so every
    document is embedded again, and the caller can say so)."""
    identity = _identity(path)
    if identity is None:
        return LibraryIndex.empty(), ""
    cached = _cache.get(path)
    if cached and cached[0] == identity:
        return cached[1], ""
    try:
        index = LibraryIndex.from_file(path)
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        return LibraryIndex.empty(), ""
    if index.embedding_id != EMBEDDING_ID:
        return LibraryIndex.empty(), index.embedding_id
    _cache[path] = (identity, index)
    return index, ""


def update_index(
    library: Library, embedder: Callable[[], Embedder], progress: Callable[[int, int], None] | None = None
) -> UpdateReport:
    """Bring the index up to date with the catalog; `embedder` is called only if needed;
    `progress(done, total)` is told the passages embedded after each part."""
    path = index_path(library)
    catalog = library.root / CATALOG_FILE
    known = _current.get(path)
    cached = _cache.get(path)
    if known and cached and known == (_identity(path), _identity(catalog)) and cached[0] == known[0]:
        return UpdateReport(cached[1])
    with _index_lock(library):
        catalog_identity = _identity(catalog)
        old, replaced = _read_index(path)
        docs = {d.id: d for d in library.documents()}
        have = set(old.docs)
        report = UpdateReport(old, removed=sorted(have - set(docs)), replaced_embedding=replaced)
        missing = [d for d in docs.values() if d.id not in have]
        if not missing and not report.removed:
            _remember_current(path, catalog_identity)
            return report
        keep = np.asarray([p.doc in docs for p in old.passages], dtype=bool)
        passages = [p for p, kept in zip(old.passages, keep, strict=True) if kept]
        blocks: list[Vectors] = [old.vectors[keep]] if len(passages) else []
        order = [d for d in old.docs if d in docs]
        new_passages: list[Passage] = []
        texts: list[str] = []
        for listed in missing:
            doc = library.get(listed.id)  # the catalog has no page maps: the document's record has
            text = library.text(doc)
            found = passages_of(doc, text)
            new_passages.extend(found)
            texts.extend(embedding_text(text[p.start : p.end]) for p in found)
            order.append(doc.id)
            report.embedded.append(doc.id)
        if texts:
            model = embedder()
            # In parts, so a caller can show progress (1,000 pages take half a minute or more);
            # parts of equal size, each large enough for the embedder's bulk path.
            parts = max(1, round(len(texts) / EMBED_PART))
            for part in range(parts):
                first, end = part * len(texts) // parts, (part + 1) * len(texts) // parts
                blocks.append(model.encode(texts[first:end]))
                if progress is not None:
                    progress(end, len(texts))
        vectors = np.concatenate(blocks) if blocks else np.zeros((0, DIMENSION), dtype=np.float32)
        index = LibraryIndex(order, passages + new_passages, np.ascontiguousarray(vectors, dtype=np.float32))
        atomic_write_bytes(path, index.to_bytes())
        identity = _identity(path)
        if identity is not None:
            _cache[path] = (identity, index)
        _remember_current(path, catalog_identity)
        report.index = index
        report.passages_embedded = len(texts)
        return report


def _remember_current(path: Path, catalog_identity: FileIdentity | None) -> None:
    """Record that the index at `path` matches the catalog as it was when read under the lock."""
    identity = _identity(path)
    cached = _cache.get(path)
    if identity is None or catalog_identity is None or cached is None or cached[0] != identity:
        _current.pop(path, None)
        return
    _current[path] = (identity, catalog_identity)


def query_vector(query: str, embedder: Embedder) -> Vectors:
    """The query's unit vector, from the cache of the last QUERY_CACHE queries when there."""
    key = (id(embedder), query)
    with _queries_lock:  # the studio and the tools search from several threads
        hit = _queries.get(key)
        if hit is not None and hit[0] is embedder:
            _queries.move_to_end(key)
            return hit[1]
    vector: Vectors = np.ascontiguousarray(embedder.encode([embedding_text(query)])[0], dtype=np.float32)
    with _queries_lock:
        _queries[key] = (embedder, vector)
        while len(_queries) > QUERY_CACHE:
            _queries.popitem(last=False)
    return vector


def embedding_text(text: str) -> str:
    """What the model reads of a passage or a query: its words without STOP_WORDS and without
    the punctuation around them. The model spends its time per token (docs/library.md: ~21
    MFLOP a token, the CPU's float32 limit); commas, periods, brackets and backticks are a
    sixth of a passage's tokens and, like the stop words, tell it least (round 5: the same
    passages found). Text made of nothing else is read as it is."""
    kept = [core for w in text.split() if (core := w.strip(_EDGES)) and core.lower() not in STOP_WORDS]
    return " ".join(kept) if kept else " ".join(text.split())


def clean_query(query: str) -> str:
    query = " ".join(query.split())
    if not query:
        raise UsageError("the query is empty; give a few words, e.g. 'replication lag in leader election'")
    return query[:MAX_QUERY_CHARS]


def _passage_texts(library: Library, index: LibraryIndex) -> list[str]:
    if len(index._texts) != len(index.passages):
        docs = {d.id: d for d in library.documents()}
        by_doc: dict[str, str] = {}
        texts = []
        for p in index.passages:
            if p.doc not in by_doc:
                by_doc[p.doc] = library.text(docs[p.doc]) if p.doc in docs else ""
            texts.append(by_doc[p.doc][p.start : p.end])
        index._texts = texts
    return index._texts


def _bm25(index: LibraryIndex, texts: list[str], titles: dict[str, str]) -> Any:
    """BM25 over the passages, each with its document's title (the vectors do not read it)."""
    if index._bm25 is None:
        import bm25s

        tokenizer = bm25s.tokenization.Tokenizer(stopwords="en")
        titled = [f"{titles.get(p.doc, '')}\n{t}" for p, t in zip(index.passages, texts, strict=True)]
        ids = tokenizer.tokenize(titled, update_vocab=True, return_as="ids", show_progress=False)
        retriever = bm25s.BM25()
        retriever.index((ids, tokenizer.get_vocab_dict()), show_progress=False)
        index._bm25 = (tokenizer, retriever)
    return index._bm25


def _ranks(scores: npt.NDArray[np.float32], floor: float, limit: int) -> dict[int, int]:
    """Row -> rank (1 = best) of the `limit` best rows scoring above `floor`."""
    candidates = np.flatnonzero(scores > floor)
    if not len(candidates):
        return {}
    if len(candidates) > limit:
        top = np.argpartition(-scores[candidates], limit)[:limit]
        candidates = candidates[top]
    ordered = candidates[np.argsort(-scores[candidates], kind="stable")]
    return {int(row): rank for rank, row in enumerate(ordered.tolist(), start=1)}


def search(
    library: Library,
    query: str,
    k: int,
    embedder: Callable[[], Embedder],
    *,
    update: bool = True,
) -> list[Hit]:
    """The k best passages for a query, best first (at most PER_DOCUMENT per document)."""
    query = clean_query(query)
    if k < 1:
        raise UsageError(f"k must be at least 1, not {k}")
    index = update_index(library, embedder).index if update else load_index(index_path(library))
    if not index.passages:
        return []
    texts = _passage_texts(library, index)
    docs = {d.id: d for d in library.documents()}
    tokenizer, retriever = _bm25(index, texts, {d.id: d.title for d in docs.values()})
    query_ids = tokenizer.tokenize([query], update_vocab=False, return_as="ids", show_progress=False)[0]
    if query_ids:
        bm25_scores = np.asarray(retriever.get_scores(list(query_ids)), dtype=np.float32)
    else:
        bm25_scores = np.zeros(len(index.passages), dtype=np.float32)
    cosine = index.vectors @ query_vector(query, embedder())
    by_bm25 = _ranks(bm25_scores, 0.0, CANDIDATES)
    by_vector = _ranks(cosine.astype(np.float32), MIN_COSINE, CANDIDATES)
    fused: dict[int, float] = {}
    for ranks in (by_bm25, by_vector):
        for row, rank in ranks.items():
            fused[row] = fused.get(row, 0.0) + 1.0 / (RRF_K + rank)
    hits: list[Hit] = []
    per_doc: dict[str, int] = {}
    for row in sorted(fused, key=lambda r: (-fused[r], r)):
        passage = index.passages[row]
        doc = docs.get(passage.doc)
        if doc is None or per_doc.get(doc.id, 0) >= PER_DOCUMENT:
            continue
        per_doc[doc.id] = per_doc.get(doc.id, 0) + 1
        hits.append(Hit(doc, passage, texts[row], fused[row], by_bm25.get(row), by_vector.get(row)))
        if len(hits) == k:
            break
    return hits
