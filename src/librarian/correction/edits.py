"""Edits of a command line: replace a span of tokens, alone or two at a time.

Every correction of a command is one or two :class:`Edit` s of the failed argv: a span
``[start, end)`` replaced by new tokens (an insertion is an empty span, a removal has no new
tokens). Edits that touch disjoint spans compose; :func:`apply_edits` applies them right to left so
indices stay valid.

Example:
    >>> argv = ["tool", "--old", "x.txt"]
    >>> rename = Edit("rename_option", 1, 2, ("--new",), 0.8, "renamed")
    >>> insert = Edit("insert_subcommand", 1, 1, ("run",), 0.7, "subcommand")
    >>> apply_edits(argv, [rename, insert])
    ['tool', 'run', '--new', 'x.txt']
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["Edit", "EditKind", "apply_edits", "compatible"]

EditKind = Literal[
    "rename_option",
    "drop_option",
    "option_value",
    "insert_subcommand",
    "replace_subcommand",
    "set_subcommand",
    "to_positional",
    "to_option",
    "add_option",
]


@dataclass(frozen=True)
class Edit:
    """One change of a command line.

    Attributes:
        kind: what the edit does (``rename_option``, ``drop_option``, ``option_value`` -- a flag
            becomes an option with a value --, ``insert_subcommand``, ``replace_subcommand``,
            ``set_subcommand``, ``to_positional``, ``to_option``).
        start, end: the span of the failed argv it replaces.
        tokens: what it puts there.
        prior: how strongly the evidence supports it, 0..1, before the documentation check.
        reason: the evidence, in words a person can check.
        target: the token it answers for (the rejected option or word), so two edits of one target
            never compose.
        evidence: structured evidence (the error line, the option's description, the value list).
        drops: values of the failed command it removes on purpose (a dropped option's value, a
            replaced word), so the documentation check does not count them as lost.
    """

    kind: EditKind
    start: int
    end: int
    tokens: tuple[str, ...]
    prior: float
    reason: str
    target: str = ""
    evidence: dict[str, Any] = field(default_factory=dict)
    drops: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form for the timeline."""
        return {
            "kind": self.kind,
            "span": [self.start, self.end],
            "tokens": list(self.tokens),
            "prior": round(self.prior, 4),
            "reason": self.reason,
            "target": self.target,
        }


def compatible(first: Edit, second: Edit) -> bool:
    """Whether two edits touch disjoint spans and answer for different targets."""
    if first.target and first.target == second.target:
        return False
    if first.start == first.end and second.start == second.end:
        return first.start != second.start
    return (
        first.end <= second.start
        or second.end <= first.start
        or (
            # an insertion at the edge of a replaced span does not overlap it
            (first.start == first.end and first.start in (second.start, second.end))
            or (second.start == second.end and second.start in (first.start, first.end))
        )
    )


def apply_edits(argv: Sequence[str], edits: Sequence[Edit]) -> list[str]:
    """``argv`` with every edit applied (they must be pairwise :func:`compatible`)."""
    tokens = list(argv)
    # Right to left, and at one position a replacement before an insertion, so indices hold.
    for edit in sorted(edits, key=lambda e: (e.start, e.end), reverse=True):
        tokens[edit.start : edit.end] = list(edit.tokens)
    return tokens
