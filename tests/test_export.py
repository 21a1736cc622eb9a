"""`pensieve export`: every format read back structurally, the evidence bundle verified and
then tampered with, and the command's errors."""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import docx
import pytest
import yaml
from lxml import html as lxml_html  # type: ignore[import-untyped]
from markdown_it import MarkdownIt

from pensieve.status import load_status, save_status
from tests.conftest import Home
from tests.publish_fixtures import HOSTILE_TITLE, write_evidence, write_final

PROJECT = "vdb"
URLS = {
    "S1": "https://www.example.org/vector-indexes",
    "S2": "https://research.example.com/papers/ivf",
    "S3": "https://blog.example.net/pq",
    "S4": "https://evil.example/page",
}


@pytest.fixture
def project(home: Home) -> Path:
    home.new("How vector databases index embeddings", "--id", PROJECT)
    project_dir = home.project_dir(PROJECT)
    write_final(project_dir, hostile=True)
    status = load_status(project_dir / "status.json")
    for entry in status.stages.values():
        entry.status = "complete"
    save_status(project_dir / "status.json", status)
    return project_dir


def _export(home: Home, *args: str) -> Path:
    result = home.run("export", PROJECT, *args)
    assert result.exit_code == 0, result.stderr
    path = Path(result.stdout.strip())
    assert path.exists()
    return path


def assert_safe_page(page: str) -> lxml_html.HtmlElement:
    """No script, no external resource, nothing executable; returns the parsed tree."""
    tree = lxml_html.fromstring(page)
    assert not tree.xpath("//script | //iframe | //object | //embed | //img | //link | //base | //form")
    for element in tree.iter():
        if not isinstance(element.tag, str):
            continue
        for name, value in element.attrib.items():
            assert not name.lower().startswith("on"), (element.tag, name, value)
            assert not re.match(r"\s*(javascript|data|vbscript|file):", value, re.I), (name, value)
            if name == "src":
                raise AssertionError(f"<{element.tag} src={value}> loads a resource")
            if name == "href" and re.match(r"\s*(https?:)?//", value):
                assert element.tag == "a", f"<{element.tag} href={value}> loads a resource"
    for style in tree.xpath("//style"):
        assert "@import" not in style.text and "url(" not in style.text
    assert not tree.xpath("//*[@style]")
    csp = tree.xpath("//meta[@http-equiv='Content-Security-Policy']/@content")
    assert csp and "default-src 'none'" in csp[0] and "script-src" not in csp[0]
    return tree


def test_html_export(home: Home, project: Path) -> None:
    path = _export(home)
    assert path == project / "export" / f"{PROJECT}.html"
    page = path.read_text(encoding="utf-8")
    tree = assert_safe_page(page)
    assert tree.xpath("//title")[0].text == "How vector databases index embeddings"
    assert tree.xpath("//meta[@name='viewport']") and "@media print" in page and "max-width: 600px" in page
    references = {li.get("id"): li for li in tree.xpath("//ol[@class='references']/li")}
    assert set(references) == {f"ref-{sid}" for sid in URLS}
    cites = tree.xpath("//a[contains(concat(' ', @class, ' '), ' cite ')]")
    assert len(cites) == 10
    for cite in cites:
        target = cite.get("href")[1:]
        assert target in references
        number = references[target].get("value")
        assert cite.text_content().startswith(f"[{number}]")
    for sid, url in URLS.items():
        entry = references[f"ref-{sid}"]
        assert entry.xpath(".//a[@class='ref-url']/@href") == [url]
        assert re.search(r"Fetched \d{4}-\d{2}-\d{2}", entry.text_content())
    # Hostile text is shown as text.
    assert HOSTILE_TITLE.split(">")[0] + ">" in references["ref-S4"].text_content()
    assert "<script>window.__pwned=3</script>" in tree.xpath("//article")[0].text_content()
    # Without an evidence file: no passages, no verdicts claimed.
    assert {c.get("data-verdict") for c in cites} == {"unchecked"}
    assert "no evidence check yet" in page


