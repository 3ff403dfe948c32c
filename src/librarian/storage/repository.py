"""Reads and writes of the source of truth, each in the caller's transaction.

Every function takes an open :class:`~sqlalchemy.orm.Session`; the caller decides the transaction
boundary (the ingest pipeline commits once per document).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session

from librarian.index.scope import scope_tokens
from librarian.knowledge.access import LOCAL_ORGANIZATION_ID, Visibility, object_grants
from librarian.storage.models import Chunk, Document, DocumentVersion, Source, VectorOutboxEntry, utcnow


@dataclass(frozen=True)
class SourceSpec:
    """What identifies an ingest target, and the labels its chunks get."""

    uri: str
    kind: str
    ref: str | None = None
    sdk_name: str | None = None
    sdk_version: str | None = None
    document_type: str | None = None
    category: str | None = None
    tags: tuple[str, ...] = ()
    # How to run the connector again (not part of the identity): scopes, limits, interpreter...
    options: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    # Who owns the source and who may read its documents (knowledge/access.py).
    organization_id: int = LOCAL_ORGANIZATION_ID
    created_by: int | None = None
    visibility: str | None = None
    allowed_teams: tuple[int, ...] = ()

    @property
    def key(self) -> str:
        """Stable identity: the same folder ingested as two SDK versions is two sources.

        Two organisations ingesting the same URL own two sources (the local organisation's keys are
        those of stores made before organisations existed).
        """
        parts: list[object] = [self.uri, self.kind, self.ref, self.sdk_name, self.sdk_version]
        if self.organization_id != LOCAL_ORGANIZATION_ID:
            parts.append(self.organization_id)
        return hashlib.sha256(json.dumps(parts).encode("utf-8")).hexdigest()

    @property
    def resolved_visibility(self) -> str:
        """The visibility asked for, else public for SDK documentation and organisation-wide otherwise."""
        if self.visibility is not None:
            return self.visibility
        return Visibility.PUBLIC.value if self.sdk_name else Visibility.ORGANIZATION.value


# The kind of the per-organisation source holding hand-written knowledge: its documents get their own
# labels, and it has nothing to refresh or relabel.
KNOWLEDGE_KIND = "knowledge"
# How an ingested document's origin is named in the knowledge model (the design's source_type),
# by source kind; other kinds (a local folder) are imports.
_SOURCE_TYPES = {
    "git": "git",
    "website": "website",
    "openapi": "openapi",
    "cli-help": "cli",
    "python-package": "package",
}


@dataclass(frozen=True)
class DocumentLabels:
    """What a document is labelled with and who may read it; chunks copy it."""

    organization_id: int
    created_by: int | None
    visibility: str
    allowed_teams: tuple[int, ...] = ()
    document_type: str | None = None
    category: str | None = None
    tags: tuple[str, ...] = ()

    @classmethod
    def of_source(cls, source: Source) -> DocumentLabels:
        """The labels an ingested document of ``source`` gets."""
        return cls(
            organization_id=source.organization_id,
            created_by=source.created_by,
            visibility=source.visibility,
            allowed_teams=tuple(source.allowed_teams or ()),
            document_type=source.document_type,
            category=source.category,
            tags=tuple(source.tags or ()),
        )

    @property
    def grants(self) -> list[str]:
        """Who may read a document with these labels."""
        return object_grants(self.organization_id, self.visibility, self.allowed_teams, self.created_by)

    def apply(self, document: Document) -> None:
        """Write these labels, and the grants they imply, onto ``document``."""
        document.document_type = self.document_type
        document.category = self.category
        document.tags = sorted(set(self.tags))
        document.visibility = self.visibility
        document.allowed_teams = sorted(set(self.allowed_teams))
        document.access_grants = self.grants

    def fields(self) -> dict[str, Any]:
        """The labels as a version records them."""
        return {
            "document_type": self.document_type,
            "category": self.category,
            "tags": sorted(set(self.tags)),
            "visibility": self.visibility,
            "allowed_teams": sorted(set(self.allowed_teams)),
        }


@dataclass(frozen=True)
class NewChunk:
    """A chunk ready to be stored (content hash = hash of the text that was embedded)."""

    ordinal: int
    entity_name: str | None
    entity_type: str
    section_path: str
    content: str
    content_hash: str
    attributes: dict[str, Any] = field(default_factory=dict)


def get_or_create_source(session: Session, spec: SourceSpec) -> Source:
    """The stored source for ``spec``; labels (type, category, tags) are updated to ``spec``'s.

    When the labels change, the chunks already stored are relabelled in the same transaction (and
    queued for the vector index), so unchanged files never keep stale labels.
    """
    source = session.scalar(select(Source).where(Source.source_key == spec.key))
    old_labels = _labels(source) if source else None
    if source is None:
        source = Source(
            source_key=spec.key,
            uri=spec.uri,
            kind=spec.kind,
            ref=spec.ref,
            sdk_name=spec.sdk_name,
            sdk_version=spec.sdk_version,
            tags=[],
            last_errors=[],
            last_stats={},
            options={},
            organization_id=spec.organization_id,
            created_by=spec.created_by,
            visibility=spec.resolved_visibility,
            allowed_teams=sorted(set(spec.allowed_teams)),
        )
        session.add(source)
    elif spec.visibility is not None:  # a refresh without a visibility keeps the stored one
        source.visibility = spec.visibility
        source.allowed_teams = sorted(set(spec.allowed_teams))
    if spec.options:
        source.options = dict(spec.options)
    source.document_type = spec.document_type
    source.category = spec.category
    source.tags = sorted(set(spec.tags))
    session.flush()
    if old_labels is not None and old_labels != _labels(source):
        _relabel_chunks(session, source)
    return source


def _labels(source: Source) -> tuple[object, ...]:
    return (
        source.document_type,
        source.category,
        list(source.tags or []),
        source.visibility,
        list(source.allowed_teams or []),
    )


def source_grants(source: Source) -> list[str]:
    """Who may read the documents of ``source``."""
    return object_grants(
        source.organization_id, source.visibility, source.allowed_teams or (), source.created_by
    )


def _relabel_chunks(session: Session, source: Source) -> None:
    """Copy the source's labels and access to its ingested documents and their chunks."""
    if source.kind == KNOWLEDGE_KIND:  # hand-written documents keep their own labels
        return
    grants = source_grants(source)
    document_ids = select(Document.id).where(Document.source_id == source.id).scalar_subquery()
    session.execute(
        update(Document)
        .where(Document.id.in_(document_ids))
        .values(
            document_type=source.document_type,
            category=source.category,
            tags=list(source.tags),
            visibility=source.visibility,
            allowed_teams=list(source.allowed_teams or []),
            access_grants=grants,
        )
    )
    session.execute(
        update(Chunk)
        .where(Chunk.document_id.in_(document_ids))
        .values(
            document_type=source.document_type,
            category=source.category,
            tags=list(source.tags),
            access_grants=grants,
            search_scope=scope_tokens(
                source.sdk_name,
                source.sdk_version,
                source.document_type,
                source.category,
                source.tags,
                grants,
            ),
        )
    )
    chunk_ids = session.scalars(select(Chunk.id).where(Chunk.document_id.in_(document_ids)))
    session.add_all(VectorOutboxEntry(chunk_id=chunk_id, operation="upsert") for chunk_id in chunk_ids)


