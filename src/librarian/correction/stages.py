"""Where a correction stands: the first failure, a chain that made progress, or a setback.

When the loop's own correction of a task fails, what it failed *with* decides what comes next:

- **chain** -- the correction got past the error it answered and met a *different* one, and nothing
  it introduced is what the tool now rejects: it was right as far as it went, so the new failure is
  corrected from where it stands (the corrected command, not the original one), one level deeper;
- **setback** -- the same error about the same names again, raised by the same statement
  (``cannot import name 'escape'`` after ``'Markup'`` was corrected is progress: the next name of
  one import; so is the same error raised by the next line), or the tool now rejects
  something the correction introduced (which is then *blamed*: no later candidate may bring it
  back): the correction was wrong, so the command it corrected is corrected again with the next
  candidate, never one already tried.

Each stage has a budget of alternatives (``max_alternatives``); a chain has a depth limit
(``max_chain``). A stage whose budget is spent hands back to the stage it came from, and when every
stage is spent the loop stops proposing (the workflow ends with a report instead of a guess).

The stages are read from the stored correction attempts of the task (:class:`CorrectionAttempt`),
so an orchestrator that restarts in the middle finds the same stage.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from librarian.correction.models import ERROR_TEXT_CHARS, CorrectionAttempt
from librarian.research.error_signature import normalize_error
from librarian.research.scrub import scrub

__all__ = ["Stage", "SubjectKind", "find_stage"]

Relation = Literal["first", "chain", "setback"]


class SubjectKind(Protocol):
    """What the stage logic needs to know about the thing corrected (a command line or code)."""

    def failed(self, attempt: CorrectionAttempt) -> Any:
        """What the attempt corrected (its argv or code)."""

    def corrected(self, attempt: CorrectionAttempt) -> Any:
        """What the attempt ran instead."""

    def key(self, subject: Any) -> Hashable:
        """A comparable form of a subject."""

    def introduced(self, before: Any, after: Any) -> set[str]:
        """Option names, words or identifiers ``after`` has that ``before`` has not."""

    def named(self, output: str, subject: Any) -> set[str]:
        """The options, words or names of ``subject`` that ``output`` calls wrong."""


@dataclass
class Stage:
    """The failure to correct now.

    Attributes:
        relation: ``first`` (no earlier correction of this task led here), ``chain`` or ``setback``.
        subject: the argv or code to correct.
        stderr, stdout, exit_code: how it failed.
        parent: the attempt whose correction ``subject`` is (``None`` for the task's original).
        depth: the chain depth of a correction made from this stage.
        tried: corrections already made from this stage (never proposed again).
        blamed: what earlier corrections introduced and the tool rejected.
        exhausted: every stage's budget is spent: nothing more may be proposed.
        note: why this stage, in words (for the timeline).
        newly_blamed: ``(attempt id, tokens)`` the caller stores on the failed attempt.
    """

    relation: Relation
    subject: Any
    stderr: str
    stdout: str
    exit_code: int | None
    parent: CorrectionAttempt | None = None
    depth: int = 0
    tried: list[Any] = field(default_factory=list)
    blamed: set[str] = field(default_factory=set)
    exhausted: bool = False
    note: str = ""
    newly_blamed: tuple[int, tuple[str, ...]] | None = None


def find_stage(
    attempts: Sequence[CorrectionAttempt],
    kind: SubjectKind,
    subject: Any,
    stderr: str,
    stdout: str,
    exit_code: int | None,
    *,
    is_drift: Callable[[str, int | None], bool],
    max_chain: int,
    max_alternatives: int,
) -> Stage:
    """The stage the failure of ``subject`` puts this task's correction in (see the module docs).

    Args:
        attempts: the task's correction attempts, oldest first.
        kind: how to read subjects.
        subject: what just failed; stderr, stdout, exit_code: how.
        is_drift: whether an output (and exit code) is a correctable drift failure.
        max_chain: the deepest chain allowed (a correction at this depth is not corrected further).
        max_alternatives: corrections tried from one stage at most.
    """
    blamed = {token for attempt in attempts for token in attempt.blamed or ()}
    by_id = {attempt.id: attempt for attempt in attempts}
    last = attempts[-1] if attempts else None
    output = f"{stderr}\n{stdout}" if stdout.strip() else stderr
    if last is None or kind.key(kind.corrected(last)) != kind.key(subject):
        stage = Stage("first", subject, stderr, stdout, exit_code, note="the task's own command failed")
        return _budget(stage, attempts, kind, by_id, blamed, max_alternatives)
    introduced = kind.introduced(kind.failed(last), subject)
    rejected = introduced & kind.named(output, subject)
    same = (
        normalize_error(output) == normalize_error(last.error_text)
        and _named(output) == _named(last.error_text)
        and _failing_lines(output) == _failing_lines(last.error_text)
    )
    progressed = not rejected and not same and is_drift(output, exit_code)
    if progressed and last.depth + 1 < max_chain:
        stage = Stage(
            "chain",
            subject,
            stderr,
            stdout,
            exit_code,
            parent=last,
            depth=last.depth + 1,
            note="the correction got past its error and met a new one: correcting it from where it stands",
        )
        return _budget(stage, attempts, kind, by_id, blamed, max_alternatives)
    why = (
        f"the tool rejects {', '.join(sorted(rejected))}, which the correction introduced"
        if rejected
        else "the correction failed with the same error"
        if same
        else f"the chain is {last.depth + 1} deep (limit {max_chain})"
        if progressed
        else "the correction failed with an error that is not drift"
    )
    stage = Stage(
        "setback",
        kind.failed(last),
        last.error_text,
        "",
        last.exit_code,
        parent=by_id.get(last.chain_parent_id) if last.chain_parent_id is not None else None,
        depth=last.depth,
        blamed=set(),
        note=f"{why}: correcting the command it corrected again, with another candidate",
        newly_blamed=(last.id, tuple(sorted(rejected))) if rejected else None,
    )
    return _budget(stage, attempts, kind, by_id, blamed | rejected, max_alternatives)


# What an error is about: the names it quotes ('Markup', `--x`). Double quotes are left out: a
# traceback's "File" paths hold a new script name on every attempt.
_QUOTED = re.compile(r"'([^'\n]{1,80})'|`([^`\n]{1,80})`")


def _named(text: str) -> set[str]:
    # As an attempt stores its error text: scrubbed (home directories, secrets) and cut to its end.
    return {a or b for a, b in _QUOTED.findall(scrub(text)[-ERROR_TEXT_CHARS:])}


# A traceback frame's source line: the code printed under its ``File "...", line N, in f`` line.
_FRAME_SOURCE = re.compile(r'^\s*File "[^"\n]*", line \d+[^\n]*\n[ \t]+(\S[^\n]*)$', re.MULTILINE)


def _failing_lines(text: str) -> list[str]:
    """The source lines of a traceback's frames: the same error raised by another statement (the
    next call still passing a keyword the correction renamed in the first) is progress, not the
    same failure."""
    return _FRAME_SOURCE.findall(scrub(text)[-ERROR_TEXT_CHARS:])


def _budget(
    stage: Stage,
    attempts: Sequence[CorrectionAttempt],
    kind: SubjectKind,
    by_id: dict[int, CorrectionAttempt],
    blamed: set[str],
    max_alternatives: int,
) -> Stage:
    """Fill in what was tried from the stage; hand back to earlier stages while its budget is spent."""
    stage.blamed = blamed
    while True:
        here = kind.key(stage.subject)
        stage.tried = [kind.corrected(a) for a in attempts if kind.key(kind.failed(a)) == here]
        if len(stage.tried) < max_alternatives:
            return stage
        parent = stage.parent
        if parent is None:
            stage.exhausted = True
            stage.note += f"; {len(stage.tried)} corrections tried from here (limit {max_alternatives})"
            return stage
        # This stage is spent: the correction that led here was a dead end after all.
        stage = Stage(
            "setback",
            kind.failed(parent),
            parent.error_text,
            "",
            parent.exit_code,
            parent=by_id.get(parent.chain_parent_id) if parent.chain_parent_id is not None else None,
            depth=parent.depth,
            blamed=blamed,
            note=f"every correction from `{here}` failed: going back one step",
            newly_blamed=stage.newly_blamed,
        )
