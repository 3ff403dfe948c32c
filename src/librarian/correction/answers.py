"""The user's answers to the loop's clarification questions, and how they become corrections.

When no correction reaches the threshold, the loop asks the user which command should run instead
(the runtime pauses the workflow until ``librarian workflow answer``). An answer may be a command
line -- taken as it is, with the program spelled as in the failed command -- or words ("use NEW
instead of OLD"), which the loop researches and reads as it reads an error message.

Example:
    >>> answer_command("tool put --to box", ("/opt/bin/tool",), "tool")
    ['/opt/bin/tool', 'put', '--to', 'box']
    >>> answer_command("use put instead of copy", ("tool",), "tool") is None
    True
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence

from librarian.runtime.correctors import Clarification, CorrectionContext

__all__ = ["USER_COMMAND_CONFIDENCE", "answer_command", "answers_for"]

# A command the user typed is what they want; it still has to pass the evaluator to be learned.
USER_COMMAND_CONFIDENCE = 0.95


def answers_for(context: CorrectionContext, strategy: str) -> list[Clarification]:
    """The user's answers to the questions this corrector asked about this task."""
    return [
        item
        for item in context.answers
        if item.task_key == context.failed.key and item.strategy == strategy and item.answer.strip()
    ]


def answer_command(answer: str, program: Sequence[str], tool: str) -> list[str] | None:
    """The answer as a command line of the same tool (spelled like the failed one), else ``None``.

    ``answer`` may start with the failed command's program (``python -m mod ...``) or with the tool's
    own name (``mod ...``); either way the program is spelled as in the failed command, so it runs
    the same installation.
    """
    text = answer.strip().strip("`").strip()
    try:
        words = shlex.split(text)
    except ValueError:
        return None
    if not program or not words:
        return None
    names = [os.path.basename(word) for word in words[: len(program)]]
    if len(words) > len(program) and names == [os.path.basename(word) for word in program]:
        return [*program, *words[len(program) :]]
    if len(words) > 1 and os.path.basename(words[0]) == tool:
        return [*program, *words[1:]]
    return None
