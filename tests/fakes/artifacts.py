"""The fake model's default artifacts: a real artifact of each kind, about the request's topic.

They meet the default stage contracts (pensieve/contracts.py; tests/test_contracts.py checks
every one) for any brief: the topic is read from the request, the drafts are long enough for
the default `article.target_words` of 1500, and nothing is cited (no source is ever fetched
by the default script, so the research is marked unsourced and every claim of the fact check
is `uncited`, which the Reviser's notes answer claim by claim). Each ends with a comment
naming the stage, which tests use to recognise the fake's work.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

DEFAULT_TOPIC = "How vector databases index embeddings"

# A line of the task message (or system prompt) that names the brief, in the forms a task
# message may give it: `Brief: ...`, `Title: "..."`, `The brief's title: ...`, `Topic: ...`.
_BRIEF_LINE = re.compile(
    r"^\s*(?:the\s+)?(?:brief(?:'s)?|article(?:'s)?|working)?\s*(?:title|brief|topic)\s*(?:is)?\s*:\s*(.+?)\s*$",
    re.I | re.M,
)
_PROJECT = re.compile(r"^Project: ([A-Za-z0-9._-]+)\. ", re.M)


def topic_of(body: dict[str, Any]) -> str:
    """The article's topic, as the request tells it: the brief named in the task message or
    system prompt, else the project id when it is a slug of the brief, else the default."""
    messages = body.get("messages") or []
    task = next((str(m.get("content") or "") for m in messages if m.get("role") == "user"), "")
    system = next((str(m.get("content") or "") for m in messages if m.get("role") == "system"), "")
    for text in (task, system):
        match = _BRIEF_LINE.search(text)
        if match:
            topic = match.group(1).strip().rstrip(".").strip("\"'\u201c\u201d`*").strip()
            if topic:
                return topic.splitlines()[0]
    project = _PROJECT.search(task)
    if project:
        slug = re.sub(r"-\d+$", "", project.group(1))  # "-2": a second project with the same brief
        words = [w for w in re.split(r"[-_.]+", slug) if w]
        if len(words) >= 2:
            return " ".join(words).capitalize()
    return DEFAULT_TOPIC


def _subject(topic: str) -> str:
    """The topic inside a sentence: 'How X works' -> 'how X works', acronyms kept."""
    topic = topic.strip().rstrip("?.!")
    if len(topic) > 1 and topic[0].isupper() and not topic[1].isupper():
        return topic[0].lower() + topic[1:]
    return topic


def _marker(stage: str) -> str:
    return f"\n<!-- This is the {stage} artifact, written by the fake model. -->\n"


def topic_brief(topic: str) -> str:
    s = _subject(topic)
    return f"""# {topic}

## Angle
The one question this article answers is {s}: what actually happens, step by step, and
which design choices change the outcome. It matters now because more teams depend on it
every year while most explanations either skip the mechanism or drown it in detail.

## Audience
Curious, technically literate readers who know the basic vocabulary of the field but have
not studied {s} closely, and want to judge claims about it for themselves.

## Scope
In: the core mechanism behind {s}, the main variants in use today, their trade-offs, and
how to evaluate them. Out: vendor comparisons, pricing, and history beyond what is needed to
explain the present design.

## Key questions
1. What problem does {s} solve, and what did people do before?
2. How does the core mechanism work, step by step?
3. Which variants are in use, and how do they differ?
4. What are the main trade-offs (speed, accuracy, cost, complexity)?
5. How is the result measured or evaluated in practice?
6. What are the common mistakes and misconceptions?

## Prior knowledge
None: the topic memory holds no earlier article on this subject.

## Length and form
About 1500 words: an introduction, four or five sections following the key questions, and a
short conclusion.
{_marker("refiner")}"""


def research_notes(topic: str) -> str:
    s = _subject(topic)
    return f"""# Research notes: {topic}

No web search was available for this run: every finding below is general knowledge and is
marked (unsourced) so that later stages treat it with care.

## What problem does it solve?
- The need behind {s} is practical: a task that used to be done by hand or by brute force
  became too slow or too costly at today's scale (unsourced).
- Before the current approach, simpler methods worked for small cases but did not scale
  (unsourced).

## How does the core mechanism work?
- The mechanism splits the work into a preparation step done once and a cheap step done
  many times (unsourced).
- Most of the cleverness lies in the preparation step, which organises the data so that
  later work can skip most of it (unsourced).

## Which variants are in use?
- Two or three families of designs dominate; they differ in what they precompute and in how
  much memory they spend to save time (unsourced).
- Hybrid designs combine the families, trading simplicity for better results (unsourced).

## What are the trade-offs?
- Faster answers usually cost accuracy or memory; the right balance depends on the workload
  (unsourced).
- Updates are the weak point of many designs: adding or removing data can be expensive
  (unsourced).

## How is it evaluated?
- Practitioners measure speed, accuracy against an exact baseline, and cost, on data that
  resembles their own (unsourced).

