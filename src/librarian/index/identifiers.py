"""Identifier-like tokens: what a user pastes when they want the one page that holds it.

An identifier has inner punctuation (``get_object``, ``a.b.c``, ``err-code``, ``ns:name``, ``a/b``),
a leading ``--`` (an option), camelCase or two-hump PascalCase, or letters followed by digits (an
error code such as ``E1107``). Plain words never count, so natural-language queries are untouched.
"""

from __future__ import annotations

import re

from librarian.index.query_terms import query_terms

IDENTIFIER = re.compile(
    r"--[a-z][a-z0-9-]{2,}"  # an option
    r"|\b[A-Za-z_][A-Za-z0-9]*(?:[._:/-][A-Za-z0-9_]+)+\b"  # dotted, snake, kebab, namespaced, paths
    r"|\b[a-z]+[A-Z][A-Za-z0-9]+\b"  # camelCase
    r"|\b[A-Z]+[a-z]+[A-Z][A-Za-z0-9]*\b"  # PascalCase with two humps
    r"|\b[A-Za-z]+[0-9]+[A-Za-z0-9]*\b"  # letters then digits
)
MIN_LENGTH = 4
MAX_IDENTIFIERS = 3
# A query is about its identifiers when at most this many of its other words remain: "what does
# E1107 mean" is; a question that happens to name a model ("classify images with ResNet50
# pretrained on ImageNet") is left to fusion, which measured better on such questions.
MAX_OTHER_WORDS = 3
_WORDS = re.compile(r"[a-z0-9]+")


def identifiers_in(text: str, min_length: int = MIN_LENGTH) -> list[str]:
    """The identifier-like tokens of ``text``, in order, without trailing punctuation."""
    found: dict[str, None] = {}
    for match in IDENTIFIER.finditer(text):
        token = match.group(0)
        if not token.startswith("--"):
            token = token.strip("./:-")
        if len(token) >= min_length and not token.lower().startswith(("http", "www.")):
            found.setdefault(token, None)
    return list(found)


def query_identifiers(query: str) -> list[str]:
    """At most :data:`MAX_IDENTIFIERS` identifiers of a search query."""
    return identifiers_in(query)[:MAX_IDENTIFIERS]


def lookup_identifiers(query: str) -> list[str]:
    """The identifiers to look up exactly: those of a query about them, else none."""
    found = query_identifiers(query)
    if not found:
        return []
    covered = {word for identifier in found for word in _WORDS.findall(identifier.lower())}
    others = [term for term in query_terms(query) if term not in covered]
    return found if len(others) <= MAX_OTHER_WORDS else []
