"""Hostile input against the studio (issue 26): every page rendered with artifacts, topics,
sources and evidence holding ordinary links, code, tables and hostile markup; the live
feeds' bounds; the run lock read one way everywhere; cookies of other localhost apps; the
first-visit redirect; malformed archives and bodies; the token's form."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pensieve.stages import STAGES
from tests.conftest import Home
from tests.publish_fixtures import DRAFT, HOSTILE_BODY
from tests.publish_fixtures import write_evidence as publish_evidence
from tests.publish_fixtures import write_final
from tests.studio_support import HOSTILE, client, make_project, workspace

TABLE = """
| Index | Recall | Memory |
|-------|--------|--------|
| HNSW  | 0.98   | high   |
| IVF   | 0.92   | `low`  |
"""

# What a model or a web page may put in any artifact: ordinary links (inline, reference,
# autolink, in-document), code, a table, and markup that must stay inert.
RICH = (
    DRAFT
    + TABLE
    + "\nSee [the paper](https://arxiv.org/abs/1603.09320 \"HNSW\"), <https://example.org/auto>, "
    + "[below](#trade-offs) and [ref][faiss].\n\n[faiss]: https://faiss.ai/\n\n"
    + "Inline `code <b>` and a mail link <mailto:someone@example.org>.\n"
    + HOSTILE_BODY
    + "\n"
    + HOSTILE
    + "\n"
)

TOPIC = """---
title: Vector indexes <script>window.__pwned=7</script>
summary: What HNSW and IVF trade
tags: [ann, indexes]
updated: 2026-11-20
---
HNSW builds a layered graph ([Vector indexes explained](https://www.example.org/vector-indexes)).

## Sources
- [S1] [Vector indexes explained](https://www.example.org/vector-indexes)
- [evil](javascript:window.__pwned=8)
""" + TABLE


def _inert(text: str, where: str) -> None:
    assert "<script>window" not in text and "<img src=x" not in text and "<iframe" not in text, where
    assert 'href="javascript:' not in text and 'href="data:' not in text and "<div onclick" not in text, where


@pytest.fixture
def rich(home: Home) -> Path:
    """A finished project whose every artifact, source, evidence and topic is rich and hostile."""
    project = make_project("rich")
    for stage in STAGES:
        (project / stage.writes).write_text(f"# {stage.name}\n\n{RICH}", encoding="utf-8")
    write_final(project, hostile=True)
    publish_evidence(project, verdicts={"S3": "weak", "S4": "unsupported"})
    topics = workspace().root / "topics"
    topics.mkdir(parents=True, exist_ok=True)
    (topics / "vector-indexes.md").write_text(TOPIC, encoding="utf-8")
    return project


def test_every_page_renders_links_code_tables_and_keeps_hostile_markup_inert(rich: Path) -> None:
    c = client()
    pages = ["/", "/new", "/topics", "/queue", "/projects/rich", "/projects/rich/read", "/projects/rich/sources"]
    pages += ["/projects/rich/diff", "/projects/rich/diff?a=draft_v1.md&b=draft_v2.md"]
    pages += [f"/projects/rich/sources/S{i}" for i in range(1, 5)]
    for stage in STAGES:
        pages += [f"/projects/rich/files/{stage.writes}", f"/projects/rich/files/{stage.writes}?edit=1"]
    for path in pages:
        response = c.get(path, headers={"accept": "text/html"})
        assert response.status_code == 200, (path, response.text[:300])
        _inert(response.text, path)
    page = c.get("/projects/rich/files/outline.md").text
    # Links are links (with rel on outside ones), code is code, tables are tables.
    assert '<a href="https://arxiv.org/abs/1603.09320" title="HNSW" rel="noopener noreferrer nofollow">' in page
    assert '<a href="https://faiss.ai/" rel="noopener noreferrer nofollow">ref</a>' in page
    assert '<a href="#trade-offs">below</a>' in page
    assert "<table>" in page and "<td>HNSW</td>" in page
    assert "<code>code &lt;b&gt;</code>" in page and '<code class="language-python">' in page
    topics = c.get("/topics").text
    assert '<a href="https://www.example.org/vector-indexes" rel="noopener noreferrer nofollow">' in topics
    assert "<table>" in topics and "&lt;script&gt;window.__pwned=7" in topics
    # The API answers the same files as data.
    assert c.get("/api/projects/rich/files/outline.md").json()["text"].endswith(HOSTILE + "\n")
    assert re.search(r"S4", c.get("/projects/rich/sources").text)
    assert json.loads(c.get("/api/topics").text)["topics"][0]["slug"] == "vector-indexes"