## Open questions
- How well the published results carry over to real workloads remains disputed.
- Which variant suits small teams best is a matter of opinion more than evidence.
{_marker("researcher")}"""


def outline(topic: str) -> str:
    s = _subject(topic)
    return f"""# {topic}

Thesis: {s[0].upper() + s[1:]} comes down to a few design choices, and knowing them is
enough to judge any system that claims to do it well.

## Introduction (~150 words)
- The question, and why it matters now.
- What the reader will be able to judge by the end.

## The problem it solves (~250 words)
- What made the naive approach too slow or too costly.
- What people did before the current designs.

## How the mechanism works (~400 words)
- The preparation step done once, and the cheap step done many times.
- Where the cleverness lies, with one worked example.

## Variants and trade-offs (~350 words)
- The main families of designs, side by side.
- Speed, accuracy, memory and updates: what each one gives up.

## Measuring it in practice (~200 words)
- Speed, accuracy against an exact baseline, and cost, on realistic data.

## Conclusion (~150 words)
- The few choices that matter, and the open questions.
{_marker("outliner")}"""


_ARTICLE = """# {title}

Anyone who has looked into {s} has met two kinds of explanation: the confident summary that
skips every detail, and the specification that buries the reader in them. This article takes
a middle road. It starts from the question a practitioner actually asks, follows the
mechanism one step at a time, and stops at each point where a design choice changes the
outcome. Along the way it separates what is well established from what is still argued
about, so that a reader can tell a settled fact from a confident claim.

## Why the question matters

The need behind {s} is practical. A task that used to be done by hand, or by brute force,
became too slow and too costly once the amount of data grew by several orders of magnitude.
A method that answers in a second for a thousand items answers in hours for a billion, and
no amount of faster hardware closes a gap of that size. Teams that meet this wall for the
first time often try to buy their way past it, and discover that the cost grows as fast as
the data does.

The early answers were simple and honest about their limits. They worked well for small
collections, and they are still the right choice when the data fits comfortably in memory
and the questions are rare. The interesting part begins when neither is true, which is the
situation most production systems find themselves in today.

## How the mechanism works

Every serious design splits the work into two parts. The first is a preparation step, done
once or at least rarely, that organises the data. The second is the step done for every
question, which uses that organisation to look at only a small fraction of the data. The
whole art lies in making the first step pay for itself many times over in the second.

A useful way to picture it is a library. Without a catalogue, finding a book means walking
every shelf. With one, the reader goes straight to the right aisle, and only then reads the
spines. The catalogue costs effort to build and must be kept up to date, but nobody would
run a large library without one. The designs discussed here are catalogues of different
kinds, each tuned to a different way of asking.

The preparation step makes choices that cannot easily be undone. It decides how finely the
data is divided, how much extra memory the structure may use, and how much accuracy it is
willing to give up. Those choices set the ceiling on how fast and how accurate the answers
can later be, which is why experienced engineers spend more time on them than on anything
else in the system.

## Variants and their trade-offs

In practice, two or three families of designs dominate. One family divides the data into
groups and searches only the most promising groups; it is simple, uses little memory, and
degrades gracefully. Another builds a web of shortcuts between related items and walks it
greedily; it is fast and accurate, but hungry for memory and slower to build. A third
compresses the data so that more of it fits in memory, accepting small errors in exchange
for a large saving in space.

None of these is best in general. Faster answers usually cost accuracy or memory, and the
right balance depends on the workload: how often the data changes, how many questions
arrive per second, and how much an occasional wrong answer costs. Hybrid designs combine
the families, for example compressing the items inside each group, and trade simplicity for
better figures on every axis at once.

Updates deserve special attention because they are the weak point of many designs. A
structure built for a fixed collection may need to be rebuilt when a large share of the data
changes, and a rebuild at the wrong moment can take a system offline. Designs that accept
updates gracefully exist, but they pay for it with more complex code and, often, with
slightly worse answers until the structure is tidied up again.

## Measuring it in practice

Published benchmarks are a starting point, not an answer. Practitioners measure three
things on data that resembles their own: how long a typical question takes, how often the
answer matches the one an exact but slow method would give, and what the whole system costs
to run. The second figure is the one most often forgotten, and the one that most often
explains disappointing results after launch.

A sound evaluation also varies the settings rather than testing one configuration. Most
designs expose a knob that trades speed for accuracy, and the useful result is the whole
curve, not a single point on it. Two systems that look identical at one setting can behave
very differently at another, and only the curve shows which one suits a given budget.

A realistic test set matters as much as the method. Questions drawn at random from the
stored data are easier than the questions real users ask, because they always have a close
match. A fair evaluation keeps a sample of genuine questions aside, computes their exact
answers once with the slow method, and compares every candidate system against that fixed
reference. The exercise takes a day, and it routinely overturns the conclusions drawn from
public benchmarks.

## What changes at scale

Growth changes which costs dominate. With a few thousand items, the preparation step is
cheap and almost any design is fast enough. With hundreds of millions, memory becomes the
binding constraint, the structure no longer fits on one machine, and the data has to be
split across several. Each split adds a network hop to every question and a coordination
problem to every update. Designs that looked equivalent on a laptop diverge sharply here,
which is why it pays to test at the size one expects to reach, not the size one has today.

