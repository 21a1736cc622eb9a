"""What a real small model (Qwen2.5-Coder-0.5B, bench/real_model.py --sources) did with the
evidence list, replayed by the fake model: the reviser, given the unsupported sentences of
draft_v1.md, replied with the evidence check's own instructions instead of a revised draft
(as plain text, and dressed under a heading). Pensieve must refuse that as draft_v2.md, keep
it for the user, store no evidence for it and stop before the polisher."""

from __future__ import annotations

import json

import pytest

from pensieve.evidence.lexical import stronger_cues
from pensieve.evidence.store import EVIDENCE_FILE
from tests.conftest import Home
from tests.fakes.model_server import echo, text, write
from tests.fakes.web_site import FakeSite
from tests.test_citations import P1, P2, TYPED_REFS, article, script_clean_run, status_of
from tests.test_evidence import INVENTED

# Qwen's reply, word for word but for the count (it echoed the task message's evidence block).
INTRO = (
    "The evidence check could not find support in the cited sources for 1 cited sentence(s) of draft_v1.md "
    "(only the ones it is sure of are listed; the passage shown is the closest one found; sources are in "
    "sources/Sn.md). For each sentence below, in your version: cite the source id that does say it, or correct "
    "it to what the source says, or remove it. Never invent numbers, dates or names."
)
# Its other form: under a heading, the instruction turned into a list (then a bare `draft_v2.md`).
DRESSED = (
    "### Summary\n\nThe evidence check could not find support in the cited sources for 1 cited sentence(s) of "
    "`draft_v1.md` only the ones it is sure of are listed; the passage shown is the closest one found; sources "
    "are in `sources/Sn.md`. For each sentence below, in your version:\n- cite the source id that does say it, "
    "or correct it to what the source says, or remove it.\n- Never invent numbers, dates or names.\n"
)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("replies", "contract"),
    [
        pytest.param([text(INTRO)], "not_echo", id="plain-text-echo"),
        pytest.param([text(DRESSED), write("draft_v2.md", DRESSED), text("draft_v2.md")], "not_echo", id="dressed"),
    ],
)
def test_a_reviser_that_answers_with_the_evidence_list_is_refused(
    web_home: Home, site: FakeSite, replies: list[dict[str, object]], contract: str
) -> None:
    pid = web_home.new()
    script_clean_run(web_home, site, draft=article(P1, INVENTED, P2) + TYPED_REFS)
    # Short scripted drafts need the contracts off; the reviser is judged with them on.
    assert web_home.run("run", pid, "--until", "style_reviewer", "--quiet").exit_code == 0
    web_home.configure(contracts={"enabled": True})
    web_home.model.scripts["reviser"].clear()  # script_clean_run's clean draft_v2 is not this model's
    web_home.model.always("reviser", *replies)
    try:
        assert web_home.run("run", pid, "--until", "reviser", "--quiet").exit_code == 1
    finally:
        web_home.model.fallbacks.pop("reviser", None)
    task = web_home.model.for_stage("reviser")[0].messages[1]["content"]
    assert "for 1 cited sentence(s) of draft_v1.md" in task and "14 not found in S1" in task
    folder = web_home.project_dir(pid)
    reviser = status_of(web_home, pid)["stages"]["reviser"]
    assert reviser["status"] == "error" and "draft_v2.md does not meet its contract" in reviser["error"]
    assert f"{contract}:" in reviser["error"] and "rejected/draft_v2.md" in reviser["error"], reviser["error"]
    assert not (folder / "draft_v2.md").exists() and (folder / "rejected" / "draft_v2.md").is_file()
    doc = json.loads((folder / EVIDENCE_FILE).read_text())
    assert set(doc["artifacts"]) == {"draft_v1.md"}  # nothing aligned for the refused reply
    assert status_of(web_home, pid)["stages"]["polisher"]["status"] == "pending"
    assert web_home.model.count("polisher") == 0


