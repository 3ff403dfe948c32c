"""Which names the docs or the output say replaced which: "Replace ``missing`` and ``default`` with
``load_default`` and ``dump_default``", "'orm_mode' has been renamed to 'from_attributes'".

The one-for-one phrasings ("A was renamed to B", "A is deprecated in favour of B", "renamed A to B")
are read by the command strategy's :func:`~librarian.correction.replacement.find_replacements`; a
pair counts when it names the old name and exactly one new one, both identifiers. What that parser
does not read is the form a Sphinx ``versionchanged`` note often takes for several parameters at
once, *Replace A and B with C and D*: the quoted lists pair up in order when they have the same
length (only quoted names count, so prose is never read as an identifier).

Example:
    >>> succession_pairs(".. versionchanged:: 3.13.0\\n    Replace ``missing`` and ``default`` "
    ...                  "parameters with ``load_default`` and ``dump_default``.")
    {'missing': 'load_default', 'default': 'dump_default'}
    >>> succession_pairs("* 'orm_mode' has been renamed to 'from_attributes'")
    {'orm_mode': 'from_attributes'}
    >>> succession_pairs("The `sparse` keyword was renamed to `sparse_output`.")
    {'sparse': 'sparse_output'}
"""

from __future__ import annotations

import re

from librarian.correction.replacement import find_replacements

__all__ = ["succession_pairs"]

_NAME = r"(?:``|`|')[A-Za-z_]\w*(?:``|`|')"
# Names joined by commas, "and" or "or", optionally followed by what they are ("parameters").
_LIST = rf"{_NAME}(?:\s*(?:,\s*(?:and\s+|or\s+)?|\s+and\s+|\s+or\s+){_NAME})*"
_KIND = r"(?:\s+(?:parameters?|arguments?|keywords?|keyword\s+arguments?|options?|attributes?))?"
_REPLACE_LISTS = re.compile(
    rf"\b(?:[Rr]eplac\w*|[Rr]enam\w*)\s+(?P<old>{_LIST}){_KIND}\s+(?:with|by|to)\s+(?P<new>{_LIST})"
)
_QUOTED = re.compile(_NAME)


def succession_pairs(text: str) -> dict[str, str]:
    """Old name -> new name for every rename ``text`` states (see the module docs)."""
    pairs: dict[str, str] = {}
    flat = re.sub(r"\s+", " ", text)
    for match in _REPLACE_LISTS.finditer(flat):
        old, new = _names(match.group("old")), _names(match.group("new"))
        if len(old) == len(new):
            for before, after in zip(old, new, strict=True):
                if before != after:
                    pairs.setdefault(before, after)
    for found in find_replacements(text):
        if found.suggestion or found.old is None or len(found.new) != 1:
            continue
        before, after = found.old, found.new[0]
        if before != after and before.isidentifier() and after.isidentifier():
            pairs.setdefault(before, after)
    return pairs


def _names(listed: str) -> list[str]:
    return [quoted.strip("`'") for quoted in _QUOTED.findall(listed)]