## Common mistakes

The most common mistake is to choose a design from a leaderboard without checking whether
the leaderboard's data resembles one's own. The second is to ignore updates until they
become a crisis. The third is to tune for speed alone and discover later that the answers
quietly got worse. Each of these is easy to avoid once it has been named, which is a good
reason to write the evaluation plan before writing any code.

## Conclusion

Stripped of jargon, {s} comes down to a small number of choices: how to organise the data
once, how much memory to spend, and how much accuracy to give up for speed. Knowing those
choices is enough to read any product claim critically and to ask the questions that reveal
whether a system fits a given workload. What remains open is how well published results
carry over to real data, and that is a question each team can only answer by measuring its
own.
"""


def article(topic: str) -> str:
    return _ARTICLE.format(title=topic, s=_subject(topic))


_CLAIMS = (
    "A method that answers in a second for a thousand items answers in hours for a billion.",
    "One family of designs divides the data into groups and searches only the most promising ones.",
    "Designs that build a web of shortcuts between related items are fast but hungry for memory.",
    "Compressing the data trades small errors for a large saving in space.",
)


def fact_check(topic: str) -> str:
    rows = "\n".join(f"| {n} | {claim} |  | uncited | n/a |" for n, claim in enumerate(_CLAIMS, 1))
    corrections = "".join(
        f"- Claim {n}: cite a source for it, or present it as general background without figures.\n"
        for n in range(1, len(_CLAIMS) + 1)
    )
    return f"""# Fact check: {topic}

No sources were fetched for this article, so no claim could be checked against a source:
every checkable claim is uncited.

| # | claim | cited id | verdict | evidence |
|---|-------|----------|---------|----------|
{rows}

## Corrections for the Reviser
{corrections}{_marker("fact_checker")}"""


def content_review(topic: str) -> str:
    s = _subject(topic)
    return f"""# Content review: {topic}

Verdict: the draft answers the brief's main question about {s} and follows the outline, but
it argues from general knowledge rather than sources.

1. "Every serious design splits the work into two parts": the central claim of the article
   has no source. Suggested change: cite one, or say plainly that it is a simplification.
2. "Variants and their trade-offs": the three families are described but not compared on
   the same workload. Suggested change: add one sentence per family on when to choose it.
3. "Measuring it in practice": the advice is sound but abstract. Suggested change: give one
   concrete example of a speed-accuracy curve and how to read it.
{_marker("content_reviewer")}"""


def style_review(topic: str) -> str:
    return f"""# Style review: {topic}

1. Opening: "Anyone who has looked into..." takes two sentences to reach the point.
   Rewrite: start with the question the article answers.
2. Sentence length: several sentences in "How the mechanism works" run past 35 words.
   Rewrite: split each at its main clause.
3. Ending: the conclusion repeats the introduction's wording. Rewrite: end on the open
   question and what the reader can do about it.
{_marker("style_reviewer")}"""


def revised_draft(topic: str) -> str:
    notes = "".join(
        f"- Claim {n}: no source was available; kept as general background, stated without figures.\n"
        for n in range(1, len(_CLAIMS) + 1)
    )
    return f"""{article(topic).rstrip()}

## Revision notes
- Content findings 1-3: applied; the central simplification is now stated as one.
- Style findings 1-3: applied where they did not change the meaning.
{notes}{_marker("reviser")}"""


def final_article(topic: str) -> str:
    return f"{article(topic).rstrip()}\n{_marker('polisher')}"


def consistency_report(topic: str, earlier: Sequence[str] = ()) -> str:
    if earlier:
        compared = "Compared with the workspace's other articles: " + ", ".join(f"`{p}`" for p in earlier) + "."
    else:
        compared = "No earlier articles in the workspace to compare with: this is the first one."
    return f"""# Consistency report: {topic}

Verdict: consistent.

## Earlier articles
{compared}

## Findings
1. The article delivers the brief's angle and stays within its scope.
2. Terms are used consistently throughout; no contradiction with earlier articles was found.
{_marker("consistency_checker")}"""


def artifact(stage: str, topic: str = DEFAULT_TOPIC, earlier: Sequence[str] = ()) -> str:
    """The default artifact of `stage` about `topic` (earlier: other projects' ids)."""
    writers = {
        "refiner": topic_brief,
        "researcher": research_notes,
        "outliner": outline,
        "drafter": article,
        "content_reviewer": content_review,
        "fact_checker": fact_check,
        "style_reviewer": style_review,
        "reviser": revised_draft,
        "polisher": final_article,
    }
    if stage == "consistency_checker":
        return consistency_report(topic, earlier)
    if stage == "drafter":
        return f"{article(topic).rstrip()}\n{_marker('drafter')}"
    if stage in writers:
        return writers[stage](topic)
    return f"# {topic}\n\nThe {stage} output.\n{_marker(stage)}"
