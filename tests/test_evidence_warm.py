"""The evidence check's warm-up and what a process keeps between the pipeline's three checks:
the model is loaded only once a project has archived sources, the sources are cut into
windows ahead, and the next draft's check embeds only sentences it has not seen."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pensieve.config import Settings
from pensieve.evidence.hooks import align_file, warm_up
from pensieve.evidence.vectors import VECTORS_DIR, VectorCache, shared_cache
from pensieve.project.events import read_events
from pensieve.project.source_archive import SourceArchive
from pensieve.project.workspace import Project, open_workspace
from pensieve.topics.embedder import Embedder
from tests.conftest import Home
from tests.fakes.web_site import FakeSite
from tests.test_citations import P1, P2, TYPED_REFS, article, script_clean_run
from tests.test_evidence import INVENTED, CountingEmbedder, _project
from tests.test_web_pipeline import NOTES
from tests.web_fixtures import script_researcher


class Loads:
    """An embedder factory that counts how often the model is asked for."""

    def __init__(self) -> None:
        self.model = CountingEmbedder()
        self.asked = 0

    def __call__(self) -> Embedder:
        self.asked += 1
        return self.model


def test_no_archived_source_means_no_model_load(tmp_path: Path) -> None:
    project = Project(open_workspace(tmp_path, "default"), "empty")
    project.dir.mkdir(parents=True)
    loads = Loads()
    warm_up(project, loads)
    assert loads.asked == 0


def test_a_warm_up_never_raises(tmp_path: Path) -> None:
    project = _project(tmp_path)

    def broken() -> Embedder:
        raise RuntimeError("the model cannot load")

    warm_up(project, broken)  # the check itself reports it when it runs


@pytest.mark.slow
def test_warm_up_prepares_the_sources_and_the_next_draft_embeds_only_new_sentences(tmp_path: Path) -> None:
    project = _project(tmp_path)
    loads = Loads()
    embed: Callable[[], Embedder] = loads
    warm_up(project, embed)
    assert loads.asked == 1 and loads.model.texts == 0  # loaded, nothing embedded yet
    cache = shared_cache(project.dir / VECTORS_DIR, embed)
    kept: Any = cache._memory
    assert len(kept) == 1  # S1's windows, ready for the check

    first = "HNSW builds a layered proximity graph and searches it greedily from the top layer [S1]."
    (project.dir / "draft_v1.md").write_text(article(first, INVENTED))
    align_file(project, "draft_v1.md", Settings(), embed)
    embedded = loads.model.texts
    assert embedded > 2  # the windows its sentences need, and the two sentences

    # The reviser keeps one sentence and writes one new one: only the new one is embedded.
    (project.dir / "draft_v2.md").write_text(article(first, "Queries descend the layers one by one [S1]."))
    alignment = align_file(project, "draft_v2.md", Settings(), embed)
    assert alignment is not None
    # A short source has every window embedded by the first check: only the new sentence is.
    assert loads.model.texts - embedded == 1
    assert [s["verdict"] for s in alignment.sentences] == ["supported", "supported"]


@pytest.mark.slow
def test_a_recheck_reuses_the_verdicts_of_unchanged_pairs_never_what_was_done_to_them(tmp_path: Path) -> None:
    project = _project(tmp_path)
    embed: Callable[[], Embedder] = Loads()
    cache = shared_cache(project.dir / VECTORS_DIR, embed)
    kept: Any = cache._verdicts
    first = "HNSW builds a layered proximity graph and searches it greedily from the top layer [S1]."
    (project.dir / "draft_v1.md").write_text(article(first, INVENTED))
    before = align_file(project, "draft_v1.md", Settings(), embed)
    assert before is not None and len(kept) == 2
    verdicts = [s["verdict"] for s in before.sentences]
    assert verdicts[0] == "supported" and verdicts[1] != "supported"
    # What a later step does to the citations it is given (the fact check, the judge)...
    before.citations[1][0].verdict = "supported"
    before.citations[1][0].reasons.append("changed after the check")

    # ...is not what the next draft's check is told: it keeps both sentences, assesses
    # neither again, and gives the verdicts a fresh check gives.
    (project.dir / "draft_v2.md").write_text(article(INVENTED, first))
    again = align_file(project, "draft_v2.md", Settings(), embed)
    assert again is not None and len(kept) == 2
    assert [s["verdict"] for s in again.sentences] == verdicts[::-1]
    assert "changed after the check" not in again.citations[0][0].reasons
    fresh = align_file(project, "draft_v2.md", Settings(), embed, cache=VectorCache(None, embed))
    assert fresh is not None and [s["citations"] for s in fresh.sentences] == [s["citations"] for s in again.sentences]
    again.citations[0][0].reasons.append("changed after the re-check")
    third = align_file(project, "draft_v1.md", Settings(), embed)
    assert third is not None and [s["verdict"] for s in third.sentences] == verdicts
    assert not [r for r in third.citations[1][0].reasons if r.startswith("changed")]

    # A source whose text changed is a new pair: the claim is assessed against its new text.
    source = project.dir / "sources" / "S1.md"
    source.write_text(source.read_text().replace("greedily from the top layer", "by random restarts"))
    changed = align_file(project, "draft_v2.md", Settings(), embed)
    assert changed is not None and len(kept) == 4
    assert changed.sentences[1]["citations"] != again.sentences[1]["citations"]


@pytest.mark.slow
def test_a_run_that_checks_no_evidence_never_loads_the_embedding_model(web_home: Home, site: FakeSite) -> None:
    """The warm-up starts when the first source is archived, but only for a run that will
    check a draft: `--until outliner` archives pages and must not pay ~10 s loading the model
    (it did: the outliner's start warmed up for the drafter's check of a later run)."""
    pid = web_home.new()
    script_researcher(web_home, site, NOTES)
    # A process of its own, so what it imports is its own (PYTHONPROFILEIMPORTTIME lists it).
    done = subprocess.run(
        [sys.executable, "-m", "pensieve", "run", pid, "--until", "outliner", "--quiet"],
        env={**os.environ, "PYTHONPROFILEIMPORTTIME": "1"},
        cwd=web_home.path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (web_home.project_dir(pid) / "outline.md").is_file()
    assert list((web_home.project_dir(pid) / "sources").glob("S*.md"))  # pages were archived
    assert "| torch" not in done.stderr and "sentence_transformers" not in done.stderr


@pytest.mark.slow
def test_the_drafts_check_runs_beside_the_reviewers_and_the_reviser_waits_for_it(
    web_home: Home, site: FakeSite
) -> None:
    """Nothing is sent back for draft_v1, so its check (seconds when cold) no longer holds
    the three reviewers back; the reviser, which is given the check's list, starts after it."""
    pid = web_home.new()
    script_clean_run(web_home, site, draft=article(P1, INVENTED, P2) + TYPED_REFS)
    assert web_home.run("run", pid, "--until", "reviser", "--quiet").exit_code == 0
    order = [(e["kind"], e["stage"]) for e in read_events(web_home.project_dir(pid) / "events.jsonl")]
    checked = order.index(("evidence", "drafter"))
    assert order.index(("stage_start", "fact_checker")) < checked < order.index(("stage_start", "reviser"))
    task = web_home.model.for_stage("reviser")[0].messages[1]["content"]
    assert "14 not found in S1" in task  # the list of the check it waited for


