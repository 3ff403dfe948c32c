"""The state of one correction as the loop works on it, the loop's knobs, and its step recorder."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from librarian.correction.candidates import FailureInput
from librarian.correction.command_tree import CommandTree
from librarian.correction.escalation import FailedCommand
from librarian.correction.locate import TaskLocation
from librarian.correction.options import CorrectionOption
from librarian.correction.problem import Problem
from librarian.correction.research_step import ResearchAttempt
from librarian.correction.stages import Stage
from librarian.correction.tool_docs import DocPage
from librarian.correction.triggers import FailureClass
from librarian.runtime.contracts import Workspace
from librarian.runtime.correctors import CorrectionContext
from librarian.runtime.task_env import TaskEnvironment
from librarian.runtime.version_probe import ToolVersion

__all__ = ["LoopOptions", "LoopRun", "StepRecorder", "SubjectKindName"]

SubjectKindName = Literal["command", "code"]


@dataclass(frozen=True)
class LoopOptions:
    """The loop's knobs.

    Attributes:
        threshold: the confidence an option needs to be applied.
        other_version_factor: confidence factor of a verified fix learned with another version.
        pending_session_factor: confidence factor of a correction made earlier in this workflow that
            has not been verified yet.
        llm_max_confidence: the LLM's self-rated confidence is capped here (it is not calibrated).
        broaden: research again with broader terms and ``version='latest'`` when nothing qualifies.
        ask_user: ask the user a clarification question (the workflow pauses) before escalating.
        retry_transient: retry a transient failure (timeout, refused connection) unchanged.
        max_chain: how many corrections may follow one another, each correcting the last one's new
            error (a chain), before the loop stops going deeper.
        max_alternatives: how many corrections are tried from one command (or code) before the loop
            goes back a step or gives up.
        index_on_demand: index the failing tool's help (or package's API) at the detected version
            when the store has no documentation of that version.
    """

    threshold: float = 0.7
    other_version_factor: float = 0.85
    pending_session_factor: float = 0.95
    llm_max_confidence: float = 0.8
    broaden: bool = True
    ask_user: bool = True
    retry_transient: bool = True
    max_chain: int = 3
    max_alternatives: int = 3
    index_on_demand: bool = True


class StepRecorder(Protocol):
    """Records one step of the loop on the timeline."""

    def __call__(self, stage: str, summary: str, data: dict[str, Any] | None = None) -> None: ...


@dataclass
class LoopRun:
    """What one correction has found so far.

    Attributes:
        kind: ``command`` (an argv) or ``code`` (a task's Python source).
        subject: what is being corrected: the argv, or the code.
        tool: the tool (a program's name) or the distribution the failure is about.
        program: the argv prefix that runs the tool (commands) or the interpreter (code).
        succeeded: the run exited as expected but warned that part of it was ignored.
        stage: how this failure relates to the loop's earlier corrections of the task.
        tree: the tool's documented commands at the detected version (commands).
        pages: the documented API of the distribution at the detected version (code).
        details: what the subject's side found that the loop passes along (code: the failure).
    """

    context: CorrectionContext
    kind: SubjectKindName
    subject: Any
    exit_code: int | None
    stderr: str
    stdout: str
    location: TaskLocation | None
    succeeded: bool = False
    workspace: Workspace | None = None
    task_env: TaskEnvironment = field(default_factory=TaskEnvironment)
    tool: str = ""
    program: tuple[str, ...] = ()
    trigger: FailureClass | None = None
    version: ToolVersion | None = None
    problem: Problem | None = None
    research: list[ResearchAttempt] = field(default_factory=list)
    considered: list[CorrectionOption] = field(default_factory=list)
    stage: Stage | None = None
    history: list[FailedCommand] = field(default_factory=list)
    tree: CommandTree | None = None
    pages: list[DocPage] = field(default_factory=list)
    details: Any = None
    docs_sdk: str | None = None
    started: float = field(default_factory=time.perf_counter)

    @property
    def argv(self) -> list[str]:
        """The command line being corrected (empty for code)."""
        return list(self.subject) if self.kind == "command" else []

    @property
    def code(self) -> str | None:
        """The code being corrected (``None`` for a command)."""
        return str(self.subject) if self.kind == "code" else None

    @property
    def output(self) -> str:
        """Standard error, then standard output: tools print their errors on either."""
        return f"{self.stderr}\n{self.stdout}" if self.stdout.strip() else self.stderr

    @property
    def tried(self) -> list[Any]:
        """What was already tried from this stage (argvs or code)."""
        return list(self.stage.tried) if self.stage is not None else []

    @property
    def blamed(self) -> tuple[str, ...]:
        """What earlier corrections introduced and the tool rejected."""
        return tuple(sorted(self.stage.blamed)) if self.stage is not None else ()

    def failure_input(
        self,
        *,
        snippets: list[dict[str, Any]] | None = None,
        learned: list[dict[str, Any]] | None = None,
    ) -> FailureInput:
        """The failure as the offline command strategies take it, with these snippets and learned fixes."""
        return FailureInput(
            argv=self.argv,
            exit_code=self.exit_code if self.exit_code is not None else 1,
            stderr=self.stderr,
            workspace=self.workspace.root if self.workspace else None,
            stdout=self.stdout,
            tool_version=self.version.version if self.version else None,
            snippets=snippets or [],
            learned_fixes=learned or [],
            tree=self.tree,
            tool=self.tool or None,
            blamed=self.blamed,
            intent=f"{self.context.failed.description}\n{self.context.goal}",
        )
