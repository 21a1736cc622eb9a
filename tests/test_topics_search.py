"""Semantic topic search with the real all-MiniLM-L6-v2 weights (loaded once per session)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from pensieve.config import TopicsSettings
from pensieve.project.workspace import Workspace
from pensieve.topics.embedder import (
    PRECISION_ENV,
    Embedder,
    ModelUnavailable,
    SentenceEmbedder,
    get_embedder,
    load_embedder,
    precision,
)
from pensieve.topics.index import INDEX_DIR, INDEX_FILE, TopicIndex, index_path
from pensieve.topics.search import search_topic_library
from tests.topic_library import QUERIES, TOPICS, UNRELATED_QUERIES, write_library

MIN_SCORE = TopicsSettings().min_score
STOPWORDS = {"a", "an", "and", "the", "of", "in", "with", "to", "on", "at", "for", "by"}


@dataclass
class CountingEmbedder:
    """The real model, recording every batch it is asked to embed."""

    batches: list[list[str]] = field(default_factory=list)

    def encode(self, texts: list[str]) -> npt.NDArray[np.float32]:
        self.batches.append(list(texts))
        return get_embedder().encode(texts)

    def indexed_batches(self, query: str) -> list[list[str]]:
        return [b for b in self.batches if b != [query]]


@pytest.fixture(scope="session")
def built_library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixture library with its index built once; tests copy it."""
    home = tmp_path_factory.mktemp("library")
    workspace = Workspace(home, "default")
    write_library(workspace.topics_dir)
    search_topic_library(workspace, "warm up", k=1, min_score=MIN_SCORE)
    return workspace.root


@pytest.fixture
def library(tmp_path: Path, built_library: Path) -> Workspace:
    workspace = Workspace(tmp_path, "default")
    shutil.copytree(built_library, workspace.root)
    return workspace


def _search(workspace: Workspace, query: str, embedder: Embedder | None = None, k: int = 5) -> list[str]:
    result = search_topic_library(
        workspace, query, k=k, min_score=MIN_SCORE, embedder=lambda: embedder or get_embedder()
    )
    return [hit.slug for hit in result.hits]


def test_fixture_queries_share_no_title_words() -> None:
    assert len(TOPICS) >= 30
    assert len({t.slug for t in TOPICS}) == len(TOPICS)
    titles = {t.slug: t.title for t in TOPICS}
    assert set(QUERIES) == set(titles)
    for slug, queries in QUERIES.items():
        title_words = set(re.findall(r"[a-z0-9]+", titles[slug].lower())) - STOPWORDS
        for query in queries:
            shared = title_words & set(re.findall(r"[a-z0-9]+", query.lower()))
            assert not shared, (slug, query, shared)


@pytest.mark.slow
def test_paraphrases_find_their_topic(library: Workspace) -> None:
    ranks: dict[str, int] = {}
    for slug, queries in QUERIES.items():
        for query in queries:
            found = _search(library, query, k=3)
            ranks[query] = found.index(slug) if slug in found else -1
    missed = [q for q, rank in ranks.items() if rank < 0]
    first = sum(1 for rank in ranks.values() if rank == 0)
    assert not missed, f"not in the top 3: {missed}"
    # "Most" ranked first: at least 90% of the queries.
    assert first >= 0.9 * len(ranks), f"{first} of {len(ranks)} ranked first"


@pytest.mark.slow
@pytest.mark.parametrize("query", UNRELATED_QUERIES)
def test_unrelated_query_returns_nothing(library: Workspace, query: str) -> None:
    assert _search(library, query) == []


@pytest.mark.slow
def test_result_shape_and_snippet_is_the_best_chunk(library: Workspace) -> None:
    result = search_topic_library(
        library, "a follower that misses heartbeats asks for votes", k=5, min_score=MIN_SCORE
    ).hits
    best = result[0]
    assert (best.slug, best.title) == ("raft", "Raft consensus algorithm")
    assert best.snippet.startswith("Servers start as followers.")
    assert [h.score for h in result] == sorted((h.score for h in result), reverse=True)


@pytest.mark.slow
def test_index_is_incremental(library: Workspace) -> None:
    query = "how leaves turn sunlight into sugar"
    counter = CountingEmbedder()
    _search(library, query, counter)  # files were copied: their hashes match, nothing is embedded
    assert counter.indexed_batches(query) == []

    counter = CountingEmbedder()
    result = search_topic_library(library, query, k=3, min_score=MIN_SCORE, embedder=lambda: counter)
    assert counter.indexed_batches(query) == []
    assert result.report.embedded == [] and len(result.report.unchanged) == len(TOPICS)

    path = library.topics_dir / "photosynthesis.md"
    path.write_text(path.read_text().replace("RuBisCO", "the enzyme rubisco"))
    counter = CountingEmbedder()
    result = search_topic_library(library, query, k=3, min_score=MIN_SCORE, embedder=lambda: counter)
    assert result.report.embedded == ["photosynthesis"]
    (batch,) = counter.indexed_batches(query)
    assert all(text.startswith("Photosynthesis in plants") for text in batch)
    assert "rubisco" in " ".join(batch)

    (library.topics_dir / "sourdough.md").unlink()
    counter = CountingEmbedder()
    result = search_topic_library(
        library, "wild yeast starter loaves", k=5, min_score=MIN_SCORE, embedder=lambda: counter
    )
    assert result.report.removed == ["sourdough"]
    assert counter.indexed_batches("wild yeast starter loaves") == []
    assert "sourdough" not in [h.slug for h in result.hits]
    stored = TopicIndex.from_file(index_path(library))
    assert "sourdough" not in {f.slug for f in stored.files}
    assert stored.vectors.shape[0] == len(stored.row_file)


