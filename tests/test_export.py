"""`pensieve export`: every format read back structurally, the evidence bundle verified and
then tampered with, and the command's errors."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import docx
import pytest
import yaml
from lxml import html as lxml_html  # type: ignore[import-untyped]
from markdown_it import MarkdownIt

from pensieve.project.status import load_status, save_status
from pensieve.project.workspace import atomic_write_bytes
from tests.conftest import Home
from tests.publish_fixtures import HOSTILE_TITLE, cited_reference, complete_project, write_evidence, write_final

PROJECT = "vdb"
URLS = {
    "S1": "https://www.example.org/vector-indexes",
    "S2": "https://research.example.com/papers/ivf",
    "S3": "https://blog.example.net/pq",
    "S4": "https://evil.example/page",
}


@pytest.fixture
def project(home: Home) -> Path:
    return complete_project(home, PROJECT)


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
        target = cited_reference(tree, cite)
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
    # Readers get the article: no verdict, no passage, no "1 unsupported" unless asked.
    plain = lxml_html.fromstring(_export(home).read_text(encoding="utf-8"))
    assert {c.get("data-verdict") for c in plain.xpath("//a[@data-verdict]")} == {"unchecked"}
    assert not plain.xpath("//*[contains(@class, 'flag')] | //*[contains(@class, 'passage')]")
    assert not plain.xpath("//*[contains(@class, 'evidence-summary')]")
    assert "no evidence check yet" not in plain.text_content()
    tree = lxml_html.fromstring(_export(home, "--evidence-marks").read_text(encoding="utf-8"))
    # Each citation opens its passage, which links to the reference.
    references = {li.get("id"): li.get("value") for li in tree.xpath("//ol[@class='references']/li")}
    cites = tree.xpath("//a[contains(concat(' ', @class, ' '), ' cite ')]")
    assert len(cites) == 10 and all(c.get("href").startswith("#ev-") for c in cites)
    for cite in cites:
        assert cite.text_content().startswith(f"[{references[cited_reference(tree, cite)]}]")
    for cite in tree.xpath("//a[@data-source='S3']"):
        assert cite.get("data-verdict") == "unsupported"
        assert "unsupported" in cite.text_content()
    assert "1 unsupported" in tree.xpath("//p[contains(@class, 'evidence-summary')]")[0].text_content()

    final = project / "final.md"
    final.write_text(final.read_text() + "\nOne more sentence added by hand.\n")
    result = home.run("export", PROJECT, "--evidence-marks")
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
    unmarked = docx.Document(str(_export(home, "--format", "docx")))
    assert not [p.text for p in unmarked.paragraphs if "unsupported" in p.text]
    path = _export(home, "--format", "docx", "--evidence-marks")
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
    # A profile of its own: a LibreOffice already running for the user (or another test
    # worker) would otherwise take the job over, or refuse it.
    profile = f"-env:UserInstallation={(tmp_path / 'lo-profile').as_uri()}"
    subprocess.run(
        ["soffice", profile, "--headless", "--convert-to", "pdf", "--outdir", str(out), str(path)],
        check=True,
        timeout=120,
        capture_output=True,
    )
    assert (out / f"{PROJECT}.pdf").stat().st_size > 1000


def test_markdown_export(home: Home, project: Path) -> None:
    write_evidence(project, verdicts={"S2": "weak"})
    unmarked = _export(home, "--format", "md").read_text(encoding="utf-8")
    assert "(weak)" not in unmarked and "[2]" in unmarked
    text = _export(home, "--format", "md", "--front-matter", "--evidence-marks").read_text(encoding="utf-8")
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


def _tampered(manifest: dict[str, Any], change: str) -> bytes:
    """manifest.json changed by one of the cases below."""
    files, sources = manifest["files"], manifest["sources"]
    if change == "not json":
        return b'{"format": "pensieve-evidence-bundle", '
    if change == "not utf-8":
        return b"\xff\xfe{}"
    if change == "not an object":
        return json.dumps([manifest]).encode()
    if change == "too deep":
        return b"[" * 100_000 + b"]" * 100_000
    edits: dict[str, Callable[[], object]] = {
        "text_file a list": lambda: sources[0].update(text_file=["x"]),
        "text_sha256 a number": lambda: sources[1].update(text_sha256=7),
        "source id missing": lambda: sources[2].pop("id"),
        "source a string": lambda: sources.__setitem__(0, "S1"),
        "sources an object": lambda: manifest.update(sources={"S1": {}}),
        "files missing": lambda: manifest.pop("files"),
        "files a string": lambda: manifest.update(files="index.html"),
        "file entry a list": lambda: files.__setitem__(0, ["index.html"]),
        "path a number": lambda: files[0].update(path=1),
        "sha256 null": lambda: files[1].update(sha256=None),
        "bytes a string": lambda: files[2].update(bytes="12"),
        "bytes a boolean": lambda: files[2].update(bytes=True),
    }
    edits[change]()
    return json.dumps(manifest).encode()


MALFORMED = {
    "not json": "the file is malformed (not JSON:",
    "not utf-8": "the file is malformed (not JSON:",
    "not an object": "the file is malformed (a list, not an object)",
    "too deep": "the file is malformed (not JSON:",
    "text_file a list": "sources[0].text_file is malformed (a list, expected a string or null)",
    "text_sha256 a number": "sources[1].text_sha256 is malformed (a number, expected a string or null)",
    "source id missing": "sources[2].id is malformed (missing)",
    "source a string": "sources[0] is malformed (a string, expected an object)",
    "sources an object": "sources is malformed (an object, expected a list or null)",
    "files missing": "files is malformed (missing)",
    "files a string": "files is malformed (a string, expected a list)",
    "file entry a list": "files[0] is malformed (a list, expected an object)",
    "path a number": "files[0].path is malformed (a number, expected a string)",
    "sha256 null": "files[1].sha256 is malformed (null, expected a string)",
    "bytes a string": "files[2].bytes is malformed (a string, expected an integer)",
    "bytes a boolean": "files[2].bytes is malformed (a boolean, expected an integer)",
}


def test_a_malformed_manifest_fails_verification_in_one_line(home: Home, project: Path) -> None:
    bundle = _export(home, "--bundle")
    manifest_file = bundle / "manifest.json"
    original = manifest_file.read_bytes()
    for change, expected in MALFORMED.items():
        manifest_file.write_bytes(_tampered(json.loads(original), change))
        result = home.run("export", "--verify", str(bundle))
        lines = result.stderr.strip().splitlines()
        assert result.exit_code == 1 and len(lines) == 1, (change, result.stderr)
        assert lines[0].startswith(f"error: manifest.json: {expected}"), (change, lines[0])
        assert f"bundle {bundle} cannot be verified" in lines[0] and "Traceback" not in result.stderr
    manifest_file.write_bytes(original)
    assert home.run("export", "--verify", str(bundle)).exit_code == 0


def test_a_bundle_missing_a_cited_source_says_so_and_does_not_verify(home: Home, project: Path) -> None:
    (project / "sources" / "S2.md").unlink()  # archived text lost (a hand clean-up, a bad restore)
    result = home.run("export", PROJECT, "--bundle")
    assert result.exit_code == 0
    assert "warning: S2 is cited but its archived text is missing; not in the bundle" in result.stderr
    bundle = Path(result.stdout.strip())
    sources = {s["id"]: s for s in json.loads((bundle / "manifest.json").read_text())["sources"]}
    assert sources["S2"]["text_file"] is None and sources["S1"]["text_file"] == "sources/S1.txt"
    assert not (bundle / "sources" / "S2.txt").exists()
    verify = home.run("export", "--verify", str(bundle))
    assert verify.exit_code == 1 and "bundle OK" not in verify.stdout
    assert "mismatch: S2: cited, but its archived text is not in the bundle" in verify.stderr


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


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_exports_get_the_mode_the_umask_allows(home: Home, project: Path, tmp_path: Path, umask: int) -> None:
    """Exports are made to be shared: not 0600 like the project's state files."""
    previous = os.umask(umask)
    try:
        paths = [_export(home, "--format", fmt) for fmt in ("html", "docx", "md", "json")]
        paths.append(_export(home, "--bundle", "--output", str(tmp_path / "b.zip")))
        bundle = _export(home, "--bundle")
        state = project / "state-like.json"
        atomic_write_bytes(state, b"{}")
    finally:
        os.umask(previous)
    for path in [*paths, *(p for p in bundle.rglob("*") if p.is_file())]:
        assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask, path
    for directory in (bundle, bundle / "sources", project / "export"):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o777 & ~umask, directory
    assert stat.S_IMODE(state.stat().st_mode) == 0o600  # everything else Pensieve writes stays private