def test_html_marks_unsupported_and_stale_evidence(home: Home, project: Path) -> None:
    write_evidence(project, verdicts={"S3": "unsupported", "S2": "weak"})
    tree = lxml_html.fromstring(_export(home).read_text(encoding="utf-8"))
    for cite in tree.xpath("//a[@data-source='S3']"):
        assert cite.get("data-verdict") == "unsupported"
        assert "unsupported" in cite.text_content()
    assert "1 unsupported" in tree.xpath("//p[contains(@class, 'evidence-summary')]")[0].text_content()

    final = project / "final.md"
    final.write_text(final.read_text() + "\nOne more sentence added by hand.\n")
    result = home.run("export", PROJECT)
    assert result.exit_code == 0 and "evidence is stale for final.md" in result.stderr
    tree = lxml_html.fromstring(Path(result.stdout.strip()).read_text(encoding="utf-8"))
    assert "stale" in tree.xpath("//div[@class='notice']")[0].text_content()
    assert {c.get("data-verdict") for c in tree.xpath("//a[@data-verdict]")} == {"unchecked"}
    assert not tree.xpath("//*[contains(@class, 'passage')]") and not tree.xpath("//*[@class='meta evidence-summary']")


def test_a_damaged_evidence_entry_is_said_and_shows_no_verdict(home: Home, project: Path) -> None:
    from tests.publish_fixtures import damaged_evidence

    entry = write_evidence(project, verdicts={"S3": "unsupported"})["artifacts"]["final.md"]
    for damage, text in damaged_evidence(entry, "final.md").items():
        (project / "evidence.json").write_text(text)
        result = home.run("export", PROJECT)
        assert result.exit_code == 0, (damage, result.stderr)
        assert "cannot be read" in result.stderr or "is damaged" in result.stderr, damage
        tree = lxml_html.fromstring(Path(result.stdout.strip()).read_text(encoding="utf-8"))
        assert {c.get("data-verdict") for c in tree.xpath("//a[@data-verdict]")} == {"unchecked"}, damage


def test_docx_export(home: Home, project: Path) -> None:
    write_evidence(project, verdicts={"S3": "unsupported"})
    path = _export(home, "--format", "docx")
    assert path.name == f"{PROJECT}.docx"
    document = docx.Document(str(path))
    paragraphs = document.paragraphs
    styles = [(p.style.name if p.style is not None else "", p.text) for p in paragraphs]
    assert styles[0] == ("Title", "How vector databases index embeddings")
    headings = [text for style, text in styles if style == "Heading 1"]
    assert headings == ["Partitioning the space", "Trade-offs", "Hostile content", "References"]
    bullets = [text for style, text in styles if style == "List Bullet"]
    assert bullets[0] == "Graph indexes favour recall [1]."
    assert "[3] (unsupported)" in bullets[1]
    assert [text for style, text in styles if style == "List Number"] == ["Build the index.", "Tune the probes."]
    assert any(style == "No Spacing" and "IndexHNSWFlat" in text for style, text in styles)
    external = [h.url for p in paragraphs for h in p.hyperlinks if h.url]
    assert "https://github.com/facebookresearch/faiss/wiki" in external
    assert "javascript" not in " ".join(external) and "https://evil.example/pixel.png" in external
    internal = {h.fragment for p in paragraphs for h in p.hyperlinks if h.fragment}
    assert internal == {"ref_1", "ref_2", "ref_3", "ref_4"}
    references = paragraphs[[text for _, text in styles].index("References") + 1 :]
    assert len(references) == 4
    for number, (ref, sid) in enumerate(zip(references, URLS, strict=True), start=1):
        assert ref.text.startswith(f"{number}.")
        assert [h.url for h in ref.hyperlinks] == [URLS[sid]]
        assert f'w:name="ref_{number}"' in ref._p.xml
    assert "<script>window.__pwned=1</script>" in references[3].text  # literal text, nothing else
    assert document.core_properties.title == "How vector databases index embeddings"


@pytest.mark.skipif(shutil.which("soffice") is None, reason="LibreOffice (soffice) is not installed here")
def test_docx_opens_in_libreoffice(home: Home, project: Path, tmp_path: Path) -> None:
    path = _export(home, "--format", "docx")
    out = tmp_path / "converted"
    subprocess.run(
        ["soffice", "--headless", "--convert-to", "pdf", "--outdir", str(out), str(path)],
        check=True,
        timeout=120,
        capture_output=True,
    )
    assert (out / f"{PROJECT}.pdf").stat().st_size > 1000


