"""Keyword arguments a ``**kwargs`` function documents, often by sending the reader to a class.

``markdown.markdown(text, **kwargs)`` says "**kwargs: Any arguments accepted by the Markdown class"
and links ``[`Markdown`][markdown.Markdown]``; the keywords themselves are listed in that class's
``__init__`` docstring under "Keyword Arguments:". When a positional argument is no longer accepted,
those documented keywords are what it can become.

Example:
    >>> forwarded_class("Shortcut for [`Markdown`][markdown.Markdown].")
    'markdown.Markdown'
    >>> doc = "Keyword Arguments:\\n  extensions (list): A list.\\n\\n    more\\n  tab_length (int): 4"
    >>> documented_keywords(doc)
    ['extensions', 'tab_length']
    >>> reads_like('["markdown.extensions.tables"]', "extensions")
    True
"""

from __future__ import annotations

import ast
import re

from librarian.correction.matching import singular
from librarian.correction.pycode.source import imports, qualified

__all__ = ["documented_keywords", "extra_positionals", "forwarded_class", "reads_like", "takes_any_keyword"]

# mkdocstrings cross-references "[`Name`][pkg.Name]" and Sphinx roles ":class:`pkg.Name`".
_CLASS_REFERENCE = re.compile(r"\[`?(?P<short>[A-Z]\w*)`?\]\[(?P<path>[\w.]+)\]|:class:`~?(?P<role>[\w.]+)`")
_KEYWORD_SECTION = re.compile(
    r"^(?P<indent>[ \t]*)(?:Keyword Arguments|Keyword Args|Other Parameters)\s*:?\s*$", re.I | re.M
)
# "    name (type): text", "    name: text", "    * name: text"
_ENTRY = re.compile(r"^(?P<indent>[ \t]+)(?:[*-]\s+)?(?P<name>[A-Za-z_]\w*)\s*(?:\([^)\n]*\))?\s*:")


def takes_any_keyword(signature: str | None) -> bool:
    """Whether a signature's text ends in ``**kwargs`` (and so documents its keywords in prose)."""
    return bool(signature) and re.search(r"\*\*\w+", signature or "") is not None


def forwarded_class(doc: str) -> str | None:
    """The class a docstring sends its keyword arguments to (the first one it links)."""
    match = _CLASS_REFERENCE.search(doc)
    if match is None:
        return None
    return match.group("path") or match.group("role")


def documented_keywords(doc: str) -> list[str]:
    """The names listed, in order, in a docstring's "Keyword Arguments:" section (``**kwargs`` left out)."""
    section = _KEYWORD_SECTION.search(doc)
    if section is None:
        return []
    names: list[str] = []
    entry_indent: int | None = None
    for line in doc[section.end() :].splitlines()[1:]:
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        if indent <= len(section.group("indent")):
            break  # the next section
        match = _ENTRY.match(line)
        if match is None or (entry_indent is not None and indent > entry_indent):
            continue  # a description's continuation
        entry_indent = indent if entry_indent is None else entry_indent
        names.append(match.group("name"))
    return names


def extra_positionals(code: str, callee: str, keep: int, line: int | None) -> list[str]:
    """The source of the positional arguments after the first ``keep`` in the failing call."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    names = imports(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and qualified(node.func, names) == callee:
            if line is not None and not node.lineno <= line <= (node.end_lineno or node.lineno):
                continue
            return [ast.get_source_segment(code, arg) or "" for arg in node.args[keep:]]
    return []


def reads_like(source: str, keyword: str) -> bool:
    """Whether an argument's source shares a meaning word with a keyword (``"x.extensions.tables"``
    and ``extensions``)."""
    words = {singular(w) for w in re.findall(r"[a-z]{3,}", source.lower())}
    return any(singular(w) in words for w in keyword.lower().split("_") if len(w) > 2)
