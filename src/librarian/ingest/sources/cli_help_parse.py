"""Parse the help text of a command-line tool into a synopsis, a description, options and subcommands.

The parser knows the common layouts rather than any one tool: man pages rendered to plain text
(``NAME``/``SYNOPSIS``/``OPTIONS`` headers, as printed by ``git commit --help`` or the AWS CLI v1's
``help``), and ``--help`` screens of argparse, optparse, click, clap and cobra (``Usage:``,
``Commands:``, ``Options:``, ``Global Flags:``). It works line by line on the indentation that every
one of these layouts uses, and never raises: text it does not understand yields an empty result.

Example:
    >>> page = parse_help("Usage: tool [OPTIONS]\\n\\nCommands:\\n  run  Run it.\\n\\n"
    ...                   "Options:\\n  -v, --verbose  Talk more.\\n")
    >>> page.synopsis, [o.name for o in page.options], page.subcommands
    ('tool [OPTIONS]', ['--verbose'], [('run', 'Run it.')])
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass, field

__all__ = [
    "CliCommand",
    "CliOption",
    "HelpPage",
    "clean_help_text",
    "looks_like_help",
    "parse_help",
    "parse_version",
]

_OVERSTRIKE = re.compile(r".\x08")
# CSI sequences (colours, cursor moves), OSC sequences (hyperlinks, titles) and two-byte escapes.
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
# A man page's running header and footer: "GIT-COMMIT(1)   Git Manual   GIT-COMMIT(1)", "   S3()".
_MAN_TITLE_LINE = re.compile(r"\s*(?:\S.*?\s{3,})?\S+\(\w*\)")

_INLINE_USAGE = re.compile(r"(?i)^(usage|synopsis)\s*:\s*(\S.*)$")
_CAPS_TITLE = re.compile(r"^[A-Z][A-Z0-9 &/_()-]*[A-Z0-9)]$")
_WORDS_TITLE = re.compile(r"^[A-Z][\w' /&()-]*$")

_SYNOPSIS_TITLE = re.compile(r"(?i)^(synopsis|usage)\b")
_DESCRIPTION_TITLE = re.compile(r"(?i)^description$")
_NAME_TITLE = re.compile(r"(?i)^name$")
# Prose about the command after its options (Symfony Console and cleo print "Help:"): it says what
# the defaults are ("By default, packages ... will not be updated"), so it joins the description.
_DETAILS_TITLE = re.compile(r"(?i)^(help|details|discussion)$")
_EXAMPLES_TITLE = re.compile(r"(?i)^examples?$")
# "Example 1: Upload an object" (AWS CLI, many man pages) starts one example of an EXAMPLES section.
_EXAMPLE_HEADING = re.compile(r"^(?:\*\*)?example\s*\d*\s*[:.)-]\s*\S.*$", re.IGNORECASE)
_ASIDE_START = re.compile(r"^(note|warning|important|tip)\s*:", re.IGNORECASE)
_COMMANDS_TITLE = re.compile(r"(?i)\b(sub)?commands?\b|\bservices?\b")
_OPTIONS_TITLE = re.compile(r"(?i)option|flag|parameter|argument|switch")
_GLOBAL_TITLE = re.compile(r"(?i)global|general|inherited")

_OPTION_START = re.compile(r"-{1,2}(?:\[no-\])?[A-Za-z0-9?@#]")
_OPTION_NAME = re.compile(r"(-{1,2})(\[no-\])?([A-Za-z0-9?@#][\w.?@#-]*)")
# A value attached to the option token: --out=FILE, --fixup=[(amend|reword):]<commit>, -u[<mode>],
# or a bare "--errors=" (a value follows; the description says which).
_ATTACHED_VALUE = re.compile(r"\[?=\S*[^\s,]|\[[^\]\s]*\]|<[^>]*>|=(?=\s|$)")
# A value after a space: <file>, [<file>], {a,b}, FILE (single space only: two spaces start prose).
_SPACED_VALUE = re.compile(
    r"\s+(\[<[^>]*>\]|<[^>]*>[^\s,]*|\{[^}\s]*\})|\s([A-Z][A-Z0-9_-]*)(?![\w])|\s(\[[^\]\s]*\]\S*)"
)
_TYPE_HINT = re.compile(r"\s+\(([a-z][a-z -]*)\)")
_SEPARATOR = re.compile(r"\s*(?:,|\|)\s*|\s+or\s+(?=-)")
_SYNOPSIS_OPTION = re.compile(r"(?<![\w<=.-])(--?)(\[no-\])?([A-Za-z0-9][\w.-]*)")
_LIST_ITEM = re.compile(r"^(?:[-*•+o]|\d+\.)\s+(?=\S)")
_HYPHENATED = re.compile(r"(?:^|\s)[A-Za-z]*[a-z]-$")
_SHELL_META = re.compile(r"[$;|&`<>()\\]")
_BULLET = re.compile(r"^(?:[o*•+])\s(?=\S)")
_VERSION = re.compile(
    r"(?<![\w.-])v?(\d+(?:\.\d+)+(?:[-.+]?(?:a|b|rc|alpha|beta|dev|post|pre)\.?\d*)?)(?![\w.]*\d)"
)

_MAX_DESCRIPTION = 1500
_MAX_OPTION_DESCRIPTION = 500
# The description after an option's names, two spaces or more away: "-h, --help[=<X>]    Print help".
_INLINE_DESCRIPTION = re.compile(r"\S {2,}(\S)")
# "error: ...", "fatal: ...", "tool: unknown option", "Unrecognized arguments": a run that went wrong.
_ERROR_FIRST_LINE = re.compile(
    r"(?i)(?:error|fatal)\b|[\w.-]+:\s+(?:error|unknown|unrecognized|invalid|illegal)\b"
    r"|(?:unknown|unrecognized|invalid|illegal|unexpected)\s+(?:option|argument|parameter|command|flag)"
)
# "- concise: Print diagnostics" in a "Possible values:" list.
_VALUE_ITEM = re.compile(r"^[-*]\s+([\w.+/-]+)\s*(?::|$)")
_MAX_SYNOPSIS = 4000
_MAX_EXAMPLE = 1500
_MAX_EXAMPLES = 8
_MAX_ENTRY_WORDS = 3


@dataclass(frozen=True)
class CliOption:
    """One option a command accepts.

    Attributes:
        name: the canonical spelling, the long form when there is one (``--tagging``).
        aliases: the other spellings (``-m`` for ``--message``, ``--no-status`` for ``--[no-]status``).
        takes_value: whether the option is followed by a value.
        value_hint: the value's placeholder or type as printed (``<value>``, ``string``, ``FILE``).
        description: the option's help, reflowed and trimmed.
        group: the title of the help section the option came from (``OPTIONS``, ``Global Flags``), or
            ``synopsis`` when it was only named in the synopsis.
    """

    name: str
    aliases: tuple[str, ...] = ()
    takes_value: bool = False
    value_hint: str | None = None
    description: str = ""
    group: str = ""

    @property
    def is_global(self) -> bool:
        """True for options the tool documents as accepted by every command (``GLOBAL OPTIONS``)."""
        return bool(_GLOBAL_TITLE.search(self.group))

    @property
    def spellings(self) -> tuple[str, ...]:
        """The name followed by its aliases."""
        return (self.name, *self.aliases)


@dataclass(frozen=True)
class HelpPage:
    """What one help text says. ``subcommands`` holds (name, summary) candidates, not yet validated."""

    synopsis: str = ""
    description: str = ""
    options: list[CliOption] = field(default_factory=list)
    subcommands: list[tuple[str, str]] = field(default_factory=list)
    examples: list[CliExample] = field(default_factory=list)


@dataclass(frozen=True)
class CliExample:
    """One worked example from a page's EXAMPLES section: its title and its text with code fenced."""

    title: str
    text: str


