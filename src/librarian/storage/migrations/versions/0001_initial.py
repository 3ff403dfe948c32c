"""Initial schema: sources, documents and their versions, chunks, lexical index, embedding cache,
vector outbox and index state.

Revision ID: 0001
Revises:
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

JSON_TYPE = sa.JSON().with_variant(JSONB(), "postgresql")
TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "sources",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("source_key", sa.String(64), nullable=False, unique=True),
        sa.Column("uri", sa.Text, nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("ref", sa.String(255)),
        sa.Column("sdk_name", sa.String(255)),
        sa.Column("sdk_version", sa.String(255)),
        sa.Column("document_type", sa.String(64)),
        sa.Column("category", sa.String(255)),
        sa.Column("tags", JSON_TYPE, nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("last_ingested_at", TS),
        sa.Column("last_revision", sa.String(64)),
        sa.Column("last_status", sa.String(32)),
        sa.Column("last_errors", JSON_TYPE, nullable=False),
        sa.Column("last_stats", JSON_TYPE, nullable=False),
    )
    op.create_table(
        "documents",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("source_id", sa.Integer, sa.ForeignKey("sources.id", ondelete="CASCADE"), nullable=False),
        sa.Column("path", sa.Text, nullable=False),
        sa.Column("source_url", sa.Text, nullable=False),
        sa.Column("title", sa.Text),
        sa.Column("content_hash", sa.String(64)),
        sa.Column("current_version_no", sa.Integer, nullable=False),
        sa.Column("deleted_at", TS),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("updated_at", TS, nullable=False),
        sa.UniqueConstraint("source_id", "path"),
    )
    op.create_index("ix_documents_source_id", "documents", ["source_id"])
    op.create_table(
        "document_versions",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column(
            "document_id", sa.Integer, sa.ForeignKey("documents.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("version_no", sa.Integer, nullable=False),
        sa.Column("content_hash", sa.String(64), nullable=False),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("fetched_at", TS, nullable=False),
        sa.Column("chunk_count", sa.Integer, nullable=False),
        sa.UniqueConstraint("document_id", "version_no"),
    )
    op.create_index("ix_document_versions_document_id", "document_versions", ["document_id"])
    op.create_table(
        "chunks",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column(
            "document_id", sa.Integer, sa.ForeignKey("documents.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("document_version_no", sa.Integer, nullable=False),
        sa.Column("ordinal", sa.Integer, nullable=False),
        sa.Column("sdk_name", sa.String(255)),
        sa.Column("sdk_version", sa.String(255)),
        sa.Column("entity_name", sa.Text),
        sa.Column("entity_type", sa.String(64), nullable=False),
        sa.Column("section_path", sa.Text, nullable=False),
        sa.Column("source_url", sa.Text, nullable=False),
        sa.Column("content", sa.Text, nullable=False),
        sa.Column("content_hash", sa.String(64), nullable=False),
        sa.Column("last_fetched_at", TS, nullable=False),
        sa.Column("embedding_model_version", sa.String(255), nullable=False),
        sa.Column("document_type", sa.String(64)),
        sa.Column("category", sa.String(255)),
        sa.Column("tags", JSON_TYPE, nullable=False),
        sa.Column("search_title", sa.Text, nullable=False),
        sa.Column("search_scope", sa.Text, nullable=False),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_chunks_sdk", "chunks", ["sdk_name", "sdk_version"])
    op.create_index("ix_chunks_document", "chunks", ["document_id"])
    op.create_table(
        "embedding_cache",
        sa.Column("content_hash", sa.String(64), primary_key=True),
        sa.Column("model_version", sa.String(255), primary_key=True),
        sa.Column("dimension", sa.Integer, nullable=False),
        sa.Column("vector", sa.LargeBinary, nullable=False),
    )
    op.create_table(
        "vector_outbox",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("chunk_id", sa.Integer, nullable=False),
        sa.Column("operation", sa.String(16), nullable=False),
        sa.Column("created_at", TS, nullable=False),
    )
    op.create_index("ix_vector_outbox_chunk_id", "vector_outbox", ["chunk_id"])
    op.create_table(
        "index_state",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("collection", sa.String(255), nullable=False),
        sa.Column("model_version", sa.String(255), nullable=False),
        sa.Column("dimension", sa.Integer, nullable=False),
        sa.Column("chunk_count", sa.Integer, nullable=False),
        sa.Column("built_at", TS, nullable=False),
        sa.Column("build_seconds", sa.Float, nullable=False),
    )
    _create_lexical_index()


def _create_lexical_index() -> None:
    if op.get_context().dialect.name == "sqlite":
        # External-content FTS5: the text lives once, in chunks; triggers keep the index in step
        # inside the same transaction as the chunk write.
        op.execute(
            "CREATE VIRTUAL TABLE chunks_fts USING fts5("
            "search_title, content, search_scope, content='chunks', content_rowid='id', "
            "tokenize='porter unicode61')"
        )
        op.execute(
            "CREATE TRIGGER chunks_fts_insert AFTER INSERT ON chunks BEGIN "
            "INSERT INTO chunks_fts(rowid, search_title, content, search_scope) "
            "VALUES (new.id, new.search_title, new.content, new.search_scope); END"
        )
        op.execute(
            "CREATE TRIGGER chunks_fts_delete AFTER DELETE ON chunks BEGIN "
            "INSERT INTO chunks_fts(chunks_fts, rowid, search_title, content, search_scope) "
            "VALUES ('delete', old.id, old.search_title, old.content, old.search_scope); END"
        )
        op.execute(
            "CREATE TRIGGER chunks_fts_update AFTER UPDATE OF search_title, content, search_scope ON chunks "
            "BEGIN "
            "INSERT INTO chunks_fts(chunks_fts, rowid, search_title, content, search_scope) "
            "VALUES ('delete', old.id, old.search_title, old.content, old.search_scope); "
            "INSERT INTO chunks_fts(rowid, search_title, content, search_scope) "
            "VALUES (new.id, new.search_title, new.content, new.search_scope); END"
        )
    else:
        op.execute(
            "ALTER TABLE chunks ADD COLUMN search_vector tsvector GENERATED ALWAYS AS ("
            "setweight(to_tsvector('english', search_title), 'A') || "
            "setweight(to_tsvector('english', content), 'B')) STORED"
        )
        op.execute("CREATE INDEX ix_chunks_search_vector ON chunks USING GIN (search_vector)")


def downgrade() -> None:
    if op.get_context().dialect.name == "sqlite":
        op.execute("DROP TABLE IF EXISTS chunks_fts")
    for table in (
        "index_state",
        "vector_outbox",
        "embedding_cache",
        "chunks",
        "document_versions",
        "documents",
        "sources",
    ):
        op.drop_table(table)
