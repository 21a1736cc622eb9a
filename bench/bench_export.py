"""Benchmark: `pensieve export` on a long article, per format.

Run: python bench/bench_export.py
Builds a project with 40 archived sources and a ~6,000-word final.md citing them 300 times
(with an evidence file for every cited sentence), then prints the time of each export
(HTML, DOCX, Markdown, JSON: best of 3 after a first run that pays the imports; a zip
bundle), the output sizes, and the bundle's verify time.
"""

from __future__ import annotations

import json
import re
import tempfile
import time
from pathlib import Path

from pensieve.citations.cited_sources import load_sources
from pensieve.citations.references import numbered_for_reader
from pensieve.evidence.store import summarize, well_formed
from pensieve.hashing import sha256_of_bytes
from pensieve.project.source_archive import SourceArchive
from pensieve.publish.bundle import verify_bundle
from pensieve.publish.export import export_project

SOURCES = 40
SECTIONS = 12
PARAGRAPHS = 5
WORDS = ["index", "vectors", "recall", "latency", "memory", "graph", "layer", "probe", "cell", "quantization", "code"]


def _project(root: Path) -> Path:
    project = root / "long"
    project.mkdir()
    archive = SourceArchive(project)
    for n in range(1, SOURCES + 1):
        text = " ".join(WORDS[(n + i) % len(WORDS)] for i in range(2_000)) + "."
        archive.add(
            url=f"https://site{n}.example/page",
            final_url=f"https://site{n}.example/page",
            title=f"Source number {n}",
            content_type="text/html",
            body=text.encode(),
            text=text,
        )
    lines = ["# A long article", ""]
    cite = 0
    for section in range(SECTIONS):
        lines += [f"## Section {section + 1}", ""]
        for _ in range(PARAGRAPHS):
            paragraph: list[str] = []
            for _ in range(5):
                cite += 1
                words = " ".join(WORDS[(cite + i) % len(WORDS)] for i in range(18))
                paragraph.append(f"{words.capitalize()} [S{cite % SOURCES + 1}].")
            lines += [" ".join(paragraph), ""]
    final = numbered_for_reader("\n".join(lines), load_sources(project))
    (project / "final.md").write_text(final)
    # Evidence for every cited sentence, by the evidence.json contract.
    sentences: list[dict[str, object]] = []
    # The reader's numbers back to archive ids (site N was archived as SN).
    number_to_id = {n: f"S{site}" for n, site in re.findall(r"^(\d+)\. .*site(\d+)\.example", final, re.M)}
    position = 0
    for sentence in final.split("\n## References")[0].split(". "):
        start = final.index(sentence, position)
        position = start + len(sentence)
        number = re.search(r"\[(\d+)\]", sentence)
        if number:
            sentences.append(
                {
                    "index": len(sentences),
                    "text": sentence,
                    "start": start,
                    "end": position,
                    "verdict": "supported",
                    "citations": [
                        {
                            "source": number_to_id[number.group(1)],
                            "verdict": "supported",
                            "score": 0.7,
                            "passage": {"text": "passage", "start": 0, "end": 7},
                            "missing": [],
                            "judge": None,
                        }
                    ],
                    "findings": [],
                }
            )
    sha256 = sha256_of_bytes(final.encode())
    entry = {"artifact_sha256": sha256, "summary": summarize(sentences), "sentences": sentences}
    # An entry that is not well formed is exported as no evidence: the figures would time less.
    assert well_formed(entry)
    evidence = {"version": 1, "generated_at": "2026-11-23T18:00:00Z", "artifacts": {"final.md": entry}}
    (project / "evidence.json").write_text(json.dumps(evidence))
    return project


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        project = _project(root)
        words = len((project / "final.md").read_text().split())
        print(f"article: {words} words, {SOURCES} sources, {SECTIONS * PARAGRAPHS * 5} citations")
        for fmt in ("html", "docx", "md", "json"):
            started = time.perf_counter()
            result = export_project(project, fmt=fmt)
            first = time.perf_counter() - started
            timings = []
            for _ in range(3):
                started = time.perf_counter()
                export_project(project, fmt=fmt)
                timings.append(time.perf_counter() - started)
            print(
                f"{fmt:6} {min(timings) * 1000:8.1f} ms (first, with imports: {first * 1000:6.1f} ms)"
                f"  {result.path.stat().st_size / 1024:8.1f} KiB"
            )
        started = time.perf_counter()
        result = export_project(project, bundle=True, output=root / "bundle.zip")
        elapsed = time.perf_counter() - started
        print(f"bundle {elapsed * 1000:8.1f} ms  {result.path.stat().st_size / 1024:8.1f} KiB (zip)")
        started = time.perf_counter()
        report = verify_bundle(result.path)
        elapsed = time.perf_counter() - started
        print(f"verify {elapsed * 1000:8.1f} ms  ok={report.ok} files={report.checked}")


if __name__ == "__main__":
    main()
