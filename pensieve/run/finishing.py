"""When the model stops calling tools: does the stage have a real artifact?

The output-file rule and the stage's contract (pensieve.contracts), applied in the agent
loop so that the model can be asked again in the same conversation:
- no file written: one reminder turn; after that the final message is the artifact only
  if it meets the contract;
- a contract violation: a repair turn that says exactly what is wrong, up to
  `llm.repair_turns`; still violated: `ContractFailed`, which names the figures;
- a reply cut off by the output limit is never an artifact: the model is asked to write
  the file again, within the same bound;
- out of rounds or stopped by the loop guard: a staged artifact that meets its contract is
  accepted (with a note); otherwise the stage fails.
What the model wrote is never deleted: the pipeline keeps a rejected artifact for the user.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pensieve.contracts import Violation, check_artifact, repair_instruction, stage_error, strip_think
from pensieve.errors import StageFailed
from pensieve.project.source_archive import SourceArchive
from pensieve.project.workspace import atomic_write_text
from pensieve.stages import Artifact, Stage
from pensieve.tools.registry import Tool, ToolContext
from pensieve.tools.workspace import earlier_articles, shown_articles

# (artifact text, [system prompt, user turns...], files the agent read) -> what is wrong with it.
ContractCheck = Callable[[str, Sequence[str], Collection[str]], list[Violation]]

_OPENING_FENCE = re.compile(r"^```(?:markdown|md)?[ \t]*$", re.I)


def unfence(text: str) -> str:
    """A document wrapped in a ```markdown fence, as models often write it: the fence
    would end up in the file. Small models double the opening fence or never close it;
    fences inside the document are its own and make it no wrapper."""
    lines = text.strip().splitlines()
    opened = 0
    while lines and _OPENING_FENCE.match(lines[0].strip()):
        lines.pop(0)
        opened += 1
    if not opened:
        return text.strip()
    closed = 0
    while lines and lines[-1].strip() == "```" and closed < opened:
        lines.pop()
        closed += 1
    inner = "\n".join(lines).strip()
    if any(line.lstrip().startswith("```") for line in lines):
        return text.strip()
    return inner


class ContractFailed(StageFailed):
    """The artifact still breaks its contract when the repair turns are spent."""

    def __init__(self, stage: Stage, violations: Sequence[Violation], reason: str = "") -> None:
        self.stage = stage
        self.violations = list(violations)
        self.reason = reason  # why no more turns could be asked for, when not the repair limit
        super().__init__(self._message())

    def _message(self, kept_as: str | None = None) -> str:
        error = stage_error(self.stage, self.violations, kept_as=kept_as)
        return f"{self.reason}; {error}" if self.reason else error

    def with_kept(self, kept_as: str) -> str:
        return self._message(kept_as)


# The user's brief is not among them: a stage that hands it back has written nothing.
_OWN_ARTIFACTS = tuple(a for a in Artifact if a is not Artifact.BRIEF)


def project_texts(project_dir: Path) -> list[str]:
    """The project's committed artifacts and archived sources: what the stage's instructions
    quote back to it (the evidence list quotes the article and its sources' passages), so an
    artifact repeating them repeats the project, not the instructions."""
    texts = []
    paths = [project_dir / a for a in _OWN_ARTIFACTS]
    paths += sorted((project_dir / "sources").glob("S*.md"))
    for path in paths:
        try:
            texts.append(path.read_text(encoding="utf-8", errors="replace"))
        except OSError:
            continue  # not written yet, or unreadable: nothing it could have quoted
    return texts


