"""The library inside a run: the researcher searches and reads a PDF, the article cites it
[S1], and the evidence, `sources`, the exported references and the bundle name its page.
Reading lists (`new --source`) and library-only research (`research.web: false`)."""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path

import pytest

from pensieve.errors import UsageError
from tests.conftest import Home
from tests.fakes.model_server import call
from tests.fakes.web_site import FakeSite
from tests.library_files import write_pdf
from tests.test_citations import article, fact_table, write
from tests.test_library import RAFT_PAGES, raft_pdf

CLAIM = (
    "If a follower receives no communication over a period called the election timeout, "
    "it assumes there is no viable leader and begins an election [S1]."
)
_WRAPPED = re.compile(r"<<<UNTRUSTED (\w+) source=workspace library search>>>\n(.*)\n<<<END UNTRUSTED \1>>>", re.S)


def _add_raft(home: Home, tmp_path: Path) -> str:
    pdf = raft_pdf(tmp_path)
    added = home.run("library", "add", str(pdf))
    assert added.exit_code == 0, added.stderr
    return added.stdout.strip()


def _script_rest(home: Home) -> None:
    home.model.script("drafter", *write("drafter", "draft_v1.md", article(CLAIM)))
    home.model.script(
        "fact_checker",
        *write("fact_checker", "fact_check.md", fact_table(("followers start elections", "S1", "supported", "p. 12"))),
    )
    home.model.script(
        "reviser", *write("reviser", "draft_v2.md", article(CLAIM) + "\n## Revision notes\n\n- Kept it short.\n")
    )
    home.model.script("polisher", *write("polisher", "final.md", article(CLAIM)))


@pytest.mark.slow
def test_the_article_cites_a_pdf_page_through_the_whole_pipeline(home: Home, tmp_path: Path) -> None:
    home.configure(contracts={"enabled": False})
    doc_id = _add_raft(home, tmp_path)
    pid = home.new("How Raft elects a leader")
    home.model.script(
        "researcher",
        call("search_library", {"query": "what followers do when the leader goes quiet"}),
        call("read_library_document", {"id": doc_id}),
        *write("researcher", "research_notes.md", "# Notes\n\n- Followers time out and start an election [S1].\n"),
    )
    _script_rest(home)
    result = home.run("run", pid, "--quiet")
    assert result.exit_code == 0, result.stderr

    researcher = home.model.for_stage("researcher")
    assert {"search_library", "read_library_document"} <= set(researcher[0].tool_names)
    match = _WRAPPED.search(researcher[1].last_tool_results[0])
    assert match, researcher[1].last_tool_results
    hits = json.loads(match.group(2))
    assert hits[0]["id"] == doc_id and hits[0]["page"] == "12" and "election timeout" in hits[0]["passage"]
    read = researcher[2].last_tool_results[0]
    assert read.startswith(f"Source S1 (library document {doc_id}, pdf): cite it as [S1]")
    assert "pages 11-13" in read and "\n[page 12]\n" in read and "[end of document]" in read

    # Archived like a fetched page, with its metadata and page map.
    (source,) = json.loads(home.run("sources", pid, "--json").stdout)
    assert source["id"] == "S1" and source["url"] == f"library://{doc_id}"
    assert source["authors"] == ["Diego Ongaro", "John Ousterhout"] and source["year"] == 2014
    project = home.project_dir(pid)
    assert (project / "sources" / "raw" / "S1.pdf").read_bytes()[:5] == b"%PDF-"

    # The evidence alignment finds the supporting passage, and its page.
    evidence = json.loads((project / "evidence.json").read_text())
    (sentence,) = evidence["artifacts"]["final.md"]["sentences"]
    (cited,) = sentence["citations"]
    assert sentence["verdict"] == "supported" and cited["passage"]["page"] == "12"

    # The references of every export name the work and the page.
    final = (project / "final.md").read_text()
    assert "Ongaro & Ousterhout, 2014" in final or "Ongaro" in final
    for fmt, name in (("md", "article.md"), ("json", "article.json"), ("html", "article.html")):
        out = tmp_path / name
        exported = home.run("export", pid, "--format", fmt, "-o", str(out))
        assert exported.exit_code == 0, exported.stderr
        assert "p. 12" in out.read_text(), fmt
        if fmt != "json":  # the JSON keeps the archive's record (requested_url); readers see no library:// link
            assert "library://" not in out.read_text(), fmt
    data = json.loads((tmp_path / "article.json").read_text())
    (reference,) = data["references"]
    assert reference["pages"] == "p. 12" and reference["title"] == "In Search of an Understandable Consensus Algorithm"
    assert reference["entry"].startswith("Ongaro & Ousterhout, 2014. In Search of an Understandable Consensus")
    bundle = tmp_path / "bundle.zip"
    assert home.run("export", pid, "--bundle", "-o", str(bundle)).exit_code == 0
    with zipfile.ZipFile(bundle) as archive:
        names = archive.namelist()
        assert "sources/S1.txt" in names, names
        assert b"p. 12" in archive.read(next(n for n in names if n.endswith(".html")))
    shown = home.run("evidence", pid)
    assert shown.exit_code == 0 and "p. 12" in shown.stdout