TOPICS = ["lighthouse", "glacier", "orchard", "volcano", "harbour", "desert", "monsoon", "canyon", "meadow", "tundra"]
DEEDS = ["surveyed", "mapped", "photographed", "measured", "sampled", "charted"]


def _field_note(n: int) -> str:
    return f"In {1900 + n} the team {DEEDS[n % 6]} the {TOPICS[n % 10]} near station {n} for {n % 7 + 2} weeks"


def _long_project(tmp_path: Path) -> Project:
    """One archived source of 120 sentences, far more windows than a check embeds for a claim."""
    project = Project(open_workspace(tmp_path, "default"), "long")
    project.dir.mkdir(parents=True)
    body = " ".join(f"{_field_note(n)}." for n in range(120))
    url = "https://a.example/field-notes"
    SourceArchive(project.dir).add(
        url=url, final_url=url, title="Field notes", content_type="text/plain", body=body.encode(), text=body
    )
    return project


@pytest.mark.slow
def test_warm_up_embeds_ahead_the_windows_the_research_notes_cite(tmp_path: Path) -> None:
    """The draft restates the notes: the windows their cited sentences need are embedded while
    the stages wait for their model, so the draft's check embeds only its own sentences."""
    project = _long_project(tmp_path)
    notes = [f"{_field_note(17)} [S1].", f"{_field_note(42)} [S1]."]
    (project.dir / "research_notes.md").write_text("# Research notes\n\n" + "\n".join(f"- {n}" for n in notes) + "\n")
    loads = Loads()
    warm_up(project, loads)
    ahead = loads.model.texts
    windows = len(next(iter(shared_cache(project.dir / VECTORS_DIR, loads)._memory.values()))[0])
    assert 0 < ahead < windows / 2  # the windows those two sentences need, not the whole source
    (project.dir / "draft_v1.md").write_text(article(*notes))
    alignment = align_file(project, "draft_v1.md", Settings(), loads)
    assert alignment is not None and [s["verdict"] for s in alignment.sentences] == ["supported", "supported"]
    assert loads.model.texts - ahead == 2  # its two sentences, and no window


@pytest.mark.slow
def test_a_check_that_begins_stops_the_warm_up_embedding_ahead(tmp_path: Path) -> None:
    project = _long_project(tmp_path)
    (project.dir / "research_notes.md").write_text(f"- {_field_note(17)} [S1].\n")
    stop = threading.Event()
    stop.set()
    loads = Loads()
    warm_up(project, loads, stop=stop)
    assert loads.asked >= 1 and loads.model.texts == 0  # loaded and prepared, nothing embedded