@pytest.mark.slow
def test_broken_front_matter_is_skipped_with_a_warning(library: Workspace) -> None:
    (library.topics_dir / "broken.md").write_text("---\ntitle: [unclosed\n---\nA body about leader election.\n")
    (library.topics_dir / "untitled.md").write_text("---\ntags: [x]\n---\nbody\n")
    result = search_topic_library(library, "replicas agreeing on a leader", k=3, min_score=MIN_SCORE)
    assert result.hits[0].slug == "raft"
    problems = "\n".join(result.report.problems)
    assert "topics/broken.md" in problems and "bad YAML" in problems
    assert "topics/untitled.md" in problems and "no 'title'" in problems
    # Still reported on the next search, though nothing is parsed again.
    again = search_topic_library(library, "replicas agreeing on a leader", k=3, min_score=MIN_SCORE)
    assert len(again.report.problems) == 2


@pytest.mark.slow
def test_unreadable_index_is_rebuilt(library: Workspace) -> None:
    index_path(library).write_bytes(b"not an index")
    result = search_topic_library(library, "collapsed stars that trap light", k=3, min_score=MIN_SCORE)
    assert result.hits[0].slug == "black-holes"
    assert any("unreadable" in p for p in result.report.problems)
    assert len(result.report.embedded) == len(TOPICS)


def test_empty_library_searches_without_loading_the_model(tmp_path: Path) -> None:
    def no_model() -> Embedder:
        raise AssertionError("the model must not be loaded for an empty library")

    result = search_topic_library(
        Workspace(tmp_path, "default"), "anything", k=3, min_score=MIN_SCORE, embedder=no_model
    )
    assert result.hits == []


def test_weights_with_a_wrong_sha256_are_refused(tmp_path: Path) -> None:
    (tmp_path / "model.safetensors").write_bytes(b"tampered weights")
    with pytest.raises(ModelUnavailable, match=r"refusing to load .*model\.safetensors.*sha256"):
        load_embedder(tmp_path)


def test_bfloat16_is_chosen_only_where_the_cpu_multiplies_it() -> None:
    assert precision({}, "flags\t\t: fpu avx2 avx512f avx512_bf16 avx512_vnni") == "bfloat16"
    assert precision({}, "flags : fpu avx2 amx_bf16 amx_tile") == "bfloat16"
    # AVX-512 without BF16 (the Intel VMs measured before): emulated, slower, so float32.
    assert precision({}, "flags : fpu avx2 avx512f avx512bw avx512vl avx512_vnni") == "float32"
    assert precision({}, "") == "float32"
    assert precision({PRECISION_ENV: "float32"}, "flags : avx512_bf16") == "float32"
    assert precision({PRECISION_ENV: " BFloat16 "}, "flags : avx2") == "bfloat16"
    with pytest.raises(ModelUnavailable, match=f"{PRECISION_ENV} is 'half'; set it to float32 or bfloat16"):
        precision({PRECISION_ENV: "half"}, "")


@pytest.mark.parametrize("count", [3, 70], ids=["query path", "bulk path"])
def test_bfloat16_vectors_keep_the_float32_direction(count: int) -> None:
    """Both encode paths (one thread; a pool of threads, where autocast must be entered in each
    thread) really run in bfloat16, and the vectors stay where float32 puts them."""
    model = get_embedder()._model
    texts = [f"{t.title}: {t.body}" for t in TOPICS] * (count // len(TOPICS) + 1)
    texts = texts[:count]
    full = SentenceEmbedder(model, "float32").encode(texts)
    low = SentenceEmbedder(model, "bfloat16").encode(texts)
    assert low.dtype == np.float32 and low.shape == full.shape
    assert not np.array_equal(low, full)  # autocast took effect
    assert np.allclose(np.linalg.norm(low, axis=1), 1.0, atol=1e-3)
    assert float(np.min(np.sum(low * full, axis=1))) > 0.999


@pytest.mark.slow
def test_two_processes_reindexing_at_once_leave_a_valid_index(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path, "default")
    write_library(workspace.topics_dir)
    env = {**os.environ, "PENSIEVE_HOME": str(tmp_path)}
    command = [sys.executable, "-m", "pensieve", "topics", "reindex", "--json"]
    cwd = Path(__file__).resolve().parents[1]
    procs = [
        subprocess.Popen(command, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    reports = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 0, stderr
        reports.append(json.loads(stdout))
    # The lock made them take turns: one embedded everything, the other found it done.
    assert sorted(len(r["embedded"]) for r in reports) == [0, len(TOPICS)]
    assert sorted(len(r["unchanged"]) for r in reports) == [0, len(TOPICS)]
    index = TopicIndex.from_file(workspace.root / INDEX_DIR / INDEX_FILE)
    assert sorted(f.slug for f in index.files) == sorted(t.slug for t in TOPICS)
    assert index.vectors.shape == (len(index.row_file), 384)
    assert np.allclose(np.linalg.norm(index.vectors, axis=1), 1.0, atol=1e-3)
    assert not [p.name for p in (workspace.root / INDEX_DIR).iterdir() if p.name.startswith(".tmp-")]