@dataclass(frozen=True)
class CliCommand:
    """One command or subcommand and what its help says.

    Attributes:
        path: the subcommand words after the tool, e.g. ``("s3api", "put-object")``; ``()`` for the tool.
        synopsis: the usage lines, dedented.
        description: the description, reflowed and trimmed (the parent's one-line summary when the page
            has none).
        options: the options the page documents (global ones have ``is_global`` set).
        subcommands: the valid subcommand names the page lists.
        raw_help: the cleaned help text, capped at 64 KiB.
        help_args: the arguments that printed the help, e.g. ``("s3api", "put-object", "help")``.
    """

    path: tuple[str, ...]
    synopsis: str
    description: str
    options: list[CliOption]
    subcommands: list[str]
    raw_help: str
    help_args: tuple[str, ...] = ()
    examples: list[CliExample] = field(default_factory=list)

    @property
    def name(self) -> str:
        """The subcommand words joined by spaces (empty for the tool itself)."""
        return " ".join(self.path)


def looks_like_help(
    page: HelpPage, text: str, returncode: int, parent_text: str | None, *, killed: bool = False
) -> bool:
    """Whether a run printed real help, rather than an error or its parent's page again.

    The page must parse to a synopsis, options or subcommands; a tool that ignores an unknown word
    prints its parent's help, which is refused. The exit status must be 0 unless the run was killed
    (its status then means nothing) or the page lists options (``git commit -h`` exits 129). A failed
    run whose first line is an error (``error: parameter --help is unknown`` before a usage summary)
    printed the usage of a mistake, not the help asked for: another way of asking may get it.
    """
    if not (page.synopsis or page.options or page.subcommands):
        return False
    if parent_text is not None and text == parent_text:
        return False
    if returncode != 0 and not killed and _ERROR_FIRST_LINE.match(text.lstrip()):
        return False
    return killed or returncode == 0 or bool(page.options)


