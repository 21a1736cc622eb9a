"""The evidence judge (evidence.judge) facing the replies real small models give: a reply
off format leaves the pair's verdict as the alignment gave it, so junk never clears a pair
(nor makes it look surely unsupported). Through the real client, litellm and HTTP, against
the scripted fake model on 127.0.0.1."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from pensieve.config import Settings
from pensieve.evidence.align import Alignment, Citation
from pensieve.evidence.judge import judge, parse_answer
from pensieve.model.client import StageModelClient
from pensieve.model.llm import LLMReply
from pensieve.project.events import EventBus
from tests.fakes.model_server import FakeModel, text

# What small models answered instead of one verdict (Qwen2.5-0.5B and SmolLM2 in the field):
# the choice echoed, a verdict taken back on the next line, JSON, a preamble, prose.
JUNK = [
    "yes, partly or no",
    "`yes`, `partly` or `no`: the passage matches",
    "Yes/No",
    "yes | no",
    "Yes.\nNo: the year differs.",
    '{"answer": "yes", "reason": "it matches"}',
    "Answer: yes",
    "The passage supports the sentence.",
    "Sure! Here is my answer: yes",
    "yesterday",
    "",
]


@pytest.mark.parametrize("reply", JUNK)
def test_off_format_replies_are_not_understood(reply: str) -> None:
    assert parse_answer(reply) is None


@pytest.mark.parametrize(
    ("reply", "parsed"),
    [
        ("no: no mention of it", ("no", "no mention of it")),
        ("Yes, the passage says it.", ("yes", "the passage says it.")),
        ("partially: the year is right", ("partly", "the year is right")),
        ("yes\nyes: still sure", ("yes", "")),
        ("> **yes** - stated in the header table", ("yes", "stated in the header table")),
    ],
)
def test_one_line_verdicts_are_understood(reply: str, parsed: tuple[str, str]) -> None:
    assert parse_answer(reply) == parsed


@pytest.fixture
def model() -> Iterator[FakeModel]:
    fake = FakeModel().start()
    yield fake
    fake.stop()


def _client(model: FakeModel, monkeypatch: pytest.MonkeyPatch) -> tuple[StageModelClient, list[LLMReply]]:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-judge")
    settings = Settings.model_validate(
        {"llm": {"model": "openai/judge-model", "api_base": model.base_url, "retries": 0}}
    )
    used: list[LLMReply] = []
    client = StageModelClient(
        stage="fact_checker",
        model="openai/judge-model",
        settings=settings,
        events=EventBus(),
        record_usage=used.append,
        check_budget=lambda: None,
    )
    return client, used


def _flagged(verdicts: list[str]) -> Alignment:
    """One sentence per verdict, citing S1 with that (weak or unsupported) verdict."""
    alignment = Alignment("draft_v1.md", "0" * 64, [], [], [])
    for index, verdict in enumerate(verdicts):
        sentence = f"Claim {index} about the index layers [S1]."
        passage = {"text": f"A passage about claim {index}.", "start": 0, "end": 24}
        alignment.sentences.append(
            {
                "index": index,
                "text": sentence,
                "start": 0,
                "end": len(sentence),
                "verdict": "",
                "citations": [],
                "findings": [],
            }
        )
        alignment.citations.append(
            [Citation("S1", verdict, 0.4, passage, reasons=["the passage is about something else"])]
        )
        alignment.missing_everywhere.append([])
    alignment.refresh()
    return alignment


def test_junk_from_a_real_endpoint_never_changes_a_verdict(model: FakeModel, monkeypatch: pytest.MonkeyPatch) -> None:
    junk = [reply for reply in JUNK if reply]  # an empty reply is refused by the client itself
    verdicts = ["weak" if i % 2 else "unsupported" for i in range(len(junk))]
    alignment = _flagged(verdicts)
    model.script("summary", *(text(reply) for reply in junk))
    client, used = _client(model, monkeypatch)
    assert asyncio.run(judge(alignment, client, max_calls=len(junk))) == len(junk)
    assert len(used) == len(junk) == model.count("summary")  # every call made and counted
    assert [c[0].verdict for c in alignment.citations] == verdicts
    assert all(c[0].judge is None for c in alignment.citations)
    assert [s["verdict"] for s in alignment.sentences] == verdicts
    assert alignment.entry()["summary"]["supported"] == 0


def test_a_well_formed_reply_from_the_same_endpoint_is_applied(
    model: FakeModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    alignment = _flagged(["unsupported", "weak", "unsupported"])
    model.script("summary", text("yes: the passage says it"), text("**No**: another claim"), text("Answer: yes"))
    # (the `no` is recorded; it never lowers the weak pair: test_only_a_judges_yes_changes_a_verdict)
    client, _used = _client(model, monkeypatch)
    assert asyncio.run(judge(alignment, client, max_calls=5)) == 3
    assert [c[0].verdict for c in alignment.citations] == ["supported", "weak", "unsupported"]
    assert [c[0].judge for c in alignment.citations] == [
        {"answer": "yes", "reason": "the passage says it"},
        {"answer": "no", "reason": "another claim"},
        None,
    ]


def test_only_a_judges_yes_changes_a_verdict(model: FakeModel, monkeypatch: pytest.MonkeyPatch) -> None:
    """A judge sees one passage, not the whole source: its `no` and `partly` are recorded but
    never lower a weak pair to the surely-unsupported verdict a repair acts on, nor lift an
    unsupported one (a real error) off the repair list."""
    alignment = _flagged(["weak", "unsupported", "unsupported"])
    model.script("summary", text("no: not in this passage"), text("partly: the year only"), text("no: another claim"))
    client, _used = _client(model, monkeypatch)
    assert asyncio.run(judge(alignment, client, max_calls=5)) == 3
    assert [c[0].verdict for c in alignment.citations] == ["weak", "unsupported", "unsupported"]
    assert [(c[0].judge or {}).get("answer") for c in alignment.citations] == ["no", "partly", "no"]
    assert [s["verdict"] for s in alignment.sentences] == ["weak", "unsupported", "unsupported"]
