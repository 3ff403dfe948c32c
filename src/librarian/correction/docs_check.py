"""How well the documentation of the installed version backs a corrected command line.

A candidate is trusted when every subcommand and option it uses is documented for the detected
version, every value it gives an option with listed values is one of them, the usage's required
options are there, and every value of the failed command is still in it (the user's file, bucket
and tag are what they meant; only how it is said may change). :func:`check_against_docs` measures
that and returns a factor the candidate's confidence is multiplied by, with the reasons.

Example:
    >>> from librarian.correction.helpdocs import CommandDoc, OptionDoc
    >>> run = CommandDoc("tool", ("run",), {"--fast": OptionDoc("--fast")}, frozenset(), (), "")
    >>> tree = CommandTree([run])
    >>> check_against_docs(["tool", "run", "--fast", "a.txt"], ["tool", "--quick", "a.txt"], tree).documented
    True
    >>> check_against_docs(["tool", "run", "--slow", "a.txt"], ["tool", "--quick", "a.txt"], tree).unknown
    ('--slow',)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from librarian.correction.choices import choices
from librarian.correction.command_tree import CommandTree
from librarian.correction.helpdocs import CommandDoc
from librarian.correction.values import is_option, parse_command

__all__ = ["DocsCheck", "check_against_docs"]

_UNKNOWN_OPTION = 0.45
_UNDOCUMENTED_PATH = 0.6
_BAD_CHOICE = 0.5
_MISSING_REQUIRED = 0.75
_LOST_VALUE = 0.7
_EXTRA_ARGUMENT = 0.6
_ALL_DOCUMENTED = 1.08
# Placeholders of a usage line that stand for options or a subcommand, not for an argument.
_COMMAND_WORDS = frozenset({"command", "subcommand", "cmd"})
_NOT_ARGUMENTS = frozenset({"options", "option", "flags", "flag"}) | _COMMAND_WORDS


@dataclass(frozen=True)
class DocsCheck:
    """The documentary verdict on one candidate.

    Attributes:
        path: the subcommand path the candidate runs.
        path_documented: that path has a documented page.
        unknown: options the candidate brings in that the page (and the tool's global options) does not
        document (options the failed command already used are not the candidate's doing).
        bad_choices: ``option=value`` pairs whose value is not among the option's listed values.
        missing_required: required options of the usage the candidate lacks.
        lost_values: values of the failed command the candidate no longer has.
        extra_arguments: positional arguments beyond what any usage of the command takes.
        factor: what the candidate's confidence is multiplied by.
    """

    path: tuple[str, ...]
    path_documented: bool
    unknown: tuple[str, ...]
    bad_choices: tuple[str, ...]
    missing_required: tuple[str, ...]
    lost_values: tuple[str, ...]
    factor: float
    extra_arguments: tuple[str, ...] = ()

    @property
    def documented(self) -> bool:
        """Every subcommand and option of the candidate is documented, and its listed values hold."""
        return self.path_documented and not self.unknown and not self.bad_choices

    def problems(self) -> list[str]:
        """The reasons the factor is below one, in words."""
        out = []
        if not self.path_documented:
            out.append(f"`{' '.join(self.path) or '(the tool itself)'}` is not documented")
        out += [f"`{name}` is not documented for this command" for name in self.unknown]
        out += [f"`{pair}` is not one of the documented values" for pair in self.bad_choices]
        out += [f"the usage requires `{name}`" for name in self.missing_required]
        out += [f"the value `{value}` of the failed command is lost" for value in self.lost_values]
        out += [f"the command takes no argument `{value}`" for value in self.extra_arguments]
        return out


def check_against_docs(
    candidate: Sequence[str],
    failed: Sequence[str],
    tree: CommandTree,
    *,
    program_length: int = 1,
    dropped: Collection[str] = (),
    vouched: Collection[str] = (),
) -> DocsCheck:
    """Check ``candidate`` (a correction of ``failed``) against the tool's documented commands.

    Args:
        candidate: the corrected command line.
        failed: the command line that failed.
        tree: the tool's documented commands at the detected version (empty: nothing is known, the
            factor is 1).
        program_length: how many leading tokens name the program.
        dropped: values the correction removes on purpose (with the option that took them).
        vouched: options the tool's own output told to use ("Run again with `--x`"): they exist
            even where the help does not show them (a page of unstable flags of its own).
    """
    if not tree:
        return DocsCheck((), True, (), (), (), _lost(candidate, failed, program_length, dropped), 1.0)
    rest = list(candidate[program_length:])
    path = tree.longest_prefix([t for t in rest if not is_option(t)][: len(rest)])
    path = path if tuple(rest[: len(path)]) == path else ()
    doc = tree.command(path)
    root = tree.command(())
    takes_value = doc.takes_value if doc is not None else None
    parsed = parse_command(
        list(candidate), tool=None, known_paths=[path] if path else [], takes_value=takes_value
    )
    unknown: list[str] = []
    bad: list[str] = []
    # What the failed command already said is not this candidate's doing: the docs may simply not
    # list it (a help parser misses some), and if it is wrong the next error will say so.
    had = {token for token in failed[program_length:]}
    had_names = {token.partition("=")[0] for token in had if is_option(token)}
    for use in parsed.options:
        if use.name in had_names and all(candidate[i] in had for i in use.value_indices):
            continue
        if not _accepted(use.name, doc, root):
            if use.name not in vouched:
                unknown.append(use.name)
            continue
        listed = _listed_values(use.name, doc, root)
        values = [candidate[i] if i != use.index else (use.attached_value or "") for i in use.value_indices]
        for value in values:
            if listed and value and value not in listed:
                bad.append(f"{use.name}={value}")
    missing = _missing_required(doc, {use.name for use in parsed.options})
    lost = _lost(candidate, failed, program_length, dropped)
    positionals = [value.text for value in parsed.values if value.option is None]
    has_subcommands = doc is not None and bool(tree.children(doc.path))
    extra = _extra_arguments(doc, positionals, has_subcommands=has_subcommands)
    factor = 1.0
    documented_path = doc is not None
    if not documented_path:
        factor *= _UNDOCUMENTED_PATH
    factor *= _UNKNOWN_OPTION ** len(unknown)
    factor *= _BAD_CHOICE ** len(bad)
    factor *= _MISSING_REQUIRED ** len(missing)
    factor *= _LOST_VALUE ** len(lost)
    factor *= _EXTRA_ARGUMENT ** len(extra)
    if documented_path and not (unknown or bad or missing or lost or extra):
        factor = _ALL_DOCUMENTED
    return DocsCheck(
        path, documented_path, tuple(unknown), tuple(bad), tuple(missing), tuple(lost), factor, tuple(extra)
    )


def _accepted(option: str, doc: CommandDoc | None, root: CommandDoc | None) -> bool:
    if doc is not None and doc.accepts(option):
        return True
    # Options the tool accepts everywhere are listed on its own page (global flags).
    return root is not None and (option in root.global_options or (doc is None and root.accepts(option)))


def _listed_values(option: str, doc: CommandDoc | None, root: CommandDoc | None) -> tuple[str, ...]:
    for page in (doc, root):
        if page is not None and option in page.options:
            found = page.options[option]
            return choices(found.value_hint, found.description)
    return ()


def _missing_required(doc: CommandDoc | None, used: set[str]) -> list[str]:
    """Required options of the command's usage that ``used`` lacks (none when a usage form is met)."""
    if doc is None or not doc.forms:
        return []
    best: list[str] | None = None
    for form in doc.forms:
        missing = [sorted(group)[0] for group in form.required if not group & used]
        if best is None or len(missing) < len(best):
            best = missing
    return best or []


def _extra_arguments(doc: CommandDoc | None, positionals: list[str], *, has_subcommands: bool) -> list[str]:
    """The positional arguments no usage form of ``doc`` has room for (none when it is not known)."""
    if doc is None or not doc.forms or not positionals:
        return []
    room = 0
    # "<command>" stands for a subcommand where there are some; elsewhere it is an argument.
    excluded = _NOT_ARGUMENTS if has_subcommands else _NOT_ARGUMENTS - _COMMAND_WORDS
    for form in doc.forms:
        placeholders = [p for p in form.positionals if p.name.lower().strip("[]<>.") not in excluded]
        if any(p.repeatable for p in placeholders):
            return []
        room = max(room, len(placeholders))
    return positionals[room:]


def _lost(
    candidate: Sequence[str], failed: Sequence[str], program_length: int, dropped: Collection[str]
) -> tuple[str, ...]:
    """Values of ``failed`` that ``candidate`` no longer holds, leaving out the ``dropped`` ones."""
    have = Counter(_values(candidate, program_length))
    lost = []
    for value in _values(failed, program_length):
        if have[value] > 0:
            have[value] -= 1
        elif value not in dropped:
            lost.append(value)
    return tuple(lost)


def _values(argv: Sequence[str], program_length: int) -> list[str]:
    """The value-like tokens of a command line: positionals and option values, attached ones included."""
    out = []
    for token in argv[program_length:]:
        if is_option(token):
            _, eq, value = token.partition("=")
            if eq and value:
                out.append(value)
        else:
            out.append(token)
    return out
