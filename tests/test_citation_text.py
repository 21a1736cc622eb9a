"""Pure citation machinery: normalisation, parsing, generated references, the check."""

from __future__ import annotations

from pensieve.article.blocks import split_references
from pensieve.article.citations import cited_ids
from pensieve.article.tables import parse_fact_table, quoted_spans, split_table_row
from pensieve.article.words import normalize
from pensieve.citations.check import run_check
from pensieve.citations.cited_sources import CitedSource
from pensieve.citations.references import numbered_for_reader, source_list, with_references, with_source_list

SOURCES = {
    "S1": CitedSource(
        "S1",
        "https://a.example/one",
        "https://a.example/one",
        "First page",
        "2026-11-20T10:00:00Z",
        "B-trees keep   data sorted and allow searches in logarithmic time.",
    ),
    "S2": CitedSource(
        "S2",
        "https://b.example/two",
        "https://b.example/2",
        "Second [page]",
        "2026-11-21T10:00:00Z",
        "The \u201cleaf nodes\u201d hold the keys; inter\u00adnal nodes route.",
    ),
}


def test_normalize_folds_quotes_whitespace_soft_hyphens_and_case() -> None:
    assert normalize("The \u201cLeaf\u201d  nodes\n\tHOLD") == "the 'leaf' nodes hold"
    assert normalize("inter\u00adnal \u2018route\u2019") == "internal 'route'"
    assert normalize("a\u00a0b\u2009c") == "a b c"
    assert normalize("x \u2014 y") == "x - y"
    assert normalize("ﬁle") == "file"  # NFKC ligature


def test_cited_ids_in_order_of_first_use() -> None:
    text = "One [S2]. Two [S1, S3]. Three [S2][S4]. Not a citation [see S5] or [Sx]."
    assert cited_ids(text) == ["S2", "S1", "S3", "S4"]


def test_split_references_takes_the_last_reference_heading() -> None:
    text = "# T\n\n## Sources of error\n\nBody.\n\n## References\n\n- [S1] x\n\n## Appendix\n\nMore.\n"
    body, refs = split_references(text)
    assert refs is not None and refs.startswith("## References") and "- [S1] x" in refs
    assert "## Appendix" in body and "## Sources of error" in body


def test_fact_table_parsing_and_quoted_spans() -> None:
    table = (
        "| # | Claim | Cited id | Verdict | Evidence |\n|---|---|---|---|---|\n"
        "| 1 | B-trees are logarithmic | S1 | Supported | \u201callow searches in logarithmic time\u201d [S1] |\n"
        "| 2 | Leaves hold values | [S2] | **not found** | - |\n"
    )
    rows = parse_fact_table(table)
    assert [(r.number, r.verdict, r.cited) for r in rows] == [("1", "supported", ["S1"]), ("2", "not found", ["S2"])]
    assert quoted_spans(rows[0].evidence) == ["allow searches in logarithmic time"]
    assert quoted_spans(rows[1].evidence) == []


def test_pipes_inside_cells_stay_in_their_cell() -> None:
    """Seen by hand on an article about the `|` operator: `X \\| Y` in a claim moved every
    later cell one to the right, and the contract complained about the verdict."""
    assert split_table_row('| 1 | union `X | Y` types | S2 | supported | "X \\| Y" [S2] |') == [
        "1",
        "union `X | Y` types",
        "S2",
        "supported",
        '"X | Y" [S2]',
    ]
    assert split_table_row("a | b") == ["a", "b"]
    assert split_table_row("| ``a|b`` | `unclosed | c |") == ["``a|b``", "`unclosed", "c"]
    table = (
        "| # | claim | cited id | verdict | evidence |\n|---|---|---|---|---|\n"
        '| 1 | `X \\| Y` is sugar for `Union[X, Y]` | S2 | supported | "X \\| Y" [S2] |\n'
    )
    (row,) = parse_fact_table(table)
    assert (row.claim, row.verdict, row.cited, row.cells, row.columns) == (
        "`X | Y` is sugar for `Union[X, Y]`",
        "supported",
        ["S2"],
        5,
        5,
    )
    assert quoted_spans(row.evidence) == ["X | Y"]


def test_generated_lists() -> None:
    assert source_list(SOURCES).splitlines()[2:] == [
        "- [S1] First page - https://a.example/one (fetched 2026-11-20)",
        "- [S2] Second (page) - https://b.example/2 (fetched 2026-11-21)",
    ]
    notes = with_source_list("# Notes\n\nA [S2].\n\n## Sources\n\n- made up http://x.example\n", SOURCES)
    assert "made up" not in notes and notes.count("## Sources") == 1
    draft = with_references(
        "# D\n\nFirst [S2], then [S1] and [S9].\n\n## References\n\n1. http://typed.example\n"
        "\n## Revision notes\n\n- claim 1: fixed\n",
        SOURCES,
    )
    assert "typed.example" not in draft
    assert draft.index("- [S2]") < draft.index("- [S1]") < draft.index("## Revision notes")
    final = numbered_for_reader("# F\n\nFirst [S2]. Then [S1, S2]. Bad [S9].\n\n## Revision notes\n\nx\n", SOURCES)
    assert "First [1]. Then [2, 1]. Bad [S9]." in final
    # APA-like entries: no author or date is known of these pages, so the title leads, then (n.d.) and the site.
    assert (
        "1. Second (page). (n.d.). b.example. https://b.example/2\n2. First page. (n.d.). a.example. https://a.example/one"
        in final
    )
    assert "Revision notes" not in final


