"""Stage contracts: each artifact is a real artifact of its kind, or the violations say why.

Pure checks over strings: no model, no pipeline. The on_topic fallback's similarity is
injected (one slow test uses the real MiniLM); the fake model's default artifacts are
checked here too, for every stage, since the pipeline relies on them meeting the defaults.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from typing import Any

import pytest

from pensieve import prompts
from pensieve.config import ArticleSettings, ContractsSettings, Settings, load_settings
from pensieve.contracts import (
    TOPIC_BRIEF_SECTIONS,
    Violation,
    check_artifact,
    contract_of,
    repair_instruction,
    stage_error,
    violation_summary,
)
from pensieve.errors import UsageError
from pensieve.stages import BY_NAME, STAGES
from tests.fakes.artifacts import DEFAULT_TOPIC, topic_of
from tests.fakes.model_server import FakeModel, default_artifact

BRIEF = DEFAULT_TOPIC  # "How vector databases index embeddings"
SETTINGS = Settings()


def no_model(first: str, second: str) -> float:
    raise AssertionError("the semantic fallback was used")


def check(stage: str, text: str, **given: Any) -> list[Violation]:
    given.setdefault("brief_text", BRIEF)
    given.setdefault("similarity", no_model)
    settings = given.pop("settings", SETTINGS)
    return check_artifact(BY_NAME[stage], text, settings=settings, **given)


def named(violations: list[Violation]) -> dict[str, str]:
    return {v.contract: v.message for v in violations}


def system_prompt(stage: str, *, flags: bool = True) -> str:
    """The stage's system prompt much as the agent renders it (every flag on or off; any
    variable this test does not know gets a placeholder, so new prompt variables do not
    break it)."""
    row = BY_NAME[stage]
    known: dict[str, prompts.Value] = {
        "stage": row.name,
        "title": row.title,
        "reads": ", ".join(row.reads),
        "writes": str(row.writes),
        "tools": ", ".join(row.tools),
        "unavailable_tools": "\n- none",
        "target_words": "1500",
        "audience": "curious, technically literate readers",
        "style": "clear, concrete, well-sourced prose",
        "language": "English",
        "today": "2025-05-05",
    }
    rendered = []
    for name in (row.prompt, "_common.md"):
        template = prompts.load(name)
        variables = dict.fromkeys(re.findall(r"\{\{#if\s+(?:not\s+)?(\w+)", template), flags)
        variables.update({v: known.get(v, f"<{v}>") for v in re.findall(r"\{\{\s*(\w+)\s*\}\}", template)})
        rendered.append(prompts.render(template, variables).strip())
    return "\n\n".join(rendered) + "\n"


def task_message(stage: str, project: str = "how-vector-databases-index-embeddings") -> str:
    row = BY_NAME[stage]
    return (
        f"Project: {project}. Your stage: {row.name} ({row.title}).\n"
        f"Read: {', '.join(row.reads)}.\n"
        f"When you are done, write {row.writes} with write_project_file, then reply with a one-line summary."
    )


ARTICLE_BODY = default_artifact("drafter")


# ---------------------------------------------------------------- the fake model's artifacts


@pytest.mark.parametrize("stage", [s.name for s in STAGES])
@pytest.mark.parametrize(
    "topic", [DEFAULT_TOPIC, "Cafe culture in Vienna", "Crash trial 3: how write-ahead logs survive power loss"]
)
def test_the_fake_models_default_artifacts_meet_the_default_contracts(stage: str, topic: str) -> None:
    text = default_artifact(stage, topic)
    assert check(stage, text, brief_text=topic, prompt=system_prompt(stage), task_message=task_message(stage)) == []
    # Without web tools nothing has to be cited; the consistency report says there is nothing to compare.
    assert check(stage, text, brief_text=topic, web_sources=None, earlier_articles={}) == []


def test_the_fake_consistency_report_names_the_other_projects_it_has_seen() -> None:
    report = default_artifact("consistency_checker", BRIEF, earlier=["b-trees", "raft"])
    assert "`b-trees`" in report
    assert check("consistency_checker", report, earlier_articles={"raft": "How Raft elects a leader"}) == []


def _request(stage: str, task: str) -> dict[str, Any]:
    return {
        "messages": [
            {"role": "system", "content": f"You are one stage (`{stage}`) of Pensieve."},
            {"role": "user", "content": task},
        ],
        "tools": [{"type": "function", "function": {"name": "write_project_file", "parameters": {}}}],
    }


def test_the_fake_model_writes_about_the_brief_named_in_the_request() -> None:
    fake = FakeModel()
    answer = fake.handle(_request("refiner", "Project: t3. Your stage: refiner.\nBrief: Cafe culture in Vienna\n"))
    assert answer is not None
    reply = json.loads(answer[2])
    arguments = json.loads(reply["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"])
    assert arguments["content"].startswith("# Cafe culture in Vienna\n")
    assert fake.artifacts_written("t3", "refiner") == [arguments["content"]]
    assert check("refiner", arguments["content"], brief_text="Cafe culture in Vienna") == []


@pytest.mark.parametrize(
    ("task", "topic"),
    [
        ("Project: p. Your stage: refiner.\nBrief: How B-trees stay balanced\n", "How B-trees stay balanced"),
        ('Project: p. Your stage: refiner.\nThe brief\'s title: "Raft in practice".\n', "Raft in practice"),
        ("Project: p. Your stage: refiner.\nTitle: Sourdough at home\n", "Sourdough at home"),
        ("Project: cafe-culture-in-vienna-2. Your stage: refiner.\n", "Cafe culture in vienna"),
        ("Project: how-vector-databases-index-embeddings. Your stage: x.\n", DEFAULT_TOPIC),
        ("Project: t3. Your stage: refiner.\n", DEFAULT_TOPIC),
    ],
)
def test_the_fake_model_reads_the_topic_from_the_request(task: str, topic: str) -> None:
    assert topic_of(_request("refiner", task)) == topic


# ---------------------------------------------------------------- every artifact


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "write_project_file", "arguments": {"filename": "draft_v1.md", "content": "# A draft"}}',
        '{"name": "write_project_file", "parameters": {"filename": "draft_v1.md", "content": "# A draft"}}',
        '[{"name": "write_project_file", "arguments": {"filename": "draft_v1.md", "content": "# A draft"}}]',
        '{"type": "function", "function": {"name": "write_project_file", "arguments": "{\\"filename\\": \\"x\\"}"}}',
        '```json\n{"name": "write_project_file", "arguments": {"filename": "draft_v1.md", "content": "# A"}}\n```',
        '<tool_call>\n{"name": "write_project_file", "arguments": {"filename": "draft_v1.md"}}\n</tool_call>',
        'I will now save the draft.\n\n{"name": "write_project_file", "arguments": {"content": "# A\nline"}}',
        '{"tool_calls": [{"function": {"name": "write_project_file", "arguments": "{}"}}]}',
    ],
    ids=["bare", "parameters", "list", "function", "fenced", "tagged", "after-prose", "tool_calls"],
)
def test_a_tool_call_written_as_text_is_not_an_artifact(text: str) -> None:
    assert check("drafter", text) == [
        Violation(
            "not_tool_call",
            "it is a tool call written as text (write_project_file), not the draft",
            "call write_project_file through the tool interface, with the whole markdown document as its content",
        )
    ]


def test_a_tool_call_to_another_tool_is_named() -> None:
    (violation,) = check("researcher", '{"name": "web_search", "arguments": {"query": "hnsw"}}')
    assert violation.message == "it is a tool call written as text (web_search), not the research notes"
    assert violation.fix == "call tools through the tool interface, never as JSON in the reply"
    (tagged,) = check("researcher", "<tool_call>\nnot even json\n</tool_call>")
    assert tagged.contract == "not_tool_call" and "(a tool)" in tagged.message


def test_an_article_may_show_a_json_example() -> None:
    example = '\n\n```json\n{"name": "get_weather", "arguments": {"city": "Vienna"}}\n```\n'
    text = ARTICLE_BODY.replace("## Common mistakes\n", f"## Common mistakes\n{example}")
    assert check("drafter", text) == []


@pytest.mark.parametrize(
    "text",
    [
        "I'm sorry, but I can't help with that.",
        "# Draft\n\nI\u2019m sorry, but I can\u2019t write this article without access to the research notes.",
        "As an AI language model, I cannot browse the web.",
        "Unfortunately, I am unable to complete this task.",
        "Here is my answer. I cannot access the files you mention, so I stopped.",
    ],
)
def test_a_refusal_is_not_an_artifact(text: str) -> None:
    (violation,) = check("drafter", text)
    assert violation.contract == "not_refusal"
    assert violation.message.startswith('it is a refusal ("') and violation.message.endswith('"), not the draft')


def test_a_refusal_message_quotes_the_refusing_sentence() -> None:
    assert named(check("outliner", "I'm sorry, but I can't help with that. Try again later.")) == {
        "not_refusal": "it is a refusal (\"I'm sorry, but I can't help with that.\"), not the outline"
    }


def test_an_apology_before_a_whole_article_is_still_a_refusal() -> None:
    text = "I'm sorry, but as an AI I cannot browse the web. Here is the draft anyway.\n\n" + ARTICLE_BODY
    assert named(check("drafter", text)) == {
        "not_refusal": 'it is a refusal ("I\'m sorry, but as an AI I cannot browse the web."), not the draft'
    }


def test_an_apology_inside_a_long_article_is_not_a_refusal() -> None:
    text = ARTICLE_BODY.replace("## Common mistakes\n", "## Common mistakes\n\nI'm sorry to say I cannot agree.\n")
    assert check("drafter", text) == []


@pytest.mark.parametrize("what", ["prompt", "task"])
def test_an_echo_of_the_prompt_or_task_message_is_not_an_artifact(what: str) -> None:
    prompt, task = system_prompt("outliner"), task_message("outliner")
    text = prompt if what == "prompt" else task
    violations = check("outliner", text, prompt=prompt, task_message=task)
    assert [v.contract for v in violations] == ["not_echo"]
    source = "system prompt" if what == "prompt" else "task message"
    assert (
        violations[0].message == f"100% of its 8-word sequences repeat the {source} (contracts.echo_max_overlap is 50%)"
    )
    assert violations[0].fix == "write the outline itself, not the instructions"


def test_an_artifact_that_quotes_its_instructions_a_little_is_not_an_echo() -> None:
    prompt = system_prompt("refiner")
    quoted = "## Angle\nThe one question the article answers, and why it matters now.\n\n"
    text = default_artifact("refiner").replace("## Angle\n", quoted, 1)
    assert check("refiner", text, prompt=prompt) == []


def test_a_think_block_is_named_and_the_rest_is_still_checked() -> None:
    text = "<think>\nThe user wants a draft. Let me write it.\n</think>\n\n" + ARTICLE_BODY
    assert check("drafter", text) == [
        Violation("no_think", "it contains a <think> block", "write only the draft, without your reasoning")
    ]
    short = "<think>plan</think>\n# T\n\n## A\n\nToo short.\n\n## B\n\nStill short.\n"
    assert [v.contract for v in check("drafter", short)] == ["no_think", "length"]


def test_a_short_review_may_say_what_it_cannot_do() -> None:
    review = "# Review\n\nI cannot access the sources, so this review covers style only.\n\n1. The opening is slow.\n"
    assert check("style_reviewer", review) == []


def test_an_empty_artifact() -> None:
    assert check("style_reviewer", " \n") == [Violation("not_empty", "it is empty", "write the whole review")]


def test_contracts_can_be_switched_off() -> None:
    off = Settings(contracts=ContractsSettings(enabled=False))
    assert check("drafter", "I'm sorry, I can't.", settings=off) == []


# ---------------------------------------------------------------- topic_brief.md


def test_topic_brief_sections_are_the_ones_the_refiner_prompt_asks_for() -> None:
    asked = re.findall(r"^- `## ([^`]+)`", prompts.load("refiner.md"), re.M)
    assert tuple(asked) == TOPIC_BRIEF_SECTIONS
    assert "# <working title>" in prompts.load("refiner.md")


def test_topic_brief_needs_a_title_and_its_sections() -> None:
    text = "## Angle\nVector databases and how they index embeddings.\n\n## Audience\nEngineers.\n"
    assert named(check("refiner", text)) == {
        "title": "no title",
        "sections": "sections missing: Scope, Key questions, Prior knowledge, Length and form",
    }
    (violation,) = [v for v in check("refiner", text) if v.contract == "sections"]
    assert violation.fix == (
        "give the topic brief the headings ## Angle, ## Audience, ## Scope, ## Key questions, "
        "## Prior knowledge, ## Length and form"
    )


def test_topic_brief_headings_match_tolerantly() -> None:
    text = (
        "# Indexing embeddings in vector databases\n\n"
        "## 1. The angle\nHow vector databases index embeddings.\n\n"
        "**Audience:** engineers.\n\n"
        "### SCOPE\nIn and out.\n\n"
        "## Key Questions:\n1. What is HNSW?\n\n"
        "## Prior knowledge (topic memory)\nnone\n\n"
        "## Length & format\nAbout 1500 words.\n"
    )
    assert check("refiner", text) == []


def test_topic_brief_short_headings_name_their_section() -> None:
    text = (
        default_artifact("refiner")
        .replace("## Key questions", "## Questions")
        .replace("## Length and form", "## Length")
    )
    assert check("refiner", text) == []


def test_titles_in_the_forms_models_write() -> None:
    body = "\n\n## Intro (~200 words)\n- a\n\n## Middle (~900 words)\n- b\n\n## End (~200 words)\n- c\n"
    for title in (
        "# Vector indexes",
        "Vector indexes\n==============",
        "Title: Vector indexes",
        "**Title:** Vector indexes",
    ):
        assert check("outliner", title + body) == [], title
    assert named(check("outliner", "Vector indexes" + body)) == {"title": "no title"}


def test_topic_brief_on_topic_by_shared_key_terms() -> None:
    text = default_artifact("refiner", "Indexing embeddings in vector databases")
    assert check("refiner", text) == []  # no_model: the term check sufficed


def test_topic_brief_off_topic_names_the_terms_and_the_similarity() -> None:
    text = default_artifact("refiner", "Sourdough bread at home")
    (violation,) = check("refiner", text, similarity=lambda brief, artifact: 0.12)
    assert violation == Violation(
        "on_topic",
        "not about the brief: it shares 0 of the brief's 4 key terms (missing: vector, databases, index, "
        "embeddings; at least 50% needed, contracts.topic_min_term_share), and its similarity to the brief is "
        "0.12 (contracts.topic_min_similarity 0.3)",
        "write the topic brief about the subject of brief.md",
    )


def test_topic_brief_on_topic_by_meaning_when_the_terms_differ() -> None:
    text = default_artifact("refiner", "Approximate nearest-neighbour search with HNSW graphs")
    seen: list[tuple[str, str]] = []

    def close(brief: str, artifact: str) -> float:
        seen.append((brief, artifact))
        return 0.45

    assert check("refiner", text, similarity=close) == []
    assert seen == [(BRIEF, text)]


def test_topic_brief_semantic_fallback_can_be_off_or_unavailable() -> None:
    text = default_artifact("refiner", "Sourdough bread at home")
    terms_only = Settings(contracts=ContractsSettings(topic_semantic=False))
    (violation,) = check("refiner", text, settings=terms_only)
    assert violation.message.endswith("at least 50% needed, contracts.topic_min_term_share)")

    def broken(brief: str, artifact: str) -> float:
        raise RuntimeError("the topic search model is not installed")

    (violation,) = check("refiner", text, similarity=broken)
    assert violation.message.endswith("and its meaning could not be compared (the topic search model is not installed)")


def test_topic_brief_key_terms_are_stemmed_and_stopwords_ignored() -> None:
    brief = "Write an article explaining how the embedding indexes of vector databases work"
    text = default_artifact("refiner", "Vector database indexing for embedded vectors")
    assert check("refiner", text, brief_text=brief) == []


@pytest.mark.slow
def test_topic_brief_semantic_fallback_with_the_real_model() -> None:
    on_topic = (
        "# Finding nearest neighbours fast\n\n## Angle\nHow HNSW graphs, IVF partitions and product quantization "
        "let a similarity search engine find the closest dense vectors among millions of stored items in "
        "milliseconds.\n\n## Audience\nEngineers building semantic search and retrieval-augmented generation.\n\n"
        "## Scope\nIn: index structures. Out: pricing.\n\n## Key questions\n1. What is HNSW?\n\n"
        "## Prior knowledge\nnone\n\n## Length and form\nAbout 1500 words.\n"
    )
    assert check_artifact(BY_NAME["refiner"], on_topic, settings=SETTINGS, brief_text=BRIEF) == []
    off_topic = default_artifact("refiner", "Sourdough bread at home")
    (violation,) = check_artifact(BY_NAME["refiner"], off_topic, settings=SETTINGS, brief_text=BRIEF)
    assert violation.contract == "on_topic"
    score = float(re.findall(r"similarity to the brief is (-?[\d.]+)", violation.message)[0])
    assert score < 0.2


# ---------------------------------------------------------------- research_notes.md


def test_research_notes_need_findings_and_open_questions() -> None:
    assert named(check("researcher", "# Research notes: vector databases\n\nNothing found yet.\n")) == {
        "findings": "no findings section",
        "open_questions": "no open-questions section",
    }
    empty = "# Notes\n\n## What is HNSW?\n\n## How is it built?\n\n## Open questions\n- none\n"
    (violation,) = check("researcher", empty)
    assert violation == Violation(
        "findings",
        "the findings sections are empty (What is HNSW?, How is it built?)",
        "write one ## section per key question of topic_brief.md, with the findings as bullet points",
    )


def test_research_notes_that_only_ask_questions_have_no_findings() -> None:
    # Qwen2.5-Coder-0.5B's notes (bench/real_model.py --seed refiner --sources): the brief's
    # questions again, and open questions; they reached `complete` before this check.
    asked = (
        "# Research notes: Why sourdough bread rises\n\n## Research questions\n"
        "1. Why does sourdough bread rise without commercial yeast?\n2. What factors contribute to this rise?\n\n"
        "## Open questions\n1. What specific yeast is used in sourdough bread?\n"
    )
    (violation,) = check("researcher", asked)
    assert violation.contract == "findings"
    assert violation.message == "the findings sections hold only questions, no findings (Research questions)"
    # A question as the heading, and answers under it, are findings.
    answered = asked.replace("## Research questions\n", "## Why does it rise?\n- Wild yeasts make CO2 [S1].\n")
    assert check("researcher", answered) == []
    # So is a finding written as a question and its answer on one line.
    assert check("researcher", asked.replace("yeast?\n2.", "yeast? Wild yeasts do.\n2.")) == []


def test_research_notes_with_web_tools_cite_what_was_fetched() -> None:
    notes = default_artifact("researcher")
    assert check("researcher", notes, web_sources=None) == []  # no web tools: nothing to cite
    assert check("researcher", notes, web_sources=0) == [
        Violation(
            "cites_sources",
            "no source was fetched, though web tools are available",
            "search with web_search, read the best pages with fetch_url, and cite each finding by the id "
            "fetch_url reports (e.g. [S1])",
        )
    ]
    assert named(check("researcher", notes, web_sources=3)) == {"cites_sources": "no source is cited (3 pages fetched)"}
    cited = notes.replace("did not scale\n  (unsourced)", "did not scale [S2]")
    assert check("researcher", cited, web_sources=3) == []
    odd_form = notes.replace("did not scale\n  (unsourced)", "did not scale (S2)")
    assert check("researcher", odd_form, web_sources=3) == []


def test_research_notes_cited_only_in_a_typed_source_list_do_not_count() -> None:
    notes = default_artifact("researcher") + "\n## Sources\n- [S1] https://example.org/hnsw\n"
    assert named(check("researcher", notes, web_sources=1)) == {"cites_sources": "no source is cited (1 page fetched)"}


# ---------------------------------------------------------------- outline.md


@pytest.mark.parametrize(
    "budget", ["(~300 words)", "\u2014 250 words", "Words: 200", "Word budget: 150", "250-300 words", "(300w)"]
)
def test_outline_word_budgets_in_the_forms_models_write(budget: str) -> None:
    text = "# Vector indexes\n\n" + "".join(f"## Part {n} {budget}\n- point\n\n" for n in range(3))
    assert check("outliner", text) == []
    in_body = "# Vector indexes\n\n" + "".join(f"## Part {n}\n- point\n- {budget}\n\n" for n in range(3))
    assert check("outliner", in_body) == []


def test_outline_needs_three_sections_with_budgets() -> None:
    text = "# Vector indexes\n\n## Intro (~200 words)\n- a\n\n## Body\n- b\n"
    assert check("outliner", text) == [
        Violation(
            "sections",
            "2 headed sections, at least 3 needed (contracts.min_outline_sections)",
            "give each part of the outline its own ## heading",
        ),
        Violation(
            "word_budgets",
            "1 of 2 sections has a word budget, at least 3 needed (contracts.min_outline_sections); without one: Body",
            'give each ## section a word budget, e.g. "(~300 words)"',
        ),
    ]
    numbered = "# Vector indexes\n\n1. Intro (~200 words)\n2. Body (~800 words)\n3. End (~200 words)\n"
    assert [v.contract for v in check("outliner", numbered)] == ["sections", "word_budgets"]


# ---------------------------------------------------------------- drafts and the final article


def _words(n: int) -> str:
    return " ".join(["word"] * n)


def test_a_draft_below_its_share_of_the_target_says_the_figures() -> None:
    text = f"# Title\n\n## One\n\n{_words(400)}\n\n## Two\n\n{_words(9)}\n"  # 412 words with the headings
    assert check("drafter", text) == [
        Violation(
            "length",
            "412 words, the target is at least 900 (60% of article.target_words 1500)",
            "write the whole draft, about 1500 words",
        )
    ]
    assert (
        check("reviser", text)[0].message == "412 words, the target is at least 900 (60% of article.target_words 1500)"
    )
    (final,) = check("polisher", text)
    assert final.message == "412 words, the target is at least 1050 (70% of article.target_words 1500)"
    assert final.fix == "write the whole final article, about 1500 words"


def test_the_length_share_and_target_come_from_the_settings() -> None:
    text = f"# Title\n\n## One\n\n{_words(400)}\n\n## Two\n\n{_words(9)}\n"
    settings = Settings(article=ArticleSettings(target_words=600), contracts=ContractsSettings(draft_min_share=0.5))
    assert check("drafter", text, settings=settings) == []
    settings.contracts.draft_min_share = 0.9
    assert check("drafter", text, settings=settings)[0].message == (
        "412 words, the target is at least 540 (90% of article.target_words 600)"
    )


def test_revision_notes_and_references_do_not_count_as_article() -> None:
    article = f"# Title\n\n## One\n\n{_words(500)}\n\n## Two\n\n{_words(100)}\n"
    notes = f"\n## Revision notes\n\n{_words(600)}\n"
    (violation,) = check("reviser", article + notes)
    assert violation.message.startswith("603 words,")  # the title and two headings count
    references = f"\n## References\n\n{_words(600)}\n"
    (violation,) = check("drafter", article + references)
    assert violation.message.startswith("603 words,")


def test_an_article_needs_a_title_and_headed_sections() -> None:
    text = _words(1200)
    assert named(check("polisher", text)) == {
        "title": "no title",
        "sections": "0 headed sections, at least 2 needed (contracts.min_article_sections)",
    }
    one = f"Title\n=====\n\n## Only part\n\n{_words(1200)}\n"
    assert named(check("drafter", one)) == {
        "sections": "1 headed section, at least 2 needed (contracts.min_article_sections)"
    }


# ---------------------------------------------------------------- reviews, fact check, consistency


@pytest.mark.parametrize("stage", ["content_reviewer", "style_reviewer"])
def test_reviews_have_numbered_findings_or_say_no_changes_needed(stage: str) -> None:
    assert check(stage, "# Review\n\n1. The opening is slow. Rewrite: start with the question.\n") == []
    assert check(stage, "# Review\n\n**1.** The opening is slow.\n\n**2.** The end repeats.\n") == []
    assert check(stage, "# Review\n\n### Finding 1: the opening\nToo slow.\n") == []
    assert check(stage, "# Review\n\nVerdict: the draft is ready. No changes needed.\n") == []
    assert check(stage, "# Review\n\nThe draft is fine overall but could be tighter.\n") == [
        Violation(
            "numbered_findings",
            'no numbered findings and no explicit "No changes needed"',
            'number each finding (1. ..., 2. ...), or say "No changes needed" if there is nothing to change',
        )
    ]


def test_fact_check_needs_the_claims_table_the_citation_check_parses() -> None:
    assert check("fact_checker", default_artifact("fact_checker")) == []
    assert check("fact_checker", "# Fact check\n\nEverything checks out.\n") == [
        Violation(
            "claims_table",
            "no claims table",
            "write one row per claim under the header | # | claim | cited id | verdict | evidence |",
        )
    ]
    table = (
        "| # | Claim | Cited ID | Verdict | Evidence |\n|---|---|---|---|---|\n"
        '| 1 | HNSW is a graph | S1 | **Supported** | "a navigable small world graph" [S1] |\n'
        "| 2 | IVF is faster | S2 | partially supported | n/a |\n"
        "| 3 | PQ compresses | | Not found. | n/a |\n"
    )
    assert named(check("fact_checker", table)) == {
        "claims_table": "verdicts that are not one of supported, contradicted, not found, uncited: "
        'claim 2 "partially supported"'
    }
    # A pipe that splits a cell is named as the cause (not "a bad verdict").
    split = (
        "| # | claim | cited id | verdict | evidence |\n|---|---|---|---|---|\n"
        '| 1 | Unions are written X | Y | S2 | supported | "X | Y" [S2] |\n'
    )
    assert named(check("fact_checker", split)) == {
        "claims_table": "rows with more or fewer cells than the header's 5: claim 1 (7 cells); "
        "a | inside a cell splits it"
    }
    escaped = split.replace("X | Y", "X \\| Y")
    assert check("fact_checker", escaped) == []


def test_consistency_report_without_the_project_list() -> None:
    assert check("consistency_checker", "# Report\n\nNo earlier articles to compare.\n") == []
    assert check("consistency_checker", "# Report\n\nThis is the first article in the workspace.\n") == []
    assert check("consistency_checker", "# Report\n\nCompared with `b-trees` and `raft`: consistent.\n") == []
    assert check("consistency_checker", "# Report\n\nCompared with how-b-trees-stay-balanced.\n") == []
    assert check("consistency_checker", "# Report\n\nVerdict: consistent. Checked `final.md`.\n") == [
        Violation(
            "names_compared",
            "it neither names the earlier articles it compared nor says there are none",
            'name the ones it compared (their ids), or say there are none ("No earlier articles to compare.")',
        )
    ]


def test_consistency_report_with_the_project_list() -> None:
    earlier = {"b-trees": "How B-trees stay balanced", "raft": "Raft in practice"}
    assert check("consistency_checker", "# Report\n\nCompared with b-trees.\n", earlier_articles=earlier) == []
    by_title = "# Report\n\nIt agrees with *Raft in practice*.\n"
    assert check("consistency_checker", by_title, earlier_articles=earlier) == []
    assert named(check("consistency_checker", "# Report\n\nNo earlier articles.\n", earlier_articles=earlier)) == {
        "names_compared": "it says there are no earlier articles, but list_projects shows 2 earlier articles "
        "(b-trees, raft)"
    }
    assert named(check("consistency_checker", "# Report\n\nConsistent.\n", earlier_articles={"raft": ""})) == {
        "names_compared": "it names none of the workspace's 1 earlier article (raft)"
    }
    # "raft" inside another word or id is not a mention.
    assert check("consistency_checker", "# R\n\nSee `raft-2` and rafting.\n", earlier_articles={"raft": ""})
    assert named(check("consistency_checker", "# Report\n\nConsistent.\n", earlier_articles={})) == {
        "names_compared": "it does not say that there are no earlier articles to compare (the workspace has no "
        "other complete article)"
    }


# ---------------------------------------------------------------- what the lead wires


def test_repair_instruction_and_stage_error() -> None:
    stage = BY_NAME["drafter"]
    violations = check("drafter", f"# Title\n\n## One\n\n{_words(400)}\n\n## Two\n\n{_words(9)}\n")
    assert repair_instruction(stage, violations) == (
        "`draft_v1.md` does not meet its contract yet:\n"
        "- length: 412 words, the target is at least 900 (60% of article.target_words 1500); "
        "write the whole draft, about 1500 words\n"
        "Write `draft_v1.md` again with write_project_file: the complete document, fixing every point above. "
        "Then reply with one short line, and no tool call."
    )
    assert stage_error(stage, violations, kept_as="rejected/draft_v1.md") == (
        "draft_v1.md does not meet its contract: length: 412 words, the target is at least 900 "
        "(60% of article.target_words 1500). The rejected artifact is kept as rejected/draft_v1.md. "
        "The model wrote no valid draft: try a stronger model (--model, or agents.drafter.model "
        "in the configuration)."
    )
    assert "\n" not in stage_error(stage, violations)
    assert violation_summary([Violation("a", "x"), Violation("b", "y")]) == "a: x; b: y"


def test_every_stage_has_its_contract() -> None:
    kinds = {s.name: contract_of(s).kind for s in STAGES}
    assert kinds == {
        "refiner": "topic brief",
        "researcher": "research notes",
        "outliner": "outline",
        "drafter": "draft",
        "content_reviewer": "review",
        "fact_checker": "fact check",
        "style_reviewer": "review",
        "reviser": "draft",
        "polisher": "final article",
        "consistency_checker": "consistency report",
    }


def test_contract_settings_load_from_the_config_file(tmp_path: Any) -> None:
    assert Settings().contracts == ContractsSettings(
        enabled=True,
        draft_min_share=0.6,
        final_min_share=0.7,
        min_article_sections=2,
        min_outline_sections=3,
        topic_min_term_share=0.5,
        topic_min_similarity=0.3,
        topic_semantic=True,
        echo_max_overlap=0.5,
    )
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "pensieve.yaml").write_text("contracts:\n  final_min_share: 0.8\n  enabled: false\n")
    loaded = load_settings(home=tmp_path, environ={})
    assert loaded.contracts.final_min_share == 0.8 and not loaded.contracts.enabled
    (tmp_path / "configs" / "pensieve.yaml").write_text("contracts:\n  draft_min_share: 1.5\n")
    with pytest.raises(UsageError, match=r"contracts\.draft_min_share"):
        load_settings(home=tmp_path, environ={})


def test_the_shipped_config_holds_the_defaults() -> None:
    from pathlib import Path

    import yaml

    shipped = yaml.safe_load((Path(__file__).parent.parent / "configs" / "pensieve.yaml").read_text())
    assert ContractsSettings.model_validate(shipped["contracts"]) == ContractsSettings()


def test_the_tool_names_a_text_call_may_name_are_the_tools() -> None:
    from pensieve.config import default_tool_limits
    from pensieve.contracts import tool_names

    assert set(default_tool_limits()) == tool_names()


def test_contracts_are_cheap_to_import() -> None:
    code = (
        "import sys, pensieve.contracts, pensieve.stages\n"
        "heavy = [m for m in ('torch', 'litellm', 'numpy', 'sentence_transformers', 'httpx') if m in sys.modules]\n"
        "print(','.join(heavy))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""
