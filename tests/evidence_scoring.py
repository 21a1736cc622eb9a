"""The labelled evidence set and how the detector is scored on it: one definition for the
floor test (tests/test_evidence.py) and the benchmark (bench/bench_evidence.py)."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pensieve.evidence.align import Thresholds, assess_pairs
from pensieve.topics.embedder import get_embedder

LABELS = Path(__file__).parent / "data" / "evidence_labels.jsonl"


def load_labels() -> list[dict[str, Any]]:
    return [json.loads(line) for line in LABELS.read_text().splitlines() if line.strip()]


@dataclass
class LabelScore:
    """weak+unsupported (flagged) against the labels (not `supported`), without the judge."""

    tp: int = 0
    fp: int = 0
    fn: int = 0
    per: Counter[str] = field(default_factory=Counter)  # examples per category
    right: Counter[str] = field(default_factory=Counter)  # judged right per category

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp)

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn)

    @property
    def f1(self) -> float:
        return 2 * self.precision * self.recall / (self.precision + self.recall)


def score(rows: list[dict[str, Any]]) -> LabelScore:
    result = LabelScore()
    verdicts = assess_pairs([(r["sentence"], r["passage"]) for r in rows], get_embedder, Thresholds())
    for row, verdict in zip(rows, verdicts, strict=True):
        flagged = verdict.verdict != "supported"
        positive = row["label"] != "supported"
        result.tp += flagged and positive
        result.fp += flagged and not positive
        result.fn += positive and not flagged
        result.per[row["category"]] += 1
        result.right[row["category"]] += flagged == positive
    return result
