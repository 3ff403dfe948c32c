"""What a researched help snippet says about one command: its options, their descriptions, its synopsis.

Research returns snippets of indexed CLI help (``entity_name``, Markdown ``content`` with a fenced
synopsis and an ``## Options`` list, and for CLI-help chunks ``attributes`` with ``command``,
``subcommand_path``, ``options`` and ``synopsis``). :func:`command_doc` turns one into a
:class:`CommandDoc`; :func:`synopsis_forms` reads the usage grammar that help pages share
(``[...]`` optional, ``(a | b)`` one of, ``<name>`` a value, ``...`` repeatable): an option outside
every ``[...]`` is required.

Example:
    >>> form = synopsis_forms("tool put\\n[--acl <value>]\\n--bucket <value>\\n--key <value>")[0]
    >>> [sorted(group) for group in form.required], sorted(form.value_options)
    ([['--bucket'], ['--key']], ['--acl', '--bucket', '--key'])
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "CommandDoc",
    "OptionDoc",
    "Placeholder",
    "SynopsisForm",
    "command_doc",
    "documented_paths",
    "synopsis_forms",
]

# "<file>...", and "[cmd]..." where the dots follow the closing bracket.
_REPEATED = re.compile(r"\]*\.\.\.")
_FENCED = re.compile(r"```[^\n]*\n(.*?)```", re.DOTALL)
_HEADING = re.compile(r"^#\s+(\S.*)$", re.MULTILINE)
_OPTION_ITEM = re.compile(r"^[-*]\s+(?P<head>(?:`[^`]+`[ ,]*)+)(?::\s*(?P<description>.*))?$")
_BACKTICKED = re.compile(r"`([^`]+)`")
_SECTION = re.compile(r"^##\s+(.*)$")
_SYNOPSIS_TOKEN = re.compile(
    r"(?P<option>-{1,2}(?:\[no-\])?[A-Za-z0-9?][\w.?-]*)(?P<attached>\[=[^\s\]]*\]|=[^\s\]|)]*|\[?<[^>\s]*>\]?)?"
    r"|(?P<open>[\[({])|(?P<close>[\])}])|(?P<bar>\|)|(?P<ellipsis>\.\.\.)"
    r"|(?P<placeholder><[^>]+>(?:\.\.\.)?|\b[A-Z][A-Z0-9_-]+\b(?:\.\.\.)?)"
    r"|(?P<word>[^\s\[\](){}|<>]+)"
)


@dataclass(frozen=True)
class OptionDoc:
    """One documented option: its spellings, whether it takes a value, its value hint and description."""

    name: str
    aliases: tuple[str, ...] = ()
    takes_value: bool = False
    value_hint: str = ""
    description: str = ""
    is_global: bool = False

    @property
    def spellings(self) -> tuple[str, ...]:
        """The name followed by its aliases."""
        return (self.name, *self.aliases)


@dataclass(frozen=True)
class Placeholder:
    """A positional argument of a synopsis form (``<branch>``, ``FILE``)."""

    name: str
    required: bool
    repeatable: bool = False


@dataclass(frozen=True)
class SynopsisForm:
    """One usage form of a command.

    Attributes:
        text: the form as printed.
        required: groups of option spellings; each group must be satisfied by one of its members
            (``{'--bucket'}``, or ``{'--set-upstream-to', '-u'}`` for ``(--set-upstream-to=<x> | -u <x>)``).
        mentioned: every option the form names.
        value_options: options written with a value (``--bucket <value>``, ``--format=<fmt>``).
        bracketed_value_options: options followed by a bracketed placeholder (``--merged [<commit>]``),
            which may be an optional value or an optional positional; the options list decides.
        positionals: the positional arguments, in order.
    """

    text: str
    required: tuple[frozenset[str], ...] = ()
    mentioned: frozenset[str] = frozenset()
    value_options: frozenset[str] = frozenset()
    bracketed_value_options: frozenset[str] = frozenset()
    positionals: tuple[Placeholder, ...] = ()


@dataclass(frozen=True)
class CommandDoc:
    """A documented command assembled from one research snippet.

    Attributes:
        tool: the tool as users type it (``git``), empty when the snippet does not say.
        path: the subcommand words (``("branch",)``).
        options: own options by every spelling (aliases map to the same :class:`OptionDoc`).
        global_options: spellings of options every command of the tool accepts.
        forms: the synopsis's usage forms (one when the synopsis has a single form).
        synopsis: the synopsis as printed.
        snippet: the snippet it came from.
    """

    tool: str
    path: tuple[str, ...]
    options: Mapping[str, OptionDoc]
    global_options: frozenset[str]
    forms: tuple[SynopsisForm, ...]
    synopsis: str
    snippet: Mapping[str, Any] = field(default_factory=dict)

    def accepts(self, option: str) -> bool:
        """Whether the command documents ``option`` (its own, a global one, or one its synopsis names)."""
        return (
            option in self.options
            or option in self.global_options
            or any(option in f.mentioned for f in self.forms)
        )

    def accepts_own(self, option: str) -> bool:
        """Whether ``option`` is this command's own (documented, and not one every command accepts)."""
        return self.accepts(option) and option not in self.global_options

    def takes_value(self, option: str) -> bool | None:
        """Whether ``option`` takes a value per these docs; ``None`` when they do not say.

        The synopsis decides for the options it names (an options list may print a type even for a
        flag); the options list decides the rest, and the bracketed case ``--opt [<x>]``.
        """
        doc = self.options.get(option)
        if any(option in f.value_options for f in self.forms):
            return True
        if any(option in f.bracketed_value_options for f in self.forms):
            return doc.takes_value if doc is not None else True
        if any(option in f.mentioned for f in self.forms):
            return False
        return doc.takes_value if doc is not None else None

    @property
    def name(self) -> str:
        """``tool sub path`` as a user would type it."""
        return " ".join(filter(None, (self.tool, *self.path)))


