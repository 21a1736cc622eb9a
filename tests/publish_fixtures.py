"""A finished project for the export tests: archived sources, a final.md made by the
polisher's own transform, and a hand-written evidence.json in the schema pensieve.evidence
writes (README: the evidence.json contract), so that a test chooses each verdict and needs
no model. test_export.py::test_export_shows_the_evidence_the_real_check_computed exports
the evidence the real check (MiniLM) computes on this same project.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from lxml import html as lxml_html  # type: ignore[import-untyped]

from pensieve.citations.cited_sources import load_sources
from pensieve.citations.references import numbered_for_reader
from pensieve.hashing import sha256_of_bytes
from pensieve.project.source_archive import SourceArchive
from pensieve.project.status import load_status, save_status
from tests.conftest import Home

HOSTILE_TITLE = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2"> Evil "page"'

SOURCES = [
    (
        "https://www.example.org/vector-indexes",
        "Vector indexes explained",
        "HNSW builds a layered graph of neighbours. Each query walks down the layers. "
        "Recall above 95% is typical at modest memory cost.",
    ),
    (
        "https://research.example.com/papers/ivf",
        "Inverted file indexes for ANN search",
        "IVF partitions the space into cells with k-means. Only a few cells are probed per query.",
    ),
    (
        "https://blog.example.net/pq",
        "Product quantization in practice",
        "Product quantization compresses vectors into short codes, trading accuracy for memory.",
    ),
]

DRAFT = """# How vector databases index embeddings

Vector databases answer nearest-neighbour queries over millions of embeddings [S1].
HNSW builds a layered graph and walks it from the top layer down [S1].

## Partitioning the space

IVF splits the space into cells with k-means and probes only a few of them [S2, S3].

- Graph indexes favour recall [S1].
- Quantization favours memory: it cuts storage by 97% [S3].
- Inverted files sit in between [S2].

1. Build the index.
2. Tune the probes.

## Trade-offs

