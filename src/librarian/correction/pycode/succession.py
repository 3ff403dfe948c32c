"""Which names the docs say replaced which: "Replace ``missing`` and ``default`` with ``load_default``
and ``dump_default``".

Libraries record a rename in their docstrings, most often in a Sphinx ``versionchanged`` note of the
class that defines the parameters (a base class of the one the task calls), in a few fixed forms:
*replace A with B*, *rename A to B*, *A was renamed to B*, *A is replaced by B*, *A is deprecated in
favour of B*. Each side may list several quoted names; they pair up in order when the two lists have
the same length. Only quoted names count (````name````, ```name```, ``'name'``), so prose is never
read as an identifier.

Example:
    >>> succession_pairs(".. versionchanged:: 3.13.0\\n    Replace ``missing`` and ``default`` "
    ...                  "parameters with ``load_default`` and ``dump_default``.")
    {'missing': 'load_default', 'default': 'dump_default'}
    >>> succession_pairs("The `sparse` keyword was renamed to `sparse_output`.")
    {'sparse': 'sparse_output'}
"""

from __future__ import annotations

import re

__all__ = ["succession_pairs"]

_NAME = r"(?:``|`|')[A-Za-z_]\w*(?:``|`|')"
# Names joined by commas, "and" or "or", optionally followed by what they are ("parameters").
_LIST = rf"{_NAME}(?:\s*(?:,\s*(?:and\s+|or\s+)?|\s+and\s+|\s+or\s+){_NAME})*"
_KIND = r"(?:\s+(?:parameters?|arguments?|keywords?|keyword\s+arguments?|options?|attributes?))?"
_FORMS = [
    # Replace A (and B) with C (and D) / Rename A to C
    re.compile(
        rf"\b(?:[Rr]eplac\w*|[Rr]enam\w*)\s+(?P<old>{_LIST}){_KIND}\s+(?:with|by|to)\s+(?P<new>{_LIST})"
    ),
    # A was renamed to C / A is replaced by C / A is deprecated in favour of C
    re.compile(
        rf"(?P<old>{_LIST}){_KIND}\s+(?:(?:is|are|was|were|has\s+been|have\s+been)\s+)?"
        rf"(?:renamed|replaced|deprecated|superseded)\s+(?:(?:in\s+favou?r\s+of)|by|with|to)\s+"
        rf"(?P<new>{_LIST})"
    ),
]
_QUOTED = re.compile(_NAME)


def succession_pairs(doc: str) -> dict[str, str]:
    """Old name -> new name for every rename ``doc`` states (see the module docs)."""
    pairs: dict[str, str] = {}
    text = re.sub(r"\s+", " ", doc)
    for form in _FORMS:
        for match in form.finditer(text):
            old, new = _names(match.group("old")), _names(match.group("new"))
            if len(old) != len(new):
                continue
            for before, after in zip(old, new, strict=True):
                if before != after:
                    pairs.setdefault(before, after)
    return pairs


def _names(listed: str) -> list[str]:
    return [quoted.strip("`'") for quoted in _QUOTED.findall(listed)]