@dataclass
class _Block:
    title: str
    lines: list[str]
    inline: bool = False  # the title line carried content ("usage: git commit [...]")


def clean_help_text(raw: bytes | str) -> str:
    """Decode help output and remove terminal formatting.

    Strips backspace overstrike (``X\\bX`` bold, ``_\\bX`` underline, as ``man``/``groff`` print to a
    dumb terminal), ANSI escapes, carriage returns and other control characters, expands tabs and
    drops trailing spaces.

    Example:
        >>> clean_help_text(b"N\\x08NA\\x08AM\\x08ME\\x08E \\x1b[1m_\\x08x\\x1b[0m")
        'NAME x'
    """
    text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
    text = _OVERSTRIKE.sub("", text)
    text = _ANSI.sub("", text)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _CONTROL.sub("", text.expandtabs(8))
    return "\n".join(line.rstrip() for line in text.split("\n")).strip("\n")


def parse_version(text: str) -> str | None:
    """The first version-looking token of ``text``.

    Example:
        >>> parse_version("aws-cli/1.46.3 Python/3.11.7"), parse_version("git version 2.39.5")
        ('1.46.3', '2.39.5')
        >>> parse_version("pip 24.0 from /usr/lib (python 3.11)"), parse_version("no digits")
        ('24.0', None)
    """
    match = _VERSION.search(text)
    return match.group(1) if match else None


