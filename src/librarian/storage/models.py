"""SQLAlchemy 2 models of the source of truth.

The relational store owns every fact; vector indexes are derived from it. A source is one ingest
target (a folder, a file, a git repository at a ref) for one SDK version; a document is one file of a
source and keeps its versions; a chunk is one logical unit of the current version of a document.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, overload

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

JSONType = JSON().with_variant(JSONB(), "postgresql")


def utcnow() -> datetime:
    """The current time, timezone-aware in UTC (the only clock the store uses)."""
    return datetime.now(UTC)


@overload
def as_utc(moment: datetime) -> datetime: ...
@overload
def as_utc(moment: None) -> None: ...
def as_utc(moment: datetime | None) -> datetime | None:
    """Aware UTC; a naive datetime is taken to be UTC already (SQLite returns naive UTC)."""
    if moment is None:
        return None
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


class Base(DeclarativeBase):
    """Declarative base of every Librarian table."""


class Source(Base):
    """One ingest target for one SDK version (or for organisational documents, no SDK)."""

    __tablename__ = "sources"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    source_key: Mapped[str] = mapped_column(String(64), unique=True)
    uri: Mapped[str] = mapped_column(Text)
    kind: Mapped[str] = mapped_column(String(32))
    ref: Mapped[str | None] = mapped_column(String(255))
    sdk_name: Mapped[str | None] = mapped_column(String(255))
    sdk_version: Mapped[str | None] = mapped_column(String(255))
    document_type: Mapped[str | None] = mapped_column(String(64))
    category: Mapped[str | None] = mapped_column(String(255))
    tags: Mapped[list[str]] = mapped_column(JSONType, default=list)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    last_ingested_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_revision: Mapped[str | None] = mapped_column(String(64))
    last_status: Mapped[str | None] = mapped_column(String(32))
    last_errors: Mapped[list[dict[str, Any]]] = mapped_column(JSONType, default=list)
    last_stats: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    # What the connector needs to run again (scopes, limits), so `librarian refresh` can repeat it.
    options: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    refresh_interval_seconds: Mapped[int | None] = mapped_column(Integer)
    # Access control (knowledge/access.py): the owning organisation, who created it, who may read it.
    organization_id: Mapped[int] = mapped_column(Integer, default=1, index=True)
    created_by: Mapped[int | None] = mapped_column(Integer)
    visibility: Mapped[str] = mapped_column(String(16), default="organization")
    allowed_teams: Mapped[list[int]] = mapped_column(JSONType, default=list)

    documents: Mapped[list[Document]] = relationship(back_populates="source")


class Document(Base):
    """One file of a source. ``current_version_id`` is null once the file was deleted upstream."""

    __tablename__ = "documents"
    __table_args__ = (UniqueConstraint("source_id", "path"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    source_id: Mapped[int] = mapped_column(ForeignKey("sources.id", ondelete="CASCADE"), index=True)
    path: Mapped[str] = mapped_column(Text)
    source_url: Mapped[str] = mapped_column(Text)
    title: Mapped[str | None] = mapped_column(Text)
    content_hash: Mapped[str | None] = mapped_column(String(64))
    current_version_no: Mapped[int] = mapped_column(Integer, default=0)
    deleted_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # HTTP validators of a crawled page (ETag, Last-Modified) for conditional refresh.
    etag: Mapped[str | None] = mapped_column(Text)
    last_modified: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    # Access control (knowledge/access.py): the owning organisation, who created it, who may read it.
    organization_id: Mapped[int] = mapped_column(Integer, default=1, index=True)
    created_by: Mapped[int | None] = mapped_column(Integer)
    visibility: Mapped[str] = mapped_column(String(16), default="organization")
    allowed_teams: Mapped[list[int]] = mapped_column(JSONType, default=list)
    # Knowledge-document fields (the design's knowledge_documents); labels default to the source's.
    description: Mapped[str | None] = mapped_column(Text)
    document_type: Mapped[str | None] = mapped_column(String(64))
    category: Mapped[str | None] = mapped_column(String(255))
    tags: Mapped[list[str]] = mapped_column(JSONType, default=list)
    source_type: Mapped[str] = mapped_column(String(32), default="import")
    content_structured: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    attributes: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    updated_by: Mapped[int | None] = mapped_column(Integer)
    view_count: Mapped[int] = mapped_column(Integer, default=0)
    usefulness_score: Mapped[float] = mapped_column(Float, default=2.5)
    feedback_count: Mapped[int] = mapped_column(Integer, default=0)
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # Who may read it, derived from the fields above (knowledge/access.py); chunks carry a copy.
    access_grants: Mapped[list[str]] = mapped_column(JSONType, default=list)

    source: Mapped[Source] = relationship(back_populates="documents")
    versions: Mapped[list[DocumentVersion]] = relationship(
        back_populates="document", order_by="DocumentVersion.version_no", cascade="all, delete-orphan"
    )


class DocumentVersion(Base):
    """The history of a document: every distinct content it had, with when it was fetched."""

    __tablename__ = "document_versions"
    __table_args__ = (UniqueConstraint("document_id", "version_no"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    document_id: Mapped[int] = mapped_column(ForeignKey("documents.id", ondelete="CASCADE"), index=True)
    version_no: Mapped[int] = mapped_column(Integer)
    content_hash: Mapped[str] = mapped_column(String(64))
    text: Mapped[str] = mapped_column(Text)
    fetched_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    chunk_count: Mapped[int] = mapped_column(Integer, default=0)
    # Who made this version and what the document's fields were then (title, labels, visibility...),
    # so any version can be read and restored whole.
    created_by: Mapped[int | None] = mapped_column(Integer)
    fields: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)

    document: Mapped[Document] = relationship(back_populates="versions")


class Chunk(Base):
    """One logical unit (section, command, function...) of the current version of a document."""

    __tablename__ = "chunks"
    __table_args__ = (
        Index("ix_chunks_sdk", "sdk_name", "sdk_version"),
        Index("ix_chunks_document", "document_id"),
        # Never reuse the id of a deleted chunk: ids are also the keys of the vector index.
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    document_id: Mapped[int] = mapped_column(ForeignKey("documents.id", ondelete="CASCADE"))
    document_version_no: Mapped[int] = mapped_column(Integer)
    ordinal: Mapped[int] = mapped_column(Integer)
    sdk_name: Mapped[str | None] = mapped_column(String(255))
    sdk_version: Mapped[str | None] = mapped_column(String(255))
    entity_name: Mapped[str | None] = mapped_column(Text)
    entity_type: Mapped[str] = mapped_column(String(64))
    section_path: Mapped[str] = mapped_column(Text)
    source_url: Mapped[str] = mapped_column(Text)
    content: Mapped[str] = mapped_column(Text)
    content_hash: Mapped[str] = mapped_column(String(64))
    last_fetched_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    embedding_model_version: Mapped[str] = mapped_column(String(255))
    document_type: Mapped[str | None] = mapped_column(String(64))
    category: Mapped[str | None] = mapped_column(String(255))
    tags: Mapped[list[str]] = mapped_column(JSONType, default=list)
    # Structured facts from the connector (e.g. the option names a command accepts).
    attributes: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    # Derived text the lexical index reads (FTS5 triggers on SQLite, a generated tsvector on PostgreSQL).
    search_title: Mapped[str] = mapped_column(Text, default="")
    search_scope: Mapped[str] = mapped_column(Text, default="")
    # Who may read the chunk (its document's grants, knowledge/access.py): every engine filters on it.
    access_grants: Mapped[list[str]] = mapped_column(JSONType, default=list)


class EmbeddingCacheEntry(Base):
    """An embedding of one text by one model, keyed by the text's content hash."""

    __tablename__ = "embedding_cache"

    content_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    model_version: Mapped[str] = mapped_column(String(255), primary_key=True)
    dimension: Mapped[int] = mapped_column(Integer)
    vector: Mapped[bytes] = mapped_column(LargeBinary)


