"""What the knowledge base of verified fixes stores and answers: found fixes, attempts, verdicts.

The records of :mod:`librarian.correction.fixes` (which re-exports them): a :class:`KnownFix` found
for a problem, the :class:`AttemptRecord` of a correction the loop proposes, and the
:class:`Settlement` of an attempt once the event log has decided it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from librarian.correction.problem import Problem

__all__ = ["AttemptRecord", "KnownFix", "Settlement"]


@dataclass(frozen=True)
class KnownFix:
    """A verified fix found for a problem.

    Attributes:
        fix_id: its row id.
        same_version: it was verified with the version the problem has.
        tool_version: the version it was verified with.
        entry: the fix as the ``learned_fix`` strategy reads it (``id``, ``signature``, the two
            templates, ``successes``, ``failures``).
        snippets: the research snippets it was derived from.
    """

    fix_id: int
    same_version: bool
    tool_version: str | None
    entry: dict[str, Any]
    snippets: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class AttemptRecord:
    """A correction the loop is about to propose, as it is stored.

    Attributes:
        workflow_id, task_id, task_key: the task it corrects.
        problem: the problem it solves.
        trigger_category: the class the trigger rules gave the failure.
        error_text: what the failed command printed (scrubbed before it is stored).
        exit_code: the failed command's exit status.
        failed_argv, corrected_argv: the command that failed and the one that replaces it.
        strategy: the strategy that proposed it; source: where its knowledge came from
            (``session_cache``, ``knowledge_base``, ``research``, ``llm``).
        confidence, rationale: as the strategy said.
        fix_id: the verified fix it reuses, if any.
        snippets: the research snippets it relied on.
        research_calls: research calls made for this correction.
        failed_at: when the failure was recorded.
        kind: ``command`` or ``code``.
        failed_code, corrected_code: a code task's source before and after (``None`` for commands).
        edits: the edits that made the correction.
        chain_parent_id: the attempt whose correction this one corrects further, if any.
        depth: its depth in that chain (0 for a first correction).
    """

    workflow_id: uuid.UUID
    task_id: uuid.UUID
    task_key: str
    problem: Problem
    trigger_category: str
    error_text: str
    failed_argv: list[str]
    corrected_argv: list[str]
    strategy: str
    source: str
    confidence: float
    rationale: str
    fix_id: int | None = None
    snippets: list[dict[str, Any]] = field(default_factory=list)
    research_calls: int = 0
    failed_at: datetime | None = None
    exit_code: int | None = None
    kind: str = "command"
    failed_code: str | None = None
    corrected_code: str | None = None
    edits: list[dict[str, Any]] = field(default_factory=list)
    chain_parent_id: int | None = None
    depth: int = 0


@dataclass(frozen=True)
class Settlement:
    """The verdict on one correction attempt.

    Attributes:
        attempt_id, workflow_id, task_key: which attempt.
        outcome: ``succeeded``, ``failed`` or ``not_applied``.
        strategy, source: how the correction was found.
        corrected_argv: the command it ran.
        fix_id: the verified fix that was created or updated (``None`` when none was).
        new_fix: a new verified fix was saved.
        successes, failures: the fix's counts after this verdict.
        reward: the retry's reward (also added to the strategy statistics).
        correction_seconds: from the failure to the successful retry's result, when it succeeded.
        chain_fix_id: for the end of a chain, the verified fix saved for the whole chain (from the
            task's first failed command to the one that worked).
    """

    attempt_id: int
    workflow_id: str
    task_key: str
    outcome: str
    strategy: str
    source: str
    corrected_argv: list[str]
    fix_id: int | None
    new_fix: bool
    successes: int
    failures: int
    reward: float | None
    correction_seconds: float | None = None
    chain_fix_id: int | None = None
    shown: str = ""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready copy."""
        return {
            "attempt_id": self.attempt_id,
            "workflow_id": self.workflow_id,
            "task_key": self.task_key,
            "outcome": self.outcome,
            "strategy": self.strategy,
            "source": self.source,
            "corrected_argv": list(self.corrected_argv),
            "fix_id": self.fix_id,
            "new_fix": self.new_fix,
            "successes": self.successes,
            "failures": self.failures,
            "reward": self.reward,
            "correction_seconds": self.correction_seconds,
            "chain_fix_id": self.chain_fix_id,
            "shown": self.shown,
        }