def command_doc(snippet: Mapping[str, Any]) -> CommandDoc | None:
    """The command a research snippet documents, or ``None`` when it documents no command.

    Uses ``attributes`` (``command``, ``subcommand_path``, ``options``, ``global_options``,
    ``synopsis``) when present and falls back to the Markdown content (heading, first fenced block,
    ``## Options`` list), so snippets from other sources that look like help still work.
    """
    attributes = snippet.get("attributes") or {}
    content = str(snippet.get("content") or "")
    tool, path = _identity(snippet, attributes, content)
    if tool is None and not path:
        return None
    options, global_names = _options(content)
    for spelling in attributes.get("options") or ():
        if isinstance(spelling, str) and spelling not in options:
            options[spelling] = OptionDoc(spelling)
    global_options = frozenset(
        [*global_names, *(s for s in attributes.get("global_options") or () if isinstance(s, str))]
    )
    synopsis = attributes.get("synopsis")
    if not isinstance(synopsis, str) or not synopsis.strip():
        fenced = _FENCED.search(content)
        synopsis = fenced.group(1).strip() if fenced else ""
    if not options and not synopsis:
        return None
    forms = tuple(synopsis_forms(synopsis)) if synopsis else ()
    return CommandDoc(tool or "", path, options, global_options, forms, synopsis, snippet)


def synopsis_forms(synopsis: str) -> list[SynopsisForm]:
    """The usage forms of a synopsis, each with its required option groups and positionals.

    A new form starts on a line whose first word is the first line's first word (``git branch ...``
    repeated); other lines continue the current form. Leading plain words (the command itself) are
    not positionals.
    """
    lines = [line for line in synopsis.splitlines() if line.strip()]
    if not lines:
        return []
    lead = lines[0].split()[0]
    chunks: list[list[str]] = []
    for line in lines:
        stripped = line.strip()
        stripped = re.sub(r"^(?:or|usage)\s*:\s*", "", stripped, flags=re.IGNORECASE)
        if not chunks or stripped.split()[0] == lead:
            chunks.append([stripped])
        else:
            chunks[-1].append(stripped)
    return [_parse_form(" ".join(chunk)) for chunk in chunks]