class VectorOutboxEntry(Base):
    """A pending change to the vector index, written in the same transaction as the chunk change.

    The ingest pipeline drains the outbox after each batch and at the start of every run, so a crash
    between the database commit and the index update never leaves the index out of step for good.
    """

    __tablename__ = "vector_outbox"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    chunk_id: Mapped[int] = mapped_column(Integer, index=True)
    operation: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class IndexState(Base):
    """Which vector collection serves searches, and for which embedding model."""

    __tablename__ = "index_state"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    collection: Mapped[str] = mapped_column(String(255))
    model_version: Mapped[str] = mapped_column(String(255))
    dimension: Mapped[int] = mapped_column(Integer)
    chunk_count: Mapped[int] = mapped_column(Integer, default=0)
    built_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    build_seconds: Mapped[float] = mapped_column(Float, default=0.0)


class ResearchFeedback(Base):
    """A record that one snippet resolved (or did not resolve) one error, scrubbed of secrets.

    Chunks are replaced on re-ingest, so the snippet is identified by its source URL, entity and
    content hash rather than by a chunk id.
    """

    __tablename__ = "research_feedback"
    __table_args__ = (Index("ix_feedback_sdk_signature", "sdk_name", "error_signature"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    sdk_name: Mapped[str] = mapped_column(String(255))
    sdk_version: Mapped[str | None] = mapped_column(String(255))
    error_signature: Mapped[str] = mapped_column(String(64))
    error_text: Mapped[str] = mapped_column(Text)
    command: Mapped[str | None] = mapped_column(Text)
    query: Mapped[str | None] = mapped_column(Text)
    entity_name: Mapped[str | None] = mapped_column(Text)
    source_url: Mapped[str] = mapped_column(Text)
    chunk_content_hash: Mapped[str | None] = mapped_column(String(64))
    helpful: Mapped[bool] = mapped_column(Boolean)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
