"""The workspace library: extraction and BM25 libraries compared, adding PDF pages, warm search.

1. PDF extraction, pypdfium2 (the choice) against pypdf and pdfminer.six when they are
   importable (pdfminer.six is not a dependency: `pip install --target DIR` it and put
   DIR on PYTHONPATH to compare): ms per page, and the share of the known words recovered
   in order from PDFs written here; words per page on any real PDFs given with --pdf.
2. BM25, bm25s (the choice) against rank-bm25 when importable: index time and median query
   time over the passages of part 4, and how many of the top 10 they share.
3. Adding 1,000 PDF pages (10 PDFs of 100 pages, --words words a page) to a library with
   `Library.add_bytes` and embedding every passage (`update_index`, the real MiniLM model),
   as `pensieve library add` does; wall and CPU time of each phase (CPU including the PDF
   reader's child processes), with the load, and the passages' length in model tokens;
   and what reading a PDF in a child process costs over reading it in this one. Target: under 60 s.
4. A warm search over 10,000 passages (`library.index.search`: the freshness check, BM25,
   the query embedded by the real model, cosine, fusion), median of fresh queries. The
   corpus's vectors are random unit vectors written into the index (a search costs the same
   whatever their values; embedding 10,000 passages would take minutes and measure part 3
   again); its text is real text for BM25. Wall and CPU time of the search and of its
   parts (the query embedding, BM25), and of the same query again (its vector cached).
   Target: under 100 ms.
5. An int8 copy of the model (torch dynamic quantization of its Linear layers, one scale
   per output channel) and the model in bfloat16 (round 6) against the float32 one: CPU
   time of the same passages through the bulk path, alternating, and the cosine of their
   vectors; then retrieval over the Rust RFCs (--rfcs, 639 markdown files; --rfc-step 2
   takes every other one) added as a library, indexed and searched once with the float32
   model and once with the int8 one: recall@10 of the RFC whose summary's
   first sentence is the query, by the hybrid search and by the vectors alone, and the share
   of the top 10 both return. docs/library.md says why int8 is not the library's model.
6. What the model reads (rounds 4 and 5): the RFCs' passages (--rfc-step) embedded as written
   (round 3: with the title in front), without the stop words (round 4) and as `embedding_text`
   gives them (the library's way since round 5: no stop words, no punctuation around words, no
   title), CPU time of each and their model tokens; then recall@10 of each over the same
   queries as part 5, and over 12 words taken from inside passages (inner queries), hybrid
   (the real `search`) and by the vectors alone.

The generated text is the sentences of this project's docs by default (`--text prose`);
`--text english` draws its words Zipf-like (about half of them "the": what rounds 1-3
measured), `--text made-up` uses made-up words, which the tokenizer cuts into about twice
as many pieces.

Run: python bench/bench_library.py [--pages 1000] [--words 250] [--passages 10000] [--text prose|english|made-up]
     [--skip 1,2] [--pdf FILE ...] [--int8-passages 400] [--rfcs DIR] [--rfc-step 1]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import random
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import numpy.typing as npt

from pensieve.library.extract import Limits, _pdf
from pensieve.library.index import (
    _EDGES,
    PASSAGE_WORDS,
    STOP_WORDS,
    LibraryIndex,
    Passage,
    embedding_text,
    index_path,
    passages_of,
    query_vector,
    search,
    update_index,
)
from pensieve.library.isolation import extract_pdf
from pensieve.library.store import Library
from pensieve.project.workspace import Workspace, atomic_write_bytes
from pensieve.topics.embedder import DIMENSION, PRECISION_ENV, Embedder, SentenceEmbedder, get_embedder, precision
from tests.library_files import pdf_bytes

SYLLABLES = [a + b for a in "bcdfghklmnprstvz" for b in ("a", "e", "i", "o", "u", "ai", "ou")]


def vocabulary(rng: random.Random, size: int = 20_000) -> list[str]:
    """Made-up words: the tokenizer splits each into several pieces (~2.3 tokens a word)."""
    words = {"".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 4))) for _ in range(size * 2)}
    return sorted(words)[:size]


def english_vocabulary(rng: random.Random) -> list[str]:
    """This project's own English words (docs/ and README), most frequent first: ~1.3 tokens
    a word, as in real English PDFs, where made-up words take nearly twice the model's work."""
    root = Path(__file__).resolve().parents[1]
    counts: dict[str, int] = {}
    for path in sorted([root / "README.md", *(root / "docs").glob("*.md")]):
        for word in re.findall(r"[a-z]{2,}", path.read_text(encoding="utf-8").lower()):
            counts[word] = counts.get(word, 0) + 1
    return sorted(counts, key=lambda w: (-counts[w], w))