def test_clean_texts_pass_with_figures() -> None:
    para = "B-trees keep data sorted and allow fast searches for any key at all [S1]."
    draft = with_references(f"# D\n\n{para}\n\nLeaves hold the keys in every single tree we know [S2].\n", SOURCES)
    final = numbered_for_reader(draft, SOURCES)
    facts = (
        "| # | claim | cited | verdict | evidence |\n|---|---|---|---|---|\n"
        '| 1 | sorted | S1 | supported | "keep data sorted" [S1] |\n'
        "| 2 | leaves | S2 | supported | \u201cthe 'leaf nodes' hold the keys; internal nodes route\u201d [S2] |\n"
    )
    report = run_check({"draft_v1.md": draft, "final.md": final, "fact_check.md": facts}, SOURCES, 0.5)
    assert report.ok, report.problems
    assert report.files["final.md"].cited_share == 1.0
    assert report.quotes_checked == 2 and report.citations_checked == 2 + 2 + 2


def test_each_problem_is_caught_by_name() -> None:
    draft = (
        "# D\n\nA claim that cites an id nobody archived at any point [S7].\n\n"
        "A claim with a bare link https://never.example/page that was not fetched.\n\n"
        "## References\n\n- [S1] First page - https://a.example/one\n- [S1] First page - https://a.example/one\n"
    )
    facts = (
        "| # | claim | cited | verdict | evidence |\n|---|---|---|---|---|\n"
        '| 1 | x | S1 | supported | "B-trees are always balanced by magic" [S1] |\n'
        '| 2 | y | S2 | contradicted | "leaf nodes" [S2] |\n'
    )
    v2 = "# V2\n\nText that cites properly, as it should for every paragraph [S1].\n\n## Revision notes\n\n- ok\n"
    report = run_check(
        {"draft_v1.md": draft, "fact_check.md": facts, "draft_v2.md": with_references(v2, SOURCES)}, SOURCES, 0.9
    )
    kinds = {(p.file, p.kind) for p in report.problems}
    assert ("draft_v1.md", "unknown_citation") in kinds
    assert ("draft_v1.md", "unfetched_url") in kinds
    assert ("draft_v1.md", "duplicate_reference") in kinds
    assert ("draft_v1.md", "orphan_reference") in kinds
    assert ("draft_v1.md", "low_citation_share") in kinds
    assert ("fact_check.md", "quote_not_in_source") in kinds
    assert ("draft_v2.md", "unaddressed_claim") in kinds
    details = " ".join(p.detail for p in report.problems)
    assert "[S7]" in details and "https://never.example/page" in details and "claim 2" in details


def test_a_url_that_redirected_to_an_archived_page_counts_as_fetched() -> None:
    redirected = CitedSource(
        "S3",
        "https://c.example/p",
        "https://c.example/p",
        "Third",
        "2026-11-21T10:00:00Z",
        "text",
        also=("https://short.example/x",),
    )
    text = "# D\n\nA claim that links the short URL https://short.example/x and one that does not exist.\n"
    problems = run_check({"draft_v1.md": text}, {"S3": redirected}, 0.0).problems
    assert [p.kind for p in problems] == []
    problems = run_check({"draft_v1.md": text + "\nSee https://never.example/\n"}, {"S3": redirected}, 0.0).problems
    assert [p.kind for p in problems] == ["unfetched_url"]


def test_mcp_urls_in_a_reference_list_are_checked_like_web_urls() -> None:
    wiki = CitedSource(
        "S3",
        "mcp://wiki/search?query=falcon",
        "mcp://wiki/search?query=falcon",
        "search (wiki)",
        "2026-11-22T10:00:00Z",
        "The Falcon index rebuilds nightly.",
    )
    sources = {**SOURCES, "S3": wiki}
    body = "# F\n\nThe index rebuilds nightly [1]. Trees stay sorted [2].\n\n## References\n\n"
    good = body + "1. search (wiki). mcp://wiki/search?query=falcon\n2. First page - https://a.example/one\n"
    assert run_check({"final.md": good}, sources, 0.0).problems == []
    # The URL of another query of the same tool: not the source's, and never archived.
    wrong = body + "1. search (wiki). mcp://wiki/search?query=other\n2. First page - https://a.example/one\n"
    problems = run_check({"final.md": wrong}, sources, 0.0).problems
    assert {p.kind for p in problems} == {"unfetched_url"}
    assert "mcp://wiki/search?query=other" in problems[0].detail
    listed = "# D\n\nA claim [S3].\n\n## References\n\n- [S3] search (wiki) - mcp://wiki/search?query=other\n"
    kinds = {p.kind for p in run_check({"draft_v1.md": listed}, sources, 0.0).problems}
    assert kinds == {"unfetched_url", "reference_mismatch"}


def test_final_reference_list_must_match_numbers() -> None:
    final = "# F\n\nOne [1]. Two [3].\n\n## References\n\n1. First page - https://a.example/one\n2. x - https://b.example/2\n"
    kinds = {p.kind for p in run_check({"final.md": final}, SOURCES, 0.0).problems}
    assert kinds == {"missing_reference", "orphan_reference"}
