"""A flag keyword that became one of the named values of another parameter.

``emojize(s, use_aliases=True)`` is ``emojize(s, language='alias')`` now: the docs of ``language``
list ``'alias'``, which shares the old flag's words. ``read_csv(f, error_bad_lines=False)`` is
``read_csv(f, on_bad_lines='skip')``: of the listed values, the one that is not what the old flag
turned off and that the task's own description names ("skipping malformed lines").

Example:
    >>> doc = "on_bad_lines : {'error', 'warn', 'skip'}. What to do upon a bad line."
    >>> [e[0]["value"] for e in keyword_from_false("read_csv", "error_bad_lines", "on_bad_lines", doc,
    ...                                             "Load sales.csv skipping malformed lines")]
    ["'skip'"]
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from librarian.correction.choices import choices
from librarian.correction.matching import singular

__all__ = ["keyword_from_false", "keyword_to_value", "listed_values", "typed_values"]

# A numpy-style parameter line: "on_bad_lines : {'error', 'warn', 'skip'} or Callable, default 'error'".
_TYPED_SET = re.compile(r"^\s*\w+\s*:\s*(?P<set>\{[^}\n]*\})")

# An edit, its prior, why, and whether the installed API confirms it (as in :mod:`.candidates`).
Edit = tuple[dict[str, Any], float, str, bool]


def keyword_to_value(callee: str, old: str, param: str, description: str) -> Iterator[Edit]:
    """``old=True`` as a listed value of ``param`` whose words the old keyword shares."""
    wanted = {
        singular(w)
        for w in re.findall(r"[a-z]+", old.lower())
        if len(w) > 2 and w not in ("use", "enable", "with")
    }
    for choice in listed_values(description):
        if wanted & {singular(w) for w in re.findall(r"[a-z]+", choice.lower())}:
            yield (
                {"op": "rename_keyword", "callee": callee, "old": old, "new": param, "value": repr(choice)},
                0.8,
                f"`{old}=True` became `{param}={choice!r}`: the docs of `{param}` list `{choice}` "
                "among its values.",
                True,
            )


def keyword_from_false(callee: str, old: str, param: str, description: str, intent: str) -> Iterator[Edit]:
    """``error_bad_lines=False`` as the one listed value of ``param`` that is not the old keyword's
    meaning and that the task's own description names (``on_bad_lines='skip'`` for "skipping
    malformed lines")."""
    own = {singular(w) for w in re.findall(r"[a-z]{3,}", old.lower())}
    said = re.findall(r"[a-z]{3,}", intent.lower())
    named = []
    for choice in listed_values(description):
        words = re.findall(r"[a-z]{3,}", choice.lower())
        if own & {singular(w) for w in words}:
            continue  # what the old flag switched off
        if any(w.startswith(word) for word in words for w in said):  # "skip": "skipping"
            named.append(choice)
    if len(named) == 1:
        yield (
            {"op": "rename_keyword", "callee": callee, "old": old, "new": param, "value": repr(named[0])},
            0.8,
            f"`{old}=False` became `{param}={named[0]!r}`: of the values the docs of `{param}` list, it is "
            "the one that is not what the old flag turned off and that the task asks for.",
            True,
        )


def listed_values(description: str) -> tuple[str, ...]:
    """The values a parameter's docs list: the set its type line gives, else the ones its prose names."""
    typed = _TYPED_SET.match(description)
    return choices(typed.group("set") if typed else "", description)


def typed_values(description: str) -> tuple[str, ...]:
    """The named values a parameter's type line enumerates (``{'error', 'warn', 'skip'}``), booleans
    left out; ``()`` when its type is not such a set (prose that quotes words is no enumeration)."""
    typed = _TYPED_SET.match(description)
    if typed is None:
        return ()
    return tuple(v for v in choices(typed.group("set"), "") if v.lower() not in ("true", "false", "none"))