Every index trades **recall**, *latency* and memory; see the
[FAISS wiki](https://github.com/facebookresearch/faiss/wiki) for figures [S2].

```python
index = faiss.IndexHNSWFlat(d, 32)  # [S9] in code is not a citation
```
"""

HOSTILE_BODY = """
## Hostile content

A paragraph with <script>window.__pwned=3</script> and <img src=x onerror="window.__pwned=4"> inline [S4].

<iframe src="https://evil.example/"></iframe>

[click me](javascript:window.__pwned=5) and [data](data:text/html,<script>alert(1)</script>) and
[tab](java\tscript:alert(1)) and ![tracker](https://evil.example/pixel.png) [S4].
"""


def add_sources(project_dir: Path, hostile: bool = False) -> None:
    archive = SourceArchive(project_dir)
    entries = list(SOURCES)
    if hostile:
        entries.append(
            ("https://evil.example/page", HOSTILE_TITLE, 'Text with <script>window.__pwned=6</script> "quoted".')
        )
    for url, title, text in entries:
        archive.add(url=url, final_url=url, title=title, content_type="text/html", body=text.encode(), text=text)


def write_final(project_dir: Path, hostile: bool = False) -> str:
    """final.md as the polisher's transform writes it: [1] numbers and a reference list."""
    add_sources(project_dir, hostile)
    draft = DRAFT + (HOSTILE_BODY if hostile else "")
    final = numbered_for_reader(draft, load_sources(project_dir))
    (project_dir / "final.md").write_text(final, encoding="utf-8")
    return final


_SENTENCE = re.compile(r"[^.\n]*?(?:\[[\d, ]+\])[^.\n]*\.?")


def complete_project(home: Home, project_id: str) -> Path:
    """A project whose every stage is complete, with the hostile final article and its sources
    (what `pensieve export` needs)."""
    home.new("How vector databases index embeddings", "--id", project_id)
    project_dir = home.project_dir(project_id)
    write_final(project_dir, hostile=True)
    status = load_status(project_dir / "status.json")
    for entry in status.stages.values():
        entry.status = "complete"
    save_status(project_dir / "status.json", status)
    return project_dir


def write_evidence(
    project_dir: Path,
    name: str = "final.md",
    verdicts: dict[str, str] | None = None,
    sha256: str | None = None,
) -> dict[str, Any]:
    """evidence.json for `name`: every cited sentence, each citation with a verdict
    (`verdicts` by source id; default supported) and a passage from the source."""
    verdicts = verdicts or {}
    text = (project_dir / name).read_text(encoding="utf-8")
    body = text.split("\n## References", 1)[0]
    numbers = dict(re.findall(r"^(\d+)\. .* (https?://\S+)$", text, re.M))
    archive = SourceArchive(project_dir)
    sentences: list[dict[str, Any]] = []
    for match in _SENTENCE.finditer(body):
        sentence = match.group(0)
        cited: list[dict[str, Any]] = []
        for group in re.findall(r"\[([\d, ]+)\]", sentence):
            for number in re.findall(r"\d+", group):
                source = archive.find(numbers[number])
                assert source is not None
                verdict = verdicts.get(source.id, "supported")
                source_text = archive.text(source)
                cited.append(
                    {
                        "source": source.id,
                        "verdict": verdict,
                        "score": {"supported": 0.71, "weak": 0.45, "unsupported": 0.12}[verdict],
                        "passage": None
                        if verdict == "unsupported"
                        else {"text": source_text.split(".")[0] + ".", "start": 0, "end": 10},
                        "missing": ["97%"] if verdict != "supported" else [],
                        "judge": None,
                    }
                )
        if not cited:
            continue
        findings = [f"97% is not in {c['source']}" for c in cited if c["verdict"] != "supported"]
        rank = ["unsupported", "weak", "supported"]
        best = max((str(c["verdict"]) for c in cited), key=rank.index)
        sentences.append(
            {
                "index": len(sentences),
                "text": sentence.strip(),
                "start": match.start(),
                "end": match.end(),
                "verdict": best,
                "citations": cited,
                "findings": findings,
            }
        )
    counts = {v: sum(1 for s in sentences if s["verdict"] == v) for v in ("supported", "weak", "unsupported")}
    data = {
        "version": 1,
        "generated_at": "2026-11-23T18:00:00Z",
        "thresholds": {"supported": 0.55, "weak": 0.40},
        "artifacts": {
            name: {
                "artifact_sha256": sha256 or sha256_of_bytes((project_dir / name).read_bytes()),
                "summary": {
                    "cited_sentences": len(sentences),
                    **counts,
                    "supported_share": round(counts["supported"] / len(sentences), 3) if sentences else None,
                },
                "sentences": sentences,
            }
        },
    }
    (project_dir / "evidence.json").write_text(json.dumps(data, indent=2), encoding="utf-8")
    return data


def cited_reference(tree: lxml_html.HtmlElement, cite: lxml_html.HtmlElement) -> str:
    """The id of the reference a citation resolves to: its link's target (`ref-S2`), or,
    when it opens its passage, the reference the passage links to."""
    target = cite.get("href").removeprefix("#")
    if target.startswith("ref-"):
        return str(target)
    [passage] = tree.xpath(f"//*[@id='{target}']")
    assert passage is cite.getnext() and "passage" in passage.get("class").split(), target
    [link] = passage.xpath(".//a[@class='passage-ref']")
    assert link.text_content() == f"\u2192 reference {cite.text_content().split(']')[0][1:]}"
    return str(link.get("href").removeprefix("#"))


def damaged_evidence(entry: dict[str, Any], name: str) -> dict[str, str]:
    """evidence.json texts a hand edit or another program could leave instead of one holding
    `entry` for `name`, by what is wrong with them."""

    def document(**changes: Any) -> str:
        return json.dumps({"version": 1, "artifacts": {name: {**entry, **changes}}})

    first = entry["sentences"][0]
    return {
        "not JSON": "{not json",
        "an empty file": "",
        "artifacts that are not an object": json.dumps({"version": 1, "artifacts": [entry]}),
        "no summary": json.dumps(
            {"version": 1, "artifacts": {name: {k: v for k, v in entry.items() if k != "summary"}}}
        ),
        "a summary that is not an object": document(summary="2 of 3"),
        "a share that is not a number": document(summary={**entry["summary"], "supported_share": "high"}),
        "sentences that are not a list": document(sentences=5),
        "a sentence without a verdict": document(sentences=[{k: v for k, v in first.items() if k != "verdict"}]),
        "a citation that is not an object": document(sentences=[{**first, "citations": ["S1"]}]),
        "a passage without offsets": document(
            sentences=[{**first, "citations": [{**first["citations"][0], "passage": {"text": "x"}}]}]
        ),
    }
