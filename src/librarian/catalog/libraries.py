"""Library resolution, as Context7's ``resolve-library-id``: which indexed SDKs a name may mean.

Candidates are the SDKs the caller may read, scored by how their name matches what was typed: the
same name (1.0), the same normal form (``aws`` = ``aws-cli``, 0.95), one name containing the other
(0.8), else string similarity. Each comes with what an agent needs to pick one: its versions (newest
first) with chunk counts, its sources with their kind and last run, and how fresh it is.
"""

from __future__ import annotations

import difflib
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, select

from librarian.errors import InvalidInputError
from librarian.knowledge.access import Principal, Scope, can_read
from librarian.research.sdks import IndexedSdk, indexed_sdks, normal_form
from librarian.research.versions import sort_versions
from librarian.storage import repository
from librarian.storage.models import Chunk, Document, Source

if TYPE_CHECKING:
    from librarian.app import Librarian

MIN_SCORE = 0.5
# The score of a name in the same normal form (an alias: ``aws`` for ``aws-cli``).
ALIAS_SCORE = 0.95
UNVERSIONED = "unversioned"


def name_score(typed: str, name: str) -> float:
    """How well ``name`` matches what was typed, 0-1."""
    if typed.lower() == name.lower():
        return 1.0
    typed_form, form = normal_form(typed), normal_form(name)
    if typed_form and typed_form == form:
        return ALIAS_SCORE
    if typed_form and form and (typed_form in form or form in typed_form):
        return 0.8
    return round(difflib.SequenceMatcher(None, typed_form, form).ratio() * 0.75, 4)


class LibraryResolver:
    """Resolves names to the SDKs a caller may read, and describes each."""

    def __init__(self, lib: Librarian) -> None:
        self._lib = lib

    def list_libraries(self, principal: Principal) -> list[IndexedSdk]:
        """Every SDK with documentation the caller may read."""
        principal.require(Scope.READ, "listing libraries")
        with self._lib.sessions() as session:
            return indexed_sdks(session, principal.grants)

    def resolve(self, principal: Principal, name: str, *, limit: int = 5) -> list[dict[str, Any]]:
        """The SDKs ``name`` may mean, best first; an empty list when nothing looks like it."""
        principal.require(Scope.READ, "resolving a library")
        if not name.strip():
            raise InvalidInputError("name: give the library's name, e.g. aws-cli or requests")
        if not 1 <= limit <= 50:
            raise InvalidInputError(f"limit: use 1 to 50, not {limit}")
        scored = sorted(
            ((name_score(name.strip(), sdk.name), sdk) for sdk in self.list_libraries(principal)),
            key=lambda pair: (-pair[0], -pair[1].chunks, pair[1].name),
        )
        chosen = [(score, sdk) for score, sdk in scored if score >= MIN_SCORE][:limit]
        if not chosen:
            return []
        details = self._details(principal, [sdk.name for _, sdk in chosen])
        return [
            {"library_id": sdk.name, "score": score, **details.get(sdk.name, {}), "total_chunks": sdk.chunks}
            for score, sdk in chosen
        ]

    def _details(self, principal: Principal, names: list[str]) -> dict[str, dict[str, Any]]:
        with self._lib.sessions() as session:
            rows = session.execute(
                select(Source, func.count(Chunk.id))
                .join(Document, Document.source_id == Source.id, isouter=True)
                .join(Chunk, Chunk.document_id == Document.id, isouter=True)
                .where(Source.sdk_name.in_(names))
                .group_by(Source.id)
                .order_by(Source.id)
            ).all()
        found: dict[str, dict[str, Any]] = defaultdict(lambda: {"versions": {}, "sources": []})
        for source, chunks in rows:
            if source.sdk_name is None or not can_read(principal, repository.source_grants(source)):
                continue
            entry = found[source.sdk_name]
            version = source.sdk_version or UNVERSIONED
            entry["versions"][version] = entry["versions"].get(version, 0) + int(chunks)
            entry["sources"].append(
                {
                    "id": source.id,
                    "uri": source.uri,
                    "kind": source.kind,
                    "sdk_version": source.sdk_version,
                    "last_ingested_at": _stamp(source.last_ingested_at),
                    "last_status": source.last_status,
                }
            )
        return {name: _described(name, entry) for name, entry in found.items()}


def _described(name: str, entry: dict[str, Any]) -> dict[str, Any]:
    ordered = sort_versions([v for v in entry["versions"] if v != UNVERSIONED])
    if UNVERSIONED in entry["versions"]:
        ordered.append(UNVERSIONED)
    kinds = sorted({source["kind"] for source in entry["sources"]})
    stamps = [s["last_ingested_at"] for s in entry["sources"] if s["last_ingested_at"]]
    return {
        "description": f"{name}: {', '.join(kinds)} documentation, {len(ordered)} version(s)",
        "versions": [{"version": v, "chunks": entry["versions"][v]} for v in ordered],
        "sources": entry["sources"],
        "last_updated": max(stamps) if stamps else None,
    }


def _stamp(moment: Any) -> str | None:
    return moment.isoformat() if moment is not None else None