def test_markdown_export(home: Home, project: Path) -> None:
    write_evidence(project, verdicts={"S2": "weak"})
    text = _export(home, "--format", "md", "--front-matter").read_text(encoding="utf-8")
    meta = yaml.safe_load(text.split("---\n")[1])
    assert meta["title"] == "How vector databases index embeddings"
    assert meta["sources"] == 4 and re.fullmatch(r"\d{4}-\d{2}-\d{2}", meta["date"])
    body = text.split("---\n", 2)[2]
    references = body.split("## References\n", 1)[1]
    for number, url in enumerate(URLS.values(), start=1):
        assert re.search(rf"^{number}\. .*Fetched \d{{4}}-\d{{2}}-\d{{2}}\. <{re.escape(url)}>$", references, re.M)
    assert "[2 (weak)]" in body and "[1]" in body
    # As a static site generator that lets HTML through would render it:
    rendered = MarkdownIt("commonmark", {"html": True}).render(body)
    tree = lxml_html.fromstring(f"<div>{rendered}</div>")
    assert not tree.xpath("//script | //iframe | //img")
    assert not [h for h in tree.xpath("//a/@href") if re.match(r"\s*(javascript|data):", h)]
    assert not [a for a in tree.xpath("//*") if any(k.startswith("on") for k in a.attrib)]
    # Without front matter the title is a heading.
    plain = _export(home, "--format", "md", "--output", str(project / "export" / "plain.md")).read_text()
    assert plain.startswith("# How vector databases index embeddings\n")


def test_json_export(home: Home, project: Path) -> None:
    write_evidence(project, verdicts={"S3": "unsupported"})
    data = json.loads(_export(home, "--output", str(project / "export" / "out.json")).read_text(encoding="utf-8"))
    assert data["schema"] == "pensieve.article/1" and data["title"] == "How vector databases index embeddings"
    assert data["evidence"]["status"] == "current"
    assert [s["heading"] for s in data["sections"]] == [
        None,
        "Partitioning the space",
        "Trade-offs",
        "Hostile content",
    ]
    numbers = {r["number"]: r for r in data["references"]}
    assert {r["source"]: r["url"] for r in data["references"]} == URLS
    cited = [c for s in data["sections"] for sentence in s["sentences"] for c in sentence["citations"]]
    assert len(cited) == 10
    for citation in cited:
        assert numbers[citation["number"]]["source"] == citation["source"]
    sentence = next(
        s for sec in data["sections"] for s in sec["sentences"] if s["text"].startswith("Quantization favours")
    )
    assert sentence["verdict"] == "unsupported" and sentence["citations"][0]["passage"] is None
    assert sentence["findings"] == ["97% is not in S3"]
    first = numbers[1]
    assert first["fetched_at"] and first["archive"]["file"] == "sources/S1.md" and first["site"] == "example.org"
    assert "<script" not in data["sections"][3]["html"]


def test_bundle_directory_verifies_then_fails_after_tampering(home: Home, project: Path) -> None:
    write_evidence(project)
    bundle = _export(home, "--bundle")
    assert bundle == project / "export" / f"{PROJECT}-bundle" and bundle.is_dir()
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert {f["path"] for f in manifest["files"]} == {
        "index.html",
        "final.md",
        "evidence.json",
        *(f"sources/{sid}.txt" for sid in URLS),
    }
    assert all(s["fetched_at"] and s["text_sha256"] for s in manifest["sources"])
    tree = assert_safe_page((bundle / "index.html").read_text(encoding="utf-8"))
    for sid, url in URLS.items():
        entry = tree.xpath(f"//li[@id='ref-{sid}']")[0]
        hrefs = entry.xpath(".//a/@href")
        assert url in hrefs and f"sources/{sid}.txt" in hrefs
        assert (bundle / "sources" / f"{sid}.txt").read_text().startswith("---\n")
    assert json.loads((bundle / "evidence.json").read_text())["artifacts"]["final.md"]

    ok = home.run("export", "--verify", str(bundle))
    assert ok.exit_code == 0 and "bundle OK: 7 files" in ok.stdout, ok.stderr

    source = bundle / "sources" / "S2.txt"
    source.write_text(source.read_text().replace("k-means", "magic"))
    bad = home.run("export", "--verify", str(bundle))
    assert bad.exit_code == 1 and "sources/S2.txt: sha256 differs" in bad.stderr

    # Exporting again replaces the bundle; then an added and a removed file both fail it.
    _export(home, "--bundle")
    assert home.run("export", "--verify", str(bundle)).exit_code == 0
    (bundle / "sources" / "S9.txt").write_text("planted")
    (bundle / "evidence.json").unlink()
    bad = home.run("export", "--verify", str(bundle))
    assert bad.exit_code == 1
    assert "evidence.json: missing" in bad.stderr and "sources/S9.txt: not in the manifest" in bad.stderr