def parse_help(text: str) -> HelpPage:
    """Parse cleaned help text (see :func:`clean_help_text`) into a :class:`HelpPage`."""
    blocks, typeset = _split_blocks(text)
    synopsis = ""
    description = ""
    name_summary = ""
    preamble = ""
    details = ""
    options: dict[str, CliOption] = {}
    subcommands: dict[str, str] = {}
    examples: list[CliExample] = []
    for block in blocks:
        title = block.title
        if _SYNOPSIS_TITLE.match(title):
            usage, rest = _usage_and_rest(block.lines, only_first=block.inline)
            synopsis = synopsis or usage
            # Usage screens (git -h, argparse) continue straight into the option list.
            _add_options(options, _parse_options(rest, "", typeset) if _option_dominated(rest) else [])
        elif _DESCRIPTION_TITLE.match(title):
            description = description or _prose(block.lines, _MAX_DESCRIPTION, typeset)
        elif _NAME_TITLE.match(title):
            name_summary = _name_summary(block.lines)
        elif _DETAILS_TITLE.match(title):
            details = details or _prose(block.lines, _MAX_DESCRIPTION, typeset)
        elif _EXAMPLES_TITLE.match(title):
            examples = examples or _parse_examples(block.lines)
        elif _COMMANDS_TITLE.search(title) and not _OPTIONS_TITLE.search(title):
            for name, summary in _parse_entries(block.lines):
                subcommands.setdefault(name, summary)
        elif _OPTIONS_TITLE.search(title) or _option_dominated(block.lines):
            _add_options(options, _parse_options(block.lines, title, typeset))
        elif not title:
            preamble = preamble or _prose(_first_paragraph(block.lines), _MAX_DESCRIPTION, typeset)
    for option in _synopsis_options(synopsis):
        if not any(spelling in _known_spellings(options) for spelling in option.spellings):
            options.setdefault(option.name, option)
    description = description or name_summary or preamble
    if details:
        description = _trim(f"{description}\n\n{details}".strip(), _MAX_DESCRIPTION)
    return HelpPage(
        synopsis=synopsis,
        description=description,
        options=list(options.values()),
        subcommands=list(subcommands.items()),
        examples=examples,
    )


def _parse_examples(lines: list[str]) -> list[CliExample]:
    """The worked examples of an EXAMPLES section, each with its explanation and fenced code.

    Worked examples are what an agent most needs (how the options combine), and a question like "how
    do I upload a file" is phrased like an example's title, not like a reference description. Pages
    with "Example N:" headings give one example per heading; other pages (man pages listing commands
    with explanations) give the section as one example. Notes about quoting rules are dropped.
    """
    paragraphs = _paragraphs(lines)
    base = min((_indent(p[0]) for p in paragraphs), default=0)
    examples: list[tuple[str, list[str]]] = []
    for paragraph in paragraphs:
        first = paragraph[0].strip()
        if _EXAMPLE_HEADING.match(first) and len(paragraph) == 1:
            examples.append((first.strip("*").strip(), []))
            continue
        if not examples:
            if _ASIDE_START.match(first) or (paragraphs[0] is not paragraph and _indent(paragraph[0]) > base):
                continue  # a NOTE before the first example, and its indented continuation
            examples.append(("", []))
        # Lines indented deeper than the section's prose are code: keep them verbatim, fenced.
        if all(_indent(line) > base for line in paragraph) and any(_indent(p[0]) == base for p in paragraphs):
            examples[-1][1].append("```\n" + "\n".join(_dedent(paragraph)) + "\n```")
        else:
            examples[-1][1].append(" ".join(" ".join(line.split()) for line in paragraph))
    out = []
    for title, parts in examples[:_MAX_EXAMPLES]:
        text = "\n\n".join(parts)
        if text.strip():
            out.append(CliExample(title=title or "Examples", text=text[:_MAX_EXAMPLE]))
    return out


def _split_blocks(text: str) -> tuple[list[_Block], bool]:
    """Cut the text at section headers; also tell whether it is a man page typeset by groff."""
    lines = text.split("\n")
    typeset = False
    # Drop a man page's running header and footer, which would otherwise read as a title or prose.
    nonblank = [i for i, line in enumerate(lines) if line.strip()]
    for i in nonblank[:1] + nonblank[-1:]:
        line = lines[i]
        if (
            len(line) <= 200
            and _MAN_TITLE_LINE.fullmatch(line)
            and (line[0].isspace() or re.search(r"\S\s{3,}\S", line))
        ):
            lines[i] = ""
            typeset = True
    blocks = [_Block("", [])]
    for i, line in enumerate(lines):
        header = _header(line, _next_nonblank(lines, i))
        if header is None:
            blocks[-1].lines.append(line)
            continue
        title, inline = header
        blocks.append(_Block(title, [inline] if inline else [], inline=bool(inline)))
    return [b for b in blocks if b.title or any(line.strip() for line in b.lines)], typeset


