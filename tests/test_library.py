"""The workspace library through the real CLI: real PDFs (pypdf) and Word files
(python-docx) made here, hostile files refused in one line with nothing half-added, the
hybrid search with the real MiniLM model, and URLs fetched once through the safe fetch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pensieve.library.index import index_path, load_index, update_index
from pensieve.library.store import Library
from pensieve.project.workspace import open_workspace
from pensieve.topics.embedder import get_embedder
from tests.conftest import Home
from tests.fakes.web_site import FakeSite
from tests.library_files import (
    deep_pdf_bytes,
    pdf_bytes,
    scanned_pdf_bytes,
    write_docx,
    write_pdf,
    zip_bomb_docx,
)

RAFT_PAGES = [
    "In Search of an Understandable Consensus Algorithm. Diego Ongaro and John Ousterhout. "
    "doi:10.5555/2643634.2643666\n\nRaft is a consensus algorithm for managing a replicated log.",
    "Leader election. Raft uses a heartbeat mechanism to trigger leader election. When servers start up, "
    "they begin as followers. If a follower receives no communication over a period of time called the "
    "election timeout, it assumes there is no viable leader and begins an election to choose a new leader.",
    "Log replication. Once a leader has been elected, it begins servicing client requests. Each client "
    "request contains a command to be executed by the replicated state machines.",
]
BAKING = [
    ("Starters", "A sourdough starter is a culture of wild yeast and lactic acid bacteria kept in flour and water."),
    ("Baking", "Bake the loaf in a covered pot at 250 degrees for twenty minutes, then uncovered until dark."),
]


def _library(home: Home) -> Library:
    return Library(open_workspace(home.path, "default"))


def raft_pdf(tmp_path: Path) -> Path:
    return write_pdf(
        tmp_path / "raft.pdf",
        RAFT_PAGES,
        title="In Search of an Understandable Consensus Algorithm",
        author="Diego Ongaro; John Ousterhout",
        created="D:20140619120000Z",
        first_label=11,
    )


def _in_a_process(home: Home, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`pensieve ARGS` in a process of its own (this one may hold the model or the index)."""
    return subprocess.run(
        [sys.executable, "-m", "pensieve", *args],
        env={**os.environ, "PENSIEVE_HOME": str(home.path), **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _leftovers(home: Home) -> list[str]:
    docs = home.path / "workspaces" / "default" / "library" / "docs"
    return sorted(p.name for p in docs.iterdir()) if docs.is_dir() else []


def test_a_pdf_is_added_once_with_its_metadata_and_page_map(home: Home, tmp_path: Path) -> None:
    pdf = raft_pdf(tmp_path)
    added = home.run("library", "add", str(pdf), "--tags", "consensus,papers")
    assert added.exit_code == 0, added.stderr
    doc_id = added.stdout.strip()
    assert len(doc_id) == 12 and "added: " in added.stderr

    (doc,) = json.loads(home.run("library", "list", "--json").stdout)
    assert doc["id"] == doc_id and doc["kind"] == "pdf" and doc["pages"] == 3
    assert doc["title"] == "In Search of an Understandable Consensus Algorithm"
    assert doc["authors"] == ["Diego Ongaro", "John Ousterhout"]
    assert doc["published"] == "2014-06-19" and doc["year"] == 2014
    assert doc["doi"] == "10.5555/2643634.2643666"  # from the first page: the file's metadata has none
    assert doc["file_name"] == "raft.pdf" and doc["tags"] == ["consensus", "papers"]

    shown = json.loads(home.run("library", "show", doc_id, "--json").stdout)
    labels = [label for _, label in shown["marks"]]
    assert labels == ["11", "12", "13"]  # the printed page numbers (/PageLabels), not 1, 2, 3
    text = _library(home).text(_library(home).get(doc_id))
    election = text.index("election timeout")
    assert _library(home).get(doc_id).page_at(election) == "12"

    # The same bytes under another name are the same document, stored once.
    copy = tmp_path / "copy-of-raft.pdf"
    copy.write_bytes(pdf.read_bytes())
    again = home.run("library", "add", str(copy))
    assert again.exit_code == 0 and again.stdout.strip() == doc_id
    assert "already in the library" in again.stderr
    assert _leftovers(home) == [doc_id]


def test_word_markdown_html_and_text_from_a_folder(home: Home, tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    (folder / "deeper").mkdir(parents=True)
    write_docx(folder / "baking.docx", BAKING, title="Bread notes", author="A. Baker")
    (folder / "deeper" / "raft.md").write_text("# Raft notes\n\nFollowers vote.\n\n## Terms\n\nTerms are numbered.\n")
    (folder / "page.html").write_text(
        "<html><head><title>HNSW explained</title><meta name='citation_author' content='Yury Malkov'></head>"
        "<body><article><p>HNSW builds a layered proximity graph and searches it greedily.</p></article></body></html>"
    )
    (folder / "plain.txt").write_text("Plain notes about B-trees.\nThey keep keys sorted.\n")
    # A design document opens with a section's name: the file name is its title.
    (folder / "0001-private-fields.md").write_text("- Start Date: 2014-03-11\n\n# Summary\n\nFields are private.\n")
    (folder / ".hidden.md").write_text("# Hidden\n\nnot added\n")
    (folder / "image.png").write_bytes(b"\x89PNG\r\n")
    added = home.run("library", "add", str(folder))
    assert added.exit_code == 0, added.stderr
    assert len(added.stdout.split()) == 5
    docs = {d["file_name"]: d for d in json.loads(home.run("library", "list", "--json").stdout)}
    assert set(docs) == {"baking.docx", "raft.md", "page.html", "plain.txt", "0001-private-fields.md"}
    assert docs["0001-private-fields.md"]["title"] == "0001-private-fields"
    assert docs["baking.docx"]["title"] == "Bread notes" and docs["baking.docx"]["authors"] == ["A. Baker"]
    assert docs["baking.docx"]["mark_kind"] == "heading"
    baking = _library(home).get(docs["baking.docx"]["id"])
    text = _library(home).text(baking)
    assert baking.page_at(text.index("covered pot")) == "Baking"
    assert docs["raft.md"]["title"] == "Raft notes" and docs["raft.md"]["kind"] == "markdown"
    assert docs["page.html"]["title"] == "HNSW explained" and docs["page.html"]["authors"] == ["Yury Malkov"]
    assert docs["plain.txt"]["kind"] == "text"


def test_hostile_and_unreadable_files_are_refused_in_one_line_and_nothing_is_half_added(
    home: Home, tmp_path: Path
) -> None:
    home.configure(library={"max_unpacked_bytes": 5_000_000, "max_file_bytes": 50_000_000})
    good = raft_pdf(tmp_path)
    (tmp_path / "scanned.pdf").write_bytes(scanned_pdf_bytes())
    (tmp_path / "locked.pdf").write_bytes(pdf_bytes(["A secret page of text."], password="s3cret"))
    (tmp_path / "deep.pdf").write_bytes(deep_pdf_bytes(10_000))
    (tmp_path / "damaged.pdf").write_bytes(good.read_bytes()[:300])
    zip_bomb_docx(tmp_path / "bomb.docx", 20_000_000)
    with open(tmp_path / "huge.pdf", "wb") as handle:
        handle.truncate(2 * 1024**3)  # 2 GB, sparse: refused by its size, never read
    os.symlink(good, tmp_path / "link.pdf")
    os.mkfifo(tmp_path / "fifo.txt")
    (tmp_path / "binary.txt").write_bytes(b"\xff\xfe\x00\x01" * 10)
    names = ["scanned.pdf", "locked.pdf", "deep.pdf", "damaged.pdf", "bomb.docx", "huge.pdf", "link.pdf", "fifo.txt"]
    names += ["binary.txt", "missing.pdf"]
    result = home.run("library", "add", *(str(tmp_path / n) for n in names), str(good))
    assert result.exit_code == 1
    assert result.stdout.split() == [_library(home).documents()[0].id]  # the good one is added
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == len(names)
    reasons = dict(line.removeprefix(f"error: {tmp_path}/").split(": ", 1) for line in errors)
    assert "no text layer (a scanned PDF?)" in reasons["scanned.pdf"] and "OCR" in reasons["scanned.pdf"]
    assert "encrypted with a password" in reasons["locked.pdf"]
    assert "not added" in reasons["deep.pdf"]
    assert "not a readable PDF" in reasons["damaged.pdf"]
    assert "library.max_unpacked_bytes" in reasons["bomb.docx"] and "zip bomb" in reasons["bomb.docx"]
    assert "2,147,483,648 bytes, more than library.max_file_bytes" in reasons["huge.pdf"]
    assert "symbolic link (not followed)" in reasons["link.pdf"]
    assert "is a FIFO" in reasons["fifo.txt"]
    assert "not UTF-8 text" in reasons["binary.txt"]
    assert reasons["missing.pdf"] == "no such file or folder"
    assert "Traceback" not in result.stderr
    # Nothing half-added: one document directory, no temporary left, the catalog lists one.
    assert _leftovers(home) == [d.id for d in _library(home).documents()]
    assert len(_library(home).documents()) == 1


def test_a_pdf_over_max_pages_is_refused(home: Home, tmp_path: Path) -> None:
    home.configure(library={"max_pages": 2})
    result = home.run("library", "add", str(raft_pdf(tmp_path)))
    assert result.exit_code == 1
    assert "has 3 pages, more than library.max_pages (2)" in result.stderr
    assert _leftovers(home) == []


def test_unknown_ids_and_bad_queries_are_usage_errors(home: Home) -> None:
    shown = home.run("library", "show", "0123456789ab")
    assert shown.exit_code == 2 and "no document '0123456789ab'" in shown.stderr
    assert "pensieve library add" in shown.stderr
    bad = home.run("library", "remove", "../../etc")
    assert bad.exit_code == 2 and "is not a library document id" in bad.stderr
    empty = home.run("library", "search", "   ")
    assert empty.exit_code == 2 and "the query is empty" in empty.stderr
    assert home.run("library", "list").exit_code == 0


@pytest.mark.slow
def test_hybrid_search_finds_exact_terms_and_paraphrases_with_pages(home: Home, tmp_path: Path) -> None:
    pdf = raft_pdf(tmp_path)
    write_docx(tmp_path / "baking.docx", BAKING, title="Bread notes")
    assert home.run("library", "add", str(pdf), str(tmp_path / "baking.docx")).exit_code == 0
    # A paraphrase with none of the passage's words but "leader".
    found = json.loads(
        home.run("library", "search", "what happens when followers stop hearing from the leader", "--json").stdout
    )
    assert found[0]["title"] == "In Search of an Understandable Consensus Algorithm"
    assert found[0]["page"] == "12" and "election timeout" in found[0]["passage"]
    # An exact rare term (BM25's part).
    exact = json.loads(home.run("library", "search", "lactic acid bacteria", "--k", "1", "--json").stdout)
    assert len(exact) == 1 and exact[0]["title"] == "Bread notes" and exact[0]["page"] == "Starters"
    table = home.run("library", "search", "sourdough")
    assert table.exit_code == 0 and "Bread notes" in table.stdout


@pytest.mark.slow
def test_the_index_is_incremental(home: Home, tmp_path: Path) -> None:
    library = _library(home)
    assert home.run("library", "add", str(raft_pdf(tmp_path))).exit_code == 0
    first = load_index(index_path(library))
    assert first.docs and len(first.passages) >= 3
    write_docx(tmp_path / "baking.docx", BAKING)
    assert home.run("library", "add", str(tmp_path / "baking.docx")).exit_code == 0
    baking = next(d for d in library.documents() if d.kind == "docx")
    report = update_index(library, get_embedder)
    assert report.embedded == [] and report.removed == []  # `add` indexed it already
    assert load_index(index_path(library)).docs == [*first.docs, baking.id]
    assert home.run("library", "remove", baking.id).exit_code == 0
    report = update_index(library, get_embedder)
    assert report.removed == [baking.id] and report.embedded == []
    assert load_index(index_path(library)).docs == first.docs
    assert _leftovers(home) == first.docs


def test_a_url_is_fetched_once_through_the_safe_fetch(home: Home, site: FakeSite) -> None:
    home.configure(fetch={"allow_private_hosts": True, "timeout_s": 3})
    added = home.run("library", "add", site.url("/article"))
    assert added.exit_code == 0, added.stderr
    (doc,) = json.loads(home.run("library", "list", "--json").stdout)
    assert doc["url"] == site.url("/article") and doc["kind"] == "html"
    refused = home.run("library", "add", site.url("/private/secret"))
    assert refused.exit_code == 1 and "robots.txt" in refused.stderr
    # Without allow_private_hosts the guard refuses 127.0.0.1 before any request.
    home.configure(fetch={"allow_private_hosts": False})
    before = len(site.paths())
    guarded = home.run("library", "add", site.url("/second"))
    assert guarded.exit_code == 1 and len(site.paths()) == before


class _Counting:
    """The real model, counting the texts it is asked to embed."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def encode(self, texts: list[str]) -> Any:
        self.texts.extend(texts)
        return get_embedder().encode(texts)


def test_a_model_that_cannot_load_leaves_the_documents_added_and_says_so_once(home: Home, tmp_path: Path) -> None:
    """`library add` starts loading the model at the first new document; when that fails
    the documents stay added and the index step says why, in one line (a process of its
    own: this one may have the model loaded already)."""
    write_docx(tmp_path / "baking.docx", BAKING)
    added = _in_a_process(
        home, "library", "add", str(tmp_path / "baking.docx"), str(raft_pdf(tmp_path)), PENSIEVE_EMBED_PRECISION="half"
    )
    assert added.returncode == 0, added.stderr
    assert len(added.stdout.split()) == 2 and added.stderr.count("added: ") == 2
    warnings = [line for line in added.stderr.splitlines() if line.startswith("warning:")]
    assert warnings == [
        "warning: added, but not indexed yet: PENSIEVE_EMBED_PRECISION is 'half'; set it to float32 or "
        "bfloat16, or unset it"
    ]
    assert "Traceback" not in added.stderr
    assert len(_library(home).documents()) == 2 and not index_path(_library(home)).exists()


class _Hashed:
    """Unit vectors from each text's CRC (a row says which text it was made from), counting
    the texts of each call: indexing's bookkeeping without the model's seconds."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    def encode(self, texts: list[str]) -> Any:
        import zlib

        import numpy as np

        self.calls.append(len(texts))
        out = np.zeros((len(texts), 384), dtype=np.float32)
        out[np.arange(len(texts)), [zlib.crc32(t.encode()) % 384 for t in texts]] = 1.0
        return out


def test_indexing_reports_progress_in_parts_and_keeps_the_rows_in_order(home: Home) -> None:
    from pensieve.library.extract import Limits
    from pensieve.library.index import EMBED_PART, embedding_text, passages_of

    library = _library(home)
    words = [f"word{i % 997}" for i in range(1_300 * 120)]
    doc, _ = library.add_bytes("long.txt", " ".join(words).encode(), Limits(max_text_chars=10_000_000))
    hashed = _Hashed()
    told: list[tuple[int, int]] = []
    report = update_index(library, lambda: hashed, lambda done, total: told.append((done, total)))
    total = report.passages_embedded
    assert total == 1_300
    parts = round(total / EMBED_PART)
    assert len(hashed.calls) == parts == len(told) and sum(hashed.calls) == total
    assert max(hashed.calls) - min(hashed.calls) <= 1  # equal parts: each one the bulk path's size
    assert [done for done, _ in told] == sorted({done for done, _ in told}) and told[-1] == (total, total)
    # Row i is passage i's vector, across the parts.
    index = load_index(index_path(library))
    text = library.text(library.get(doc.id))
    expected = _Hashed().encode([embedding_text(text[p.start : p.end]) for p in passages_of(doc, text)])
    assert (index.vectors == expected).all()


@pytest.mark.slow
def test_a_warm_search_sees_another_process_change_the_library(home: Home, tmp_path: Path) -> None:
    from pensieve.library.index import search

    write_docx(tmp_path / "baking.docx", BAKING, title="Bread notes")
    assert home.run("library", "add", str(raft_pdf(tmp_path)), str(tmp_path / "baking.docx")).exit_code == 0
    library = _library(home)
    counting = _Counting()
    first = search(library, "sourdough starter culture", 5, lambda: counting)
    assert any(h.doc.title == "Bread notes" for h in first)
    # The same words again: the query's vector is not computed twice (the catalog, the index
    # and BM25 are kept too while their files are unchanged).
    again = search(library, "sourdough starter culture", 5, lambda: counting)
    assert [(h.doc.id, h.passage) for h in again] == [(h.doc.id, h.passage) for h in first]
    assert counting.texts == ["sourdough starter culture"]
    # Another process removes a document: this process's next search must not return it.
    bread = next(d for d in library.documents() if d.title == "Bread notes")
    removed = _in_a_process(home, "library", "remove", bread.id)
    assert removed.returncode == 0, removed.stderr
    after = search(library, "sourdough starter culture", 5, lambda: counting)
    assert all(h.doc.id != bread.id for h in after)
    assert bread.id not in load_index(index_path(library)).docs  # and the index dropped it
    assert all(d.id != bread.id for d in library.documents())


@pytest.mark.slow
def test_an_index_built_by_another_embedding_is_re_embedded_and_said_in_one_line(home: Home, tmp_path: Path) -> None:
    """Vectors of two embeddings cannot be compared: an index whose manifest names another
    embedding is never mixed with this model's vectors, it is rebuilt and the command says so."""
    from pensieve.library.index import EMBEDDING_ID, LibraryIndex
    from pensieve.project.workspace import atomic_write_bytes

    library = _library(home)
    assert home.run("library", "add", str(raft_pdf(tmp_path))).exit_code == 0
    built = load_index(index_path(library))
    # The same passages, as another model (or an int8 copy) would have stored them.
    foreign = LibraryIndex(built.docs, built.passages, built.vectors[:, ::-1].copy(), embedding_id="other/model@1")
    atomic_write_bytes(index_path(library), foreign.to_bytes())
    searched = home.run("library", "search", "election timeout", "--json")
    assert searched.exit_code == 0, searched.stderr
    notes = [line for line in searched.stderr.splitlines() if "another embedding" in line]
    assert len(notes) == 1 and "other/model@1" in notes[0] and EMBEDDING_ID in notes[0], searched.stderr
    assert f"re-embedded its {len(built.passages)} passages" in notes[0]
    assert json.loads(searched.stdout)[0]["page"] == "12"
    rebuilt = load_index(index_path(library))
    assert rebuilt.embedding_id == EMBEDDING_ID and rebuilt.passages == built.passages
    assert float((rebuilt.vectors * built.vectors).sum(axis=1).min()) > 0.999  # this model's vectors again
    again = home.run("library", "search", "election timeout")
    assert again.exit_code == 0 and "another embedding" not in again.stderr


def test_the_model_reads_passages_and_queries_without_stop_words_or_punctuation() -> None:
    import bm25s.stopwords

    from pensieve.library.index import STOP_WORDS, embedding_text

    # The same list BM25 drops, but for the negations, which carry a passage's meaning.
    assert set(bm25s.stopwords.STOPWORDS_EN) - STOP_WORDS == {"no", "not"}
    assert embedding_text("The leader is elected by a majority, not by the clients.") == (
        "leader elected majority not clients"
    )
    # Punctuation around a word goes; inside one (a path, a version, a contraction) it stays.
    assert embedding_text("(see `std::mem::take`, v1.2) -- doesn't it?") == "see std::mem::take v1.2 -- doesn't"
    assert embedding_text("To be, or not to be") == "not"
    assert embedding_text("It is this.") == "It is this."  # nothing else: read as it is


@pytest.mark.slow
def test_the_index_embeds_passages_without_stop_words_and_bm25_reads_titles(home: Home, tmp_path: Path) -> None:
    from pensieve.library.extract import Limits
    from pensieve.library.index import search

    write_docx(tmp_path / "baking.docx", BAKING, title="Bread notes")
    library = _library(home)
    library.add_bytes("baking.docx", (tmp_path / "baking.docx").read_bytes(), Limits())
    counting = _Counting()
    update_index(library, lambda: counting)
    assert any(
        "sourdough starter culture wild yeast lactic acid bacteria kept flour water" in t for t in counting.texts
    )
    assert not any(" the " in f" {t.lower()} " or "Bread notes" in t for t in counting.texts)
    # The title is no longer in front of each passage's vector, but BM25 reads it: words that
    # are only in the title still find the document.
    hits = search(library, "bread notes", 3, get_embedder)
    assert hits and hits[0].doc.title == "Bread notes"