def test_bundle_zip(home: Home, project: Path, tmp_path: Path) -> None:
    target = tmp_path / "out" / "article.zip"
    assert _export(home, "--bundle", "--format", "docx", "--output", str(target)) == target
    with zipfile.ZipFile(target) as archive:
        names = set(archive.namelist())
        assert {"index.html", "manifest.json", "evidence.json", "article.docx", "sources/S1.txt"} <= names
        members = {name: archive.read(name) for name in names}
    assert docx.Document(io.BytesIO(members["article.docx"])).paragraphs[0].text.startswith("How vector")
    assert json.loads(members["evidence.json"]) == {"version": 1, "generated_at": None, "artifacts": {}}
    assert home.run("export", "--verify", str(target)).exit_code == 0

    members["index.html"] = members["index.html"].replace(b"Vector databases", b"Vector DBs")
    with zipfile.ZipFile(target, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    bad = home.run("export", "--verify", str(target))
    assert bad.exit_code == 1 and "index.html: sha256 differs" in bad.stderr


def test_warns_when_the_stage_is_not_complete(home: Home, project: Path) -> None:
    status = load_status(project / "status.json")
    status.stages["polisher"].status = "error"
    save_status(project / "status.json", status)
    result = home.run("export", PROJECT)
    assert result.exit_code == 0
    assert "warning: the Polisher is error in status.json: final.md may not be its latest version" in result.stderr


def test_export_of_a_draft(home: Home, project: Path) -> None:
    draft = (
        "# Draft title\n\nA claim [S2]. Another [S1, S3].\n\n## References\n\n"
        f"- [S2] Inverted - {URLS['S2']}\n- [S1] Vector - {URLS['S1']}\n- [S3] PQ - {URLS['S3']}\n"
    )
    (project / "draft_v2.md").write_text(draft)
    tree = assert_safe_page(_export(home, "--file", "draft_v2.md", "--output", "d.html").read_text())
    assert (home.path / "d.html").is_file()  # relative to the working directory
    assert tree.xpath("//h1")[0].text == "Draft title"
    assert [li.get("id") for li in tree.xpath("//ol[@class='references']/li")] == ["ref-S2", "ref-S1", "ref-S3"]
    assert [a.text_content() for a in tree.xpath("//a[@data-source]")] == ["[1]", "[2]", "[3]"]


def _error(home: Home, *args: str) -> str:
    result = home.run("export", *args)
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in result.stderr
    return lines[0]


def test_cli_errors(home: Home, project: Path, tmp_path: Path) -> None:
    home.new("Unfinished article about B-trees", "--id", "btrees")
    message = _error(home, "btrees")
    assert "btrees is not finished: final.md is missing (the Polisher has not run)" in message
    assert not (home.project_dir("btrees") / "export").exists()
    assert "draft_v1.md is missing (the Drafter has not run)" in _error(home, "btrees", "--file", "draft_v1.md")
    assert "unknown format 'pdf'" in _error(home, PROJECT, "--format", "pdf")
    assert "html, docx, md, json" in _error(home, PROJECT, "--format", "pdf")
    assert "a zip is an evidence bundle" in _error(home, PROJECT, "--output", "x.zip")
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    assert f"cannot write {blocker}/out.html" in _error(home, PROJECT, "--output", str(blocker / "out.html"))
    assert "is a directory" in _error(home, PROJECT, "--output", str(tmp_path))
    assert "exists and is not a Pensieve bundle" in _error(home, PROJECT, "--bundle", "--output", str(tmp_path))
    assert "file name" in _error(home, PROJECT, "--file", "../vdb/final.md")
    for inside in ("final.md", "sources/S1.md", "notes.html"):
        assert "is inside the project vdb" in _error(home, PROJECT, "--format", "md", "--output", str(project / inside))
    assert "HNSW" in (project / "final.md").read_text()
    assert "not a markdown artifact" in _error(home, PROJECT, "--file", "status.json")
    assert "--front-matter applies to --format md" in _error(home, PROJECT, "--front-matter")
    assert "unknown project 'nope'" in _error(home, "nope")
    assert "no project given" in _error(home)
    assert "no bundle at" in _error(home, "--verify", str(tmp_path / "missing.zip"))
    assert "neither a bundle directory nor a zip" in _error(home, "--verify", str(blocker))
    # Nothing half-written anywhere.
    assert not list(tmp_path.rglob(".tmp-*")) and not (project / "export").exists()


def _modules_after(*args: str) -> set[str]:
    code = (
        "import sys, runpy\n"
        f"sys.argv = ['pensieve', *{list(args)!r}]\n"
        "try:\n    runpy.run_module('pensieve', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "print('\\n'.join(sorted(sys.modules)), file=sys.stderr)\n"
    )
    repo = Path(__file__).resolve().parents[1]
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=repo, timeout=60)
    return set(proc.stderr.split())


