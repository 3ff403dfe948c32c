"""What the loop does that is particular to a failed *command* task (an ``argv``).

The loop (:mod:`~librarian.correction.loop`) is the same for commands and code; this module supplies
the command side: reading the failed argv and its output from the task, probing the tool's version
in the task's environment, the problem signature, applying learned fix templates, indexing the tool's
help on demand, loading its command tree, and the offline strategies (explicit replacement, synopsis
rewrite, command-line edits), plus :class:`CommandKind`, how chains and setbacks read command lines.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

from librarian.correction.candidates import Candidate, FailureInput
from librarian.correction.command_edits import CommandEdits
from librarian.correction.command_tree import CommandTree
from librarian.correction.error_hints import command_hints
from librarian.correction.models import CorrectionAttempt
from librarian.correction.problem import Problem, problem_of, tool_of
from librarian.correction.replacement import ExplicitReplacement
from librarian.correction.rewrite import SynopsisRewrite
from librarian.correction.strategies import LearnedFix
from librarian.correction.values import is_option
from librarian.runtime.correctors import FailedTask

__all__ = ["COMMAND_EXECUTOR", "CommandFailure", "CommandKind", "command_failure", "offline_candidates"]

COMMAND_EXECUTOR = "command_executor"
_STRATEGIES = (ExplicitReplacement(), SynopsisRewrite(), CommandEdits())


@dataclass(frozen=True)
class CommandFailure:
    """A failed command task as the loop reads it from its feedback notes."""

    argv: list[str]
    exit_code: int | None
    stderr: str
    stdout: str
    succeeded: bool

    @property
    def tool(self) -> str:
        """The tool's name (the executable's base name, or the module run with ``-m``)."""
        return tool_of(self.argv)[0]

    @property
    def program(self) -> tuple[str, ...]:
        """The argv prefix that runs the tool."""
        return tuple(self.argv[: tool_of(self.argv)[1]])


def command_failure(failed: FailedTask) -> CommandFailure | None:
    """The failed command of a ``command_executor`` task with an ``argv``, or ``None``."""
    argv = failed.payload.get("argv")
    if failed.executor_type != COMMAND_EXECUTOR or not _is_argv(argv):
        return None
    notes = failed.feedback_notes or {}
    details = notes.get("details") if isinstance(notes.get("details"), dict) else {}
    assert isinstance(details, dict)
    exit_code = details.get("exit_code")
    stderr = str(details.get("stderr") or "")
    stdout = str(details.get("stdout") or "")
    if not stderr and not stdout:
        stderr = str(notes.get("error_message") or "")
    return CommandFailure(
        list(argv),
        exit_code if isinstance(exit_code, int) else None,
        stderr,
        stdout,
        succeeded=bool(details.get("succeeded")),
    )


class CommandKind:
    """How chains and setbacks read command lines (:class:`~librarian.correction.stages.SubjectKind`)."""

    def failed(self, attempt: CorrectionAttempt) -> list[str]:
        """The argv the attempt corrected."""
        return list(attempt.failed_argv)

    def corrected(self, attempt: CorrectionAttempt) -> list[str]:
        """The argv it ran instead."""
        return list(attempt.corrected_argv)

    def key(self, subject: Any) -> tuple[str, ...]:
        """The argv as a tuple."""
        return tuple(subject)

    def introduced(self, before: Any, after: Any) -> set[str]:
        """Option names and words of ``after`` that ``before`` does not have."""
        had = {token.partition("=")[0] for token in before}
        return {token.partition("=")[0] for token in after} - had

    def named(self, output: str, subject: Any) -> set[str]:
        """The options and words of ``subject`` that ``output`` rejects."""
        argv = list(subject)
        hints = command_hints(output, argv, tool_of(argv)[1])
        names = {r.option for r in hints.targets}
        names |= {word for _, word in hints.rejected_words}
        return names


def problem(failure_argv: Sequence[str], output: str, version: str | None) -> Problem:
    """The problem signature of a failed command line."""
    return problem_of(list(failure_argv), output, version)


def learned_candidates(failure: FailureInput) -> list[Candidate]:
    """Stored fix templates (``failure.learned_fixes``) applied to this command's values."""
    return LearnedFix().propose(failure)


def offline_candidates(failure: FailureInput) -> list[Candidate]:
    """Every offline strategy's candidates for a researched failure, the command-line edits last."""
    return [candidate for strategy in _STRATEGIES for candidate in strategy.propose(failure)]


def command_tree(pages_as_snippets: Sequence[dict[str, Any]]) -> CommandTree:
    """The tool's documented commands from its pages."""
    return CommandTree.from_snippets(pages_as_snippets)


def program_path(program: Sequence[str], path: str) -> str:
    """The executable ``program`` runs, as the task's ``PATH`` resolves it (for display)."""
    first = program[0] if program else ""
    if "/" in first:
        return first
    for directory in path.split(os.pathsep):
        candidate = os.path.join(directory, first)
        if directory and os.access(candidate, os.X_OK):
            return candidate
    return first


def _is_argv(value: Any) -> TypeGuard[list[str]]:
    return isinstance(value, list) and bool(value) and all(isinstance(item, str) for item in value)


def option_names(argv: Sequence[str]) -> list[str]:
    """The options a command line uses (names only)."""
    return [token.partition("=")[0] for token in argv if is_option(token)]
