"""Scope tokens: filter values encoded as single lexical tokens.

FTS5 cannot use a B-tree index for a WHERE clause on the joined table, so filtering after a broad
MATCH would rank every matching chunk of every SDK. Instead each chunk carries one token per filter
value (``s…`` for the SDK, ``v…`` for SDK and version, ``d…`` document type, ``c…`` category, ``g…``
tag) in the ``search_scope`` column, and the filter becomes part of the MATCH expression, so FTS5
intersects posting lists and ranks only the chunks in scope.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from librarian.index.base import SearchFilter


def _token(prefix: str, *parts: str) -> str:
    digest = hashlib.blake2b("\x1f".join(parts).encode("utf-8"), digest_size=8).hexdigest()
    return f"{prefix}{digest}"


def scope_tokens(
    sdk_name: str | None,
    sdk_version: str | None,
    document_type: str | None,
    category: str | None,
    tags: Iterable[str],
) -> str:
    """The ``search_scope`` text of a chunk with these filter values."""
    tokens = []
    if sdk_name is not None:
        tokens.append(_token("s", sdk_name))
        if sdk_version is not None:
            tokens.append(_token("v", sdk_name, sdk_version))
    if document_type is not None:
        tokens.append(_token("d", document_type))
    if category is not None:
        tokens.append(_token("c", category))
    tokens.extend(_token("g", tag) for tag in sorted(set(tags)))
    return " ".join(tokens)


def filter_tokens(where: SearchFilter) -> list[str]:
    """The scope tokens a chunk must all carry to pass ``where`` (dates are filtered separately)."""
    tokens = []
    if where.sdk_name is not None:
        if where.sdk_version is not None:
            tokens.append(_token("v", where.sdk_name, where.sdk_version))
        else:
            tokens.append(_token("s", where.sdk_name))
    if where.document_type is not None:
        tokens.append(_token("d", where.document_type))
    if where.category is not None:
        tokens.append(_token("c", where.category))
    tokens.extend(_token("g", tag) for tag in sorted(set(where.tags)))
    return tokens
