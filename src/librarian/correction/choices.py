"""The values an option (or a parameter) documents as allowed, in the ways help texts list them.

Help screens and docstrings enumerate allowed values in a handful of shapes: a value hint that is a
set (argparse ``{a,b,c}``, click ``[a|b|c]``), a bracketed note (clap ``[possible values: a, b]``,
yargs ``[choices: "a", "b"]``, commander ``(choices: "a", "b")``) or a sentence ("one of: a, b",
"valid values are 'a', 'b' or 'c'", "can be 'a' or 'b'"). :func:`choices` reads all of them; it names
no tool.

Example:
    >>> choices("{columns,freeze,json}", "")
    ('columns', 'freeze', 'json')
    >>> choices("<flow|babel|css|less>", "Which parser to use.")
    ('flow', 'babel', 'css', 'less')
    >>> choices("<FORMAT>", "Output format [default: full] [possible values: concise, full, json]")
    ('concise', 'full', 'json')
    >>> choices("", "Math mode, one of: always, parens-division, parens, strict.")
    ('always', 'parens-division', 'parens', 'strict')
    >>> choices("", "Choose language: language code 'es', 'de', etc. or 'alias' to use English aliases")
    ('es', 'de', 'alias')
    >>> choices("false", "disable format validation")  # "--validate-formats=false": a boolean
    ('true', 'false')
"""

from __future__ import annotations

import re

__all__ = ["choices"]

_VALUE = r"[A-Za-z0-9][\w.+:/-]*"
# A value as a set or a docstring's type prints it: bare or quoted ("{'error', 'warn', 'skip'}").
_SET_VALUE = rf"['\"]?{_VALUE}['\"]?"
_HINT_SET = re.compile(
    rf"^[\[{{(<]\s*({_SET_VALUE}(?:\s*[|,]\s*{_SET_VALUE})+)\s*[\]}})>]$|^({_VALUE}(?:\|{_VALUE})+)$"
)
# "[possible values: a, b]", "[choices: "a", "b"]", "(choices: a, b, default: c)"
_NOTE = re.compile(
    r"(?i)[\[(]\s*(?:possible\s+values|choices|allowed\s+values|valid\s+values|one\s+of)\s*:\s*(?P<list>[^\])]*)[\])]"
)
# "one of: a, b", "must be one of a, b or c", "valid values are: a, b", "can be 'a' or 'b'", "either a or b"
_SENTENCE = re.compile(
    r"(?i)\b(?:one\s+of|(?:allowed|valid|accepted|supported|possible)\s+(?:values|options|choices)"
    r"(?:\s+(?:are|is|include))?|can\s+be|may\s+be|must\s+be|either|choose\s+(?:from|between))"
    r"\s*[:=]?\s*(?P<list>[^.;\n]*)"
)
_QUOTED = re.compile(r"[`'\"‘“]([^`'\"’”\s]+)[`'\"’”]")
_SEPARATOR = re.compile(r"\s*(?:,|\||/|\bor\b|\band\b)\s*")
_FILLER = frozenset({"etc", "default", "defaults", "e.g", "eg", "the", "a", "an", "value", "values"})
_MAX_CHOICES = 40
# "--strict=false", "--color=true": the hint is the value to write, so the option is a boolean. (A
# "boolean" *type* hint is not here: yargs and commander print "[boolean]" for a plain flag.)
_BOOLEAN_LITERALS = frozenset({"true", "false"})


def choices(value_hint: str | None, description: str | None) -> tuple[str, ...]:
    """The allowed values ``value_hint`` or ``description`` enumerate, in their order; ``()`` when none.

    Quoted items win over bare words in a sentence (prose around them is not a value); a bracketed
    note or a set-shaped hint is read whole. At most 40 values.
    """
    hint = (value_hint or "").strip()
    if hint.lower() in _BOOLEAN_LITERALS:
        return ("true", "false")
    found: list[str] = []
    match = _HINT_SET.match(hint)
    if match:
        found = _items(match.group(1) or match.group(2), quoted_only=False)
    text = description or ""
    if not found:
        for note in _NOTE.finditer(text):
            found = _items(note.group("list"), quoted_only=False)
            if found:
                break
    if not found:
        for sentence in _SENTENCE.finditer(text):
            listed = sentence.group("list")
            quoted = _items(listed, quoted_only=True)
            bare = [] if quoted else _items(listed, quoted_only=False)
            # A bare list needs at least two items that look like values, not a phrase.
            if quoted or (len(bare) >= 2 and _listy(listed)):
                found = quoted or bare
                break
    if not found:
        # Docstrings often just quote the values somewhere ("code 'es', 'de', or 'alias'").
        quoted = _items(text, quoted_only=True)
        found = quoted if len(quoted) >= 2 else []
    return tuple(dict.fromkeys(found))[:_MAX_CHOICES]


def _items(text: str, *, quoted_only: bool) -> list[str]:
    quoted = _QUOTED.findall(text)
    if quoted or quoted_only:
        return [q for q in quoted if re.fullmatch(_VALUE, q) and q.lower() not in _FILLER]
    # A default note inside the list ("a, b, default: c") ends it.
    text = re.split(r"(?i)\bdefault\b", text)[0]
    items = [i.strip().strip("\"'`") for i in _SEPARATOR.split(text)]
    return [i for i in items if i and re.fullmatch(_VALUE, i) and i.lower() not in _FILLER]


def _listy(text: str) -> bool:
    """Whether bare text reads as a list of values (separators between short words), not prose."""
    parts = [p for p in _SEPARATOR.split(text.strip()) if p]
    return len(parts) >= 2 and all(len(p.split()) == 1 for p in parts)
