"""What a failed command's output says about the command line, in the phrasings tools share.

Every edit of a failed command starts from here: which options the error rejects (or a warning says
were ignored), which plain words it calls invalid subcommands or arguments, which replacements it
names ("use X instead", "did you mean X", "a similar argument exists: X"), which whole command lines
it suggests ("Use `tool sub <path>` instead"), and whether it says the behaviour asked for is now the
default or has no effect (so the option can simply go). None of it names a tool.

Example:
    >>> argv = ["tool", "lint", "--old-flag", "src"]
    >>> hints = command_hints("error: unexpected argument '--old-flag' found", argv)
    >>> [r.option for r in hints.rejected]
    ['--old-flag']
    >>> hints = command_hints("error: `tool <path>` has been removed. Use `tool lint <path>` instead.", argv)
    >>> [t.words for t in hints.templates]
    [('lint',)]
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from librarian.correction.replacement import Replacement, find_replacements
from librarian.correction.values import RejectedOption, is_option, rejected_options

__all__ = ["CommandHints", "CommandTemplate", "command_hints", "named_options"]

# Words that say an option or command is gone or not accepted (a line that names an argv option and
# says one of these is about that option).
_DRIFT_WORDS = re.compile(
    r"(?i)\b(?:unknown|unrecogni[sz]ed|unexpected|invalid|illegal|unsupported|no such|not (?:a )?(?:valid|"
    r"recogni[sz]ed|supported|allowed|known|expected)|removed|deprecated|no longer|obsolete|ignored|ignoring|"
    r"has no effect|renamed|replaced)\b"
)
# "now the default", "by default", "has no effect", "is ignored", "please remove it": the option
# asked for nothing, or the tool says to drop it.
_DEFAULT_NOW = re.compile(
    r"(?i)\b(?:(?:is|are)\s+(?:now\s+)?(?:the\s+)?default|now\s+(?:the\s+)?default|by\s+default|"
    r"(?:no\s+longer\s+has\s+any|has\s+no|no\s+longer\s+has\s+an?)\s+effect|"
    r"(?:no\s+longer|not)\s+(?:needed|necessary|required)|always\s+(?:enabled|on)|ignored|"
    r"please\s+remove\s+it|remove\s+it\s+from)\b"
)
# Plain words named as invalid: argparse "invalid choice: 'x'", clap "unrecognized subcommand 'x'",
# cobra 'unknown command "x" for', click "No such command 'x'", "'x' is not a tool command".
_REJECTED_WORD = (
    re.compile(r"(?i)\binvalid choice:?\s*[`'\"‘“]?(?P<word>[^\s`'\"’”,)]+)"),
    re.compile(
        r"(?i)\b(?:unknown|unrecogni[sz]ed|invalid|no such)\s+(?:sub)?command:?\s*"
        r"[`'\"‘“]?(?P<word>[^\s`'\"’”,)]+)"
    ),
    re.compile(
        r"(?i)[`'\"‘“](?P<word>[^\s`'\"’”]+)[`'\"’”]\s+is\s+not\s+an?\s+(?:valid\s+|known\s+)?(?:[\w.-]+\s+)?(?:sub)?command\b"
    ),
    re.compile(r"(?i)\bunrecogni[sz]ed\s+arguments?:\s*(?P<words>[^\n]+)"),
    re.compile(r"(?i)\bunexpected\s+(?:extra\s+)?arguments?:?\s*(?P<words>[^\n]+)"),
    # "Couldn't resolve parser "postcss"": an option's value the tool no longer knows
    re.compile(
        r"(?i)\b(?:couldn't|could not|cannot|can't) (?:resolve|find|load) [\w-]+ "
        r"[`'\"‘“](?P<word>[^`'\"’”\s]+)"
    ),
)
# "requires a subcommand", "missing command", "no command given", "a command is required".
_SUBCOMMAND_REQUIRED = re.compile(
    r"(?i)\b(?:requires?\s+a\s+(?:sub)?command|missing\s+(?:sub)?command|no\s+(?:sub)?command\s+(?:given|specified|provided)|"
    r"(?:sub)?command\s+is\s+required|has\s+been\s+removed\.?\s+use\b)"
)
_QUOTED = re.compile(r"[`'\"‘“]([^`'\"’”\n]+)[`'\"’”]")
# "'--a' requires '--b'", "--a can only be used with --b", "the following arguments are required: --b",
# "Missing option '--b'", "required arguments were not provided: --b" (or listed on the lines below)
_REQUIRES = re.compile(
    r"(?i)\b(?:requires?|needs?|can only be used (?:together )?with|must be used (?:together )?with|"
    r"(?:the following )?(?:arguments?|options?) (?:are|is) required|"
    r"missing (?:required )?(?:option|argument)s?|"
    r"required (?:arguments?|options?) (?:were|was) not provided)\b[^\n]*"
    # clap lists them below, one indented option per line
    r"(?:\n[ \t]+-[^\n]*)*"
)
_DASHED_NAME = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")
# "No dialect was specified": a setting named in words that the command line must now give.
_UNSPECIFIED = re.compile(
    r"(?i)\bno ([a-z][\w-]*) (?:was|were|is|has been) (?:specified|given|provided|set|selected)\b"
)
# "Available dialects: ansi, bigquery, ...": the values the output offers for it.
_AVAILABLE = re.compile(
    r"(?i)\b(?:available|valid|supported|possible) [\w -]{0,30}?:\s*(?P<list>[^\n]+(?:\n\s*[\w, -]+)?)"
)
# "Want to run without a config file? Use --no-config", "Run again with `--unstable-kv` flag to enable
# this API": an option the output suggests adding.
_SUGGESTED = re.compile(
    r"(?im)\b(?:use|try|pass|add|run (?:again )?with)\s+[`'\"]?(--(?!help\b|version\b)[A-Za-z][\w.-]*)[`'\"]?"
    r"(?:\s+instead|\s+(?:flag|option|switch)\b[^\n]*)?\s*[.!]?\s*$"
)


@dataclass(frozen=True)
class CommandTemplate:
    """A command line the output suggests, as the subcommand words it puts after the program.

    Attributes:
        words: the subcommand path the suggestion names (``("check",)`` for "Use `tool check <path>`").
        text: the phrase it came from.
    """

    words: tuple[str, ...]
    text: str


@dataclass(frozen=True)
class CommandHints:
    """Everything the output says about the command line (see the module docs).

    Attributes:
        rejected: options named as unknown, unexpected or removed, with their values when listed.
        ignored: options a warning says were ignored or have no effect (the command still ran).
        rejected_words: ``(argv index, word)`` of plain words named as invalid (subcommands, arguments).
        replacements: "use X instead" / "did you mean X" phrases.
        templates: suggested command lines, as subcommand paths.
        default_now: the output says the behaviour asked for is the default now, or has no effect.
        subcommand_required: the output says a subcommand is needed (the bare form is gone).
        required_options: options the output says are required (or that another one requires), or
            suggests using ("Use --no-config"), that the command line lacks.
        unspecified: settings the output says were not given, by name ("No dialect was specified").
        offered: values the output lists for them ("Available dialects: ansi, bigquery").
    """

    rejected: tuple[RejectedOption, ...] = ()
    ignored: tuple[RejectedOption, ...] = ()
    rejected_words: tuple[tuple[int, str], ...] = ()
    replacements: tuple[Replacement, ...] = ()
    templates: tuple[CommandTemplate, ...] = ()
    default_now: bool = False
    subcommand_required: bool = False
    required_options: tuple[str, ...] = field(default=())
    unspecified: tuple[str, ...] = field(default=())
    offered: tuple[str, ...] = field(default=())

    @property
    def vouched_options(self) -> frozenset[str]:
        """Options the output itself names as the ones to use: the tool knows them."""
        named = [new.split()[0].partition("=")[0] for r in self.replacements for new in r.new if new.split()]
        names = [*named, *self.required_options]
        return frozenset(name for name in names if is_option(name) and "*" not in name)

    @property
    def targets(self) -> tuple[RejectedOption, ...]:
        """The options to change: the rejected ones, then the ignored ones not already among them."""
        seen = {r.index for r in self.rejected}
        return (*self.rejected, *(r for r in self.ignored if r.index not in seen))


def command_hints(output: str, argv: Sequence[str], program_length: int = 1) -> CommandHints:
    """Read ``output`` (stderr, then stdout) of the failed ``argv`` (see the module docs)."""
    tokens = list(argv)
    rejected = rejected_options(output, tokens)
    taken = {r.index for r in rejected}
    named = [r for r in named_options(output, tokens) if r.index not in taken]
    ignored = [r for r in [*rejected, *named] if _says_ignored(output, r.option)]
    if not rejected:
        # No "unknown option" phrasing, but a line naming the option says it is gone or invalid.
        rejected = [r for r in named if r not in ignored]
    replacements = find_replacements(output)
    return CommandHints(
        rejected=tuple(rejected),
        ignored=tuple(ignored),
        rejected_words=tuple(_rejected_words(output, tokens, program_length)),
        replacements=tuple(replacements),
        templates=tuple(_templates(replacements, tokens, program_length)),
        default_now=bool(_DEFAULT_NOW.search(output)),
        subcommand_required=bool(_SUBCOMMAND_REQUIRED.search(output)),
        required_options=tuple(_required_options(output, tokens)),
        unspecified=tuple(dict.fromkeys(m.group(1).lower() for m in _UNSPECIFIED.finditer(output))),
        offered=tuple(_offered(output)),
    )


def named_options(output: str, argv: Sequence[str]) -> list[RejectedOption]:
    """Options of ``argv`` that a line of ``output`` names and calls gone, invalid or ignored."""
    found: dict[int, RejectedOption] = {}
    lines = [line for line in output.splitlines() if _DRIFT_WORDS.search(line)]
    for index, token in enumerate(argv):
        if index == 0 or not is_option(token):
            continue
        name, eq, value = token.partition("=")
        spelled = re.compile(rf"(?<![\w-]){re.escape(name)}(?![\w-])")
        bare = re.compile(rf"[`'\"‘“{{\s]{re.escape(name.lstrip('-'))}[`'\"’”:=}}\s]")
        if any(spelled.search(line) or bare.search(f" {line} ") for line in lines):
            found[index] = RejectedOption(name, index, (value,) if eq else (), bool(eq))
    return [found[i] for i in sorted(found)]


def _required_options(output: str, argv: list[str]) -> list[str]:
    """Options the output says are required that ``argv`` lacks, in the order named."""
    used = {token.partition("=")[0] for token in argv if is_option(token)}
    found: list[str] = []
    for match in _REQUIRES.finditer(output):
        for name in _DASHED_NAME.findall(match.group(0)):
            if name not in used and name not in found:
                found.append(name)
    for match in _SUGGESTED.finditer(output):
        if match.group(1) not in used and match.group(1) not in found:
            found.append(match.group(1))
    return found


def _offered(output: str) -> list[str]:
    """The values an "Available x: a, b, c" line of the output lists."""
    match = _AVAILABLE.search(output)
    if not match:
        return []
    items = [item.strip().strip("`'\".") for item in re.split(r"[,\s]+", match.group("list"))]
    return [item for item in items if re.fullmatch(r"[A-Za-z0-9][\w.+-]*", item)][:100]


def _says_ignored(output: str, option: str) -> bool:
    """Whether a line naming ``option`` says it was ignored or has no effect."""
    name = re.escape(option.lstrip("-"))
    for line in output.splitlines():
        if re.search(rf"(?<![\w]){name}(?![\w-])", line) and re.search(
            r"(?i)\bignor(?:ed|ing)\b|\bno\s+(?:longer\s+has\s+any\s+)?effect\b", line
        ):
            return True
    return False


def _rejected_words(output: str, argv: list[str], program_length: int) -> list[tuple[int, str]]:
    found: dict[int, str] = {}
    for pattern in _REJECTED_WORD:
        for match in pattern.finditer(output):
            groups = match.groupdict()
            words = [groups["word"]] if groups.get("word") else re.split(r"[\s,]+", groups.get("words") or "")
            for word in words:
                word = word.strip("`'\"‘’“”.:;")
                if not word or is_option(word):
                    continue
                index = next(
                    (i for i in range(program_length, len(argv)) if argv[i] == word and i not in found),
                    None,
                )
                if index is not None:
                    found[index] = word
    return sorted(found.items())


def _templates(
    replacements: Sequence[Replacement], argv: list[str], program_length: int
) -> list[CommandTemplate]:
    """Suggested command lines that start with the program: the subcommand words they name."""
    program = {os.path.basename(token) for token in argv[:program_length]}
    templates: list[CommandTemplate] = []
    for replacement in replacements:
        for new in replacement.new:
            words = new.split()
            if len(words) < 2 or os.path.basename(words[0]) not in program:
                continue
            path = []
            for word in words[1:]:
                if (
                    is_option(word)
                    or word.startswith(("<", "[", "{"))
                    or not re.fullmatch(r"[A-Za-z][\w:.-]*", word)
                ):
                    break
                path.append(word)
            if path:
                templates.append(CommandTemplate(tuple(path), replacement.text))
    return templates