def _next_nonblank(lines: list[str], index: int) -> str:
    return next((line for line in lines[index + 1 :] if line.strip()), "")


def _header(line: str, next_line: str) -> tuple[str, str] | None:
    if not line or line[0].isspace() or line.startswith("-"):
        return None
    usage = _INLINE_USAGE.match(line)
    if usage:
        return usage.group(1), usage.group(2)
    if line.endswith(":") and len(line) <= 80:
        return line[:-1].strip(), ""
    if _CAPS_TITLE.match(line) and len(line) <= 40:
        return line, ""
    # "Commit message options" (git -h), "Main Porcelain Commands" (git help -a): a short capitalised
    # line without sentence punctuation, introducing indented entries.
    if _WORDS_TITLE.match(line) and len(line.split()) <= 5 and next_line[:1].isspace():
        return line, ""
    return None


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _dedent(lines: list[str]) -> list[str]:
    text = textwrap.dedent("\n".join(lines)).strip("\n")
    return text.split("\n") if text else []


def _paragraphs(lines: list[str]) -> list[list[str]]:
    paragraphs: list[list[str]] = [[]]
    for line in lines:
        if line.strip():
            paragraphs[-1].append(line)
        elif paragraphs[-1]:
            paragraphs.append([])
    return [p for p in paragraphs if p]


def _value_note(paragraph: list[str]) -> str:
    """A later paragraph of an option that says which values it takes, as one bracketed note.

    clap's long help puts ``[default: x]``/``[possible values: a, b]`` in a paragraph of their own, or a
    ``Possible values:`` list of ``- name: what it does`` lines. Other later paragraphs (man pages go
    on for pages) stay out of the one-paragraph description.
    """
    text = " ".join(line.strip() for line in paragraph)
    if text.startswith("[") and text.endswith("]"):
        return text
    if paragraph[0].strip().lower().rstrip(":") in ("possible values", "allowed values", "choices"):
        values = [m.group(1) for line in paragraph[1:] if (m := _VALUE_ITEM.match(line.strip()))]
        return f"[possible values: {', '.join(values)}]" if values else ""
    return ""


def _first_paragraph(lines: list[str]) -> list[str]:
    paragraphs = _paragraphs(lines)
    return paragraphs[0] if paragraphs else []


def _reflow(lines: list[str], typeset: bool = False) -> str:
    out: list[str] = []
    for line in (stripped for raw in lines if (stripped := raw.strip())):
        item = _LIST_ITEM.match(line)
        if item or not out:
            out.append(f"- {line[item.end() :]}" if item else line)
        elif out[-1].endswith("-") and line[:1].isalnum():
            # groff hyphenates words at line ends (authentica-/tion); --help screens only break at a
            # hyphen that belongs to the text (--python-/version), which must stay.
            dehyphenate = typeset and _HYPHENATED.search(out[-1]) and line[:1].islower()
            out[-1] = (out[-1][:-1] if dehyphenate else out[-1]) + line
        else:
            out[-1] = f"{out[-1]} {line}"
    return "\n".join(re.sub(r" {2,}", " ", line) for line in out)


