"""The values of a failed command, in general terms, and the options its error names as rejected.

A correction keeps what the user meant (which file, which bucket, which tag) and changes how it is
said. So the failed command line is split into the program, the subcommand words, the options, and
the values: positional arguments and option values, each classified by shape as a ``file``, ``url``,
``key_value``, ``number`` or ``word``, with the parts a rewrite may need (a URL's host and last path
segment, a file's base name, the pairs of ``k=v,k2=v2``).

Example:
    >>> parsed = parse_command(["tool", "copy", "notes.txt", "proto://box/dir/", "--tag", "a=b"])
    >>> [(v.text, v.kind) for v in parsed.values]
    [('notes.txt', 'file'), ('proto://box/dir/', 'url'), ('a=b', 'key_value')]
    >>> parsed.values[1].parts["host"], parsed.values[1].segments
    ('box', ('dir',))
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

__all__ = [
    "CommandValue",
    "OptionUse",
    "ParsedCommand",
    "RejectedOption",
    "ValueKind",
    "classify_value",
    "is_option",
    "normalize_error_text",
    "parse_command",
    "rejected_options",
]

ValueKind = Literal["file", "url", "key_value", "number", "word"]

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_NUMBER = re.compile(r"^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$")
_PAIR = re.compile(r"^[^=,\s\[\]{}]+=")
# A path with an extension: the extension holds a letter, so a version such as 1.2.3 is not a file.
_PATH_WITH_EXTENSION = re.compile(r"^[\w.~@+/\\-]*[\w-]\.(?=[A-Za-z0-9]{0,9}[A-Za-z])[A-Za-z0-9]{1,10}$")
_EXPLICIT_PATH = re.compile(r"^(?:\.{1,2}/|/|~/)")
_COMMAND_WORD = re.compile(r"^[A-Za-z][A-Za-z0-9_.:-]*$")
_MAX_PATH_CHECK = 4096


@dataclass(frozen=True)
class CommandValue:
    """One value of a command line.

    Attributes:
        text: the value as written.
        kind: ``file``, ``url``, ``key_value``, ``number`` or ``word``.
        index: the argv index of the token that holds it.
        option: the option it was given to (``--body``), ``None`` for a positional argument.
        attached: written as ``--option=value``.
        exists: for a ``file``: it exists relative to the workspace (or absolutely).
        parts: named pieces: for a URL ``scheme``, ``host``, ``path`` (without the leading ``/``),
            ``basename`` (last non-empty segment); for a file ``path``, ``basename``, ``stem``,
            ``suffix``; for one ``k=v`` pair ``key`` and ``value``. Absent pieces are left out.
        segments: a URL's non-empty path segments.
        pairs: a ``key_value``'s pairs, in order.
    """

    text: str
    kind: ValueKind
    index: int
    option: str | None = None
    attached: bool = False
    exists: bool = False
    parts: Mapping[str, str] = field(default_factory=dict)
    segments: tuple[str, ...] = ()
    pairs: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class OptionUse:
    """An option as used on the command line: its spelling, argv index and the indices of its values."""

    name: str
    index: int
    value_indices: tuple[int, ...] = ()
    attached_value: str | None = None


@dataclass(frozen=True)
class ParsedCommand:
    """A command line split into program, subcommand path, options and values.

    Attributes:
        argv: the whole command line.
        program: the leading tokens that name the tool (``["aws"]``, or ``["python", "-m", "pip"]``
            when the tool's name was given).
        command_path: the subcommand words after the program (``["s3", "cp"]``).
        options: the options used, in order.
        values: positional arguments and option values, in order.
    """

    argv: tuple[str, ...]
    program: tuple[str, ...]
    command_path: tuple[str, ...]
    options: tuple[OptionUse, ...]
    values: tuple[CommandValue, ...]

    def option(self, name: str) -> OptionUse | None:
        """The first use of option ``name`` (its exact spelling), or ``None``."""
        return next((o for o in self.options if o.name == name), None)


@dataclass(frozen=True)
class RejectedOption:
    """An option the error output names as unknown.

    Attributes:
        option: its spelling in the command line (``--tagging``).
        index: its argv index.
        values: the tokens that belong to it: those the error lists after it, or the attached value.
        values_known: ``True`` when the error listed the values (or they were attached), so the
            option's arity is known; otherwise the caller decides from documentation.
    """

    option: str
    index: int
    values: tuple[str, ...] = ()
    values_known: bool = False


def is_option(token: str) -> bool:
    """Whether ``token`` is an option (``-x``, ``--name``, ``--name=value``), not a negative number."""
    return len(token) > 1 and token.startswith("-") and token != "--" and not _NUMBER.match(token)


def classify_value(text: str, workspace: str | os.PathLike[str] | None = None) -> CommandValue:
    """Classify one value by shape (its ``index`` is 0; :func:`parse_command` sets it).

    Args:
        text: the value.
        workspace: the directory relative paths are resolved against, to tell existing files.

    Example:
        >>> classify_value("k=v,k2=v2").pairs
        (('k', 'v'), ('k2', 'v2'))
        >>> classify_value("data/report.csv").parts["basename"], classify_value("42").kind
        ('report.csv', 'number')
    """
    if _URL.match(text):
        return _url_value(text)
    if _NUMBER.match(text):
        return CommandValue(text, "number", 0)
    pairs = _pairs(text)
    if pairs:
        parts = {"key": pairs[0][0], "value": pairs[0][1]} if len(pairs) == 1 else {}
        return CommandValue(text, "key_value", 0, parts=parts, pairs=pairs)
    exists = _exists(text, workspace)
    if exists or _PATH_WITH_EXTENSION.match(text) or _EXPLICIT_PATH.match(text):
        return _file_value(text, exists)
    return CommandValue(text, "word", 0)


def parse_command(
    argv: Sequence[str],
    workspace: str | os.PathLike[str] | None = None,
    *,
    tool: str | None = None,
    known_paths: Collection[Sequence[str]] = (),
    takes_value: Callable[[str], bool | None] | None = None,
) -> ParsedCommand:
    """Split a command line into program, subcommand path, options and classified values.

    Args:
        argv: the command line.
        workspace: where relative file values are looked up.
        tool: the tool's name (``pip``): the program is the argv prefix up to the first token whose
            base name is ``tool`` (so ``python -m pip`` is one program); otherwise ``argv[0]``.
        known_paths: documented subcommand paths; the longest one that starts the remaining tokens is
            the command path. Without a match, the leading plain words are taken.
        takes_value: tells whether an option takes a value (``None``: unknown). An option of unknown
            arity takes the next token when that token is not an option.
    """
    tokens = list(argv)
    program_end = _program_end(tokens, tool)
    rest_start = program_end
    path = _command_path(tokens[rest_start:], workspace, known_paths)
    index = rest_start + len(path)
    options: list[OptionUse] = []
    values: list[CommandValue] = []
    only_positionals = False
    while index < len(tokens):
        token = tokens[index]
        if only_positionals or not is_option(token):
            if token == "--" and not only_positionals:
                only_positionals = True
            else:
                values.append(_located(classify_value(token, workspace), index, None, False))
            index += 1
            continue
        name, eq, attached = token.partition("=")
        if eq:
            options.append(OptionUse(name, index, (index,), attached))
            values.append(_located(classify_value(attached, workspace), index, name, True))
            index += 1
            continue
        arity = takes_value(name) if takes_value else None
        following = tokens[index + 1] if index + 1 < len(tokens) else None
        if following is not None and following != "--" and not is_option(following) and arity is not False:
            options.append(OptionUse(name, index, (index + 1,)))
            values.append(_located(classify_value(following, workspace), index + 1, name, False))
            index += 2
        else:
            options.append(OptionUse(name, index))
            index += 1
    return ParsedCommand(tuple(tokens), tuple(tokens[:program_end]), path, tuple(options), tuple(values))


# "Unknown options: --a,1", "unrecognized arguments: --a 1", "no such option: --a",
# "unknown option `a'", "unexpected argument '--a' found", "unknown flag: --a", "invalid option -- 'a'".
_REJECTION = re.compile(
    r"(?i)\b(?:unknown|unrecogni[sz]ed|no such|invalid|illegal|unexpected|bad|unsupported)\s+"
    r"(?:shorthand\s+)?(?:command[- ]line\s+)?"
    r"(?P<noun>options?|arguments?|flags?|parameters?|switch(?:es)?)\b(?P<rest>[^\n]*)"
)
# The name first: 'The option "--a" does not exist', "parameter --a is unknown", "flag '-a' is not
# recognized" (the "rest" is the name alone).
_REJECTED_AFTER = re.compile(
    r"(?i)\b(?P<noun>option|argument|flag|parameter|switch)\s+(?P<rest>[`'\"‘“]?-{1,2}[A-Za-z0-9?][\w.-]*"
    r"[`'\"’”]?)\s+(?:does not exist|is (?:unknown|not (?:known|recogni[sz]ed|supported|allowed|valid)))\b"
)
_LISTED_AFTER_COLON = re.compile(r"^\s*:\s*(?P<list>.+)$")
_QUOTED = re.compile(r"[`'\"‘“]([^`'\"’”\s]+)[`'\"’”]")
_DASHED = re.compile(r"(?<![\w-])(-{1,2}[A-Za-z0-9?][\w.-]*(?:=\S*)?)")


def rejected_options(error_text: str, argv: Sequence[str]) -> list[RejectedOption]:
    """The options of ``argv`` that ``error_text`` names as unknown, with their values when listed.

    Works on the common phrasings (``Unknown options: --a,v``, ``unrecognized arguments: --a v``,
    ``no such option: --a``, ``unknown option `a'``, ``unexpected argument '--a'``, ``unknown flag:
    --a``): a listed item that starts with ``-`` is an option, the items after it are its values.
    Names printed without dashes are matched to the command line's spelling. Options the command
    line does not contain are ignored.

    Example:
        >>> argv = ["tool", "cp", "a.txt", "proto://b/", "--tag", "k=v,x=y"]
        >>> rejected_options("Unknown options: --tag,k=v,x=y", argv)
        [RejectedOption(option='--tag', index=4, values=('k=v,x=y',), values_known=True)]
    """
    tokens = list(argv)
    found: dict[int, RejectedOption] = {}
    matches = [*_REJECTION.finditer(error_text), *_REJECTED_AFTER.finditer(error_text)]
    for match in matches:
        # Only a plural heading ("Unknown options: --a,v") lists every token left over, values
        # included; a singular one ("no such option: --a") stops at the first unknown name.
        plural = match.group("noun").lower().endswith("s")
        for name, values, listed in _named_items(match.group("rest"), plural):
            index = _argv_index(name, tokens, found)
            if index is None:
                continue
            spelled, eq, attached = tokens[index].partition("=")
            if eq:
                found[index] = RejectedOption(spelled, index, (attached,), True)
                continue
            joined = _values_in_argv(values, tokens, index) if listed else None
            found[index] = RejectedOption(spelled, index, joined or (), joined is not None)
    return [found[i] for i in sorted(found)]


def normalize_error_text(text: str, parsed: ParsedCommand) -> str:
    """Error text with the command's values replaced by their kind, for a problem signature.

    Two failures that differ only in their values (another file, another bucket) get the same text.

    Example:
        >>> cmd = parse_command(["tool", "cp", "a.csv", "proto://bkt/", "--tag", "k=v"])
        >>> normalize_error_text("Unknown options: --tag,k=v  (in a.csv)", cmd)
        'Unknown options: --tag,<key_value> (in <file>)'
    """
    out = text
    for value in sorted(parsed.values, key=lambda v: len(v.text), reverse=True):
        if len(value.text) >= 2 or value.kind != "word":
            out = re.sub(rf"(?<![\w.-]){re.escape(value.text)}(?![\w-])", f"<{value.kind}>", out)
    return " ".join(out.split())


def _named_items(rest: str, plural: bool) -> list[tuple[str, list[str], bool]]:
    """(option name, values listed after it, whether the error listed its values) per named option."""
    listed = _LISTED_AFTER_COLON.match(rest)
    if listed and _DASHED.match(listed.group("list").strip()):
        # A list: "--a,v1,--b" (comma separated) or "--a v1 --b" (space separated). Values may hold
        # commas themselves (k=v,k2=v2), so items are rejoined against the command line later.
        items = [i for i in re.split(r"[,\s]+", listed.group("list").strip()) if i]
        named: list[tuple[str, list[str], bool]] = []
        for item in items:
            if is_option(item):
                named.append((item, [], plural))
            elif named:
                named[-1][1].append(item)
        return named
    names = [m.group(1) for m in _QUOTED.finditer(rest)] or [m.group(1) for m in _DASHED.finditer(rest)]
    return [(name, [], False) for name in names[:1]]


def _argv_index(name: str, tokens: list[str], taken: Mapping[int, RejectedOption]) -> int | None:
    bare = name.split("=", 1)[0]
    spellings = [bare] if bare.startswith("-") else [f"--{bare}", f"-{bare}", bare]
    # Parsers that read ``--no-x`` as ``x`` set to false (cac, yargs, commander) name ``--x`` when
    # they reject it: the command line's negated spelling is meant, when nothing spells it plainly.
    spellings += [f"--no-{s[2:]}" for s in spellings if s.startswith("--") and not s.startswith("--no-")]
    for spelling in spellings:
        for index, token in enumerate(tokens):
            if index == 0 or index in taken or not is_option(token):
                continue
            if token == spelling or token.startswith(spelling + "="):
                return index
    return None


def _values_in_argv(listed: list[str], tokens: list[str], index: int) -> tuple[str, ...]:
    """The argv tokens after ``index`` that the listed items spell (items may have been split on commas)."""
    if not listed:
        return ()
    wanted = ",".join(listed)
    collected: list[str] = []
    position = index + 1
    while position < len(tokens) and not is_option(tokens[position]):
        collected.append(tokens[position])
        if ",".join(collected) == wanted or " ".join(collected) == " ".join(listed):
            return tuple(collected)
        position += 1
    # The error's list did not line up with the command line; fall back to the next token.
    following = tokens[index + 1] if index + 1 < len(tokens) else None
    return (following,) if following is not None and not is_option(following) else ()


def _program_end(tokens: list[str], tool: str | None) -> int:
    if tool:
        for index, token in enumerate(tokens[:4]):
            if os.path.basename(token) == tool or Path(token).stem == tool:
                return index + 1
    return 1 if tokens else 0


def _command_path(
    rest: list[str], workspace: str | os.PathLike[str] | None, known: Collection[Sequence[str]]
) -> tuple[str, ...]:
    documented = [tuple(p) for p in known if p and tuple(rest[: len(p)]) == tuple(p)]
    if documented:
        return max(documented, key=len)
    words: list[str] = []
    for token in rest:
        if not _COMMAND_WORD.match(token) or classify_value(token, workspace).kind != "word":
            break
        words.append(token)
    return tuple(words)


def _located(value: CommandValue, index: int, option: str | None, attached: bool) -> CommandValue:
    return CommandValue(
        value.text,
        value.kind,
        index,
        option,
        attached,
        value.exists,
        value.parts,
        value.segments,
        value.pairs,
    )


def _url_value(text: str) -> CommandValue:
    split = urlsplit(text)
    segments = tuple(s for s in split.path.split("/") if s)
    parts = {"scheme": split.scheme, "host": split.hostname or split.netloc}
    if segments:
        parts["path"] = split.path.lstrip("/")
        parts["basename"] = segments[-1]
    return CommandValue(text, "url", 0, parts={k: v for k, v in parts.items() if v}, segments=segments)


def _file_value(text: str, exists: bool) -> CommandValue:
    name = os.path.basename(text.rstrip("/\\")) or text
    stem, suffix = os.path.splitext(name)
    parts = {"path": text, "basename": name, "stem": stem or name}
    if suffix:
        parts["suffix"] = suffix
    return CommandValue(text, "file", 0, exists=exists, parts=parts)


def _pairs(text: str) -> tuple[tuple[str, str], ...]:
    if not _PAIR.match(text):
        return ()
    pairs: list[tuple[str, str]] = []
    for item in text.split(","):
        key, eq, value = item.partition("=")
        if not eq or not key or any(c.isspace() for c in key):
            return ()
        pairs.append((key, value))
    return tuple(pairs)


def _exists(text: str, workspace: str | os.PathLike[str] | None) -> bool:
    if not text or len(text) > _MAX_PATH_CHECK or "\x00" in text:
        return False
    candidate = Path(text).expanduser()
    if not candidate.is_absolute():
        if workspace is None:
            return False
        candidate = Path(workspace) / candidate
    try:
        return candidate.exists()
    except OSError:
        return False