# --text prose: the sentences of this project's docs, as written. The Zipf-drawn English words
# of --text english are about half "the" (paretovariate(1.1) picks the first word 53% of the
# time); real English prose has ~25% stop words, which the library's embedding drops.
PROSE: list[str] = []


def prose_sentences() -> list[str]:
    """Running English: the sentences of README.md and docs/*.md outside tables, code and headings."""
    root = Path(__file__).resolve().parents[1]
    found: list[str] = []
    for path in sorted([root / "README.md", *(root / "docs").glob("*.md")]):
        text = re.sub(r"```.*?```", " ", path.read_text(encoding="utf-8"), flags=re.DOTALL)
        lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith(("|", "#", "    "))]
        flat = re.sub(r"[`*_\[\]]|\(http[^)]*\)", "", " ".join(lines))
        found += [p for p in re.split(r"(?<=[.!?])\s+", flat) if 6 <= len(p.split()) <= 60]
    return found


def sentence(rng: random.Random, words: list[str]) -> str:
    if PROSE:
        return rng.choice(PROSE)
    # Zipf-like: a few words are everywhere, most are rare, as in real text.
    picked = [words[min(int(rng.paretovariate(1.1)) - 1, len(words) - 1)] for _ in range(rng.randint(8, 20))]
    return " ".join(picked).capitalize() + "."


def page_text(rng: random.Random, words: list[str], count: int) -> str:
    out: list[str] = []
    while sum(len(s.split()) for s in out) < count:
        out.append(sentence(rng, words))
    return " ".join(out)


def _median_ms(values: list[float]) -> float:
    return statistics.median(values) * 1000


# -- 1. extraction ---------------------------------------------------------------------------------


def _pypdf(data: bytes) -> list[str]:
    import io

    from pypdf import PdfReader

    return [p.extract_text() or "" for p in PdfReader(io.BytesIO(data)).pages]


def _pdfium(data: bytes) -> list[str]:
    import pypdfium2

    document = pypdfium2.PdfDocument(data)
    try:
        return [document[i].get_textpage().get_text_range() for i in range(len(document))]
    finally:
        document.close()


def _pdfminer(data: bytes) -> list[str]:
    import io

    from pdfminer.high_level import extract_text

    text: str = extract_text(io.BytesIO(data))
    return text.split("\f")


EXTRACTORS = {"pypdf": ("pypdf", _pypdf), "pypdfium2": ("pypdfium2", _pdfium), "pdfminer.six": ("pdfminer", _pdfminer)}


def recall_in_order(expected: list[str], got: str) -> float:
    tokens = re.findall(r"\w+", got.lower())
    position, found = 0, 0
    for word in expected:
        try:
            position = tokens.index(word, position) + 1
            found += 1
        except ValueError:
            continue
    return found / len(expected) if expected else 1.0


def bench_extraction(rng: random.Random, words: list[str], real: list[Path]) -> None:
    pages = [page_text(rng, words, 300) for _ in range(50)]
    data = pdf_bytes(pages)
    expected = [w for p in pages for w in re.findall(r"\w+", p.lower())]
    print("1. PDF extraction (50 generated pages of 300 words; then any --pdf files)")
    for name, (module, function) in EXTRACTORS.items():
        if importlib.util.find_spec(module) is None:
            print(f"   {name:13s} not importable (see the docstring to compare it)")
            continue
        times = []
        for _ in range(3):
            started = time.perf_counter()
            texts = function(data)
            times.append(time.perf_counter() - started)
        recall = recall_in_order(expected, "\n".join(texts))
        line = f"   {name:13s} {min(times) / len(pages) * 1000:6.2f} ms/page, {recall:.1%} of the words in order"
        for path in real:
            raw = path.read_bytes()
            started = time.perf_counter()
            texts = function(raw)
            took = time.perf_counter() - started
            count = sum(len(t.split()) for t in texts)
            per_page = max(len(texts), 1)
            line += f"; {path.name}: {took / per_page * 1000:.1f} ms/page, {count / per_page:.0f} words/page"
        print(line, flush=True)


