"""One stage's conversation as the agent loop builds it, in characters, without a model.

Every call re-sends the whole conversation: the system prompt, the task and the tool
schemas, then each turn's tool calls and results. So a stage's input tokens grow with the
square of its turns, and what it reads early (its input files, fetched pages) is paid for
again on every later call. `simulate` adds that up for the turns a stage is expected to
take; `pensieve.estimate.history` corrects the result by what finished projects used.
"""

from __future__ import annotations

from dataclasses import dataclass

# Characters per token: about 4 for English prose and markdown with OpenAI-style tokenizers
# (the same rule the by-hand relay counts with). The ranges absorb the error.
CHARS_PER_TOKEN = 4.0
# A tool call as the model writes it (name, JSON arguments) and a short final answer.
CALL_CHARS = 120
FINAL_CHARS = 150


@dataclass(frozen=True)
class Shape:
    """What one stage's conversation is expected to hold, in characters."""

    base: int  # system prompt + task + tool schemas: sent with every call
    reads: int  # the input files, read in the first turn (the calls made at once)
    first_calls: int  # tool calls of that first turn (reads, search_topics, list_projects...)
    extra_results: int  # what those other first-turn tools return
    research_turns: int  # web_search / fetch_url turns
    research_chars: int  # what one such turn returns, on average
    artifact: int  # the file the stage writes (in the write_project_file call)
    context_cap: int  # llm.max_context_chars: older tool results are elided past it
    max_rounds: int
    attempts: float = 1.0  # expected runs of the stage (a stage resent once on a failed check)


@dataclass(frozen=True)
class Figures:
    calls: float
    input_tokens: float
    output_tokens: float

    @property
    def total_tokens(self) -> float:
        return self.input_tokens + self.output_tokens


def turns_of(shape: Shape) -> list[tuple[int, int]]:
    """(characters the model writes, characters the tools answer) per call, in order."""
    turns: list[tuple[int, int]] = []
    if shape.first_calls:
        turns.append((CALL_CHARS * shape.first_calls, shape.reads + shape.extra_results))
    turns += [(CALL_CHARS, shape.research_chars)] * shape.research_turns
    turns.append((shape.artifact + CALL_CHARS, CALL_CHARS))  # write_project_file and its answer
    turns.append((FINAL_CHARS, 0))  # the one-line summary that ends the stage
    if len(turns) > shape.max_rounds:  # the round cap: research gives way first
        turns = turns[: shape.max_rounds - 2] + turns[-2:]
    return turns


def simulate(shape: Shape) -> Figures:
    conversation = shape.base
    sent = written = 0
    turns = turns_of(shape)
    for out_chars, result_chars in turns:
        sent += min(conversation, shape.context_cap)
        written += out_chars
        conversation += out_chars + result_chars
    times = shape.attempts
    return Figures(len(turns) * times, sent * times / CHARS_PER_TOKEN, written * times / CHARS_PER_TOKEN)