def test_export_from_another_workspace(home: Home, project: Path) -> None:
    home.new("B-trees in another workspace", "--id", "btrees", "-w", "team")
    other = home.project_dir("btrees", "team")
    write_final(other)
    write_evidence(other, verdicts={"S2": "weak"})
    for flag in ("-w", "--workspace"):
        result = home.run("export", "btrees", flag, "team", "--format", "json")
        assert result.exit_code == 0, result.stderr
        path = Path(result.stdout.strip())
        assert path == other / "export" / "btrees.json"
        data = json.loads(path.read_text())
        assert data["project"] == "btrees" and data["evidence"]["status"] == "current"
    bundle = Path(home.run("export", "btrees", "-w", "team", "--bundle").stdout.strip())
    assert bundle == other / "export" / "btrees-bundle" and home.run("export", "--verify", str(bundle)).exit_code == 0
    # Each workspace finds only its own projects.
    assert "unknown project 'btrees'" in _error(home, "btrees")
    assert "unknown project 'vdb'" in _error(home, PROJECT, "-w", "team")
    assert "invalid workspace" in _error(home, "btrees", "-w", "../team")
    assert not (project / "export").exists()


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
    # Only a regular file is replaced: a FIFO (or a device node) stays what it was.
    fifo = tmp_path / "pipe.html"
    os.mkfifo(fifo)
    assert f"{fifo} is a FIFO, not a regular file" in _error(home, PROJECT, "--output", str(fifo))
    zip_fifo = tmp_path / "pipe.zip"
    os.mkfifo(zip_fifo)
    assert f"{zip_fifo} is a FIFO, not a regular file" in _error(home, PROJECT, "--bundle", "--output", str(zip_fifo))
    assert f"{fifo} is a FIFO, not a bundle directory" in _error(home, PROJECT, "--bundle", "--output", str(fifo))
    assert "is a FIFO: neither a bundle directory nor a zip" in _error(home, "--verify", str(zip_fifo))
    assert stat.S_ISFIFO(fifo.lstat().st_mode) and stat.S_ISFIFO(zip_fifo.lstat().st_mode)
    link = tmp_path / "link.html"
    link.symlink_to(tmp_path / "elsewhere.html")
    assert "is a symbolic link, not a regular file" in _error(home, PROJECT, "--output", str(link))
    assert link.is_symlink() and not (tmp_path / "elsewhere.html").exists()
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
        assert "pensieve.cli.main" in light
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