def live_documents(session: Session, source_id: int) -> dict[str, Document]:
    """The source's documents that still exist upstream, by path."""
    rows = session.scalars(
        select(Document).where(Document.source_id == source_id, Document.deleted_at.is_(None))
    )
    return {document.path: document for document in rows}


def find_document(session: Session, source_id: int, path: str) -> Document | None:
    """The document at ``path`` of a source, deleted or not."""
    return session.scalar(select(Document).where(Document.source_id == source_id, Document.path == path))


def store_document_version(
    session: Session,
    source: Source,
    *,
    path: str,
    source_url: str,
    title: str | None,
    raw_hash: str,
    text: str,
    chunks: Sequence[NewChunk],
    embedding_model_version: str,
    fetched_at: datetime,
    labels: DocumentLabels | None = None,
    created_by: int | None = None,
    extra_fields: dict[str, Any] | None = None,
) -> tuple[Document, list[int], list[int]]:
    """Record a new version of a document and replace its chunks.

    The previous version stays in ``document_versions`` (history); its chunks are removed. Outbox
    entries for the vector index are written in the same transaction. An ingested document takes
    its labels and access from its source; a hand-written one passes its own ``labels``.

    Returns:
        The document, the ids of the removed chunks and the ids of the new chunks.
    """
    document = find_document(session, source.id, path)
    if document is None:
        document = Document(
            source_id=source.id,
            path=path,
            source_url=source_url,
            current_version_no=0,
            organization_id=source.organization_id,
            created_by=created_by if labels is not None else source.created_by,
            source_type=_SOURCE_TYPES.get(source.kind, "import"),
        )
        session.add(document)
        session.flush()
    labels = labels or DocumentLabels.of_source(source)
    labels.apply(document)
    grants = list(document.access_grants)
    removed = remove_chunks(session, document.id)
    version_no = document.current_version_no + 1
    session.add(
        DocumentVersion(
            document_id=document.id,
            version_no=version_no,
            content_hash=raw_hash,
            text=text,
            fetched_at=fetched_at,
            chunk_count=len(chunks),
            created_by=created_by,
            fields={**labels.fields(), "title": title, **(extra_fields or {})},
        )
    )
    document.current_version_no = version_no
    document.content_hash = raw_hash
    document.title = title
    document.source_url = source_url
    document.deleted_at = None
    document.updated_at = fetched_at
    document.updated_by = created_by
    scope = scope_tokens(
        source.sdk_name, source.sdk_version, labels.document_type, labels.category, labels.tags, grants
    )
    rows = [
        Chunk(
            document_id=document.id,
            document_version_no=version_no,
            ordinal=chunk.ordinal,
            sdk_name=source.sdk_name,
            sdk_version=source.sdk_version,
            entity_name=chunk.entity_name,
            entity_type=chunk.entity_type,
            section_path=chunk.section_path,
            source_url=source_url,
            content=chunk.content,
            content_hash=chunk.content_hash,
            last_fetched_at=fetched_at,
            embedding_model_version=embedding_model_version,
            document_type=labels.document_type,
            category=labels.category,
            tags=list(labels.tags),
            attributes=dict(chunk.attributes),
            search_title=" ".join(filter(None, [chunk.entity_name, chunk.section_path])),
            search_scope=scope,
            access_grants=grants,
        )
        for chunk in chunks
    ]
    session.add_all(rows)
    session.flush()
    added = [row.id for row in rows]
    session.add_all(VectorOutboxEntry(chunk_id=chunk_id, operation="upsert") for chunk_id in added)
    return document, removed, added


