"""Syntax-tree edits of Python code, applied at the exact source positions of the nodes they change.

An edit is plain data (a dict with ``op``), so a verified one can be stored and applied to other code
with the same drift. Each finds its nodes by meaning, not by text: through the code's imports
(:mod:`.source`), so ``np.product`` and ``numpy.product`` and ``from numpy import product`` are one
API name, and a string or comment that happens to contain the name is never touched.

- ``rename_attribute``: ``{base, old, new}`` -- every ``X.old`` where ``X`` resolves to ``base`` (a
  module or, with ``owner_type``, a variable holding that class), and ``from base import old``;
- ``replace_expression``: ``{base, old, expression, import}`` -- every ``X.old`` (``X`` resolving to
  ``base``) becomes ``expression``; ``import`` is added when the expression needs it;
- ``move_import``: ``{module, name, new_module}`` -- ``from module import name`` imports it from
  ``new_module`` (the statement is split when it imports other names too);
- ``rename_keyword``: ``{callee, old, new, value?}`` -- in calls of ``callee``, the keyword argument
  ``old`` becomes ``new`` (with ``value`` instead of its value, when given);
- ``drop_keyword``: ``{callee, name}`` -- the keyword argument goes;
- ``add_keyword``: ``{callee, name, value}`` -- calls of ``callee`` that lack it get ``name=value``;
- ``positional_to_keyword``: ``{callee, keep, names}`` -- positional arguments after the first
  ``keep`` become the keyword arguments ``names``, in order;
- ``call_attribute``: ``{base | owner_type, old}`` -- every ``X.old`` read that is not called becomes
  ``X.old()`` (a property that became a method);
- ``rename_setting``: ``{old, new}`` -- a setting a library reads by name: every ``old = ...`` in a
  class body (a ``class Config:`` of options) and every ``old=`` keyword argument;
- ``drop_conversion``: ``{callee, method}`` -- every ``X.method(...)`` where ``X`` is a call of
  ``callee`` (or a variable it assigned) becomes ``X``: the call now returns the converted value.

Example:
    >>> code = "import numpy as np\\nprint(np.product([2, 3]))  # np.product here stays\\n"
    >>> apply_edits(code, [{"op": "rename_attribute", "base": "numpy", "old": "product", "new": "prod"}])
    ('import numpy as np\\nprint(np.prod([2, 3]))  # np.product here stays\\n', 1)
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from librarian.correction.pycode.source import (
    imports,
    local_types,
    qualified,
    uncalled_attributes,
    value_made_by,
)

__all__ = ["apply_edits", "describe"]


@dataclass(frozen=True)
class _Splice:
    start: int
    end: int
    text: str


def apply_edits(source: str, edits: Sequence[Mapping[str, Any]]) -> tuple[str, int]:
    """``source`` with the edits applied in order, and how many places changed (0: none applied)."""
    changed = 0
    for edit in edits:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            return source, 0
        splices = _splices(source, tree, edit)
        if not splices:
            continue
        source = _splice(source, splices)
        changed += len(splices)
        needed = edit.get("import")
        if isinstance(needed, str) and needed:
            source = _ensure_import(source, needed)
    try:
        ast.parse(source)
    except SyntaxError:
        return source, 0
    return source, changed


def describe(edit: Mapping[str, Any]) -> str:
    """One line a person reads: ``numpy.product -> numpy.prod``."""
    op = edit.get("op")
    if op == "rename_attribute":
        return f"`{edit.get('base') or edit.get('owner_type')}.{edit.get('old')}` -> `.{edit.get('new')}`"
    if op == "replace_expression":
        return f"`{edit.get('base')}.{edit.get('old')}` -> `{edit.get('expression')}`"
    if op == "move_import":
        return f"import `{edit.get('name')}` from `{edit.get('new_module')}`, not `{edit.get('module')}`"
    if op == "rename_keyword":
        value = f"={edit['value']}" if edit.get("value") is not None else ""
        return f"`{edit.get('callee')}({edit.get('old')}=...)` -> `{edit.get('new')}{value}`"
    if op == "drop_keyword":
        return f"drop `{edit.get('name')}=` from `{edit.get('callee')}(...)`"
    if op == "add_keyword":
        return f"`{edit.get('callee')}(..., {edit.get('name')}={edit.get('value')})`"
    if op == "call_attribute":
        return f"`{edit.get('base') or edit.get('owner_type')}.{edit.get('old')}` -> `.{edit.get('old')}()`"
    if op == "rename_setting":
        return f"setting `{edit.get('old')}` -> `{edit.get('new')}`"
    if op == "drop_conversion":
        return f"drop `.{edit.get('method')}(...)` of what `{edit.get('callee')}(...)` returns"
    if op == "positional_to_keyword":
        names = ", ".join(f"{n}=" for n in edit.get("names") or [])
        return f"`{edit.get('callee')}(...)`: positional arguments after {edit.get('keep')} as {names}"
    return str(op)


# -- finding the nodes -------------------------------------------------------------------------------


def _splices(source: str, tree: ast.AST, edit: Mapping[str, Any]) -> list[_Splice]:
    names = imports(tree)
    lines = source.splitlines(keepends=True)
    op = edit.get("op")
    if op == "rename_attribute":
        return _rename_attribute(tree, lines, names, edit)
    if op == "replace_expression":
        return [
            _Splice(*_span(lines, node), str(edit["expression"])) for node in _attributes(tree, names, edit)
        ]
    if op == "move_import":
        return _move_import(tree, lines, edit)
    if op == "call_attribute":
        reads = {id(node) for node in uncalled_attributes(tree)}
        return [
            _Splice(end, end, "()")
            for node in _attributes(tree, names, edit)
            if id(node) in reads
            for end in [_span(lines, node)[1]]
        ]
    if op in ("rename_keyword", "drop_keyword"):
        return _keywords(tree, lines, names, edit)
    if op in ("add_keyword", "positional_to_keyword"):
        return _rebuilt_calls(tree, lines, names, edit)
    if op == "rename_setting":
        return _settings(tree, lines, str(edit.get("old") or ""), str(edit.get("new") or ""))
    if op == "drop_conversion":
        return _conversions(tree, lines, names, edit)
    return []


def _conversions(
    tree: ast.AST, lines: list[str], names: dict[str, str], edit: Mapping[str, Any]
) -> list[_Splice]:
    """``X.method(...)`` calls on what ``callee`` returned, each replaced by ``X``."""
    callee, method = str(edit.get("callee") or ""), str(edit.get("method") or "")
    types = local_types(tree, names)
    splices = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        if node.func.attr != method:
            continue
        receiver = node.func.value
        if value_made_by(receiver, names, types) == callee:
            splices.append(_Splice(*_span(lines, node), _text(lines, receiver)))
    return splices


def _settings(tree: ast.AST, lines: list[str], old: str, new: str) -> list[_Splice]:
    """``old = ...`` targets in class bodies and ``old=`` keyword arguments, renamed ``new``."""
    if not old or not new.isidentifier():
        return []
    splices = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for statement in node.body:
                targets = (
                    statement.targets
                    if isinstance(statement, ast.Assign)
                    else [statement.target]
                    if isinstance(statement, ast.AnnAssign)
                    else []
                )
                splices += [
                    _Splice(*_span(lines, target), new)
                    for target in targets
                    if isinstance(target, ast.Name) and target.id == old
                ]
        elif isinstance(node, ast.Call):
            for keyword in node.keywords:
                if keyword.arg == old:
                    start, end = _span(lines, keyword)
                    splices.append(_Splice(start, end, f"{new}={_text(lines, keyword.value)}"))
    return splices


def _attributes(tree: ast.AST, names: dict[str, str], edit: Mapping[str, Any]) -> list[ast.Attribute]:
    """The ``X.old`` nodes whose ``X`` is ``base`` (through the imports), or is or holds an ``owner_type``
    (the class itself, ``Retry.OLD``, or an object it made)."""
    old, base, owner_type = edit.get("old"), edit.get("base"), edit.get("owner_type")
    types = local_types(tree, names) if owner_type else {}
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or node.attr != old:
            continue
        if (base or owner_type) and qualified(node.value, names) in (base, owner_type):
            found.append(node)
        elif owner_type and isinstance(node.value, ast.Name):
            held = types.get(node.value.id)
            if held is not None and (
                held == owner_type or held.rsplit(".", 1)[-1] == owner_type.rsplit(".", 1)[-1]
            ):
                found.append(node)
    return found


def _rename_attribute(
    tree: ast.AST, lines: list[str], names: dict[str, str], edit: Mapping[str, Any]
) -> list[_Splice]:
    old, new = str(edit["old"]), str(edit["new"])
    splices = []
    for node in _attributes(tree, names, edit):
        _, end = _span(lines, node)
        # The attribute name ends the node: replace just it, so the object expression is untouched.
        if _text(lines, node).endswith(old):
            splices.append(_Splice(end - len(old), end, new))
    base = edit.get("base")
    for statement in ast.walk(tree):
        if isinstance(statement, ast.ImportFrom) and base and statement.module == base:
            for alias in statement.names:
                if alias.name == old:
                    splices.extend(_imported_names(tree, lines, statement, alias, new))
    return splices


def _imported_names(
    tree: ast.AST, lines: list[str], statement: ast.ImportFrom, alias: ast.alias, new: str
) -> list[_Splice]:
    """``from m import old`` -> ``from m import new``, and the bare uses of ``old`` follow when unaliased."""
    start, _ = _span(lines, alias)
    splices = [_Splice(start, start + len(alias.name), new)]
    if alias.asname is None:
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and node.id == alias.name:
                use_start, use_end = _span(lines, node)
                splices.append(_Splice(use_start, use_end, new))
    return splices


def _move_import(tree: ast.AST, lines: list[str], edit: Mapping[str, Any]) -> list[_Splice]:
    module, name, target = edit.get("module"), edit.get("name"), str(edit.get("new_module"))
    splices = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or node.module != module or node.level != 0:
            continue
        moved = [alias for alias in node.names if alias.name == name]
        if not moved:
            continue
        start, end = _span(lines, node)
        rest = [alias for alias in node.names if alias.name != name]
        statements = []
        if rest:
            kept = copy.copy(node)
            kept.names = rest
            statements.append(ast.unparse(kept))
        statements.append(ast.unparse(ast.ImportFrom(module=target, names=moved, level=0)))
        indent = lines[node.lineno - 1][: node.col_offset]
        splices.append(_Splice(start, end, f"\n{indent}".join(statements)))
    return splices


def _keywords(
    tree: ast.AST, lines: list[str], names: dict[str, str], edit: Mapping[str, Any]
) -> list[_Splice]:
    callee = str(edit.get("callee") or "")
    wanted = str(edit.get("old") or edit.get("name") or "")
    splices = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not _calls(node, callee, names):
            continue
        for keyword in node.keywords:
            if keyword.arg != wanted:
                continue
            if edit.get("op") == "rename_keyword":
                start, end = _span(lines, keyword)
                value = edit.get("value")
                text = (
                    f"{edit['new']}={value}"
                    if value is not None
                    else f"{edit['new']}={_text(lines, keyword.value)}"
                )
                splices.append(_Splice(start, end, text))
            else:
                trimmed = copy.copy(node)
                trimmed.keywords = [k for k in node.keywords if k.arg != wanted]
                splices.append(_Splice(*_span(lines, node), ast.unparse(trimmed)))
    return splices


def _rebuilt_calls(
    tree: ast.AST, lines: list[str], names: dict[str, str], edit: Mapping[str, Any]
) -> list[_Splice]:
    """Calls of ``callee`` rebuilt with a keyword added, or positional arguments turned into keywords."""
    callee = str(edit.get("callee") or "")
    splices = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not _calls(node, callee, names):
            continue
        call = copy.copy(node)
        if edit.get("op") == "add_keyword":
            name = str(edit["name"])
            if any(k.arg == name for k in node.keywords):
                continue
            value = ast.parse(str(edit["value"]), mode="eval").body
            call.keywords = [*node.keywords, ast.keyword(arg=name, value=value)]
        else:
            keep = int(edit.get("keep") or 0)
            extra = node.args[keep:]
            wanted = [str(n) for n in edit.get("names") or []]
            if not extra or len(extra) > len(wanted) or any(isinstance(a, ast.Starred) for a in extra):
                continue
            call.args = node.args[:keep]
            moved = [ast.keyword(arg=name, value=value) for name, value in zip(wanted, extra, strict=False)]
            call.keywords = [*moved, *node.keywords]
        splices.append(_Splice(*_span(lines, node), ast.unparse(call)))
    return splices


def _calls(node: ast.Call, callee: str, names: dict[str, str]) -> bool:
    """Whether ``node`` calls ``callee`` (a dotted path, or a bare function or method name)."""
    path = qualified(node.func, names)
    last = callee.rsplit(".", 1)[-1]
    if path is not None:
        return path == callee or path.rsplit(".", 1)[-1] == last
    if isinstance(node.func, ast.Attribute):
        return node.func.attr == last  # a method of an object: matched by its name
    return isinstance(node.func, ast.Name) and node.func.id == last


# -- source positions --------------------------------------------------------------------------------


def _offset(lines: list[str], lineno: int, col: int) -> int:
    """Character offset in the source of (1-based line, UTF-8 byte column)."""
    before = sum(len(line) for line in lines[: lineno - 1])
    line = lines[lineno - 1] if lineno - 1 < len(lines) else ""
    return before + len(line.encode("utf-8")[:col].decode("utf-8", errors="ignore"))


def _span(lines: list[str], node: ast.AST) -> tuple[int, int]:
    start = _offset(lines, node.lineno, node.col_offset)  # type: ignore[attr-defined]
    end = _offset(lines, node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined]
    return start, end


def _text(lines: list[str], node: ast.AST) -> str:
    start, end = _span(lines, node)
    return "".join(lines)[start:end]


def _splice(source: str, splices: list[_Splice]) -> str:
    seen: set[tuple[int, int]] = set()
    for item in sorted(splices, key=lambda s: (s.start, s.end), reverse=True):
        if (item.start, item.end) in seen:
            continue
        seen.add((item.start, item.end))
        source = source[: item.start] + item.text + source[item.end :]
    return source


def _ensure_import(source: str, module: str) -> str:
    """Add ``import module`` after the last top-level import, unless the code imports it already."""
    tree = ast.parse(source)
    if any(
        isinstance(n, ast.Import) and any(a.name == module and a.asname is None for a in n.names)
        for n in tree.body
    ):
        return source
    lines = source.splitlines(keepends=True)
    last = max(
        (n.end_lineno or n.lineno for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)), default=0
    )
    lines.insert(last, f"import {module}\n")
    return "".join(lines)
