"""Scope tokens: filter values encoded as single lexical tokens.

FTS5 cannot use a B-tree index for a WHERE clause on the joined table, so filtering after a broad
MATCH would rank every matching chunk of every SDK. Instead each chunk carries one token per filter
value (``s…`` for the SDK, ``v…`` for SDK and version, ``d…`` document type, ``c…`` category, ``g…``
tag, ``a…`` access grant) in the ``search_scope`` column, and the filter becomes part of the MATCH
expression, so FTS5 intersects posting lists and ranks only the chunks in scope. Filters that accept
any of several values (document types, the caller's access grants) become OR groups.
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
    grants: Iterable[str] = (),
) -> str:
    """The ``search_scope`` text of a chunk with these filter values and access grants."""
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
    tokens.extend(grant_token(grant) for grant in sorted(set(grants)))
    return " ".join(tokens)


def grant_token(grant: str) -> str:
    """The scope token of one access grant (``public``, ``org:3``, ``team:7``, ``user:12``)."""
    return _token("a", grant)


def any_of_groups(where: SearchFilter) -> list[list[str]]:
    """Groups of scope tokens of which a chunk must carry at least one token per group."""
    groups = []
    if where.document_types:
        groups.append([_token("d", value) for value in sorted(set(where.document_types))])
    if where.access is not None:
        # An empty grant list must match nothing: a token no chunk carries keeps the group false.
        groups.append([grant_token(grant) for grant in sorted(set(where.access))] or [_token("a", "\x00")])
    return groups


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
