"""The shared renderer (pensieve.publish.render): citations resolve to references, evidence
verdicts are visible, nothing from content is executable, no external resource."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from lxml import html as lxml_html  # type: ignore[import-untyped]

from pensieve.errors import UsageError
from pensieve.publish.render import render_article, safe_href
from tests.publish_fixtures import write_evidence, write_final


@pytest.fixture
def project(tmp_path: Path) -> Path:
    project_dir = tmp_path / "proj"
    project_dir.mkdir()
    write_final(project_dir, hostile=True)
    return project_dir


def _tree(fragment: str) -> lxml_html.HtmlElement:
    return lxml_html.fromstring(f"<div>{fragment}</div>")


def test_every_citation_resolves_to_a_reference(project: Path) -> None:
    art = render_article(project)
    assert art.title == "How vector databases index embeddings"
    body, refs = _tree(art.body_html), _tree(art.references_html)
    ref_ids = {li.get("id") for li in refs.xpath("//ol[@class='references']/li")}
    assert ref_ids == {"ref-S1", "ref-S2", "ref-S3", "ref-S4"}
    cites = body.xpath("//a[contains(concat(' ', @class, ' '), ' cite ')]")
    assert len(cites) == 10  # [1] x3, [2, 3] as two, [3], [2] x2, [4] x2
    for cite in cites:
        assert cite.get("href").removeprefix("#") in ref_ids
        assert cite.get("href") == f"#ref-{cite.get('data-source')}"
    # numbers follow the reference list
    numbers = {li.get("id"): li.get("value") for li in refs.xpath("//li[@value]")}
    for cite in cites:
        assert cite.text_content().startswith(f"[{numbers[cite.get('href')[1:]]}]")
    # the title is not repeated in the body, the typed reference list is replaced
    assert not body.xpath("//h1") and "References" not in art.body_html
    # brackets in code are not citations
    assert "[S9] in code" in body.xpath("//pre/code")[0].text
    assert art.evidence_status == "absent" and not body.xpath("//*[@class='passage']")


def test_hostile_content_is_escaped(project: Path) -> None:
    art = render_article(project, bundle_links=True)
    for fragment in (art.body_html, art.references_html):
        tree = _tree(fragment)
        assert not tree.xpath("//script | //iframe | //img | //object | //embed | //style")
        for element in tree.iter():
            for name, value in element.attrib.items():
                assert not name.lower().startswith("on"), (name, value)
                if name in ("href", "src"):
                    assert safe_href(value) is not None, value
                    assert not re.match(r"\s*(javascript|data|vbscript):", value, re.I)
        assert not tree.xpath("//*[@src]")
    assert "&lt;script&gt;window.__pwned=1" in art.references_html  # shown as text
    assert "javascript:" not in "".join(_tree(art.body_html).xpath("//a/@href"))


def test_safe_href() -> None:
    for bad in (
        "javascript:alert(1)",
        "JaVaScRiPt:x",
        "java\tscript:x",
        " data:text/html,x",
        "//evil.com/x",
        "vbscript:x",
        "file:///etc/passwd",
        "/\\evil.com",
    ):
        assert safe_href(bad) is None, bad
    for good in ("https://a.example/x", "http://b.example", "#ref-S1", "sources/S1.txt", "../x?y=1"):
        assert safe_href(good) is not None, good


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