def test_export_loads_no_model_and_list_loads_no_renderer(home: Home, project: Path) -> None:
    modules = _modules_after("export", PROJECT, "--format", "docx")
    assert "pensieve.publish.docx" in modules
    assert not {m for m in modules if m.split(".")[0] in {"litellm", "torch", "sentence_transformers", "openai"}}
    for args in (("--help",), ("list",)):
        light = _modules_after(*args)
        assert "pensieve.cli" in light
        assert not {m for m in light if m.split(".")[0] in {"markdown_it", "docx", "lxml"}}, args


RICH = """# Rich

Intro [1].

1. first
2. second
   - nested bullet [2]

> A quotation [1].

| Index | Recall |
|---|---|
| HNSW [1] | 0.95 |

### Sub heading

3. a list that starts at three
4. four

## References

1. Vector indexes explained - https://www.example.org/vector-indexes
2. IVF - https://research.example.com/papers/ivf
"""


def test_docx_structure_of_lists_quotes_and_tables(tmp_path: Path) -> None:
    from pensieve.publish.document import load_article
    from pensieve.publish.docx import docx_export
    from tests.publish_fixtures import add_sources

    add_sources(tmp_path)
    (tmp_path / "final.md").write_text(RICH)
    document = docx.Document(io.BytesIO(docx_export(load_article(tmp_path), exported_at="2026-11-23T18:00:00Z")))
    styles = [(p.style.name if p.style is not None else "", p.text) for p in document.paragraphs]
    assert ("List Bullet 2", "nested bullet [2]") in styles
    assert ("Quote", "A quotation [1].") in styles
    assert ("Heading 2", "Sub heading") in styles
    numbered = [p for p in document.paragraphs if p.style is not None and p.style.name == "List Number"]
    assert [p.text for p in numbered] == ["first", "second", "a list that starts at three", "four"]
    num_ids = [int(p._p.xpath("./w:pPr/w:numPr/w:numId/@w:val")[0]) for p in numbered]
    assert num_ids[0] == num_ids[1] != num_ids[2] == num_ids[3]  # the second list restarts
    numbering = document.part.numbering_part.element
    starts = [numbering.num_having_numId(n).xpath("./w:lvlOverride/w:startOverride/@w:val") for n in num_ids[1:3]]
    assert starts == [["1"], ["3"]]
    [table] = document.tables
    assert [[c.text for c in row.cells] for row in table.rows] == [["Index", "Recall"], ["HNSW [1]", "0.95"]]


@pytest.mark.slow
def test_export_after_a_real_pipeline_run(home: Home) -> None:
    """The whole pipeline against the fake model, then every export of its final.md."""
    pid = home.new()
    assert home.run("export", pid).exit_code == 2  # not finished yet
    assert home.run("run", pid).exit_code == 0
    page = assert_safe_page(Path(home.run("export", pid).stdout.strip()).read_text(encoding="utf-8"))
    title = page.xpath("//h1")[0].text_content()
    assert title and page.xpath("//article//p")
    document = docx.Document(str(Path(home.run("export", pid, "--format", "docx").stdout.strip())))
    assert document.paragraphs[0].text == title
    data = json.loads(Path(home.run("export", pid, "--format", "json").stdout.strip()).read_text())
    assert data["title"] == title and data["sections"]
    bundle = Path(home.run("export", pid, "--bundle").stdout.strip())
    assert home.run("export", "--verify", str(bundle)).exit_code == 0
