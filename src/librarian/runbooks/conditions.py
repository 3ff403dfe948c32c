"""``conditional`` steps: a small, safe expression language, evaluated by ``simpleeval``.

A condition compares values::

    {{exit_code}} == 137
    restart_count > 3 and not contains(step_2_output, "ready")
    matches(status, "^(Pending|CrashLoopBackOff)$") or {{force}} == true

Allowed: numbers, strings, ``true``/``false``, names of the run's values (with or without braces),
comparisons (``== != < <= > >= in``, ``not in``), ``and``/``or``/``not``, arithmetic (``+ - * / %``)
and the functions ``contains(text, part)``, ``matches(text, regex)``, ``len``, ``lower``, ``upper``,
``int``, ``float``, ``str``. Nothing else parses: no attributes, subscripts, lambdas or
comprehensions. A value is bound to its name, never pasted into the expression's text, so a value
cannot change what the expression does; a value that reads as a number (``"137"`` from a regular
expression) compares as one.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from typing import Any

from simpleeval import InvalidExpression, SimpleEval

from librarian.runbooks.templates import TemplateError, as_text, placeholders

_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_INTEGER = re.compile(r"^[+-]?\d{1,18}$")
_DECIMAL = re.compile(r"^[+-]?(\d+\.\d*|\.\d+)([eE][+-]?\d+)?$")
# Regular expressions run on step outputs: bound the text, as a shell's `grep` would not need to.
_MAX_MATCH_TEXT = 1_000_000
_ALLOWED_NODES = (
    ast.Expression,
    ast.BoolOp,
    ast.And,
    ast.Or,
    ast.UnaryOp,
    ast.Not,
    ast.USub,
    ast.UAdd,
    ast.BinOp,
    ast.Add,
    ast.Sub,
    ast.Mult,
    ast.Div,
    ast.Mod,
    ast.Compare,
    ast.Eq,
    ast.NotEq,
    ast.Lt,
    ast.LtE,
    ast.Gt,
    ast.GtE,
    ast.In,
    ast.NotIn,
    ast.Name,
    ast.Load,
    ast.Constant,
    ast.Call,
)


class ConditionError(ValueError):
    """A condition is not valid, or cannot be evaluated with the run's values."""


def _contains(text: Any, part: Any) -> bool:
    return as_text(part) in as_text(text)


def _matches(text: Any, pattern: Any) -> bool:
    try:
        return re.search(as_text(pattern), as_text(text)[:_MAX_MATCH_TEXT]) is not None
    except re.error as exc:
        raise ConditionError(f"matches(): {pattern!r} is not a regular expression: {exc}") from exc


FUNCTIONS: dict[str, Any] = {
    "contains": _contains,
    "matches": _matches,
    "len": lambda value: len(as_text(value)) if not isinstance(value, (list, dict)) else len(value),
    "lower": lambda value: as_text(value).lower(),
    "upper": lambda value: as_text(value).upper(),
    "int": int,
    "float": float,
    "str": as_text,
}
_CONSTANTS = {"true": True, "false": False, "null": None, "True": True, "False": False, "None": None}


def expression_of(condition: str) -> str:
    """The condition with each ``{{name}}`` turned into the bare name (a reference, not its value).

    Raises:
        ConditionError: a placeholder sits inside a quoted string (write ``{{x}} == 'ok'``, not
            ``'{{x}}' == 'ok'``).
    """
    placeholders(condition)
    out: list[str] = []
    quote: str | None = None
    position = 0
    while position < len(condition):
        match = _PLACEHOLDER.match(condition, position)
        if match is not None:
            if quote is not None:
                raise ConditionError(
                    f"{{{{{match.group(1)}}}}} is inside quotes: a placeholder is a value, not text "
                    f"(write {{{{{match.group(1)}}}}} == 'text')"
                )
            out.append(f" {match.group(1)} ")
            position = match.end()
            continue
        char = condition[position]
        if quote is None and char in "'\"":
            quote = char
        elif char == quote and condition[position - 1] != "\\":
            quote = None
        out.append(char)
        position += 1
    return "".join(out).strip()


def check_condition(condition: str) -> list[str]:
    """Validate a condition's syntax; return the names it reads.

    Raises:
        ConditionError: the expression does not parse, or uses something the language does not allow.
    """
    expression = expression_of(condition)
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError as exc:
        raise ConditionError(f"not a valid expression: {exc.msg} in {expression!r}") from exc
    names: list[str] = []
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED_NODES):
            raise ConditionError(f"{type(node).__name__} is not allowed in a condition ({expression!r})")
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS or node.keywords:
                raise ConditionError(
                    f"only the functions {', '.join(sorted(FUNCTIONS))} can be called in a condition"
                )
        elif isinstance(node, ast.Name) and node.id not in (*FUNCTIONS, *_CONSTANTS, *names):
            names.append(node.id)
    return names


def coerce(value: Any) -> Any:
    """A value as a condition sees it: numeric text as a number, ``true``/``false`` text as booleans."""
    if isinstance(value, str):
        text = value.strip()
        if _INTEGER.match(text):
            return int(text)
        if _DECIMAL.match(text):
            return float(text)
        if text in ("true", "false"):
            return text == "true"
    return value


def evaluate(condition: str, values: Mapping[str, Any]) -> bool:
    """Evaluate a condition with the run's values.

    Raises:
        ConditionError: the condition is invalid, reads a value the run does not have, or fails
            (comparing a number with text, say).
    """
    try:
        names = check_condition(condition)
    except TemplateError as exc:
        raise ConditionError(str(exc)) from exc
    missing = [name for name in names if name not in values]
    if missing:
        raise ConditionError(f"{', '.join(missing)}: no such value in this run")
    bound = dict(_CONSTANTS)
    bound.update({name: coerce(values[name]) for name in names})
    evaluator = SimpleEval(names=bound, functions=FUNCTIONS)
    try:
        result = evaluator.eval(expression_of(condition))
    except ConditionError:
        raise
    except (InvalidExpression, TypeError, ValueError, ZeroDivisionError) as exc:
        raise ConditionError(f"cannot evaluate {condition.strip()!r}: {exc}") from exc
    return bool(result)
