"""A PDF is read by a child process with limits (pensieve.library.isolation): a crash, a
hang or a memory blow-up in the PDF reader refuses that file in one line, and the command,
the other files and the library carry on."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from pensieve.library.extract import ExtractionError, Limits, extract
from pensieve.library.isolation import extract_pdf
from pensieve.library.store import Library
from pensieve.project.workspace import open_workspace
from tests.conftest import Home
from tests.library_files import deflate_bomb_pdf_bytes, pdf_bytes, write_pdf


def test_a_pdf_is_read_by_a_child_process_with_its_pages_and_metadata(tmp_path: Path) -> None:
    data = write_pdf(tmp_path / "a.pdf", ["First page text.", "Second page text."], title="Two pages").read_bytes()
    found = extract("a.pdf", data, Limits())
    assert found.kind == "pdf" and found.title == "Two pages"
    assert [label for _, label in found.marks] == ["1", "2"]
    assert "Second page text." in found.text[found.marks[1][0] :]
    # A refusal inside the child comes back as its one line.
    with pytest.raises(ExtractionError, match=r"has 2 pages, more than library\.max_pages"):
        extract("a.pdf", data, Limits(max_pages=1))


def test_a_module_planted_in_the_working_directory_is_not_imported_by_the_pdf_reader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`python -m` puts the working directory first on sys.path, and `library add` runs where
    the user's downloads are: a `json.py` there (the child's first import) must not run."""
    data = write_pdf(tmp_path / "a.pdf", ["First page text."], title="One page").read_bytes()
    planted = tmp_path / "downloads"
    planted.mkdir()
    marker = tmp_path / "planted-ran"
    (planted / "json.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\nraise SystemExit(9)\n")
    monkeypatch.chdir(planted)
    found = extract("a.pdf", data, Limits())
    assert found.title == "One page" and not marker.exists()


@pytest.mark.parametrize(
    ("program", "reason"),
    [
        ("import os; os.abort()", r"crashed the PDF reader \(SIGABRT: a damaged or hostile PDF, or one needing"),
        ("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)", r"crashed the PDF reader \(SIGSEGV"),
        ("x = bytearray(1 << 62)", r"needs more than library.extract_memory_mb \(2,048 MB\)"),
        ("import sys; sys.exit(3)", r"stopped the PDF reader \(exit status 3"),
        ("print('{not json')", r"stopped the PDF reader"),
    ],
)
def test_a_child_that_dies_is_one_line(program: str, reason: str) -> None:
    with pytest.raises(ExtractionError, match=reason) as raised:
        extract_pdf(pdf_bytes(["A page."]), Limits(), command=[sys.executable, "-c", program])
    assert "\n" not in str(raised.value)


@pytest.mark.slow
def test_a_pdf_that_takes_too_long_is_refused_and_nothing_is_added(home: Home, tmp_path: Path) -> None:
    # Starting the child alone takes longer than this: the real child is killed at the limit.
    home.configure(library={"extract_timeout_s": 0.01})
    pdf = write_pdf(tmp_path / "slow.pdf", ["A page of text."])
    (tmp_path / "notes.md").write_text("# Notes\n\nStill added.\n")
    result = home.run("library", "add", str(pdf), str(tmp_path / "notes.md"))
    assert result.exit_code == 1
    assert f"error: {pdf}: took longer than library.extract_timeout_s (0.01 s) to read" in result.stderr
    assert "Traceback" not in result.stderr
    docs = Library(open_workspace(home.path, "default")).documents()
    assert [d.kind for d in docs] == ["markdown"]  # the other file is added, the PDF is not


def test_a_decompression_bomb_stays_inside_the_childs_memory_limit(home: Home, tmp_path: Path) -> None:
    # 160 MB of content from a few hundred KB: with 64 MB allowed, PDFium runs out of memory
    # in the child (it aborts); the command reports the file and carries on.
    home.configure(library={"extract_memory_mb": 64})
    (tmp_path / "bomb.pdf").write_bytes(deflate_bomb_pdf_bytes(160 << 20))
    (tmp_path / "notes.md").write_text("# Notes\n\nStill added.\n")
    result = home.run("library", "add", str(tmp_path / "bomb.pdf"), str(tmp_path / "notes.md"))
    assert result.exit_code == 1
    line = next(line for line in result.stderr.splitlines() if "bomb.pdf" in line)
    assert "crashed the PDF reader (SIGABRT" in line and "library.extract_memory_mb (64 MB)" in line
    docs = Library(open_workspace(home.path, "default")).documents()
    assert [d.kind for d in docs] == ["markdown"]


def test_the_isbn_printed_on_the_first_page_is_kept_and_a_wrong_check_digit_is_not(tmp_path: Path) -> None:
    """ISBN-13 and ISBN-10 from the first page's text, checked by their check digit."""
    book = write_pdf(
        tmp_path / "book.pdf",
        ["Designing Data-Intensive Applications. ISBN 978-1-4493-7332-0", "Chapter one."],
        title="Designing Data-Intensive Applications",
    ).read_bytes()
    assert extract("book.pdf", book, Limits()).isbn == "9781449373320"
    older = write_pdf(tmp_path / "older.pdf", ["Old book. ISBN: 0-306-40615-2"]).read_bytes()
    assert extract("older.pdf", older, Limits()).isbn == "0306406152"
    wrong = write_pdf(tmp_path / "wrong.pdf", ["A typo. ISBN 978-1-4493-7332-1"]).read_bytes()
    assert extract("wrong.pdf", wrong, Limits()).isbn == ""
    later = write_pdf(tmp_path / "later.pdf", ["No number here.", "ISBN 978-1-4493-7332-0 on page two"]).read_bytes()
    assert extract("later.pdf", later, Limits()).isbn == ""  # only the first page is the book's own
