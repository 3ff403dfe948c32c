"""Listing and deleting ingested sources, with everything derived from them.

A source is listed to whoever may read its documents (its grants), and deleted only by who may
change it: its creator or an administrator of its organisation (the same rule as refresh). Deleting a
source removes its documents, their versions and chunks in one transaction and queues the chunks'
removal from the vector index through the outbox, so a crash between the two never leaves a vector
that search could return (the outbox is applied again at the next start).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import delete, func, select

from librarian.errors import InvalidInputError
from librarian.knowledge.access import Principal, Scope, can_read
from librarian.storage import repository
from librarian.storage.models import Chunk, Document, Source

if TYPE_CHECKING:
    from librarian.app import Librarian

MAX_PAGE = 500


def source_view(source: Source, documents: int, chunks: int) -> dict[str, Any]:
    """A source as every interface shows it."""
    return {
        "id": source.id,
        "uri": source.uri,
        "kind": source.kind,
        "ref": source.ref,
        "sdk_name": source.sdk_name,
        "sdk_version": source.sdk_version,
        "document_type": source.document_type,
        "category": source.category,
        "tags": list(source.tags or []),
        "visibility": source.visibility,
        "documents": documents,
        "chunks": chunks,
        "last_ingested_at": source.last_ingested_at.isoformat() if source.last_ingested_at else None,
        "last_revision": source.last_revision,
        "last_status": source.last_status,
        "last_stats": dict(source.last_stats or {}),
        "last_errors": list(source.last_errors or []),
    }


class SourceCatalog:
    """The sources a caller may see, and their removal."""

    def __init__(self, lib: Librarian) -> None:
        self._lib = lib

    def list_sources(
        self, principal: Principal, *, after_id: int = 0, limit: int = 50
    ) -> list[dict[str, Any]]:
        """Sources whose documents ``principal`` may read, by id; ``after_id`` pages on.

        Hand-written knowledge (kind ``knowledge``) is listed by ``lib.knowledge``, not here.
        """
        principal.require(Scope.READ, "listing sources")
        if not 1 <= limit <= MAX_PAGE:
            raise InvalidInputError(f"limit: use 1 to {MAX_PAGE}, not {limit}")
        found: list[dict[str, Any]] = []
        cursor = after_id
        with self._lib.sessions() as session:
            # Grants are derived per source, so filter in pages until the page is full.
            while len(found) < limit:
                rows = list(
                    session.scalars(
                        select(Source)
                        .where(Source.kind != repository.KNOWLEDGE_KIND, Source.id > cursor)
                        .order_by(Source.id)
                        .limit(limit * 2)
                    )
                )
                if not rows:
                    break
                readable = [row for row in rows if can_read(principal, repository.source_grants(row))]
                counts = _counts(session, [row.id for row in readable])
                for row in readable[: limit - len(found)]:
                    found.append(source_view(row, *counts.get(row.id, (0, 0))))
                cursor = rows[-1].id
        return found

    def delete_sources(
        self, principal: Principal, selector: str, *, every_match: bool = False
    ) -> list[dict[str, Any]]:
        """Delete the sources ``selector`` names (an id, key prefix, URI or SDK name, as refresh takes).

        A selector that names several sources (an SDK name names each of its versions) deletes them
        only with ``every_match``, so a typo never removes a whole SDK. Returns one summary per
        deleted source: its id, URI and how many documents and chunks went with it.

        Raises:
            NotFoundError: nothing the caller may change matches.
            InvalidInputError: several sources match and ``every_match`` is not set.
        """
        from librarian.refresh import select_sources  # refresh imports the facade: import late

        principal.require(Scope.WRITE, "deleting a source")
        targets = select_sources(self._lib, selector, principal)
        if len(targets) > 1 and not every_match:
            listed = ", ".join(f"{t.id} ({t.uri} {t.sdk_version or ''})".strip() for t in targets[:10])
            raise InvalidInputError(
                f"{selector!r} names {len(targets)} sources: {listed}",
                hint="give one source id, or ask to delete every match (--all, all=true)",
            )
        deleted = []
        with self._lib.sessions.begin() as session:
            for target in targets:
                source = session.get(Source, target.id, with_for_update=True)
                if source is None:  # deleted meanwhile
                    continue
                deleted.append(_delete_source(session, source))
        self._lib.vectors.apply_outbox()
        return deleted


def _delete_source(session: Any, source: Source) -> dict[str, Any]:
    document_ids = list(session.scalars(select(Document.id).where(Document.source_id == source.id)))
    chunks = 0
    for document_id in document_ids:
        chunks += len(repository.remove_chunks(session, document_id))
    # Versions, feedback and links cascade in the database; solutions and runbooks keep their text.
    session.execute(delete(Document).where(Document.source_id == source.id))
    summary = {
        "id": source.id,
        "uri": source.uri,
        "sdk_name": source.sdk_name,
        "sdk_version": source.sdk_version,
        "documents": len(document_ids),
        "chunks": chunks,
        "deleted": True,
    }
    session.execute(delete(Source).where(Source.id == source.id))
    return summary


def _counts(session: Any, source_ids: list[int]) -> dict[int, tuple[int, int]]:
    """Live documents and chunks per source, in two grouped queries."""
    if not source_ids:
        return {}
    documents = dict(
        session.execute(
            select(Document.source_id, func.count())
            .where(Document.source_id.in_(source_ids), Document.deleted_at.is_(None))
            .group_by(Document.source_id)
        ).all()
    )
    chunks = dict(
        session.execute(
            select(Document.source_id, func.count(Chunk.id))
            .join(Chunk, Chunk.document_id == Document.id)
            .where(Document.source_id.in_(source_ids))
            .group_by(Document.source_id)
        ).all()
    )
    return {sid: (int(documents.get(sid, 0)), int(chunks.get(sid, 0))) for sid in source_ids}
