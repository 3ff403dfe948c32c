"""What every correction strategy takes and returns: a :class:`FailureInput` and :class:`Candidate` fixes."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from librarian.correction.command_tree import CommandTree
from librarian.correction.helpdocs import CommandDoc, command_doc

__all__ = ["Candidate", "FailureInput", "Strategy", "rank_candidates"]


@dataclass(frozen=True)
class FailureInput:
    """A failed command and everything known about it when the correctors run.

    Attributes:
        argv: the command line that failed.
        exit_code: its exit status.
        stderr: its standard error.
        workspace: the directory it ran in (relative file values are resolved against it).
        stdout: its standard output.
        tool_version: the version detected for the tool, when known.
        snippets: research results: dicts with ``entity_name``, ``content`` (Markdown help),
            ``source_url``, ``score`` and, for CLI-help chunks, ``attributes`` (``command``,
            ``subcommand_path``, ``options``, ``global_options``, ``synopsis``).
        learned_fixes: verified fixes for the failure's signature: dicts with ``signature``,
            ``failed_argv_template``, ``fixed_argv_template``, ``successes`` and ``failures``.
        tree: every documented command of the tool at the detected version, when loaded (edits
            are checked against it); ``None`` uses the commands the snippets document.
        tool: the tool's name as documented (the program's base name when ``None``).
        blamed: option names and words that an earlier correction introduced and the tool then
            rejected: no candidate may bring them back.
        intent: what the task is for, in its author's words (its description and the workflow's
            goal): a value the author meant ("the ANSI dialect") is looked for there.
    """

    argv: list[str]
    exit_code: int
    stderr: str
    workspace: str | os.PathLike[str] | None = None
    stdout: str = ""
    tool_version: str | None = None
    snippets: list[dict[str, Any]] = field(default_factory=list)
    learned_fixes: list[dict[str, Any]] = field(default_factory=list)
    tree: CommandTree | None = None
    tool: str | None = None
    blamed: tuple[str, ...] = ()
    intent: str = ""

    @property
    def output(self) -> str:
        """Standard error followed by standard output: tools print their errors on either."""
        return f"{self.stderr}\n{self.stdout}" if self.stdout else self.stderr

    def command_docs(self) -> list[CommandDoc]:
        """The commands the snippets document, best research score first, one per command."""
        docs: dict[tuple[str, tuple[str, ...]], CommandDoc] = {}
        ranked = sorted(self.snippets, key=lambda s: -float(s.get("score") or 0.0))
        for snippet in ranked:
            doc = command_doc(snippet)
            if doc is not None:
                docs.setdefault((doc.tool, doc.path), doc)
        return list(docs.values())


@dataclass(frozen=True)
class Candidate:
    """A proposed corrected command.

    Attributes:
        argv: the command to run instead.
        strategy: the strategy that proposed it (``learned_fix``, ``explicit_replacement``,
            ``synopsis_rewrite``).
        confidence: 0..1; the loop applies the best candidate that reaches its threshold.
        rationale: one or two sentences a person can check.
        evidence: what it relied on: the error line or the snippet (``entity_name``, ``source_url``)
            or the learned fix (``signature``, templates, counts).
    """

    argv: list[str]
    strategy: str
    confidence: float
    rationale: str
    evidence: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form, as recorded in the timeline and the escalation report."""
        return {
            "argv": list(self.argv),
            "strategy": self.strategy,
            "confidence": round(self.confidence, 4),
            "rationale": self.rationale,
            "evidence": self.evidence,
        }


class Strategy(Protocol):
    """A correction strategy: proposes candidates for a failure, best first, possibly none."""

    name: str

    def propose(self, failure: FailureInput) -> list[Candidate]:
        """Candidate corrections for ``failure``."""
        ...


def rank_candidates(candidates: Sequence[Candidate]) -> list[Candidate]:
    """Candidates by descending confidence, one per distinct argv (the most confident one kept).

    Ties keep their input order, so a caller that lists strategies by preference keeps it.
    """
    best: dict[tuple[str, ...], Candidate] = {}
    for candidate in candidates:
        key = tuple(candidate.argv)
        if key not in best or candidate.confidence > best[key].confidence:
            best[key] = candidate
    order = {id(c): i for i, c in enumerate(candidates)}
    return sorted(best.values(), key=lambda c: (-c.confidence, order[id(c)]))