# The polisher's reply, both times: its task message (evidence list and untrusted markers
# included) in a markdown fence under a `##` heading, as plain text.
FENCED_TASK = "```markdown\n## How vector databases index embeddings\n\n{prompt}\n```"


@pytest.mark.slow
def test_a_polisher_that_answers_with_its_task_in_a_fence_writes_no_final(web_home: Home, site: FakeSite) -> None:
    pid = web_home.new()
    script_clean_run(web_home, site)
    web_home.model.scripts["reviser"].clear()
    notes = "\n## Revision notes\n\n- Kept the layers.\n"
    web_home.model.script("reviser", write("draft_v2.md", article(P1, INVENTED, P2) + notes), text("done"))
    assert web_home.run("run", pid, "--until", "reviser", "--quiet").exit_code == 0
    web_home.configure(contracts={"enabled": True})
    web_home.model.scripts["polisher"].clear()
    web_home.model.always("polisher", echo("task", template=FENCED_TASK))
    try:
        assert web_home.run("run", pid, "--quiet").exit_code == 1
    finally:
        web_home.model.fallbacks.pop("polisher", None)
    task = web_home.model.for_stage("polisher")[0].messages[1]["content"]
    assert "for 1 cited sentence(s) of draft_v2.md" in task and "<<<UNTRUSTED" in task
    folder = web_home.project_dir(pid)
    doc = status_of(web_home, pid)
    polisher = doc["stages"]["polisher"]
    assert polisher["status"] == "error" and "not_echo:" in polisher["error"], polisher["error"]
    assert doc["status"] != "complete" and doc["stages"]["consistency_checker"]["status"] == "pending"
    assert not (folder / "final.md").exists()
    assert set(json.loads((folder / EVIDENCE_FILE).read_text())["artifacts"]) == {"draft_v1.md", "draft_v2.md"}
    # Four replies (reminder, two contract repairs): a failed stage is not sent back for evidence.
    assert web_home.model.count("polisher") == 4


def test_a_stronger_claim_is_reported_with_the_word_the_sentence_used() -> None:
    # Qwen's reviser was shown "stated more strongly than the passage: best" for a sentence
    # saying "first", and "all" for one saying "every": words it could not find.
    # (Since issue 25, a cue needs the same claim: "first" against a passage about something
    # else, or a dropped frequency word such as "often", is no finding: on the by-hand
    # articles such findings were wrong.)
    passage = "New vectors are often written to a small buffer that is searched by brute force."
    assert stronger_cues("New vectors are always written to a small buffer first.", passage) == ['"always"']
    assert stronger_cues("HNSW was first built at Google to rank search results.", passage) == []
    assert stronger_cues("Most systems rebuild their whole index every hour.", "Systems rebuild the index.") == [
        '"every"'
    ]
    assert stronger_cues("Indexes are never retrained.", "Indexes are never retrained.") == []


# Qwen's researcher (--seed refiner --sources): the brief's questions again, no finding.
QUESTIONS_ONLY = """# Research notes: How vector databases index embeddings

## Research questions
1. How do vector databases index embeddings?
2. What factors contribute to the speed of the search?

## Open questions
1. Which index is used in vector databases?
2. How does the index affect recall and memory?
"""


def test_research_notes_that_only_repeat_questions_are_not_complete(home: Home) -> None:
    home.model.always("researcher", write("research_notes.md", QUESTIONS_ONLY), text("Wrote research_notes.md."))
    pid = home.new()
    try:
        assert home.run("run", pid, "--until", "researcher", "--quiet").exit_code == 1
    finally:
        home.model.fallbacks.pop("researcher", None)
    researcher = status_of(home, pid)["stages"]["researcher"]
    assert researcher["status"] == "error"
    assert (
        "findings: the findings sections hold only questions, no findings (Research questions)" in (researcher["error"])
    )
    assert not (home.project_dir(pid) / "research_notes.md").exists()
