"""The shared renderer (pensieve.publish.render): citations resolve to references, evidence
verdicts are visible, nothing from content is executable, no external resource."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from lxml import html as lxml_html  # type: ignore[import-untyped]

from pensieve.errors import UsageError
from pensieve.publish.links import safe_link
from pensieve.publish.render import bundle_source_path, render_article
from tests.publish_fixtures import cited_reference, write_evidence, write_final


@pytest.fixture
def project(tmp_path: Path) -> Path:
    project_dir = tmp_path / "proj"
    project_dir.mkdir()
    write_final(project_dir, hostile=True)
    return project_dir


def _tree(fragment: str) -> lxml_html.HtmlElement:
    return lxml_html.fromstring(f"<div>{fragment}</div>")


@pytest.mark.parametrize("evidence", [False, True])
def test_every_citation_resolves_to_a_reference(project: Path, evidence: bool) -> None:
    if evidence:  # a citation then opens its passage, which links on to the reference
        write_evidence(project, verdicts={"S3": "unsupported", "S2": "weak"})
    art = render_article(project)
    assert art.title == "How vector databases index embeddings"
    body, refs = _tree(art.body_html), _tree(art.references_html)
    ref_ids = {li.get("id") for li in refs.xpath("//ol[@class='references']/li")}
    assert ref_ids == {"ref-S1", "ref-S2", "ref-S3", "ref-S4"}
    cites = body.xpath("//a[contains(concat(' ', @class, ' '), ' cite ')]")
    assert len(cites) == 10  # [1] x3, [2, 3] as two, [3], [2] x2, [4] x2
    for cite in cites:
        assert cited_reference(body, cite) == f"ref-{cite.get('data-source')}"
        if evidence:
            assert cite.get("href") == f"#{cite.getnext().get('id')}"
        else:
            assert cite.get("href") == f"#ref-{cite.get('data-source')}"
    ids = body.xpath("//@id")
    assert len(ids) == len(set(ids)) == (3 + 10 if evidence else 3)  # headings, passages
    # numbers follow the reference list
    numbers = {li.get("id"): li.get("value") for li in refs.xpath("//li[@value]")}
    for cite in cites:
        assert cite.text_content().startswith(f"[{numbers[cited_reference(body, cite)]}]")
    # the title is not repeated in the body, the typed reference list is replaced
    assert not body.xpath("//h1") and "References" not in art.body_html
    # brackets in code are not citations
    assert "[S9] in code" in body.xpath("//pre/code")[0].text
    assert (art.evidence_status == "current") is evidence
    assert bool(body.xpath("//*[contains(@class, 'passage')]")) is evidence
    assert [h.get("id") for h in body.xpath("//h2")] == [
        "sec-partitioning-the-space",
        "sec-trade-offs",
        "sec-hostile-content",
    ]


def test_hostile_content_is_escaped(project: Path) -> None:
    art = render_article(project, bundle_links=True)
    for fragment in (art.body_html, art.references_html):
        tree = _tree(fragment)
        assert not tree.xpath("//script | //iframe | //img | //object | //embed | //style")
        for element in tree.iter():
            for name, value in element.attrib.items():
                assert not name.lower().startswith("on"), (name, value)
                if name in ("href", "src"):  # the rule's, or the bundle's own copy of a source
                    own = value == bundle_source_path(value.removeprefix("sources/").removesuffix(".txt"))
                    assert safe_link(value) is not None or own, value
                    assert not re.match(r"\s*(javascript|data|vbscript):", value, re.I)
        assert not tree.xpath("//*[@src]")
    assert "&lt;script&gt;window.__pwned=1" in art.references_html  # shown as text
    assert "javascript:" not in "".join(_tree(art.body_html).xpath("//a/@href"))


def test_evidence_verdicts_are_visible(project: Path) -> None:
    write_evidence(project, verdicts={"S3": "unsupported", "S2": "weak"})
    art = render_article(project)
    body = _tree(art.body_html)
    verdicts = {a.get("data-source"): a.get("data-verdict") for a in body.xpath("//a[@data-verdict]")}
    assert verdicts == {"S1": "supported", "S2": "weak", "S3": "unsupported", "S4": "supported"}
    for cite in body.xpath("//a[@data-source='S3']"):
        assert "unsupported" in cite.text_content()  # the mark is text, not only a colour
        passage = cite.getnext()
        assert "passage" in passage.get("class") and "No supporting passage" in passage.text_content()
    for cite in body.xpath("//a[@data-source='S1']"):
        assert "HNSW builds a layered graph of neighbours." in cite.getnext().text_content()
    assert art.evidence_status == "current" and not art.warnings
    refs = _tree(art.references_html)
    assert "unsupported" in refs.xpath("//li[@id='ref-S3']//details/summary")[0].text_content()


def test_a_citation_is_bound_to_its_word_and_its_punctuation(project: Path) -> None:
    """No line break before a citation, nor between it and the punctuation after it (the
    browser test measures the lines; this is the markup that makes them)."""
    final = project / "final.md"
    # A citation that starts a line of the markdown source follows its word all the same.
    final.write_text(final.read_text().replace("for figures [2].", "for figures\n[2]."))
    write_evidence(project, verdicts={"S3": "unsupported", "S2": "weak"})
    art = render_article(project)
    assert not re.search(r"\s(<span class=\"cite-run\">)?<a class=\"cite ", art.body_html)
    body = _tree(art.body_html)
    runs = body.xpath("//span[@class='cite-run']")
    assert len(runs) == 9  # one per group; [2, 3] is one
    for run in runs:
        before = run.getprevious().tail if run.getprevious() is not None else run.getparent().text
        if run.xpath("preceding-sibling::a[contains(@class, 'cite')]"):
            continue  # the last item of [2, 3]: bound to the first, which is bound to the word
        assert before.endswith("\u00a0"), before
        cite, passage = run.xpath("./a[contains(@class, 'cite')]")[0], run.xpath("./span")[-1]
        assert cite.tail == "." and "passage" in passage.get("class")  # the full stop inside
    assert "for figures\u00a0" in body.text_content()


def test_stale_evidence_is_not_shown_as_current(project: Path) -> None:
    write_evidence(project, verdicts={"S3": "unsupported"}, sha256="0" * 64)
    art = render_article(project)
    assert art.evidence_status == "stale"
    assert any("stale" in w for w in art.warnings)
    body = _tree(art.body_html)
    assert {a.get("data-verdict") for a in body.xpath("//a[@data-verdict]")} == {"unchecked"}
    assert not body.xpath("//*[contains(@class, 'passage')]")
    assert "supported" not in art.references_html


def test_unknown_citation_is_marked_not_linked(project: Path) -> None:
    final = project / "final.md"
    final.write_text(final.read_text().replace("top layer down [1]", "top layer down [S77]"))
    art = render_article(project)
    unresolved = _tree(art.body_html).xpath("//span[contains(@class, 'cite-unresolved')]")
    assert [u.text_content() for u in unresolved] == ["[S77?]"]
    assert any("S77" in w for w in art.warnings)


def test_missing_artifact_names_what_is_missing(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"not finished: final\.md is missing \(the Polisher has not run\)"):
        render_article(tmp_path)
    with pytest.raises(UsageError, match="file name"):
        render_article(tmp_path, "../etc/passwd")


def test_reference_entry_not_in_the_archive_is_unresolved(project: Path) -> None:
    final = project / "final.md"
    text = re.sub(
        r"^4\. .*$", "4. A page that was never fetched - https://gone.example/page", final.read_text(), flags=re.M
    )
    final.write_text(text)
    art = render_article(project)
    unresolved = _tree(art.body_html).xpath("//span[contains(@class, 'cite-unresolved')]")
    assert [u.text_content() for u in unresolved] == ["[4?]", "[4?]"]
    assert "ref-S4" not in art.references_html
    assert any("4" in w and "no archived source" in w for w in art.warnings)


def test_sentence_split_keeps_citations_with_their_sentence() -> None:
    from pensieve.publish.json_export import split_sentences

    one, two = "\ue0000\ue001", "\ue0001\ue001"
    assert split_sentences(f"First claim {one}. Second one.{two} Third \u201cquoted.\u201d Last") == [
        f"First claim {one}.",
        f"Second one.{two}",
        "Third \u201cquoted.\u201d",
        "Last",
    ]
    assert split_sentences("Version 3.5 is out! Really?  Yes") == ["Version 3.5 is out!", "Really?", "Yes"]


def test_evidence_matches_the_text_as_read_with_universal_newlines(project: Path) -> None:
    # The evidence check reads artifacts with Path.read_text: CRLF files are hashed and
    # offset as LF text.
    write_evidence(project, verdicts={"S3": "unsupported"})
    final = project / "final.md"
    final.write_bytes(final.read_bytes().replace(b"\n", b"\r\n"))
    art = render_article(project)
    assert art.evidence_status == "current"
    verdicts = {a.get("data-source"): a.get("data-verdict") for a in _tree(art.body_html).xpath("//a[@data-verdict]")}
    assert verdicts["S3"] == "unsupported" and verdicts["S1"] == "supported"


def test_numbered_entry_matched_by_title_when_its_url_is_an_identifier(project: Path) -> None:
    # With bibliographic metadata an entry may give the work's doi.org URL, not the page's.
    final = project / "final.md"
    final.write_text(final.read_text().replace("https://blog.example.net/pq", "https://doi.org/10.1000/pq.1"))
    art = render_article(project)
    assert {a.get("data-source") for a in _tree(art.body_html).xpath("//a[@data-source]")} == {"S1", "S2", "S3", "S4"}
    assert not art.warnings


def test_author_year_citations_when_labels_are_available(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An article in author-year style (the bibliographic-metadata issue): inline labels
    resolve through `author_year_labels` when the citation code provides it."""
    from pensieve.citations import references

    names = {"S1": "Malkov & Yashunin, 2018", "S2": "Jégou et al., 2011", "S3": "example.net", "S4": "Evil"}
    monkeypatch.setattr(references, "author_year_labels", lambda sources: names, raising=False)
    (project / "final.md").write_text(
        "# Title\n\nGraphs win (Malkov & Yashunin, 2018). Cells too (Jégou et al., 2011; example.net).\n"
        "Not a citation (see above).\n\n## References\n\n"
        "- Jégou, H. (2011). Inverted file indexes for ANN search. https://doi.org/10.1/x\n"
        "- Malkov, Y. (2018). Vector indexes explained. https://www.example.org/vector-indexes\n"
        "- example.net. Product quantization in practice. https://blog.example.net/pq\n"
    )
    art = render_article(project)
    cites = _tree(art.body_html).xpath("//a[@data-source]")
    assert [(a.get("data-source"), a.text_content()) for a in cites] == [("S1", "[1]"), ("S2", "[2]"), ("S3", "[3]")]
    assert "(see above)" in art.body_html and not art.warnings


def test_reference_text_drops_bidi_and_control_characters() -> None:
    from pensieve.project.source_archive import ArchivedSource
    from pensieve.publish.references import reference_parts

    source = ArchivedSource(
        id="S1",
        url="https://a.example/x",
        final_url="https://a.example/x",
        title="Safe\u202e txt.exe\x07 title\u200b",
        fetched_at="2026-11-23T10:00:00Z",
        sha256="0" * 64,
        size=1,
        content_type="text/html",
        file="sources/S1.md",
        raw_file="",
    )
    parts = reference_parts(source)
    assert parts.title == "Safe txt.exe title" and parts.label == "a.example" and parts.fetched == "2026-11-23"
    assert parts.text() == "a.example. Safe txt.exe title. Fetched 2026-11-23. https://a.example/x"
