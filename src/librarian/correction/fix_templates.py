"""Fix templates: a verified correction recorded so that it applies to the same failure with other values.

:func:`make_fix_template` turns ``(failed argv, fixed argv)`` into two token lists in which the
failed command's values are placeholders: ``{v0:file}`` on the failed side names value 0 and the kind
it must have; ``{v0}``, ``{v0.host}``, ``{v0.basename}`` (any of the value's
:attr:`~librarian.correction.values.CommandValue.parts`) on the fixed side say where it goes; ``{argv0}``
is the executable as the new failure spells it. Literal braces are doubled (``{{``, ``}}``).

:func:`apply_fix_template` matches a new failed command token by token against the failed side
(same length, same literal tokens, each placeholder bound to a value of the same kind) and renders the
fixed side with the new values.

Example:
    >>> failed = ["tool", "cp", "a.csv", "proto://one/"]
    >>> t = make_fix_template(failed, ["tool", "put", "--to", "one", "--src", "a.csv"])
    >>> t.failed, t.fixed
    (['tool', 'cp', '{v0:file}', '{v1:url}'], ['{argv0}', 'put', '--to', '{v1.host}', '--src', '{v0}'])
    >>> apply_fix_template(t.failed, t.fixed, ["tool", "cp", "b.txt", "proto://two/"])
    ['tool', 'put', '--to', 'two', '--src', 'b.txt']
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from librarian.correction.values import CommandValue, classify_value, parse_command

__all__ = ["FixTemplate", "apply_fix_template", "make_fix_template"]

_PLACEHOLDER = re.compile(r"\{(v\d+)(?::(\w+))?\}|\{(v\d+)\.(\w+)\}|\{argv0\}|\{\{|\}\}")
# Parts tried, in order, when a fixed token is a piece of a value rather than the whole value.
_PART_ORDER = ("host", "path", "basename", "stem", "key", "value", "scheme", "suffix")
_MIN_EMBEDDED = 3  # shorter values are not looked for inside longer tokens: "1" is in everything


@dataclass(frozen=True)
class FixTemplate:
    """A learned fix as two token lists with placeholders (see the module docstring)."""

    failed: list[str]
    fixed: list[str]

    def to_dict(self) -> dict[str, Any]:
        """The fields stored with a verified fix."""
        return {"failed_argv_template": list(self.failed), "fixed_argv_template": list(self.fixed)}


def make_fix_template(
    failed_argv: Sequence[str],
    fixed_argv: Sequence[str],
    workspace: str | os.PathLike[str] | None = None,
) -> FixTemplate:
    """Record a verified fix with the failed command's values as placeholders.

    A fixed token equal to a whole value becomes ``{vN}`` (preferred over a part, so a value used
    whole stays whole); one equal to a part of a value (a URL's host, a file's base name) becomes
    ``{vN.part}``; a value of three or more characters found inside a longer token (``file://a.csv``)
    is replaced there. Everything else is literal.

    Args:
        failed_argv: the command that failed.
        fixed_argv: the command that succeeded instead.
        workspace: where the failed command ran, to recognise existing files.
    """
    parsed = parse_command(failed_argv, workspace)
    values = list(parsed.values)
    failed = [_escape(t) for t in failed_argv]
    for number, value in enumerate(values):
        token = failed_argv[value.index]
        placeholder = f"{{v{number}:{value.kind}}}"
        if value.attached:
            name = token.partition("=")[0]
            failed[value.index] = f"{_escape(name)}={placeholder}"
        else:
            failed[value.index] = placeholder
    fixed = [_fixed_token(token, values, failed_argv[0] if failed_argv else None) for token in fixed_argv]
    return FixTemplate(failed, fixed)


def apply_fix_template(
    failed_template: Sequence[str],
    fixed_template: Sequence[str],
    argv: Sequence[str],
    workspace: str | os.PathLike[str] | None = None,
) -> list[str] | None:
    """The fixed command for ``argv``, or ``None`` when ``argv`` does not fit the failed template.

    ``argv`` fits when it has as many tokens, its literal tokens are equal (the executable is
    compared by base name), and each ``{vN:kind}`` placeholder binds a value of that kind (the same
    text wherever ``vN`` repeats). A ``{vN.part}`` whose part the new value lacks (a URL without a
    path) makes the template not apply.
    """
    if len(failed_template) != len(argv) or not argv:
        return None
    bound: dict[str, CommandValue] = {}
    for position, (pattern, token) in enumerate(zip(failed_template, argv, strict=True)):
        if position == 0 and "{" not in pattern.replace("{{", ""):
            if os.path.basename(_unescape(pattern)) != os.path.basename(token):
                return None
            continue
        if not _bind(pattern, token, bound, workspace):
            return None
    rendered: list[str] = []
    for pattern in fixed_template:
        piece = _render(pattern, bound, argv[0])
        if piece is None:
            return None
        rendered.append(piece)
    return rendered


def _fixed_token(token: str, values: list[CommandValue], argv0: str | None) -> str:
    if argv0 is not None and token == argv0:
        return "{argv0}"
    for number, value in enumerate(values):
        if token == value.text:
            return f"{{v{number}}}"
    for part in _PART_ORDER:
        for number, value in enumerate(values):
            if value.parts.get(part) == token:
                return f"{{v{number}.{part}}}"
    return _embed(token, values)


def _embed(token: str, values: list[CommandValue]) -> str:
    """Escape ``token`` and put placeholders where whole values occur inside it."""
    spans: list[tuple[int, int, str]] = []
    for number, value in sorted(enumerate(values), key=lambda item: len(item[1].text), reverse=True):
        if len(value.text) < _MIN_EMBEDDED:
            continue
        pattern = re.compile(rf"(?<![\w.-]){re.escape(value.text)}(?![\w-])")
        for match in pattern.finditer(token):
            if all(match.end() <= start or match.start() >= end for start, end, _ in spans):
                spans.append((match.start(), match.end(), f"{{v{number}}}"))
    out: list[str] = []
    cursor = 0
    for start, end, placeholder in sorted(spans):
        out.append(_escape(token[cursor:start]))
        out.append(placeholder)
        cursor = end
    out.append(_escape(token[cursor:]))
    return "".join(out)


def _bare_name(kind: str, value: CommandValue) -> bool:
    """A bare name is a file when it exists and a word when it does not yet: the output directory a
    command creates (``venv``) is one value before and after its first run."""
    return {kind, value.kind} == {"file", "word"} and "/" not in value.text


def _bind(
    pattern: str, token: str, bound: dict[str, CommandValue], workspace: str | os.PathLike[str] | None
) -> bool:
    regex: list[str] = []
    kinds: dict[str, str] = {}
    cursor = 0
    for match in _PLACEHOLDER.finditer(pattern):
        regex.append(re.escape(pattern[cursor : match.start()]))
        cursor = match.end()
        text = match.group()
        if text in ("{{", "}}"):
            regex.append(re.escape(text[0]))
        elif match.group(1):
            name = match.group(1)
            kinds[name] = match.group(2) or ""
            regex.append(f"(?P<{name}>.+)" if name not in _regex_names(regex) else f"(?P={name})")
        else:
            return False  # only the failed side's {vN:kind} form may appear in a failed template
    regex.append(re.escape(pattern[cursor:]))
    found = re.fullmatch("".join(regex), token)
    if not found:
        return False
    for name, kind in kinds.items():
        value = classify_value(found.group(name), workspace)
        if kind and value.kind != kind and not _bare_name(kind, value):
            return False
        if name in bound and bound[name].text != value.text:
            return False
        bound[name] = value
    return True


def _regex_names(parts: list[str]) -> set[str]:
    """Group names already defined in a partially built regex."""
    return set(re.findall(r"\(\?P<(\w+)>", "".join(parts)))


def _render(pattern: str, bound: dict[str, CommandValue], argv0: str) -> str | None:
    out: list[str] = []
    cursor = 0
    for match in _PLACEHOLDER.finditer(pattern):
        out.append(pattern[cursor : match.start()])
        cursor = match.end()
        text = match.group()
        if text in ("{{", "}}"):
            out.append(text[0])
        elif text == "{argv0}":
            out.append(argv0)
        else:
            name = match.group(1) or match.group(3)
            value = bound.get(name)
            if value is None:
                return None
            if match.group(4):
                part = value.parts.get(match.group(4))
                if part is None:
                    return None
                out.append(part)
            else:
                out.append(value.text)
    out.append(pattern[cursor:])
    return "".join(out)


def _escape(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


def _unescape(text: str) -> str:
    return text.replace("{{", "{").replace("}}", "}")
