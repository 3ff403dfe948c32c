"""The state of one correction as the loop works on it, the loop's knobs, and its step recorder."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from librarian.correction.candidates import FailureInput
from librarian.correction.escalation import FailedCommand
from librarian.correction.locate import TaskLocation
from librarian.correction.models import CorrectionAttempt
from librarian.correction.options import CorrectionOption
from librarian.correction.problem import Problem
from librarian.correction.research_step import ResearchAttempt
from librarian.correction.triggers import FailureClass
from librarian.runtime.contracts import Workspace
from librarian.runtime.correctors import CorrectionContext
from librarian.runtime.version_probe import ToolVersion

__all__ = ["LoopOptions", "LoopRun", "StepRecorder"]


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
    """

    threshold: float = 0.7
    other_version_factor: float = 0.85
    pending_session_factor: float = 0.95
    llm_max_confidence: float = 0.8
    broaden: bool = True
    ask_user: bool = True
    retry_transient: bool = True


class StepRecorder(Protocol):
    """Records one step of the loop on the timeline."""

    def __call__(self, stage: str, summary: str, data: dict[str, Any] | None = None) -> None: ...


@dataclass
class LoopRun:
    """What one correction has found so far."""

    context: CorrectionContext
    argv: list[str]
    exit_code: int | None
    stderr: str
    stdout: str
    location: TaskLocation | None
    workspace: Workspace | None = None
    trigger: FailureClass | None = None
    version: ToolVersion | None = None
    problem: Problem | None = None
    research: list[ResearchAttempt] = field(default_factory=list)
    considered: list[CorrectionOption] = field(default_factory=list)
    tried: list[list[str]] = field(default_factory=list)
    history: list[FailedCommand] = field(default_factory=list)
    origin: CorrectionAttempt | None = None
    started: float = field(default_factory=time.perf_counter)

    @property
    def output(self) -> str:
        """Standard error, then standard output: tools print their errors on either."""
        return f"{self.stderr}\n{self.stdout}" if self.stdout.strip() else self.stderr

    def failure_input(
        self,
        *,
        snippets: list[dict[str, Any]] | None = None,
        learned: list[dict[str, Any]] | None = None,
    ) -> FailureInput:
        """The failure as the offline strategies take it, with these snippets and learned fixes."""
        return FailureInput(
            argv=self.argv,
            exit_code=self.exit_code if self.exit_code is not None else 1,
            stderr=self.stderr,
            workspace=self.workspace.root if self.workspace else None,
            stdout=self.stdout,
            tool_version=self.version.version if self.version else None,
            snippets=snippets or [],
            learned_fixes=learned or [],
        )
