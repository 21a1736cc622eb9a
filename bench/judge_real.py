"""bench_evidence.py --judge-config: the real judge on the flagged pairs of the real set.

The pairs are judged by pensieve.evidence.judge.judge_pair through StageModelClient (litellm,
the retry policy, usage recording), as the pipeline's evidence check calls it; only the
configuration comes from the file given. Figures are per part (dev, held out): the same
pairs scored without the judge, then with its answers applied.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pensieve.config import Settings, load_settings
from pensieve.errors import StageFailed
from pensieve.evidence.align import Citation
from pensieve.evidence.hooks import confident_sentences
from pensieve.evidence.judge import judge_pair, needs_judge
from pensieve.model.client import StageModelClient
from pensieve.model.llm import LLMReply
from pensieve.project.events import EventBus
from pensieve.stages import EVIDENCE_JUDGE
from tests.evidence_scoring import REAL_SETS, RealScore, corpus_dir, load_real, real_citations, tally_real


@dataclass
class JudgeRun:
    config: Path | None
    limit: int | None = None
    concurrency: int = 1
    log: Path | None = None
    replay: Path | None = None  # a --judge-log of an earlier run: its replies, no model


@dataclass
class Replay:
    """The replies of an earlier run (its --judge-log), given again pair by pair: what a change
    of the judge's rules does to answers a model already gave, without asking it again."""

    replies: dict[str, str]
    model: str = "replay"
    context_chars: int = 100_000
    current: str = ""

    async def complete(
        self, messages: Any, *, tools: Any = None, temperature: float | None = None, purpose: str = "agent"
    ) -> LLMReply:
        return LLMReply(self.replies[self.current], [], 0, 0, None, self.model)


def replay_of(log: Path) -> Replay:
    rows = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line.strip()]
    return Replay({row["id"]: row["reply"] or "" for row in rows})


@dataclass
class Usage:
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None
    not_understood: int = 0
    answers: Counter[str] = field(default_factory=Counter)
    failed: list[str] = field(default_factory=list)

    def add(self, reply: LLMReply) -> None:
        self.calls += 1
        self.prompt_tokens += reply.prompt_tokens
        self.completion_tokens += reply.completion_tokens
        if reply.cost_usd is not None:
            self.cost_usd = (self.cost_usd or 0.0) + reply.cost_usd


def client_of(config: Path) -> tuple[StageModelClient, Settings]:
    settings = load_settings(environ={**os.environ, "PENSIEVE_CONFIG": str(config)})
    model = settings.model_for(EVIDENCE_JUDGE.name) or ""
    client = StageModelClient(
        stage=EVIDENCE_JUDGE.name,
        model=model,
        settings=settings,
        events=EventBus(),
        record_usage=lambda _reply: None,  # counted per pair below
        check_budget=lambda: None,
    )
    return client, settings


async def judge_pairs(
    client: StageModelClient | Replay, work: list[tuple[dict[str, Any], Citation]], concurrency: int, log: Any
) -> Usage:
    usage = Usage()
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(row: dict[str, Any], citation: Citation) -> None:
        before = citation.verdict
        async with gate:
            if isinstance(client, Replay):
                client.current = row["id"]
            try:
                reply, understood = await judge_pair(row["sentence"], citation, client)
            except StageFailed as exc:  # the call failed for good: the pair keeps its verdict
                usage.failed.append(str(exc))
                return
        usage.add(reply)
        usage.not_understood += not understood
        usage.answers[citation.judge["answer"] if understood and citation.judge else "not understood"] += 1
        if log is not None:
            record = {"id": row["id"], "before": before, "after": citation.verdict, "reply": reply.text}
            log.write(json.dumps(record) + "\n")
            log.flush()

    await asyncio.gather(*(one(row, citation) for row, citation in work))
    return usage