def remove_chunks(session: Session, document_id: int) -> list[int]:
    """Delete a document's chunks and queue their removal from the vector index."""
    ids = list(session.scalars(select(Chunk.id).where(Chunk.document_id == document_id)))
    if ids:
        session.execute(delete(Chunk).where(Chunk.document_id == document_id))
        session.add_all(VectorOutboxEntry(chunk_id=chunk_id, operation="delete") for chunk_id in ids)
    return ids


def mark_deleted(session: Session, document: Document, when: datetime) -> list[int]:
    """The file is gone upstream: drop its chunks, keep its history."""
    removed = remove_chunks(session, document.id)
    document.deleted_at = when
    return removed


def record_run(
    session: Session,
    source: Source,
    *,
    status: str,
    errors: Iterable[dict[str, Any]],
    stats: dict[str, Any],
    revision: str | None,
) -> None:
    """Store the outcome of an ingest run on its source (shown by ``librarian sources``)."""
    source.last_ingested_at = utcnow()
    source.last_status = status
    source.last_errors = list(errors)
    source.last_stats = stats
    if revision is not None:
        source.last_revision = revision


def chunks_by_ids(session: Session, ids: Sequence[int]) -> dict[int, Chunk]:
    """Chunks by primary key; ids that no longer exist are left out."""
    found: dict[int, Chunk] = {}
    for start in range(0, len(ids), 500):
        for chunk in session.scalars(select(Chunk).where(Chunk.id.in_(ids[start : start + 500]))):
            found[chunk.id] = chunk
    return found


def chunk_grants(session: Session, ids: Sequence[int]) -> dict[int, list[str]]:
    """The access grants of chunks by primary key; ids that no longer exist are left out."""
    found: dict[int, list[str]] = {}
    for start in range(0, len(ids), 500):
        rows = session.execute(
            select(Chunk.id, Chunk.access_grants).where(Chunk.id.in_(ids[start : start + 500]))
        )
        found.update((chunk_id, list(grants or [])) for chunk_id, grants in rows)
    return found


def chunk_documents(session: Session, ids: Sequence[int]) -> dict[int, int]:
    """The document of each chunk by primary key; ids that no longer exist are left out."""
    unique = list(dict.fromkeys(ids))
    found: dict[int, int] = {}
    for start in range(0, len(unique), 500):
        rows = session.execute(
            select(Chunk.id, Chunk.document_id).where(Chunk.id.in_(unique[start : start + 500]))
        )
        found.update((int(chunk_id), int(document_id)) for chunk_id, document_id in rows)
    return found


def store_statistics(session: Session) -> dict[str, Any]:
    """Counts of sources, documents, versions and chunks, and chunks per SDK version."""
    per_sdk = session.execute(
        select(Chunk.sdk_name, Chunk.sdk_version, func.count())
        .group_by(Chunk.sdk_name, Chunk.sdk_version)
        .order_by(Chunk.sdk_name, Chunk.sdk_version)
    ).all()
    return {
        "sources": session.scalar(select(func.count()).select_from(Source)) or 0,
        "documents": session.scalar(
            select(func.count()).select_from(Document).where(Document.deleted_at.is_(None))
        )
        or 0,
        "document_versions": session.scalar(select(func.count()).select_from(DocumentVersion)) or 0,
        "chunks": session.scalar(select(func.count()).select_from(Chunk)) or 0,
        "pending_index_updates": session.scalar(select(func.count()).select_from(VectorOutboxEntry)) or 0,
        "chunks_per_sdk": [
            {"sdk_name": name, "sdk_version": version, "chunks": count} for name, version, count in per_sdk
        ],
    }