def _trim(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit)
    return text[: cut if cut > limit // 2 else limit].rstrip(" ,;:") + " …"


def _prose(lines: list[str], limit: int, typeset: bool) -> str:
    out: list[str] = []
    size = 0
    for paragraph in _paragraphs(lines):
        text = _reflow(paragraph, typeset)
        if out and size + len(text) > limit:
            break
        out.append(text)
        size += len(text) + 2
    return _trim("\n\n".join(out), limit)


def _name_summary(lines: list[str]) -> str:
    text = _reflow(lines)
    _, sep, summary = text.partition(" - ")
    return summary.strip() if sep else ""


def _usage_and_rest(lines: list[str], *, only_first: bool) -> tuple[str, list[str]]:
    paragraphs = _paragraphs(lines)
    usage: list[str] = []
    consumed = 0
    # An inline "usage:" line is one paragraph; a SYNOPSIS section may list several forms.
    for paragraph in paragraphs[:1] if only_first else paragraphs:
        joined = _reflow(paragraph)
        # Man SYNOPSIS sections end with prose ("Use aws command help for ..."): stop there.
        if usage and joined.endswith(".") and re.search(r"[a-z]{3,} [a-z]{3,} [a-z]{3,}", joined):
            break
        if usage and paragraph[0].lstrip().startswith("-"):
            break
        usage.extend([*paragraph, ""])
        consumed += 1
    rest: list[str] = []
    for paragraph in paragraphs[consumed:]:
        rest.extend([*paragraph, ""])
    synopsis = "\n".join(_dedent(_hanging_dedent(usage))).strip()
    return synopsis[:_MAX_SYNOPSIS], rest


def _hanging_dedent(lines: list[str]) -> list[str]:
    # An inline "usage: git commit [...]" leaves its first line unindented and its continuations
    # aligned under the command; dedent the continuations on their own.
    if len(lines) > 1 and lines[0] and not lines[0][0].isspace():
        rest = _dedent(lines[1:])
        return [lines[0], *("    " + line if line else line for line in rest)]
    return lines


def _option_dominated(lines: list[str]) -> bool:
    nonblank = [line for line in lines if line.strip()]
    if not nonblank:
        return False
    base = min(_indent(line) for line in nonblank)
    at_base = [line for line in nonblank if _indent(line) == base]
    hits = sum(1 for line in at_base if _OPTION_START.match(line.lstrip()))
    return hits >= 1 and hits * 2 >= len(at_base)


def _parse_options(lines: list[str], group: str, typeset: bool) -> list[CliOption]:
    option_indents = [_indent(line) for line in lines if _OPTION_START.match(line.lstrip())]
    if not option_indents:
        return []
    base = min(option_indents)
    entries: list[tuple[str, list[str]]] = []
    previous_blank = True
    flush = False  # the current entry continues at the option's own indent (man/groff style)
    body_indent: int | None = None
    description_column: int | None = None
    for line in lines:
        if not line.strip():
            previous_blank = True
            if entries:
                entries[-1][1].append("")
            continue
        indent = _indent(line)
        starts_option = bool(_OPTION_START.match(line.lstrip()))
        new_entry = starts_option and (
            (indent == base and (previous_blank or not flush))
            # clap aligns long-only options deeper than "-h, --help": after a blank line, or (its long
            # help, with descriptions on their own deeper lines) shallower than the description.
            or (
                base < indent <= base + 6
                and (body_indent is None or indent < body_indent)
                and (
                    previous_blank
                    or body_indent is not None
                    or (description_column is not None and indent < description_column)
                )
            )
        )
        if new_entry:
            entries.append((line.strip(), []))
            flush, body_indent = False, None
            # "-h, --help    Print help": where the description starts; an option line shallower than
            # it is the next entry even with no blank line and no continuation line between them.
            column = _INLINE_DESCRIPTION.search(line, indent)
            description_column = column.start(1) if column else None
        elif entries:
            entries[-1][1].append(line)
            flush = flush or indent == base
            if indent > base and body_indent is None:
                body_indent = indent
        previous_blank = False
    return [opt for head, body in entries if (opt := _parse_option(head, body, group, typeset)) is not None]


def _parse_option(head: str, body: list[str], group: str, typeset: bool) -> CliOption | None:
    names: list[str] = []
    hint: str | None = None
    pos = 0
    while pos < len(head):
        match = _OPTION_NAME.match(head, pos)
        if not match:
            break
        dashes, negation, word = match.groups()
        names.append(dashes + word)
        if negation:
            names.append(f"{dashes}no-{word}")
        pos = match.end()
        attached = _ATTACHED_VALUE.match(head, pos)
        if attached:
            hint = hint or _unwrap_value(attached.group(0))
            pos = attached.end()
        spaced = _SPACED_VALUE.match(head, pos) or _TYPE_HINT.match(head, pos)
        if spaced:
            hint = hint or next(g for g in spaced.groups() if g)
            pos = spaced.end()
        separator = _SEPARATOR.match(head, pos)
        if not separator or not _OPTION_START.match(head, separator.end()):
            break
        pos = separator.end()
    if not names:
        return None
    type_hint = _TYPE_HINT.match(head, pos)
    if type_hint:
        hint = hint or type_hint.group(1)
        pos = type_hint.end()
    first = head[pos:].strip()
    paragraphs = _paragraphs([first, *body] if first else body)
    description = ""
    if paragraphs:
        notes = [note for paragraph in paragraphs[1:] if (note := _value_note(paragraph))]
        description = _trim(" ".join([_reflow(paragraphs[0], typeset), *notes]), _MAX_OPTION_DESCRIPTION)
    name = next((n for n in names if n.startswith("--")), names[0])
    aliases = tuple(dict.fromkeys(n for n in names if n != name))
    takes_value = hint is not None and hint.lower() != "boolean"
    return CliOption(name, aliases, takes_value, hint, description, group)


def _unwrap_value(token: str) -> str:
    if token.startswith("[=") and token.endswith("]"):
        return token[2:-1]
    if token == "=":
        return "VALUE"
    if token.startswith("="):
        return token[1:]
    if token.startswith("[") and token.endswith("]"):
        return token[1:-1]
    return token


def _add_options(into: dict[str, CliOption], found: list[CliOption]) -> None:
    known = _known_spellings(into)
    for option in found:
        if option.name not in known:
            into[option.name] = option
            known.update(option.spellings)


def _known_spellings(options: dict[str, CliOption]) -> set[str]:
    return {spelling for option in options.values() for spelling in option.spellings}


def _synopsis_options(synopsis: str) -> list[CliOption]:
    found: dict[str, CliOption] = {}
    for dashes, negation, word in _SYNOPSIS_OPTION.findall(synopsis):
        name = dashes + word
        aliases = (f"{dashes}no-{word}",) if negation else ()
        found.setdefault(name, CliOption(name, aliases, group="synopsis"))
    return list(found.values())


def _parse_entries(lines: list[str]) -> list[tuple[str, str]]:
    # Option lines are left out: pip prints " -V, --version" one column left of its commands.
    # A heading inside the block ("Examples:", as click prints a no-rewrap paragraph) is no entry.
    indents = [
        _indent(ln)
        for ln in lines
        if ln[:1].isspace()
        and ln.strip()
        and not _OPTION_START.match(ln.lstrip())
        and not ln.rstrip().endswith(":")
    ]
    if not indents:
        return []
    # The indentation most entries share, not the smallest: one stray line must not hide them.
    base = max(sorted(set(indents)), key=indents.count)
    entries: list[tuple[str, str]] = []
    for line in lines:
        if _indent(line) != base or not line.strip() or _OPTION_START.match(line.lstrip()):
            continue
        text = _BULLET.sub("", line.strip())
        parts = re.split(r"\s{2,}", text, maxsplit=1)
        name, summary = parts[0], (parts[1].strip() if len(parts) > 1 else "")
        first, _, arguments = name.partition(" ")
        if arguments[:1] in ("<", "[", "{", "(", "-"):
            name = first  # man COMMANDS entries show their arguments: "add <path> [<commit-ish>]"
        words = name.split()
        # Longer lines are prose, unless they start like shell syntax: those are kept to be refused.
        if words and ((len(name) <= 64 and len(words) <= _MAX_ENTRY_WORDS) or _SHELL_META.search(words[0])):
            entries.append((name, summary))
    return entries
