"""Stage contracts: what each stage's artifact must be before it may be committed.

A real model on a bad day writes junk that looks like progress: a JSON tool call as text,
a refusal, the task message repeated back, an eight-word draft, a topic brief about a
different subject. Each stage row declares a `Contract` (data: a tuple of requirements),
and `check_artifact` returns every `Violation` with the figures that explain it, e.g.
`length: 412 words, the target is at least 900 (60% of article.target_words 1500)`.
The same violations become the repair turn sent to the model (`repair_instruction`) and,
when repairs run out, the stage's one-line error (`stage_error`).

Pure functions over strings, cheap to import (`pensieve list` imports the stage table):
the only heavy piece, the MiniLM similarity used when a topic brief shares too few terms
with the brief, is imported lazily and can be replaced by any callable.

The package: `reading` (headings, sections, word counts, key terms), `requirements` (one
class per rule), `not_a_document` (what every artifact is checked against); this module
holds the contracts of the stage rows and the check itself.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pensieve.contracts.not_a_document import strip_think, universal_checks
from pensieve.contracts.reading import embedding_similarity, tool_names
from pensieve.contracts.requirements import (
    CitesSources,
    ClaimsTable,
    Findings,
    HeadedSections,
    Inputs,
    Length,
    NamesCompared,
    NumberedFindings,
    OnTopic,
    OpenQuestions,
    Requirement,
    Sections,
    Similarity,
    Title,
    Violation,
    WordBudgets,
)

if TYPE_CHECKING:
    from pensieve.config import Settings
    from pensieve.stages import Stage

# ---------------------------------------------------------------- contracts and the check


@dataclass(frozen=True)
class Contract:
    """What a stage's artifact must be: its kind (for messages) and its requirements.

    Every artifact also gets the universal checks: not empty, not a tool call written as
    text, not a refusal, not an echo of the prompt or task message, no <think> block.
    """

    kind: str
    requires: tuple[Requirement, ...] = ()


# The sections refiner.md asks for (tests/test_contracts.py keeps the two in step).
TOPIC_BRIEF_SECTIONS = ("Angle", "Audience", "Scope", "Key questions", "Prior knowledge", "Length and form")

TOPIC_BRIEF = Contract("topic brief", (Title(), Sections(TOPIC_BRIEF_SECTIONS), OnTopic()))
RESEARCH_NOTES = Contract("research notes", (Findings(), OpenQuestions(), CitesSources()))
OUTLINE = Contract("outline", (Title(), HeadedSections("min_outline_sections"), WordBudgets()))
DRAFT = Contract("draft", (Title(), HeadedSections("min_article_sections"), Length("draft_min_share")))
FINAL = Contract("final article", (Title(), HeadedSections("min_article_sections"), Length("final_min_share")))
REVIEW = Contract("review", (NumberedFindings(),))
FACT_CHECK = Contract("fact check", (ClaimsTable(),))
CONSISTENCY_REPORT = Contract("consistency report", (NamesCompared(),))
ANY_ARTIFACT = Contract("document")  # a row without a contract: the universal checks only


def contract_of(stage: Stage) -> Contract:
    """The stage row's contract (pensieve/stages.py), or just the checks every artifact gets."""
    return stage.contract or ANY_ARTIFACT


def check_artifact(
    stage: Stage,
    text: str,
    *,
    settings: Settings,
    brief_text: str,
    task_message: str | None = None,
    prompt: str | None = None,
    web_sources: int | None = None,
    earlier_articles: Mapping[str, str] | None = None,
    similarity: Similarity | None = None,
    files_read: Collection[str] | None = None,
    own_text: Callable[[], Sequence[str]] | None = None,
) -> list[Violation]:
    """Every way `text` fails the contract of the stage's artifact; [] when it meets it.

    - brief_text: the user's brief (brief.md), for the topic brief's on_topic check.
    - task_message, prompt: the stage's task message and system prompt, for the echo check.
    - web_sources: pages in the project's source archive when the stage has web tools,
      None when it has none (then nothing has to be cited).
    - earlier_articles: id -> title of the workspace's other projects that were complete
      when the stage started (what list_projects showed it); None when not known.
    - similarity: replaces the MiniLM similarity of the on_topic fallback (tests).
    - files_read: the files the agent read with read_project_file; None when not known.
    - own_text: the project's own texts (artifacts, archived sources), which the instructions
      may quote: repeating them is no echo. Called only when an echo is suspected.
    """
    if not settings.contracts.enabled:
        return []
    contract = contract_of(stage)
    given = Inputs(
        filename=str(stage.writes),
        kind=contract.kind,
        settings=settings,
        brief_text=brief_text,
        task_message=task_message,
        prompt=prompt,
        web_sources=web_sources,
        earlier_articles=earlier_articles,
        similarity=similarity,
        unread=() if files_read is None else tuple(str(r) for r in stage.reads if str(r) not in files_read),
        own_text=own_text,
    )
    if not text.strip():
        return [Violation("not_empty", "it is empty", f"write the whole {contract.kind}")]
    found, not_a_document = universal_checks(text, given)
    if not_a_document:
        return found  # what else it lacks follows from that: the repair is to write the document
    content = strip_think(text)
    for requirement in contract.requires:
        violation = requirement.check(content, given)
        if violation:
            found.append(violation)
    return found


def violation_summary(violations: Sequence[Violation]) -> str:
    """One line: `length: 412 words, the target is ...; sections: sections missing: Scope`."""
    return "; ".join(str(v) for v in violations)


def repair_instruction(stage: Stage, violations: Sequence[Violation]) -> str:
    """The turn that tells the model exactly what is wrong with its artifact and what to do."""
    filename = str(stage.writes)
    listed = "\n".join(f"- {v.contract}: {v.message}" + (f"; {v.fix}" if v.fix else "") for v in violations)
    return (
        f"`{filename}` does not meet its contract yet:\n{listed}\n"
        f"Write `{filename}` again with write_project_file: the complete document, fixing every point above. "
        "Then reply with one short line, and no tool call."
    )


def stage_error(stage: Stage, violations: Sequence[Violation], *, kept_as: str | None = None) -> str:
    """The stage's one-line error: the contracts broken with their figures, and the remedy."""
    kept = f" The rejected artifact is kept as {kept_as}." if kept_as else ""
    return (
        f"{stage.writes} does not meet its contract: {violation_summary(violations)}.{kept} "
        f"The model wrote no valid {contract_of(stage).kind}: try a stronger model "
        f"(--model, or agents.{stage.name}.model in the configuration)."
    )


__all__ = [
    "ANY_ARTIFACT",
    "CONSISTENCY_REPORT",
    "DRAFT",
    "FACT_CHECK",
    "FINAL",
    "OUTLINE",
    "RESEARCH_NOTES",
    "REVIEW",
    "TOPIC_BRIEF",
    "TOPIC_BRIEF_SECTIONS",
    "Contract",
    "Requirement",
    "Similarity",
    "Violation",
    "check_artifact",
    "contract_of",
    "embedding_similarity",
    "repair_instruction",
    "stage_error",
    "strip_think",
    "tool_names",
    "violation_summary",
]
