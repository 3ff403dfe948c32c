"""The SDK registry: which SDKs and versions are indexed, and how names people type map to them.

``aws``, ``awscli`` and ``aws-cli`` are one SDK: names are compared by a normal form that drops case,
separators and a generic trailing qualifier (``cli``, ``sdk``, ``api``, ``python``, ``py``, ``js``),
so no tool is named in code.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass

from sqlalchemy import Text, cast, func, select
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from librarian.errors import NotFoundError
from librarian.index.grants_sql import grants_condition
from librarian.research.versions import sort_versions
from librarian.storage.models import Chunk

_QUALIFIERS = ("python", "sdk", "cli", "api", "lib", "py", "js")


def normal_form(name: str) -> str:
    """``AWS-CLI`` -> ``aws``; ``python-requests`` stays ``pythonrequests`` (only suffixes go)."""
    collapsed = re.sub(r"[^a-z0-9]+", "", name.lower())
    for qualifier in _QUALIFIERS:
        if collapsed.endswith(qualifier) and len(collapsed) > len(qualifier) + 1:
            return collapsed[: -len(qualifier)]
    return collapsed


@dataclass(frozen=True)
class IndexedSdk:
    """One SDK as stored: its canonical name, its versions (newest first) and chunk counts."""

    name: str
    versions: list[str]
    chunks: int


@dataclass(frozen=True)
class ResolvedSdk:
    """The SDK a requested name resolved to: its stored name and its readable versions, newest first."""

    name: str
    versions: list[str]


def indexed_sdks(session: Session, grants: tuple[str, ...] | None = None) -> list[IndexedSdk]:
    """Every SDK with indexed chunks the holder of ``grants`` may read, versions sorted newest first.

    ``None`` grants count every chunk. Chunks are grouped by their grants too (a handful of distinct
    sets), so each group is either wholly readable or not, and counts never include hidden chunks.
    """
    grants_text = cast(Chunk.access_grants, Text)
    rows = session.execute(
        select(Chunk.sdk_name, Chunk.sdk_version, grants_text, func.count())
        .where(Chunk.sdk_name.is_not(None))
        .group_by(Chunk.sdk_name, Chunk.sdk_version, grants_text)
    ).all()
    held = None if grants is None else set(grants)
    versions: dict[str, list[str]] = {}
    counts: dict[str, int] = {}
    for name, version, stored, count in rows:
        if name is None:
            continue
        if held is not None and held.isdisjoint(_grant_list(stored)):
            continue
        versions.setdefault(name, [])
        if version is not None and version not in versions[name]:
            versions[name].append(version)
        counts[name] = counts.get(name, 0) + int(count)
    return [IndexedSdk(name, sort_versions(versions[name]), counts[name]) for name in sorted(versions)]


def readable_sdk_names(session: Session, grants: tuple[str, ...] | None) -> list[str]:
    """Every SDK name with a chunk the holder of ``grants`` may read, in order.

    Walks the distinct names of the ``(sdk_name, sdk_version)`` index one seek at a time, then asks
    for one readable chunk of each: a few index lookups per SDK, where grouping every chunk (what
    :func:`indexed_sdks` does, for the counts) reads the whole table -- 200 ms at 100,000 chunks.
    """
    names: list[str] = []
    following = select(Chunk.sdk_name).order_by(Chunk.sdk_name).limit(1)
    name = session.scalar(following.where(Chunk.sdk_name.is_not(None)))
    while name is not None:
        if _readable(session, grants, Chunk.sdk_name == name):
            names.append(name)
        name = session.scalar(following.where(Chunk.sdk_name > name))
    return names


def sdk_versions(session: Session, name: str, grants: tuple[str, ...] | None) -> list[str]:
    """The versions of SDK ``name`` with a chunk the holder of ``grants`` may read, newest first
    (the same walk of the index as :func:`readable_sdk_names`)."""
    versions: list[str] = []
    following = select(Chunk.sdk_version).where(Chunk.sdk_name == name).order_by(Chunk.sdk_version).limit(1)
    version = session.scalar(following.where(Chunk.sdk_version.is_not(None)))
    while version is not None:
        if _readable(session, grants, Chunk.sdk_name == name, Chunk.sdk_version == version):
            versions.append(version)
        version = session.scalar(following.where(Chunk.sdk_version > version))
    return sort_versions(versions)


def find_sdk(session: Session, requested: str, grants: tuple[str, ...] | None) -> ResolvedSdk | None:
    """The readable SDK ``requested`` names (see :func:`sdk_name_for`) with its readable versions,
    or ``None`` when nothing matches."""
    name = sdk_name_for(session, requested, grants)
    return None if name is None else ResolvedSdk(name, sdk_versions(session, name, grants))


def sdk_name_for(session: Session, requested: str, grants: tuple[str, ...] | None) -> str | None:
    """The stored name of the readable SDK ``requested`` names, resolved as :func:`resolve_sdk`
    resolves it without grouping the whole table: the exact name first (one indexed lookup), then
    the names of the same normal form (the one with more readable chunks when several share it)."""
    if _readable(session, grants, Chunk.sdk_name == requested):
        return requested
    wanted = normal_form(requested)
    matches = [name for name in readable_sdk_names(session, grants) if normal_form(name) == wanted]
    if len(matches) <= 1:
        return matches[0] if matches else None
    # Counting readable chunks costs a read of each: only a tie between aliases pays for it.
    counts = {match: _readable_count(session, grants, match) for match in matches}
    return max(matches, key=lambda match: counts[match])


def _readable(session: Session, grants: tuple[str, ...] | None, *where: ColumnElement[bool]) -> bool:
    readable = grants_condition(session.get_bind().dialect.name, Chunk.access_grants, grants)
    return session.scalar(select(Chunk.id).where(*where, readable).limit(1)) is not None


def _readable_count(session: Session, grants: tuple[str, ...] | None, name: str) -> int:
    readable = grants_condition(session.get_bind().dialect.name, Chunk.access_grants, grants)
    return int(session.scalar(select(func.count()).where(Chunk.sdk_name == name, readable)) or 0)


def resolve_sdk(requested: str, known: list[IndexedSdk]) -> IndexedSdk | None:
    """The indexed SDK ``requested`` names: exact name first, then the same normal form."""
    for sdk in known:
        if sdk.name == requested:
            return sdk
    wanted = normal_form(requested)
    matches = [sdk for sdk in known if normal_form(sdk.name) == wanted]
    return max(matches, key=lambda sdk: sdk.chunks) if matches else None


def canonical_sdk_name(session: Session, requested: str, grants: tuple[str, ...] | None) -> str:
    """The stored SDK name ``requested`` means for the holder of ``grants`` (``aws`` -> ``aws-cli``).

    Resolved as research resolves it (:func:`sdk_name_for`: an exact name is one indexed lookup).
    Raises :class:`NotFoundError` naming the closest readable
    names when nothing matches, so a typo is not mistaken for an empty result; SDKs the caller may
    not read count as unknown, so the answer reveals nothing about them.
    """
    found = sdk_name_for(session, requested, grants)
    if found is not None:
        return found
    close = closest_names(requested, indexed_sdks(session, grants))
    raise NotFoundError(
        f"no documentation is indexed for the SDK {requested!r}",
        hint=f"closest indexed names: {', '.join(close)}"
        if close
        else "`librarian sdks` lists what is indexed",
    )


def closest_names(requested: str, known: list[IndexedSdk], limit: int = 3) -> list[str]:
    """Indexed SDK names that look like ``requested`` (for "did you mean" suggestions)."""
    by_form = {normal_form(sdk.name): sdk.name for sdk in known}
    close = difflib.get_close_matches(normal_form(requested), list(by_form), n=limit, cutoff=0.5)
    names = [by_form[form] for form in close]
    names += [
        n for n in difflib.get_close_matches(requested, [s.name for s in known], n=limit) if n not in names
    ]
    return names[:limit]


def _grant_list(stored: object) -> list[str]:
    try:
        value = json.loads(stored) if isinstance(stored, str) else stored
    except ValueError:
        return []
    return [str(grant) for grant in value] if isinstance(value, list) else []
