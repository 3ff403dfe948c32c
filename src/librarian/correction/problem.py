"""The problem a failed command poses, in the terms fixes are stored and found under.

A *problem signature* is the SHA-256 of four things: the tool, its detected version, the normalized
error (:func:`librarian.research.error_signature.normalize_error`: values, paths and ids replaced by
placeholders) and the *intent*, the shape of the command line: the tool, its subcommand words and the
option names it used, without their values. Two failures of ``tool copy a.txt x://one --flag k=v`` and
``tool copy b.csv x://two --flag k2=v2`` are one problem; a learned fix for one applies to the other
with the other's values (:mod:`~librarian.correction.fix_templates`).

Example:
    >>> tool_of(["/usr/bin/tool", "sub", "--flag"])
    ('tool', 1)
    >>> tool_of(["python3", "-m", "pkg.module", "run"])
    ('module', 3)
    >>> intent_of(["tool", "copy", "a.txt", "x://one/", "--flag", "k=v"], "tool", 1)
    'tool copy --flag'
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass

from librarian.correction.values import parse_command
from librarian.research.error_signature import normalize_error

__all__ = ["Problem", "intent_of", "problem_of", "problem_signature", "tool_of"]

# ``interpreter -m module ...``: the module is the tool (its version is the module's, not the
# interpreter's), and the three tokens are the program a corrected command must keep.
_MODULE_FLAG = "-m"


@dataclass(frozen=True)
class Problem:
    """A failed command described for reuse.

    Attributes:
        tool: the tool's name (the executable's base name, or the module run with ``-m``).
        program: the argv prefix that runs the tool (``["aws"]``, ``["python", "-m", "pip"]``).
        version: the version detected in the task's environment, ``None`` when none was found.
        normalized_error: the error output with values replaced by placeholders.
        intent: the command's shape (tool, subcommands, option names).
        signature: SHA-256 of the four, the key of verified fixes.
    """

    tool: str
    program: tuple[str, ...]
    version: str | None
    normalized_error: str
    intent: str
    signature: str


def tool_of(argv: Sequence[str]) -> tuple[str, int]:
    """The tool a command line runs and how many leading tokens name it."""
    if not argv:
        return "", 0
    if len(argv) > 2 and argv[1] == _MODULE_FLAG and argv[2] and not argv[2].startswith("-"):
        return argv[2].rsplit(".", 1)[-1], 3
    return os.path.basename(argv[0]), 1


def intent_of(argv: Sequence[str], tool: str, program_length: int) -> str:
    """The tool, the subcommand words and the sorted option names of ``argv``, space-separated."""
    parsed = parse_command(list(argv), tool=tool or None)
    path = list(parsed.command_path) if len(parsed.program) == program_length else []
    options = sorted({use.name for use in parsed.options if use.name != _MODULE_FLAG})
    return " ".join([tool, *path, *options])


def problem_signature(tool: str, version: str | None, normalized_error: str, intent: str) -> str:
    """SHA-256 (hex) of the four parts of a problem."""
    text = "\n".join([tool, version or "", normalized_error, intent])
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def problem_of(argv: Sequence[str], error_output: str, version: str | None) -> Problem:
    """The :class:`Problem` of a failed ``argv`` that printed ``error_output`` under ``version``."""
    tool, length = tool_of(argv)
    normalized = normalize_error(error_output)
    intent = intent_of(argv, tool, length)
    return Problem(
        tool=tool,
        program=tuple(argv[:length]),
        version=version,
        normalized_error=normalized,
        intent=intent,
        signature=problem_signature(tool, version, normalized, intent),
    )