def _parse_form(text: str) -> SynopsisForm:
    stack: list[str] = []
    group: list[str] | None = None  # options inside a required ( ... ) or { ... }: one of them is needed
    required: list[frozenset[str]] = []
    mentioned: set[str] = set()
    value_options: set[str] = set()
    positionals: list[Placeholder] = []
    bracketed: set[str] = set()
    pending: list[str] = []  # the option(s) a following <placeholder> would be the value of
    pending_depth = 0  # the bracket depth at which they were named
    skipping_alternative = False  # "<a> <b> or <b> <a>": only the first spelling counts
    for match in _SYNOPSIS_TOKEN.finditer(text):
        # lastgroup would name the nested "attached" group of an option with an attached value.
        kind = "option" if match.group("option") else match.lastgroup
        token = match.group()
        optional = "[" in stack
        if kind == "option":
            names = _expand(match.group("option"))
            mentioned.update(names)
            if match.group("attached"):
                value_options.update(names)
            if not optional:
                if group is not None:
                    group.extend(names)
                else:
                    required.append(frozenset(names))
            pending, pending_depth, skipping_alternative = names, len(stack), False
        elif kind == "open":
            stack.append(token)
            if token != "[" and not optional and group is None:
                group = []
            if token != "[":
                pending = []
        elif kind == "close":
            opener = stack.pop() if stack else ""
            if opener in ("(", "{") and group is not None and not any(o != "[" for o in stack):
                if group:
                    required.append(frozenset(group))
                group = None
            pending = []
        elif kind == "placeholder":
            direct = bool(pending) and len(stack) == pending_depth
            if direct:
                value_options.update(pending)
            elif pending:
                bracketed.update(pending)  # and, just as likely, an optional positional:
            if not direct and not skipping_alternative:
                repeatable = token.endswith("...") or bool(_REPEATED.match(text, match.end()))
                name = token.removesuffix("...").strip("<>")
                positionals.append(Placeholder(name, not optional and group is None, repeatable))
            pending = []
        elif kind == "word" and token != "or" and "[" in stack and not token.startswith("-"):
            # A lowercase word in brackets is an argument too: "[files...]", "[path]".
            repeatable = token.endswith("...") or bool(_REPEATED.match(text, match.end()))
            if not skipping_alternative and not pending:
                positionals.append(Placeholder(token.removesuffix("..."), False, repeatable))
            pending = []
        else:  # "|", "...", or a plain word (the command itself, "or", "=")
            if kind == "word" and token == "or" and not stack:
                skipping_alternative = True
            pending = []
    return SynopsisForm(
        text,
        tuple(required),
        frozenset(mentioned),
        frozenset(value_options),
        frozenset(bracketed - value_options),
        tuple(positionals),
    )


def _expand(option: str) -> list[str]:
    """``--[no-]status`` names both ``--status`` and ``--no-status``."""
    if "[no-]" in option:
        return [option.replace("[no-]", ""), option.replace("[no-]", "no-")]
    return [option]


def _identity(
    snippet: Mapping[str, Any], attributes: Mapping[str, Any], content: str
) -> tuple[str | None, tuple[str, ...]]:
    tool = attributes.get("command") if isinstance(attributes.get("command"), str) else None
    raw_path = attributes.get("subcommand_path")
    if isinstance(raw_path, (list, tuple)) and all(isinstance(w, str) for w in raw_path):
        return tool, tuple(raw_path)
    entity = str(snippet.get("entity_name") or "").split()
    heading = _HEADING.search(content)
    words = heading.group(1).split() if heading else []
    if words and entity and words[-len(entity) :] == entity:
        # "# tool sub cmd" with entity "sub cmd": the tool is the rest of the heading.
        return tool or " ".join(words[: len(words) - len(entity)]) or None, tuple(entity)
    return tool, tuple(entity)


def _options(content: str) -> tuple[dict[str, OptionDoc], list[str]]:
    """Options of the ``## Options`` list (every spelling maps to its doc) and the global option names."""
    options: dict[str, OptionDoc] = {}
    global_names: list[str] = []
    section = ""
    for line in content.splitlines():
        heading = _SECTION.match(line)
        if heading:
            section = heading.group(1).strip().lower()
            continue
        if "global" in section:
            global_names.extend(n for n in _BACKTICKED.findall(line) if n.startswith("-"))
            continue
        if "option" not in section:
            continue
        item = _OPTION_ITEM.match(line.strip())
        if not item:
            continue
        doc = _option_doc(item.group("head"), item.group("description") or "")
        if doc is not None:
            for spelling in doc.spellings:
                options.setdefault(spelling, doc)
    return options, global_names


def _option_doc(head: str, description: str) -> OptionDoc | None:
    names: list[str] = []
    hint = ""
    for token in _BACKTICKED.findall(head):
        if token.startswith("-"):
            names.append(token)
        else:
            hint = token
    if not names:
        return None
    return OptionDoc(names[0], tuple(names[1:]), bool(hint), hint, description.strip())


def documented_paths(docs: Sequence[CommandDoc]) -> list[tuple[str, ...]]:
    """Every documented subcommand path and its prefixes, for splitting a command line."""
    paths: set[tuple[str, ...]] = set()
    for doc in docs:
        for end in range(1, len(doc.path) + 1):
            paths.add(doc.path[:end])
    return sorted(paths)
