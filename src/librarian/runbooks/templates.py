"""``{{name}}`` templates, rendered so that a value never becomes shell code.

Three renderings of one template syntax:

- :func:`render_text` for prompts and messages: each placeholder is replaced by its value.
- :func:`render_command` for ``bash`` steps. A command with no shell syntax is split into arguments
  *first* (``shlex``, as a shell would split it) and each value fills the whole argument it stands in
  (or its part of one: ``--tail={{n}}``); the program runs without a shell. A command that needs a
  shell (pipes, redirections, ``&&``, ``$(...)``) runs under ``/bin/sh -c``, and each placeholder
  becomes a reference to an environment variable holding the value, quoted for where it sits
  (``"$RUNBOOK_VAR_1"`` outside quotes, ``${RUNBOOK_VAR_1}`` inside double quotes, closed and reopened
  inside single quotes). The shell expands a variable's value once and never parses it, so a value
  such as ``; rm -rf ~`` or ``$(reboot)`` is data on every path.
- Conditions (``conditions.py``) turn placeholders into names bound to values, never into text.

Placeholders are ``{{ name }}`` with an identifier inside; anything else between braces is an error
(``{{ a | upper }}`` is not Jinja and says so).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

_PLACEHOLDER = re.compile(r"\{\{\s*(.*?)\s*\}\}", re.DOTALL)
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Characters that mean the command needs a shell: operators, redirections, expansions, globbing.
_SHELL_SYNTAX = re.compile(r"[|&;<>()$`*?\[\]~{}]|\n(?!$)")
ENV_PREFIX = "RUNBOOK_VAR_"


class TemplateError(ValueError):
    """A template is malformed (an unclosed or non-name placeholder) or names an unknown value."""


def placeholders(template: str) -> list[str]:
    """The names a template uses, in order of first use.

    Raises:
        TemplateError: a placeholder holds something other than a name, or ``{{`` is never closed.
    """
    names: list[str] = []
    for match in _PLACEHOLDER.finditer(template):
        name = match.group(1)
        if not _NAME.match(name):
            raise TemplateError(f"{{{{{name}}}}} is not a variable name (templates take names only)")
        if name not in names:
            names.append(name)
    rest = _PLACEHOLDER.sub("", template)
    if "{{" in rest:
        raise TemplateError("a '{{' is never closed with '}}'")
    return names


def as_text(value: Any) -> str:
    """A value as it appears in rendered text (``True`` as ``true``, ``None`` as empty)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _lookup(values: Mapping[str, Any]) -> Callable[[str], str]:
    def value_of(name: str) -> str:
        if name not in values:
            raise TemplateError(f"{{{{{name}}}}} has no value (pass it as a variable of the run)")
        return as_text(values[name])

    return value_of


def render_text(template: str, values: Mapping[str, Any]) -> str:
    """Replace every placeholder by its value.

    Raises:
        TemplateError: a placeholder names a value that is not given.
    """
    placeholders(template)
    value_of = _lookup(values)
    return _PLACEHOLDER.sub(lambda match: value_of(match.group(1)), template)


@dataclass(frozen=True)
class RenderedCommand:
    """A ``bash`` step's command, ready for the command executor.

    Exactly one of ``argv`` and ``script`` is set; ``env`` carries the values a script refers to.
    ``display`` is the command with values filled in, for people to read (never executed).
    """

    display: str
    argv: list[str] | None = None
    script: str | None = None
    env: dict[str, str] = field(default_factory=dict)

    def payload(self) -> dict[str, Any]:
        """The ``command_executor`` payload fields for this command."""
        if self.argv is not None:
            return {"argv": self.argv}
        payload: dict[str, Any] = {"script": self.script}
        if self.env:
            payload["env"] = dict(self.env)
        return payload


def needs_shell(template: str) -> bool:
    """Whether the command (placeholders aside) uses shell syntax."""
    skeleton = _PLACEHOLDER.sub("x", template.strip())
    skeleton = skeleton.replace("\\\n", " ")
    return bool(_SHELL_SYNTAX.search(skeleton))


def render_command(template: str, values: Mapping[str, Any]) -> RenderedCommand:
    """Render a ``bash`` step's command so that no value is ever parsed as shell code.

    Raises:
        TemplateError: a placeholder names a value that is not given, or the quoting is unbalanced.
    """
    placeholders(template)
    value_of = _lookup(values)
    display = _PLACEHOLDER.sub(lambda match: value_of(match.group(1)), template).strip()
    if not needs_shell(template):
        try:
            # A backslash at the end of a line continues the command, as in a shell.
            words = shlex.split(template.strip().replace("\\\n", " "))
        except ValueError as exc:
            raise TemplateError(f"cannot split the command into arguments: {exc}") from exc
        argv = [_PLACEHOLDER.sub(lambda match: value_of(match.group(1)), word) for word in words]
        if not argv:
            raise TemplateError("the command is empty")
        return RenderedCommand(display=display, argv=argv)
    return _shell_command(template.strip(), value_of, display)


def _shell_command(template: str, value_of: Callable[[str], str], display: str) -> RenderedCommand:
    env: dict[str, str] = {}
    variable_of: dict[str, str] = {}
    out: list[str] = []
    quote: str | None = None  # the quote the template is inside at this point: ', " or none
    position = 0
    escaped = False
    while position < len(template):
        match = _PLACEHOLDER.match(template, position)
        if match is not None and not escaped:
            name = match.group(1)
            if name not in variable_of:
                variable_of[name] = f"{ENV_PREFIX}{len(variable_of) + 1}"
                env[variable_of[name]] = value_of(name)
            variable = variable_of[name]
            if quote == "'":
                out.append(f"'\"${{{variable}}}\"'")
            elif quote == '"':
                out.append(f"${{{variable}}}")
            else:
                out.append(f'"${{{variable}}}"')
            position = match.end()
            continue
        char = template[position]
        out.append(char)
        position += 1
        if escaped:
            escaped = False
        elif char == "\\" and quote != "'":
            escaped = True
        elif quote is None and char in "'\"":
            quote = char
        elif char == quote:
            quote = None
    if quote is not None:
        raise TemplateError(f"the command never closes its {quote} quote")
    return RenderedCommand(display=display, script="".join(out), env=env)