# -- 2. BM25 -----------------------------------------------------------------------------------------


def bench_bm25(texts: list[str], queries: list[str]) -> None:
    import bm25s

    print(f"2. BM25 over {len(texts):,} passages, {len(queries)} queries")
    started = time.perf_counter()
    tokenizer = bm25s.tokenization.Tokenizer(stopwords="en")
    ids = tokenizer.tokenize(texts, update_vocab=True, return_as="ids", show_progress=False)
    retriever = bm25s.BM25()
    retriever.index((ids, tokenizer.get_vocab_dict()), show_progress=False)
    build = time.perf_counter() - started
    times, tops = [], []
    for query in queries:
        started = time.perf_counter()
        qids = tokenizer.tokenize([query], update_vocab=False, return_as="ids", show_progress=False)[0]
        scores = retriever.get_scores(list(qids)) if qids else np.zeros(len(texts))
        tops.append(set(np.argsort(-scores)[:10].tolist()))
        times.append(time.perf_counter() - started)
    print(f"   bm25s      index {build:6.2f} s, query median {_median_ms(times):7.2f} ms", flush=True)
    if importlib.util.find_spec("rank_bm25") is None:
        print("   rank-bm25  not importable (see the docstring to compare it)")
        return
    from rank_bm25 import BM25Okapi

    started = time.perf_counter()
    split = [re.findall(r"\w\w+", t.lower()) for t in texts]
    okapi = BM25Okapi(split)
    build = time.perf_counter() - started
    times, shared = [], []
    for query, top in zip(queries, tops, strict=True):
        started = time.perf_counter()
        scores = okapi.get_scores(re.findall(r"\w\w+", query.lower()))
        theirs = set(np.argsort(-scores)[:10].tolist())
        times.append(time.perf_counter() - started)
        shared.append(len(theirs & top) / 10)
    print(
        f"   rank-bm25  index {build:6.2f} s, query median {_median_ms(times):7.2f} ms; "
        f"top 10 shared with bm25s {statistics.mean(shared):.0%}",
        flush=True,
    )


# -- 3. adding pages -------------------------------------------------------------------------------


class Phase:
    """Wall and process CPU time of a block, and the machine's load when it ended (shared machine)."""

    def __enter__(self) -> Phase:
        self.wall0, self.cpu0 = time.perf_counter(), _cpu()
        return self

    def __exit__(self, *_: object) -> None:
        self.wall = time.perf_counter() - self.wall0
        self.cpu = _cpu() - self.cpu0
        self.load = os.getloadavg()[0]

    def __str__(self) -> str:
        return f"{self.wall:6.1f} s wall, {self.cpu:6.1f} s CPU (load {self.load:.1f})"


