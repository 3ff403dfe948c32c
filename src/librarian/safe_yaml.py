"""The one way Librarian reads YAML it did not write: bounded in size, aliases and depth, with clear errors.

YAML aliases let a few hundred bytes stand for billions of nodes (the "billion laughs"): nine levels
of nine aliases passed a workflow's validation after 50 s and 6.3 GB, one more level would take the
machine down. Deep nesting exhausts Python's recursion. Every YAML input (workflow files, runbooks,
Markdown front matter, trigger rules, OpenAPI documents) goes through :func:`load_yaml` or
:func:`compose_yaml`, which refuse before any of that happens:

- ``max_bytes``: larger text is refused before parsing;
- ``max_nodes``: every node is sized as if its aliases were expanded, and the document is refused
  once that passes the budget (an alias to a node that contains it is refused too);
- ``max_depth``: collections nested deeper are refused (well before Python's recursion limit).

Errors are :class:`~librarian.errors.InvalidInputError` naming the input (``origin``) and, for a
syntax error, its line and column. :func:`load_json` reads JSON with the same size and depth limits
and errors, and :func:`check_depth` bounds data decoded by other means.

Example:
    >>> load_yaml("a: [1, 2]", "example.yaml")
    {'a': [1, 2]}
"""

from __future__ import annotations

import json
from typing import Any

import yaml

from librarian.errors import InvalidInputError

__all__ = ["MAX_DEPTH", "MAX_NODES", "check_depth", "compose_yaml", "load_json", "load_yaml"]

MAX_BYTES = 10 * 1024 * 1024
# Nodes after alias expansion; the largest real OpenAPI documents (cloud providers') stay well below.
MAX_NODES = 2_000_000
# Nesting of collections; real documents stay within a few dozen levels.
MAX_DEPTH = 100


class _Refused(yaml.YAMLError):
    """The document is over a budget (not a syntax error)."""


class _BoundedLoader(yaml.SafeLoader):
    """A safe loader that counts nodes as if aliases were expanded and bounds nesting."""

    max_nodes = MAX_NODES
    max_depth = MAX_DEPTH

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._sizes: dict[int, int] = {}
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        is_alias = self.check_event(yaml.AliasEvent)
        self._depth += 1
        if self._depth > self.max_depth:
            mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
            raise _Refused(f"collections nested over {self.max_depth} levels deep at line {mark.line + 1}")
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        if node is None:
            return None
        if is_alias:
            if id(node) not in self._sizes:  # the anchor is still open: the alias contains itself
                raise _Refused("an alias refers to a node that contains it (recursive YAML)")
            return node
        children: list[yaml.Node] = []
        if isinstance(node, yaml.MappingNode):
            children = [part for pair in node.value for part in pair]
        elif isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        size = 1 + sum(self._sizes.get(id(child), 1) for child in children)
        if size > self.max_nodes:
            raise _Refused(f"YAML aliases expand to more than {self.max_nodes:,} nodes")
        self._sizes[id(node)] = size
        return node


def _loader(max_nodes: int, max_depth: int) -> type[_BoundedLoader]:
    if (max_nodes, max_depth) == (MAX_NODES, MAX_DEPTH):
        return _BoundedLoader
    return type("BoundedLoader", (_BoundedLoader,), {"max_nodes": max_nodes, "max_depth": max_depth})


def _text(data: str | bytes, origin: str, max_bytes: int) -> str:
    size = len(data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data)
    if size > max_bytes:
        raise InvalidInputError(f"{origin} is {size:,} bytes, over the {max_bytes:,}-byte limit")
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InvalidInputError(
            f"{origin} is not UTF-8 text (bad byte at offset {exc.start})", hint="save it as UTF-8"
        ) from exc


def _parsed(origin: str, run: Any, line_offset: int) -> Any:
    try:
        return run()
    except _Refused as exc:
        hint = "write it without YAML aliases or deep nesting"
        raise InvalidInputError(f"{origin} is refused: {exc}", hint=hint) from exc
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1 + line_offset}, column {mark.column + 1}" if mark else ""
        raise InvalidInputError(f"{origin}: invalid YAML{where}: {exc.problem or exc.context}") from exc
    except (yaml.YAMLError, ValueError, RecursionError, OverflowError) as exc:
        # ValueError: an integer past Python's digit limit; OverflowError: a huge float or date.
        raise InvalidInputError(f"{origin}: invalid YAML: {exc}") from exc


def load_yaml(
    data: str | bytes,
    origin: str,
    *,
    max_bytes: int = MAX_BYTES,
    max_nodes: int = MAX_NODES,
    max_depth: int = MAX_DEPTH,
    line_offset: int = 0,
) -> Any:
    """Parse one YAML document safely (no Python objects, bounded); ``None`` for an empty one.

    Args:
        data: the text, or bytes that must be UTF-8.
        origin: what the input is (a path, a URL, "front matter of X"), for error messages.
        max_bytes, max_nodes, max_depth: the budgets (see the module).
        line_offset: added to reported lines (front matter starts after its ``---`` line).

    Raises:
        InvalidInputError: too large, not UTF-8, a syntax error (with line and column), over a budget.
    """
    text = _text(data, origin, max_bytes)
    loader = _loader(max_nodes, max_depth)
    return _parsed(origin, lambda: yaml.load(text, Loader=loader), line_offset)


def compose_yaml(
    data: str | bytes,
    origin: str,
    *,
    max_bytes: int = MAX_BYTES,
    max_nodes: int = MAX_NODES,
    max_depth: int = MAX_DEPTH,
) -> tuple[Any, yaml.Node | None]:
    """Like :func:`load_yaml`, also returning the node tree (for line numbers in later errors)."""
    text = _text(data, origin, max_bytes)
    loader = _loader(max_nodes, max_depth)

    def run() -> tuple[Any, yaml.Node | None]:
        node = yaml.compose(text, Loader=loader)
        return yaml.load(text, Loader=loader), node

    result: tuple[Any, yaml.Node | None] = _parsed(origin, run, 0)
    return result


def load_json(data: bytes, origin: str, *, max_bytes: int = MAX_BYTES, max_depth: int = MAX_DEPTH) -> Any:
    """Parse JSON bytes with the limits and errors of :func:`load_yaml`.

    Raises:
        InvalidInputError: too large, not UTF-8, a syntax error (with line and column), nested deeper
            than ``max_depth`` or a number too long for Python.
    """
    text = _text(data, origin, max_bytes)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInputError(
            f"{origin}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from exc
    except (RecursionError, ValueError) as exc:
        raise InvalidInputError(f"{origin}: invalid JSON: nested too deeply or a number too long") from exc
    check_depth(value, origin, max_depth=max_depth)
    return value


def check_depth(value: Any, origin: str, *, max_depth: int = MAX_DEPTH) -> None:
    """Refuse decoded data (JSON, say) nested deeper than ``max_depth``, without recursion.

    Raises:
        InvalidInputError: nested too deeply.
    """
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > max_depth:
            raise InvalidInputError(f"{origin} is refused: nested more than {max_depth} levels deep")
        stack.extend((child, depth + 1) for child in children)
