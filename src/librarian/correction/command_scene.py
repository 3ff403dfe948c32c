"""The failed command as the command-line edit generators see it, and the helpers they share.

:func:`build_scene` parses the failed argv against the tool's documented commands (which words are
the subcommand path, which options take values), reads the output's hints and finds the page of the
command; the helpers answer small questions about pages and values for
:mod:`~librarian.correction.command_edits` and :mod:`~librarian.correction.subcommand_edits`.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass

from librarian.correction.candidates import FailureInput
from librarian.correction.command_tree import CommandTree
from librarian.correction.error_hints import CommandHints, command_hints
from librarian.correction.helpdocs import CommandDoc, OptionDoc, command_doc
from librarian.correction.names import keeps_meaning
from librarian.correction.replacement import Replacement
from librarian.correction.values import (
    ParsedCommand,
    RejectedOption,
    parse_command,
)

__all__ = [
    "BOOLEAN",
    "INFORMATIONAL",
    "Scene",
    "build_scene",
    "co_required",
    "distinct_options",
    "dropped_values",
    "family_members",
    "first_sentence",
    "is_boolean",
    "is_suggestion",
    "replaced_in_docs",
    "replacement_for",
    "with_values",
]


# Options that print something about the tool instead of doing the task: never a correction's doing.
INFORMATIONAL = frozenset({"--help", "-h", "-?", "--usage", "--version", "-V"})
BOOLEAN = frozenset(["on", "off", "true", "false", "yes", "no", "1", "0", "y", "n", "enabled", "disabled"])


@dataclass(frozen=True)
class Scene:
    """The failed command as the generators see it."""

    argv: list[str]
    parsed: ParsedCommand
    program_length: int
    path: tuple[str, ...]
    tree: CommandTree
    own: CommandDoc | None
    hints: CommandHints
    researched: tuple[tuple[str, ...], ...] = ()
    workspace: str | None = None
    intent: str = ""

    @property
    def page(self) -> CommandDoc | None:
        """The page whose options an option edit uses: the command's own, else the tool's."""
        return self.own or self.tree.command(())


def build_scene(failure: FailureInput) -> Scene | None:
    tree = failure.tree if failure.tree is not None else CommandTree.from_snippets(failure.snippets)
    argv = list(failure.argv)
    if len(argv) < 1:
        return None
    tool = failure.tool or os.path.basename(argv[0])
    paths = tree.paths()
    first = parse_command(argv, failure.workspace, tool=tool, known_paths=paths)
    own = tree.command(first.command_path) if tree else None
    parsed = parse_command(
        argv,
        failure.workspace,
        tool=tool,
        known_paths=paths,
        takes_value=own.takes_value if own is not None else None,
    )
    program_length = len(parsed.program)
    hints = command_hints(failure.output, argv, program_length)
    # The commands research ranked for the task's own words, best first: evidence of which
    # subcommand the task means when the output does not say.
    ranked = sorted(failure.snippets, key=lambda s: -float(s.get("score") or 0.0))
    researched = tuple(dict.fromkeys(doc.path for s in ranked if (doc := command_doc(s)) is not None))
    workspace = str(failure.workspace) if failure.workspace is not None else None
    return Scene(
        argv,
        parsed,
        program_length,
        parsed.command_path,
        tree,
        own,
        hints,
        researched,
        workspace,
        failure.intent,
    )


def distinct_options(page: CommandDoc) -> list[OptionDoc]:
    """The page's options, each once, without those that only print information (help, version)."""
    options = dict.fromkeys(page.options.values())
    return [option for option in options if not set(option.spellings) & INFORMATIONAL]


def is_boolean(values: Sequence[str]) -> bool:
    return len(values) == 1 and values[0].lower() in BOOLEAN


def with_values(words: Sequence[str], values: tuple[str, ...], page: CommandDoc | None) -> tuple[str, ...]:
    """The new option's tokens, with the old option's values when the new one takes a value."""
    if len(words) > 1 or "=" in words[0]:
        return tuple(words)
    takes = page.takes_value(words[0]) if page is not None else None
    if takes is False or is_boolean(values):
        return tuple(words)
    return (words[0], *values)


# "Requires `--preview`", "Should be used with `--write` or `--fix`", "must be combined with --a",
# "only works together with --a": the first option named after the phrase.
_CO_REQUIRED = re.compile(
    r"(?i)\b(?:requires?|(?:should|must|can only|has to|needs to) be (?:used|combined|given|passed)"
    r"(?: together)? with|only (?:works|valid|applies)(?: together)? with)\s+[`'\"‘“]?(--?[A-Za-z][\w-]*)"
)


def co_required(option: OptionDoc, page: CommandDoc, *, used: set[str]) -> list[str]:
    """Flags ``option``'s description says it requires, that the page documents and the command lacks."""
    found = []
    for match in _CO_REQUIRED.finditer(option.description or ""):
        name = match.group(1)
        if (
            name not in used
            and name not in found
            and name not in option.spellings
            and page.accepts(name)
            and page.takes_value(name) is not True
        ):
            found.append(name)
    return found


def replacement_for(scene: Scene, replacement: Replacement, target: RejectedOption) -> bool:
    """Whether a replacement phrase is about ``target``: it names it, or it is the only target."""
    if replacement.old is not None:
        return replacement.old.lstrip("-") == target.option.lstrip("-")
    # An unattributed suggestion belongs to the option its line names, or to the only one rejected.
    return len(scene.hints.targets) <= 1 or target.option.lstrip("-") in replacement.text


def replaced_in_docs(page: CommandDoc, option: str) -> bool:
    """Whether a documented option could be ``option``'s successor: a related name, or its description
    names it."""
    bare = re.escape(option.lstrip("-"))
    return any(
        any(keeps_meaning(option, spelling) for spelling in doc.spellings)
        or re.search(rf"(?<![\w-])(?:--?)?{bare}(?![\w-])", doc.description or "") is not None
        for doc in distinct_options(page)
    )


def dropped_values(values: tuple[str, ...], tokens: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(v for v in values if v not in tokens)


def family_members(scene: Scene, alternatives: Sequence[str], old: str) -> list[str]:
    """The alternatives, with a pattern (``--unstable-*``) replaced by the options it names that the
    output vouches for or the docs list."""
    page = scene.page
    known = sorted(scene.hints.vouched_options | (set(page.options) if page is not None else set()))
    out: list[str] = []
    for alternative in alternatives:
        first = alternative.split()[0] if alternative.split() else ""
        if "*" not in first:
            out.append(alternative)
            continue
        out.extend(name for name in known if name != old and fnmatch.fnmatchcase(name, first))
    return list(dict.fromkeys(out))


def is_suggestion(text: str) -> bool:
    return bool(re.search(r"(?i)did you mean|maybe you meant|perhaps you meant|similar|most similar", text))


def first_sentence(text: str) -> str:
    return re.split(r"(?<=[.!?])\s", text.strip(), maxsplit=1)[0][:200]
