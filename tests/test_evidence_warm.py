"""The evidence check's warm-up and what a process keeps between the pipeline's three checks:
the model is loaded only once a project has archived sources, the sources are cut into
windows ahead, and the next draft's check embeds only sentences it has not seen."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pensieve.config import Settings
from pensieve.evidence.hooks import align_file, warm_up
from pensieve.evidence.vectors import VECTORS_DIR, shared_cache
from pensieve.project.events import read_events
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
