"""``extract``: values taken from a step's output by JSONPath or by regular expression.

Forms of an extractor::

    extract:
      exit_code: ".status.containerStatuses[0].lastState.terminated.exitCode"   # JSONPath ($ optional)
      restarts: "$.status.containerStatuses[0].restartCount"
      connections: "regex:^\\s*(\\d+)\\s*$"            # the first group (or the whole match)
      database: {regex: "database (?P<name>\\w+)", group: name}
      items: {jsonpath: "$.items[*].metadata.name"}    # several matches: a list

JSONPath reads the output as JSON, or as YAML when it is not JSON (``kubectl -o yaml``). Regular
expressions run in multi-line mode (``^`` and ``$`` match at each line). An extractor that finds
nothing fails the step, naming the variable: a later step would otherwise run with a value missing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from jsonpath_ng import JSONPath
from jsonpath_ng.exceptions import JSONPathError
from jsonpath_ng.ext.parser import parse as parse_jsonpath

from librarian.errors import InvalidInputError
from librarian.safe_yaml import load_yaml

_REGEX_PREFIX = "regex:"
# Outputs are bounded by the executor already; this bounds what a regular expression scans.
_MAX_TEXT = 1_000_000


class ExtractError(ValueError):
    """An extractor is malformed, or found nothing in the output."""


def _kind(spec: str | Mapping[str, Any]) -> tuple[str, str, int | str | None]:
    """(``jsonpath`` or ``regex``, the expression, the group) of an extractor."""
    if isinstance(spec, Mapping):
        if "jsonpath" in spec:
            return "jsonpath", str(spec["jsonpath"]), None
        return "regex", str(spec["regex"]), spec.get("group")
    if spec.startswith(_REGEX_PREFIX):
        return "regex", spec[len(_REGEX_PREFIX) :], None
    if spec.startswith(("$", ".", "[")):
        return "jsonpath", spec, None
    raise ExtractError(f"{spec!r}: start a JSONPath with '$' or '.', a regular expression with 'regex:'")


@lru_cache(maxsize=512)
def _jsonpath(expression: str) -> JSONPath:
    # kubectl and jq write paths without the root: ``.status.phase`` is ``$.status.phase``.
    text = expression if expression.startswith("$") else "$" + expression
    try:
        return parse_jsonpath(text)
    except JSONPathError as exc:
        raise ExtractError(f"{expression!r} is not a JSONPath: {exc}") from exc


@lru_cache(maxsize=512)
def _regex(expression: str) -> re.Pattern[str]:
    try:
        return re.compile(expression, re.MULTILINE)
    except re.error as exc:
        raise ExtractError(f"{expression!r} is not a regular expression: {exc}") from exc


def check_extractor(spec: str | Mapping[str, Any]) -> None:
    """Validate an extractor's form and expression.

    Raises:
        ExtractError: it is neither a JSONPath nor a regular expression, or does not compile; a
            named group that the expression does not define.
    """
    kind, expression, group = _kind(spec)
    if kind == "jsonpath":
        _jsonpath(expression)
        return
    pattern = _regex(expression)
    if isinstance(group, str) and group not in pattern.groupindex:
        raise ExtractError(f"group {group!r}: the expression has no group of that name")
    if isinstance(group, int) and group > pattern.groups:
        raise ExtractError(f"group {group}: the expression has only {pattern.groups} groups")


def _document(output: str) -> Any:
    try:
        return json.loads(output)
    except ValueError:
        pass
    try:
        return load_yaml(output, "step output")
    except InvalidInputError as exc:
        raise ExtractError("the output is neither JSON nor YAML") from exc


def extract(output: str, extractors: Mapping[str, str | Mapping[str, Any]]) -> dict[str, Any]:
    """Apply every extractor to ``output``; the values by variable name.

    Raises:
        ExtractError: an extractor found nothing (the message names the variable).
    """
    values: dict[str, Any] = {}
    document: Any = None
    parsed = False
    text = output[:_MAX_TEXT]
    for name, spec in extractors.items():
        kind, expression, group = _kind(spec)
        if kind == "jsonpath":
            if not parsed:
                document, parsed = _document(text), True
            found = [match.value for match in _jsonpath(expression).find(document)]
            if not found:
                raise ExtractError(f"extract.{name}: {expression!r} matched nothing in the output")
            values[name] = found[0] if len(found) == 1 else found
            continue
        match = _regex(expression).search(text)
        if match is None:
            raise ExtractError(f"extract.{name}: {expression!r} matched nothing in the output")
        if group is None:
            group = 1 if match.re.groups else 0
        values[name] = match.group(group)
    return values
