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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pensieve.citations.cited_sources import load_sources
from pensieve.contracts import Violation, check_artifact, repair_instruction, stage_error, strip_think
from pensieve.errors import StageFailed
from pensieve.stages import Artifact, Stage
from pensieve.tools.projects import earlier_articles
from pensieve.tools.registry import Tool, ToolContext
from pensieve.workspace import atomic_write_text

# (artifact text, [system prompt, task message]) -> what is wrong with it.
ContractCheck = Callable[[str, Sequence[str]], list[Violation]]

_FENCED = re.compile(r"^```(?:markdown|md)?[ \t]*\n(.*)\n```$", re.S | re.I)


def unfence(text: str) -> str:
    """A final message used as the artifact: models often wrap a whole document in a
    ```markdown fence, which would end up in the file."""
    text = text.strip()
    match = _FENCED.match(text)
    return match.group(1).strip() if match and "\n```" not in match.group(1) else text


class ContractFailed(StageFailed):
    """The artifact still breaks its contract when the repair turns are spent."""

    def __init__(self, stage: Stage, violations: Sequence[Violation]) -> None:
        self.stage = stage
        self.violations = list(violations)
        super().__init__(stage_error(stage, self.violations))

    def with_kept(self, kept_as: str) -> str:
        return stage_error(self.stage, self.violations, kept_as=kept_as)


@dataclass
class Finisher:
    stage: Stage
    staged: Path
    check: ContractCheck
    repair_turns: int
    max_output_tokens: int | None = None
    prompts: Sequence[str] = ()
    reminded: bool = False
    repairs: int = 0
    # What each turn that asked again was for: "reminder", "contract", "cut_off".
    asked: list[str] = field(default_factory=list)

    @classmethod
    def for_stage(cls, ctx: ToolContext, offered: Sequence[Tool], staged: Path) -> Finisher:
        """The stage's finisher, its contract bound to what the artifact is judged against:
        the user's brief, the prompts the agent was given (an echo is no artifact), the pages
        it could have cited (with web search), and the finished articles list_projects shows."""
        stage, settings, project = ctx.stage, ctx.settings, ctx.project
        brief_path = project.file(Artifact.BRIEF)
        brief = brief_path.read_text(encoding="utf-8", errors="replace") if brief_path.is_file() else ""
        web = any(t.name == "web_search" for t in offered)
        earlier = earlier_articles(ctx) if any(t.name == "list_projects" for t in offered) else None

        def check(text: str, prompts: Sequence[str]) -> list[Violation]:
            system, task = (*prompts, "", "")[:2]
            return check_artifact(
                stage,
                text,
                settings=settings,
                brief_text=brief,
                prompt=system,
                task_message=task,
                web_sources=len(load_sources(project.dir)) if web else None,
                earlier_articles=earlier,
            )

        llm = settings.llm
        return cls(stage, staged, check, repair_turns=llm.repair_turns, max_output_tokens=llm.max_output_tokens)

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
        if not text:
            if not self.reminded:
                self.reminded = True
                self.asked.append("reminder")
                return self._reminder()
            candidate = strip_think(unfence(final_text)).strip()
            if not candidate:
                raise StageFailed(
                    f"{self.stage.name} finished without writing {self.stage.writes} and without a final message"
                )
            atomic_write_text(self.staged, candidate + "\n")
            text = candidate
        violations = self.check(text, self.prompts)
        if not violations:
            return None
        return self._ask_again(
            "contract", repair_instruction(self.stage, violations), lambda: ContractFailed(self.stage, violations)
        )

    def _ask_again(self, why: str, message: str, failure: Callable[[], StageFailed]) -> str:
        if self.repairs >= self.repair_turns:
            raise failure()
        self.repairs += 1
        self.asked.append(why)
        return message

    def accept_staged(self, reason: str) -> str:
        """Out of rounds or stopped by the loop guard: a staged artifact that meets its
        contract is committed with a warning (returned); anything else fails the stage."""
        text = self._staged_text()
        if not text:
            raise StageFailed(f"{reason}; {self.stage.writes} was never written")
        violations = self.check(text, self.prompts)
        if violations:
            raise StageFailed(f"{reason}; {stage_error(self.stage, violations)}")
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