@pytest.mark.slow
def test_a_reading_list_is_archived_before_research_and_named_to_the_researcher(home: Home, tmp_path: Path) -> None:
    home.configure(contracts={"enabled": False})
    pdf = write_pdf(tmp_path / "raft.pdf", RAFT_PAGES, title="Raft paper", first_label=11)
    created = home.run("new", "How Raft elects a leader", "--source", str(pdf))
    assert created.exit_code == 0, created.stderr
    pid = created.stdout.strip()
    plan = json.loads((home.project_dir(pid) / "research.json").read_text())
    (doc_id,) = plan["reading_list"]
    assert json.loads(home.run("library", "list", "--json").stdout)[0]["id"] == doc_id
    home.model.script(
        "researcher",
        *write("researcher", "research_notes.md", "# Notes\n\n- Followers start elections [S1].\n"),
    )
    _script_rest(home)
    assert home.run("run", pid, "--quiet").exit_code == 0
    task = home.model.for_stage("researcher")[0].messages[1]["content"]
    assert "Reading list" in task and f"- S1: Raft paper (library document {doc_id}, 3 pages)" in task
    assert "read_library_document" in task
    assert [s["id"] for s in json.loads(home.run("sources", pid, "--json").stdout)] == ["S1"]


def test_a_source_that_cannot_be_added_creates_no_project(home: Home, tmp_path: Path) -> None:
    (tmp_path / "scan.pdf").write_bytes(b"%PDF-1.4\n%%EOF\n")
    created = home.run("new", "How Raft elects a leader", "--source", str(tmp_path / "scan.pdf"))
    assert created.exit_code == 2
    assert "--source" in created.stderr and "no project was created" in created.stderr
    assert not (home.path / "workspaces" / "default" / "projects").exists() or not any(
        (home.path / "workspaces" / "default" / "projects").iterdir()
    )


@pytest.mark.parametrize("how", ["flag", "config", "workspace"])
def test_library_only_research_offers_no_web_tool_and_the_site_sees_nothing(
    web_home: Home, site: FakeSite, how: str
) -> None:
    web_home.configure(contracts={"enabled": False})
    if how == "config":
        web_home.configure(research={"web": False})
        pid = web_home.new("How Raft elects a leader")
    elif how == "workspace":  # the user's file leaves the web on; this workspace's own file turns it off
        pid = web_home.new("How Raft elects a leader")
        (web_home.path / "workspaces" / "default" / "config.yaml").write_text("research:\n  web: false\n")
    else:
        pid = web_home.new("How Raft elects a leader", "--no-web")
    # A model that asks for the web anyway is refused by the dispatcher.
    web_home.model.script(
        "researcher",
        call("fetch_url", {"url": site.url("/article")}),
        call("web_search", {"query": "raft"}),
        *write("researcher", "research_notes.md", "# Notes\n\n- Raft elects leaders.\n"),
    )
    web_home.model.script(
        "fact_checker",
        call("fetch_url", {"url": site.url("/second")}),
        *write("fact_checker", "fact_check.md", fact_table(("Raft", "-", "unverified", "none"))),
    )
    result = web_home.run("run", pid, "--quiet")
    assert result.exit_code == 0, result.stderr
    for stage in ("researcher", "fact_checker"):
        names = web_home.model.for_stage(stage)[0].tool_names
        assert "web_search" not in names and "fetch_url" not in names, (stage, names)
        assert "search_library" in names and "read_library_document" in names
    refused = web_home.model.for_stage("researcher")[1].last_tool_results[0]
    assert refused.startswith("Error: fetch_url is not available: research.web is false")
    assert site.paths() == []  # not a page, not a robots.txt: nothing left the machine


def test_batch_items_sources_become_reading_lists(home: Home, tmp_path: Path) -> None:
    from pensieve.batch.items import add_sources, create_projects, read_items
    from pensieve.config import load_settings
    from pensieve.library.sources import load_plan
    from pensieve.project.workspace import open_workspace

    papers = tmp_path / "papers"
    papers.mkdir()
    write_pdf(papers / "raft.pdf", RAFT_PAGES, title="Raft paper")
    (papers / "notes.md").write_text("# Election notes\n\nFollowers become candidates.\n")
    batch = tmp_path / "briefs.yaml"
    batch.write_text(
        "- brief: How Raft elects a leader\n  id: raft\n  sources: [papers/raft.pdf, papers/notes.md]\n"
        "- brief: Why B-trees still matter\n  id: btrees\n"
    )
    workspace = open_workspace(home.path, "default")
    items = read_items(batch)
    assert items[0].sources == (str(papers / "raft.pdf"), str(papers / "notes.md"))
    reading = add_sources(workspace, batch, items, load_settings())
    projects, created = create_projects(workspace, items, reading)
    assert created == 2
    ids = [d["id"] for d in json.loads(home.run("library", "list", "--json").stdout)]
    assert load_plan(projects[0].dir).reading_list == tuple(ids) and len(ids) == 2
    assert load_plan(projects[1].dir).reading_list == ()
    # A source that cannot be added refuses the batch, naming its line.
    batch.write_text("- brief: How Raft elects a leader\n  sources: [papers/missing.pdf]\n")
    with pytest.raises(UsageError, match=r"briefs.yaml:1: source .*missing.pdf: no such file or folder"):
        add_sources(workspace, batch, read_items(batch), load_settings())
    refused = home.run("batch", str(batch))
    assert refused.exit_code == 2 and "no such file or folder" in refused.stderr
