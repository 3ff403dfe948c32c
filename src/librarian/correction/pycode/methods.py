"""A property that became a method: its bound method is used as a value, and the error names no attribute.

``start.timestamp - end.timestamp`` fails with ``unsupported operand type(s) for -: 'method' and
'method'`` once ``timestamp`` is a method (arrow 1.0). The error's line of the task's code holds the
attribute reads that are not called; the one whose owner comes from the failing library (through the
code's imports, or the call that made the variable) and that the installed API documents as a method
callable with no argument is called instead: ``start.timestamp()``.

Example:
    >>> code = "import arrow\\nt = arrow.get('2024')\\nprint(t.timestamp - 1)\\n"
    >>> method_value_reads(ast.parse(code), 3)
    [('timestamp', 'arrow.get')]
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import Any

from librarian.correction.pycode.api import ApiEntry, ApiIndex
from librarian.correction.pycode.source import (
    imports,
    local_types,
    made_by,
    signature_function,
    uncalled_attributes,
)

__all__ = ["method_value_edits", "method_value_reads"]

_METHOD_KINDS = frozenset({"method", "function", "classmethod", "staticmethod"})


def method_value_reads(tree: ast.AST, line: int | None) -> list[tuple[str, str]]:
    """``(attribute, owner)`` for each uncalled attribute read on ``line`` whose owner is traced to an
    import: a variable made by a library call (``arrow.get``) or such a call itself."""
    names = imports(tree)
    types = local_types(tree, names)
    found: dict[tuple[str, str], None] = {}
    for node in uncalled_attributes(tree, line):
        owner = _owner(node.value, names, types)
        if owner:
            found[(node.attr, owner)] = None
    return list(found)


def method_value_edits(
    code: str, line: int | None, api: ApiIndex, top: str
) -> Iterator[tuple[dict[str, Any], float, str, bool]]:
    """``call_attribute`` edits for the reads :func:`method_value_reads` finds, with a prior, a reason
    and whether the installed API documents the attribute as a method callable with no argument."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return
    reads = method_value_reads(tree, line)
    for attribute, owner in reads:
        method = _documented_method(api, attribute, top)
        if method is None:
            continue
        alone = len({name for name, _ in reads}) == 1
        yield (
            {"op": "call_attribute", "owner_type": owner, "old": attribute},
            0.8 if alone else 0.65,
            f"a bound method is used as a value on the failing line: `{method.qualname}` is documented as "
            f"a method `{method.name}{method.signature or '()'}`, so `.{attribute}` is now called",
            True,
        )


def _owner(node: ast.AST, names: dict[str, str], types: dict[str, str]) -> str | None:
    if isinstance(node, ast.Name):
        return types.get(node.id)
    if isinstance(node, ast.Call):
        return made_by(node, names, types)
    return None


def _documented_method(api: ApiIndex, attribute: str, top: str) -> ApiEntry | None:
    """The installed API's method called ``attribute`` (in the failing library) that takes no argument."""
    for path in api.named(attribute):
        entry = api.get(path)
        if entry is None or entry.kind not in _METHOD_KINDS or not path.startswith(f"{top}."):
            continue
        if _takes_no_argument(entry.signature):
            return entry
    return None


def _takes_no_argument(signature: str | None) -> bool:
    function = signature_function(signature)
    if function is None:
        return False
    arguments = function.args
    positional = [*arguments.posonlyargs, *arguments.args]
    if positional and positional[0].arg in ("self", "cls"):
        positional = positional[1:]
    required = len(positional) - len(arguments.defaults)
    required_keywords = sum(1 for default in arguments.kw_defaults if default is None)
    return required <= 0 and required_keywords == 0