def judge_real(run: JudgeRun) -> None:
    corpus, why = corpus_dir()
    if corpus is None:
        print(f"real set: skipped ({why})")
        return
    client: StageModelClient | Replay
    if run.replay is not None:
        client = replay_of(run.replay)
        print(f"judge: the replies recorded in {run.replay} ({len(client.replies)}), replayed; no model called")
    else:
        assert run.config is not None
        client, settings = client_of(run.config)
        print(
            f"judge: {client.model} via {settings.llm.api_base or 'its provider'} ({run.config}); "
            f"concurrency {run.concurrency}; limit {run.limit if run.limit is not None else 'none'}"
        )
    left = run.limit
    log = run.log.open("w", encoding="utf-8") if run.log else None
    try:
        for part in REAL_SETS:
            rows = load_real(part)
            if not rows:
                print(f"real set ({part}): no labels in tests/data")
                continue
            citations = real_citations(rows, corpus)
            before = tally_real(rows, citations)
            sent_before = sent_to_repair(rows, citations)
            flagged = [(row, c) for row, c in zip(rows, citations, strict=True) if needs_judge(c)]
            total = len(flagged)
            if isinstance(client, Replay):
                replies = client.replies
                flagged = [(row, c) for row, c in flagged if row["id"] in replies]  # those it judged
            work = flagged if left is None else flagged[: max(0, left)]
            left = None if left is None else left - len(work)
            started, cpu, load = time.perf_counter(), _cpu(), os.getloadavg()[0]
            usage = asyncio.run(judge_pairs(client, work, run.concurrency, log))
            wall, cpu = time.perf_counter() - started, _cpu() - cpu
            after = tally_real(rows, citations)
            articles = len({row.get("article", "") for row in rows})
            report(part, len(rows), articles, total, work, before, after, usage, (wall, cpu, load))
            genuine, planted = sent_to_repair(rows, citations)
            print(
                f"  sent to the reviser as surely unsupported (hooks.confident_sentences): genuine "
                f"{sent_before[0]} -> {genuine}, planted {sent_before[1]} -> {planted}"
            )
    finally:
        if log is not None:
            log.close()


def sent_to_repair(rows: list[dict[str, Any]], citations: list[Citation]) -> tuple[int, int]:
    """(genuine, planted) pairs a repair would be asked about: unsupported and sure, as
    pensieve.evidence.hooks decides it for a sentence citing only that source."""
    genuine = planted = 0
    for row, citation in zip(rows, citations, strict=True):
        entry = {"sentences": [{"verdict": citation.verdict, "citations": [citation.as_json()]}]}
        if confident_sentences(entry):
            if row.get("kind", "genuine") == "genuine":
                genuine += row["label"] == "supported"
            else:
                planted += 1
    return genuine, planted


def _cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime


def report(
    part: str,
    pairs: int,
    articles: int,
    flagged: int,
    work: list[tuple[dict[str, Any], Citation]],
    before: RealScore,
    after: RealScore,
    usage: Usage,
    timing: tuple[float, float, float],
) -> None:
    wall, cpu, load = timing
    asked = len(work)
    subset = (
        "all of them" if asked == flagged else f"{asked} of them (the first, or those replayed)" if asked else "none"
    )
    print(f"real set ({part}): {pairs} pairs in {articles} articles, {flagged} flagged; judged {subset}")
    for name, score in (("without judge", before), ("with judge", after)):
        print(
            f"  {name}: false alarms {score.false_alarm_rate:.1%} ({score.false_alarms}/{score.genuine})  "
            f"planted recall {score.planted_recall:.3f} ({score.caught}/{score.planted})  F1 {score.f1:.3f}  "
            f"supported share of genuine {score.supported_share:.1%}"
        )
    kinds = Counter(row.get("kind", "genuine") for row, _ in work)
    answers = ", ".join(f"{k} {v}" for k, v in sorted(usage.answers.items()))
    print(f"  judged pairs by label kind: {dict(sorted(kinds.items()))}; answers: {answers}")
    per_call = (usage.prompt_tokens / asked, usage.completion_tokens / asked) if asked else (0.0, 0.0)
    cost = f"${usage.cost_usd:.4f}" if usage.cost_usd is not None else "not reported"
    print(
        f"  cost: {usage.calls} calls ({flagged / articles:.1f} flagged pairs per article), "
        f"{usage.prompt_tokens:,} prompt + {usage.completion_tokens:,} completion tokens "
        f"({per_call[0]:.0f} + {per_call[1]:.0f} per call), cost {cost}; "
        f"replies not understood (verdict kept): {usage.not_understood}"
    )
    if usage.failed:
        print(f"  calls failed for good (verdict kept): {len(usage.failed)}, first: {usage.failed[0]}")
    print(f"  time: {wall:.1f}s wall, {cpu:.1f}s CPU of this process, load {load:.1f} when it started")