def _words(text: str | None) -> str | None:
    return " ".join(text.split()) if text is not None else None


@pytest.mark.slow
def test_export_shows_the_evidence_the_real_check_computed(home: Home, project: Path) -> None:
    """`pensieve evidence` with the real MiniLM model on the fixture project, then the HTML
    and JSON exports: every citation carries the verdict, score and passage evidence.json
    has for it, in order (the other tests use hand-written evidence)."""
    assert home.run("evidence", PROJECT).exit_code == 0
    entry = json.loads((project / "evidence.json").read_text())["artifacts"]["final.md"]
    computed = [
        (c["source"], c["verdict"], _words(c["passage"]["text"]) if c["passage"] else None)
        for sentence in entry["sentences"]
        for c in sentence["citations"]
    ]
    assert len(computed) == 10 and {v for _, v, _ in computed} >= {"supported", "unsupported"}

    data = json.loads(_export(home, "--format", "json").read_text())
    assert data["evidence"]["status"] == "current" and data["evidence"]["summary"] == entry["summary"]
    exported = [
        (c["source"], c["verdict"], _words(c["passage"]))
        for section in data["sections"]
        for sentence in section["sentences"]
        for c in sentence["citations"]
    ]
    assert exported == computed
    findings = {f for s in entry["sentences"] for f in s["findings"]}
    assert findings == {f for sec in data["sections"] for s in sec["sentences"] for f in s["findings"]}

    tree = assert_safe_page(_export(home, "--evidence-marks").read_text(encoding="utf-8"))
    shown = []
    for cite in tree.xpath("//a[contains(concat(' ', @class, ' '), ' cite ')]"):
        passage = cite.getnext()
        quote = passage.xpath(".//span[@class='passage-text']")[0].text_content()
        text = None if quote == "No supporting passage was found in this source." else _words(quote[1:-1])
        shown.append((cite.get("data-source"), cite.get("data-verdict"), text))
        assert passage.get("class") == f"passage passage-{cite.get('data-verdict')}"
    assert shown == computed
    summary = entry["summary"]
    line = tree.xpath("//p[contains(@class, 'evidence-summary')]")[0].text_content()
    assert f"{summary['unsupported']} unsupported" in line and f"{summary['supported']} supported" in line


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


def test_json_sentences_are_the_sentences_the_evidence_check_judged() -> None:
    """One sentence splitter (evidence.segment): an abbreviation or an initial ends no
    sentence in the JSON export either, and a citation stays with the sentence it closes."""
    from pensieve.article.sentences import split_sentences as evidence_sentences
    from pensieve.publish.json_export import split_sentences

    cite = "\ue0003\ue001"
    text = f"HNSW was described by Malkov et al. in 2016, e.g. for search. {cite} It is fast! Dr. Li agrees."
    assert split_sentences(text) == [
        f"HNSW was described by Malkov et al. in 2016, e.g. for search. {cite}",
        "It is fast!",
        "Dr. Li agrees.",
    ]
    plain = text.replace(f" {cite}", " [S3]")
    assert [s.text for s in evidence_sentences(plain, 0, len(plain))] == [
        s.replace(f" {cite}", " [S3]") for s in split_sentences(text)
    ]