@dataclass
class Finisher:
    stage: Stage
    staged: Path
    check: ContractCheck
    repair_turns: int
    max_output_tokens: int | None = None
    prompts: Sequence[str] = ()
    # What the final-message fallback last staged: while the file still holds it, the model
    # has not written with the tool since, and its next final message is the candidate.
    fallback: str | None = None
    # Files the agent read with read_project_file (a review of an unread draft is none).
    files_read: set[str] = field(default_factory=set)
    # What each turn that asked again was for: "reminder" (at most once), "contract", "cut_off".
    asked: list[str] = field(default_factory=list)
    # The stage has edit_project_file: a repair turn suggests it for small fixes.
    can_edit: bool = False

    @property
    def repairs(self) -> int:
        """The turns spent of llm.repair_turns (the reminder is on top of them)."""
        return sum(1 for why in self.asked if why != "reminder")

    @classmethod
    def for_stage(cls, ctx: ToolContext, offered: Sequence[Tool], staged: Path) -> Finisher:
        """The stage's finisher, its contract bound to what the artifact is judged against:
        the user's brief, the prompts the agent was given (an echo is no artifact), the pages
        it could have cited (with web search), and the finished articles list_projects shows."""
        stage, settings, project = ctx.stage, ctx.settings, ctx.project
        brief_path = project.file(Artifact.BRIEF)
        brief = brief_path.read_text(encoding="utf-8", errors="replace") if brief_path.is_file() else ""
        # Pages it could have cited: fetched with web search, or returned by an MCP tool
        # whose server still answers (one that crashed during the stage gave it nothing).
        searches = any(t.name == "web_search" for t in offered)
        servers = {t.origin for t in offered if t.origin.startswith("mcp:")}

        def can_cite() -> bool:
            mcp = ctx.resources.mcp
            return searches or (mcp is not None and any(mcp.available(origin) for origin in servers))

        earlier = earlier_articles(ctx) if any(t.name == "list_projects" for t in offered) else None

        def own_text() -> list[str]:
            return project_texts(project.dir)

        def check(text: str, prompts: Sequence[str], files_read: Collection[str]) -> list[Violation]:
            # The system prompt, then every user turn (the task, reminders, repairs).
            system, task = (prompts[0] if prompts else ""), "\n\n".join(prompts[1:])
            return check_artifact(
                stage,
                text,
                settings=settings,
                brief_text=brief,
                prompt=system,
                task_message=task,
                web_sources=len(SourceArchive(project.dir).entries()) if can_cite() else None,
                earlier_articles=None if earlier is None else shown_articles(ctx, earlier),
                files_read=files_read,
                own_text=own_text,
            )

        llm = settings.llm
        return cls(
            stage,
            staged,
            check,
            repair_turns=llm.repair_turns,
            max_output_tokens=llm.max_output_tokens,
            can_edit=any(t.name == "edit_project_file" for t in offered),
        )

    def _staged_text(self) -> str:
        if not self.staged.is_file():
            return ""
        text = self.staged.read_text(encoding="utf-8", errors="replace")
        # Reasoning and a fence around the whole document never reach an artifact.
        cleaned = unfence(strip_think(text))
        if cleaned and cleaned != text.strip():
            atomic_write_text(self.staged, cleaned + "\n")
        return cleaned

    def review(self, final_text: str, *, cut_off: bool = False) -> str | None:
        """The model answered without a tool call. None: the staged artifact is accepted;
        else the next user turn. Raises StageFailed when nothing more can be asked."""
        if cut_off:
            return self._ask_again("cut_off", self._cut_off_message(), self._cut_off_failure)
        text = self._staged_text()
        if not text and "reminder" not in self.asked:
            self.asked.append("reminder")
            return self._reminder()
        if not text or text == self.fallback:
            text = self._stage_final_message(final_text) or text
        violations = self.check(text, self.prompts, self.files_read)
        if not violations:
            return None
        message = repair_instruction(self.stage, violations)
        if self.can_edit and self.staged.is_file():
            message += (
                f'\n\nFor a small fix, call edit_project_file with filename "{self.stage.writes}", the exact '
                "old_text to change and its new_text, instead of writing the whole file again."
            )
        return self._ask_again("contract", message, lambda: ContractFailed(self.stage, violations))

    def _stage_final_message(self, final_text: str) -> str:
        """The final message as the candidate artifact (it is judged like a written file)."""
        candidate = unfence(strip_think(final_text))
        if not candidate:
            if self.fallback is None:
                raise StageFailed(
                    f"{self.stage.name} finished without writing {self.stage.writes} and without a final message"
                )
            return ""
        atomic_write_text(self.staged, candidate + "\n")
        self.fallback = candidate
        return candidate

    def _ask_again(self, why: str, message: str, failure: Callable[[], StageFailed]) -> str:
        if self.repairs >= self.repair_turns:
            raise failure()
        self.asked.append(why)
        self.prompts = (*self.prompts, message)  # an echo of this turn is no artifact either
        return message

    def accept_staged(self, reason: str) -> str:
        """Out of rounds or stopped by the loop guard: a staged artifact that meets its
        contract is committed with a warning (returned); anything else fails the stage."""
        text = self._staged_text()
        if not text:
            raise StageFailed(f"{reason}; {self.stage.writes} was never written")
        violations = self.check(text, self.prompts, self.files_read)
        if violations:
            raise ContractFailed(self.stage, violations, reason)
        return f"{self.stage.name}: {reason}; committing the {self.stage.writes} it wrote, which meets its contract"

    def _reminder(self) -> str:
        name = self.stage.writes
        return (
            f"You have not written `{name}` yet. Write it now: call write_project_file with filename "
            f'"{name}" and the whole markdown document as content. Then reply with one short line.'
        )

    def _cut_off_message(self) -> str:
        limit = f" ({self.max_output_tokens} tokens)" if self.max_output_tokens else ""
        return (
            f"Your reply was cut off by the output limit{limit}, so it cannot be used. Write `{self.stage.writes}` "
            "with write_project_file in one call, keeping it within the limit (shorter sentences, no preamble)."
        )

    def _cut_off_failure(self) -> StageFailed:
        return StageFailed(
            f"{self.stage.name}: the model's replies were cut off by the output limit "
            f"(llm.max_output_tokens {self.max_output_tokens}) {self.repairs + 1} times; raise llm.max_output_tokens "
            f"or use a model that writes shorter replies (--model, or agents.{self.stage.name}.model)"
        )