def _cpu() -> float:
    """CPU time of this process and of its finished children (the PDF reader's processes)."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def token_counts(texts: list[str]) -> list[int]:
    tokenizer = get_embedder()._model.tokenizer
    return [len(tokenizer(t, truncation=False)["input_ids"]) for t in texts]


def bench_adding(root: Path, rng: random.Random, words: list[str], pages: int, per_page: int) -> None:
    library = Library(Workspace(root, "adding"))
    files = [pdf_bytes([page_text(rng, words, per_page) for _ in range(100)]) for _ in range(max(pages // 100, 1))]
    print(f"3. adding {len(files) * 100:,} PDF pages ({len(files)} files, ~{per_page} words a page)")
    get_embedder()  # the model loads once per process: not part of adding pages
    with Phase() as stored:
        for number, data in enumerate(files):
            library.add_bytes(f"book-{number}.pdf", data, Limits())
    with Phase() as embedded:
        report = update_index(library, get_embedder)
    total = stored.wall + embedded.wall
    with Phase() as in_process:
        _pdf(files[0], Limits())
    with Phase() as in_child:
        extract_pdf(files[0], Limits())
    seq_length = get_embedder()._model.max_seq_length
    sample = [library.text(d) for d in library.documents()[:1]]
    doc = library.get(library.documents()[0].id)
    lengths = token_counts([embedding_text(sample[0][p.start : p.end]) for p in passages_of(doc, sample[0])][:200])
    print(
        f"   extract+store {stored}\n"
        f"   embed {report.passages_embedded:,} passages {embedded} = "
        f"{report.passages_embedded / max(embedded.wall, 1e-9):.1f} passages/s; model tokens a passage: median "
        f"{statistics.median(lengths):.0f}, max {max(lengths)} (`embedding_text`; the model reads {seq_length})\n"
        f"   reading one 100-page PDF in a child process (pensieve.library.isolation) {in_child}; "
        f"in this process {in_process}: {in_child.wall - in_process.wall:+.2f} s a document\n"
        f"   total {total:6.1f} s = {total / 60:.2f}x the 60 s target "
        f"(CPU {stored.cpu + embedded.cpu:.1f} s: {(stored.cpu + embedded.cpu) / 120:.2f}x two cores' 60 s)",
        flush=True,
    )


# -- 4. warm search ----------------------------------------------------------------------------------


def _median_cpu_wall(samples: list[tuple[float, float]]) -> str:
    walls, cpus = [w for w, _ in samples], [c for _, c in samples]
    return f"{_median_ms(walls):6.1f} ms wall, {_median_ms(cpus):6.1f} ms CPU"


def _timed(function: Callable[[], object]) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    function()
    return time.perf_counter() - wall, time.process_time() - cpu


def bench_search(root: Path, rng: random.Random, words: list[str], passages: int, queries: int) -> list[str]:
    library = Library(Workspace(root, "search"))
    per_doc = 100
    for number in range(passages // per_doc):
        body = "\n\n".join(page_text(rng, words, PASSAGE_WORDS - 5) for _ in range(per_doc))
        library.add_bytes(f"notes-{number}.md", f"# Notes {number}\n\n{body}\n".encode(), Limits())
    docs = [library.get(d.id) for d in library.documents()]
    found = [p for d in docs for p in passages_of(d, library.text(d))]
    vectors = np.asarray(np.random.default_rng(7).standard_normal((len(found), DIMENSION)), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    atomic_write_bytes(index_path(library), LibraryIndex([d.id for d in docs], found, vectors).to_bytes())
    print(f"4. warm search over {len(found):,} passages ({len(docs)} documents)")
    embedder = get_embedder()
    fresh = [sentence(rng, words) for _ in range(queries + 1)]
    with Phase() as cold:
        search(library, fresh[0], 8, get_embedder)  # cold: reads the index, builds BM25
    totals, embeds, bm25, repeated = [], [], [], []
    index = update_index(library, get_embedder).index
    tokenizer, retriever = index._bm25
    for query in fresh[1:]:
        totals.append(_timed(partial(search, library, query, 8, get_embedder)))
        repeated.append(_timed(partial(search, library, query, 8, get_embedder)))
        embeds.append(_timed(partial(embedder.encode, [query + " again"])))

        def score(q: str = query) -> None:
            ids = tokenizer.tokenize([q], update_vocab=False, return_as="ids", show_progress=False)[0]
            retriever.get_scores(list(ids))

        bm25.append(_timed(score))
    median = _median_ms([w for w, _ in totals])
    print(
        f"   first search {cold}\n"
        f"   warm search, fresh queries: {_median_cpu_wall(totals)} (load {os.getloadavg()[0]:.1f}) "
        f"= {median / 100:.2f}x the 100 ms target; p90 {np.percentile([w for w, _ in totals], 90) * 1000:.1f} ms\n"
        f"     the query embedding alone {_median_cpu_wall(embeds)}; BM25 alone {_median_cpu_wall(bm25)}\n"
        f"   the same query again (its vector cached: the search without the embedding): {_median_cpu_wall(repeated)} "
        f"= {_median_ms([w for w, _ in repeated]) / 100:.2f}x the target",
        flush=True,
    )
    by_doc = {d.id: library.text(d) for d in docs}
    return [by_doc[p.doc][p.start : p.end] for p in found]


# -- 5. int8 against float32 embedding -------------------------------------------------------------


def quantized(base: SentenceEmbedder) -> SentenceEmbedder:
    """A copy of `base` whose Linear layers compute in int8 (torch dynamic quantization,
    one scale per output channel of each weight; per tensor moved the vectors more: cosine
    0.94 to float32's against 0.987)."""
    import copy
    import warnings

    import torch
    from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch announces the move of eager quantization to torchao
        model = quantize_dynamic(  # type: ignore[no-untyped-call]
            copy.deepcopy(base._model), {torch.nn.Linear: per_channel_dynamic_qconfig}
        )
    return SentenceEmbedder(model, "float32")  # int8 Linear layers: no autocast on top


_int8: list[SentenceEmbedder] = []


def get_int8_embedder() -> SentenceEmbedder:
    if not _int8:
        _int8.append(quantized(get_embedder()))
    return _int8[0]


_float32: list[SentenceEmbedder] = []


def get_float32_embedder() -> SentenceEmbedder:
    """The library's model in float32 whatever the CPU (the library runs it in bfloat16 where
    the CPU multiplies that natively: round 6)."""
    if not _float32:
        _float32.append(SentenceEmbedder(get_embedder()._model, "float32"))
    return _float32[0]


def _encode_timed(embedder: Embedder, texts: list[str]) -> tuple[Phase, npt.NDArray[np.float32]]:
    with Phase() as phase:
        vectors = embedder.encode(texts)
    return phase, vectors


def bench_int8_speed(rng: random.Random, words: list[str], count: int) -> None:
    """An int8 copy of the model against the float32 one on the same passages, through the
    bulk path `library add` takes (one torch thread per core), alternating, twice each."""
    texts = [f"Book {n % 10}: {page_text(rng, words, PASSAGE_WORDS - 2)}" for n in range(count)]
    model = get_embedder()._model
    # bfloat16 (round 6) is measured too; on a CPU without it natively it is emulated (slow).
    embedders = {
        "float32": get_float32_embedder(),
        "bfloat16": SentenceEmbedder(model, "bfloat16"),
        "int8": get_int8_embedder(),
    }
    for embedder in embedders.values():
        embedder.encode(texts[:80])  # warm each
    runs: dict[str, list[Phase]] = {name: [] for name in embedders}
    vectors: dict[str, npt.NDArray[np.float32]] = {}
    for _ in range(2):
        for name, embedder in embedders.items():
            phase, vectors[name] = _encode_timed(embedder, texts)
            runs[name].append(phase)
    print(f"5. int8 (torch dynamic quantization) and bfloat16 against float32: {count} generated passages, twice each")
    for name, phases in runs.items():
        cpu = min(p.cpu for p in phases)
        print(
            f"   {name:8s} " + "; ".join(str(p) for p in phases) + f" = {count / cpu:.1f} passages per CPU second",
            flush=True,
        )
    for name in ("int8", "bfloat16"):
        ratio = min(p.cpu for p in runs[name]) / min(p.cpu for p in runs["float32"])
        cosine = (vectors["float32"] * vectors[name]).sum(axis=1)
        print(
            f"   {name} takes {ratio:.2f}x the CPU of float32; cosine of its vectors to float32's: "
            f"min {cosine.min():.5f}, median {np.median(cosine):.5f}",
            flush=True,
        )


_SUMMARY = re.compile(r"^#+\s*Summary\s*$\n+(.+?)(?:\n\s*\n|\Z)", re.MULTILINE | re.DOTALL | re.IGNORECASE)


def rfc_query(text: str) -> str:
    """The first sentence of the RFC's summary, without markdown."""
    found = _SUMMARY.search(text)
    if not found:
        return ""
    paragraph = re.sub(r"[`*_\[\]]|\(http[^)]*\)", "", " ".join(found.group(1).split()))
    return re.split(r"(?<=[.!?])\s", paragraph, maxsplit=1)[0][:300]


def add_rfcs(library: Library, files: list[Path]) -> dict[str, str]:
    """The RFCs added to the library; document id -> its query (`rfc_query`), where it has one."""
    queries: dict[str, str] = {}
    for path in files:
        doc, _ = library.add_bytes(path.name, path.read_bytes(), Limits())
        query = rfc_query(path.read_text(encoding="utf-8", errors="replace"))
        if query:
            queries[doc.id] = query
    return queries


def by_vectors(
    vectors: npt.NDArray[np.float32], passages: list[Passage], query: npt.NDArray[np.float32], k: int
) -> list[str]:
    """The k documents whose passages are closest to the query vector, by the vectors alone."""
    ranked: list[str] = []
    for row in np.argsort(-(vectors @ query)):
        owner = passages[int(row)].doc
        if owner not in ranked:
            ranked.append(owner)
        if len(ranked) == k:
            break
    return ranked


def bench_rfc_quality(root: Path, corpus: Path, step: int, k: int = 10) -> None:
    """Retrieval over the Rust RFCs added as a library, once indexed and searched with the
    float32 model and once with the int8 one: the query is the first sentence of each RFC's
    summary, recall@k is the share of queries whose RFC is among the k hits (the hybrid
    search `search_library` runs, and the vector ranking alone), overlap the share of the
    k hits both models return."""
    files = sorted(corpus.glob("*.md"))[::step]
    libraries = {name: Library(Workspace(root, f"rfc-{name}")) for name in ("float32", "int8")}
    embedders: dict[str, Callable[[], Embedder]] = {"float32": get_float32_embedder, "int8": get_int8_embedder}
    for library in libraries.values():
        queries = add_rfcs(library, files)  # the same ids in both: a document's id is its hash
    print(f"   Rust RFCs ({len(files)} of {len(list(corpus.glob('*.md')))} files), {len(queries)} queries")
    found: dict[str, list[list[tuple[str, int, int]]]] = {}
    vector_recall: dict[str, float] = {}
    for name, library in libraries.items():
        with Phase() as indexed:
            index = update_index(library, embedders[name]).index
        hits_per_query, vector_hits = [], 0
        for doc_id, query in queries.items():
            hits = search(library, query, k, embedders[name])
            hits_per_query.append([(h.doc.id, h.passage.start, h.passage.end) for h in hits])
            vector_hits += doc_id in by_vectors(
                index.vectors, index.passages, query_vector(query, embedders[name]()), k
            )
        found[name] = hits_per_query
        recall = statistics.mean(
            doc_id in {d for d, _, _ in hits} for doc_id, hits in zip(queries, hits_per_query, strict=True)
        )
        vector_recall[name] = vector_hits / len(queries)
        print(
            f"   {name:7s} indexing {len(index.passages):,} passages {indexed}; recall@{k}: hybrid {recall:.1%}, "
            f"vectors alone {vector_recall[name]:.1%}",
            flush=True,
        )
    overlap = statistics.mean(
        len(set(a) & set(b)) / max(len(a), 1) for a, b in zip(found["float32"], found["int8"], strict=True)
    )
    print(f"   top-{k} hits shared by int8 and float32 (hybrid search): {overlap:.1%}", flush=True)


def bench_embedding_text(root: Path, corpus: Path, step: int, k: int = 10) -> None:
    files = sorted(corpus.glob("*.md"))[::step]
    library = Library(Workspace(root, "rfc-text"))
    queries = add_rfcs(library, files)
    docs = [library.get(d.id) for d in library.documents()]
    passages, written, titled = [], [], []
    for doc in docs:
        text = library.text(doc)
        for p in passages_of(doc, text):
            passages.append(p)
            written.append(text[p.start : p.end])
            titled.append(f"{doc.title}: {written[-1]}")
    variants: dict[str, tuple[list[str], Callable[[str], str]]] = {
        "title + text (round 3)": (titled, lambda q: q),
        "as written": (written, lambda q: q),
        "stop words only (round 4)": ([_round4(t) for t in written], _round4),
        "embedding_text": ([embedding_text(t) for t in written], embedding_text),
    }
    # Inner queries (round 5): 12 words from anywhere inside a passage, so what the model
    # reads of a passage's end counts as much as of its start (summary queries come first).
    rng = random.Random(7)
    inner: list[tuple[str, str]] = []
    for row in rng.sample(range(len(passages)), min(400, len(passages))):
        words = written[row].split()
        if len(words) >= 30:
            first = rng.randrange(len(words) - 12)
            inner.append((passages[row].doc, " ".join(words[first : first + 12])))
    asked = {"summary": list(queries.items()), "inner": inner}
    embedder = get_embedder()
    print(
        f"6. what the model reads: {len(passages):,} passages of {len(files)} Rust RFCs, {len(queries)} summary "
        f"queries, {len(inner)} inner queries"
    )
    for name, (texts, query_text) in variants.items():
        tokens = sum(token_counts(texts))
        with Phase() as embedded:
            vectors = embedder.encode(texts)
        atomic_write_bytes(index_path(library), LibraryIndex([d.id for d in docs], passages, vectors).to_bytes())
        recalls = []
        for kind, pairs in asked.items():
            hybrid = alone = 0
            for doc_id, query in pairs:
                vector = embedder.encode([query_text(query)])[0]
                # The real search, reading this variant's vectors for the query too.
                hits = search(library, query, k, partial(_Fixed, vector), update=False)
                hybrid += doc_id in {h.doc.id for h in hits}
                alone += doc_id in by_vectors(vectors, passages, vector, k)
            size = max(len(pairs), 1)
            recalls.append(f"{kind} hybrid {hybrid / size:.1%}, vectors alone {alone / size:.1%}")
        print(f"   {name:26s} {tokens:,} tokens, embedding {embedded}; recall@{k}: {'; '.join(recalls)}", flush=True)


def _round4(text: str) -> str:
    """`embedding_text` of round 4: the stop words dropped, the punctuation around words kept."""
    kept = [w for w in text.split() if w.strip(_EDGES).lower() not in STOP_WORDS]
    return " ".join(kept) if kept else " ".join(text.split())


class _Fixed:
    """An embedder that answers every query with one vector (the variant's own query vector)."""

    def __init__(self, vector: npt.NDArray[np.float32]) -> None:
        self.vector = vector

    def encode(self, texts: list[str]) -> npt.NDArray[np.float32]:
        return np.tile(self.vector, (len(texts), 1))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pages", type=int, default=1000)
    parser.add_argument("--words", type=int, default=250)
    parser.add_argument("--passages", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--pdf", type=Path, nargs="*", default=[])
    parser.add_argument("--skip", default="", help="parts to skip, e.g. 1,2")
    parser.add_argument("--int8-passages", type=int, default=400, help="part 5: passages timed per model")
    parser.add_argument("--rfcs", type=Path, default=Path("/work/shared/corpus/rust-rfcs"), help="part 5's corpus")
    parser.add_argument("--rfc-step", type=int, default=1, help="parts 5 and 6: every Nth RFC (2 halves the time)")
    parser.add_argument(
        "--text",
        choices=("prose", "english", "made-up"),
        default="prose",
        help="the words of generated pages and queries (prose: the sentences of this project's docs)",
    )
    args = parser.parse_args()
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    rng = random.Random(11)
    words = vocabulary(rng) if args.text == "made-up" else english_vocabulary(rng)
    if args.text == "prose":
        PROSE[:] = prose_sentences()
    print(
        f"generated text: {args.text} words; load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; "
        f"the model in {precision()} ({PRECISION_ENV} chooses)",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="pensieve-bench-library-") as tmp:
        if "1" not in skip:
            bench_extraction(rng, words, args.pdf)
        texts = bench_search(Path(tmp), rng, words, args.passages, args.queries) if "4" not in skip else []
        if "2" not in skip and texts:
            bench_bm25(texts, [sentence(rng, words) for _ in range(args.queries)])
        if "3" not in skip:
            bench_adding(Path(tmp), rng, words, args.pages, args.words)
        if "5" not in skip:
            bench_int8_speed(rng, words, args.int8_passages)
            if args.rfcs.is_dir():
                bench_rfc_quality(Path(tmp), args.rfcs, args.rfc_step)
            else:
                print(f"   {args.rfcs} is not a folder: give the Rust RFCs' markdown files with --rfcs")
        if "6" not in skip and args.rfcs.is_dir():
            bench_embedding_text(Path(tmp), args.rfcs, args.rfc_step)


if __name__ == "__main__":
    main()
