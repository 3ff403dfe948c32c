"""Identities, access control and knowledge documents.

New tables: ``organizations``, ``teams``, ``users``, ``team_members``, ``api_tokens`` and
``knowledge_feedback``. Sources and documents gain their organisation, creator, visibility and allowed
teams; documents gain the design's knowledge-document fields; versions keep who made them and the
document's fields at the time; chunks gain ``access_grants`` (who may read them, knowledge/access.py).

Existing stores move into the implicit local organisation (id 1) and its local administrator
(id 1): SDK documentation (a source with an SDK name) becomes public, everything else
organisation-wide. Every chunk is queued for the vector index again so its grants reach the vector
metadata; nothing stored is dropped.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-26
"""

from __future__ import annotations

import hashlib

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

JSON_TYPE = sa.JSON().with_variant(JSONB(), "postgresql")
TS = sa.DateTime(timezone=True)
EMPTY_LIST = sa.text("'[]'")
EMPTY_OBJECT = sa.text("'{}'")


def _grant_token(grant: str) -> str:
    # Frozen copy of index/scope.py's access token, so this migration never changes meaning.
    return "a" + hashlib.blake2b(grant.encode("utf-8"), digest_size=8).hexdigest()


def _acl_columns(table: str, default_visibility: str) -> None:
    op.add_column(table, sa.Column("organization_id", sa.Integer, nullable=False, server_default="1"))
    op.add_column(table, sa.Column("created_by", sa.Integer, nullable=True))
    op.add_column(
        table, sa.Column("visibility", sa.String(16), nullable=False, server_default=default_visibility)
    )
    op.add_column(table, sa.Column("allowed_teams", JSON_TYPE, nullable=False, server_default=EMPTY_LIST))
    op.create_index(f"ix_{table}_organization_id", table, ["organization_id"])


def upgrade() -> None:
    op.create_table(
        "organizations",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(255), nullable=False, unique=True),
        sa.Column("created_at", TS, nullable=False),
    )
    op.create_table(
        "teams",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column(
            "organization_id",
            sa.Integer,
            sa.ForeignKey("organizations.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.UniqueConstraint("organization_id", "name"),
    )
    op.create_table(
        "users",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column(
            "organization_id",
            sa.Integer,
            sa.ForeignKey("organizations.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("is_admin", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("disabled_at", TS, nullable=True),
        sa.UniqueConstraint("organization_id", "name"),
    )
    op.create_table(
        "team_members",
        sa.Column("team_id", sa.Integer, sa.ForeignKey("teams.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("user_id", sa.Integer, sa.ForeignKey("users.id", ondelete="CASCADE"), primary_key=True),
    )
    op.create_index("ix_team_members_user_id", "team_members", ["user_id"])
    op.create_table(
        "api_tokens",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("user_id", sa.Integer, sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("token_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("prefix", sa.String(16), nullable=False),
        sa.Column("scopes", JSON_TYPE, nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("expires_at", TS, nullable=True),
        sa.Column("last_used_at", TS, nullable=True),
        sa.Column("revoked_at", TS, nullable=True),
    )
    op.create_index("ix_api_tokens_user_id", "api_tokens", ["user_id"])
    op.create_table(
        "knowledge_feedback",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column(
            "document_id", sa.Integer, sa.ForeignKey("documents.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("document_version_no", sa.Integer, nullable=False),
        sa.Column("organization_id", sa.Integer, nullable=False),
        sa.Column("user_id", sa.Integer, nullable=False),
        sa.Column("feedback_type", sa.String(32), nullable=False),
        sa.Column("rating", sa.Integer, nullable=True),
        sa.Column("comment", sa.Text, nullable=True),
        sa.Column("search_query", sa.Text, nullable=True),
        sa.Column("was_used", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("details", JSON_TYPE, nullable=False, server_default=EMPTY_OBJECT),
    )
    op.create_index("ix_knowledge_feedback_document", "knowledge_feedback", ["document_id", "created_at"])

    _acl_columns("sources", "organization")
    _acl_columns("documents", "organization")
    for column in (
        sa.Column("description", sa.Text, nullable=True),
        sa.Column("document_type", sa.String(64), nullable=True),
        sa.Column("category", sa.String(255), nullable=True),
        sa.Column("tags", JSON_TYPE, nullable=False, server_default=EMPTY_LIST),
        sa.Column("source_type", sa.String(32), nullable=False, server_default="import"),
        sa.Column("content_structured", JSON_TYPE, nullable=True),
        sa.Column("attributes", JSON_TYPE, nullable=False, server_default=EMPTY_OBJECT),
        sa.Column("updated_by", sa.Integer, nullable=True),
        sa.Column("view_count", sa.Integer, nullable=False, server_default="0"),
        sa.Column("usefulness_score", sa.Float, nullable=False, server_default="2.5"),
        sa.Column("feedback_count", sa.Integer, nullable=False, server_default="0"),
        sa.Column("last_used_at", TS, nullable=True),
        sa.Column("access_grants", JSON_TYPE, nullable=False, server_default=EMPTY_LIST),
    ):
        op.add_column("documents", column)
    op.add_column("document_versions", sa.Column("created_by", sa.Integer, nullable=True))
    op.add_column(
        "document_versions", sa.Column("fields", JSON_TYPE, nullable=False, server_default=EMPTY_OBJECT)
    )
    op.add_column("chunks", sa.Column("access_grants", JSON_TYPE, nullable=False, server_default=EMPTY_LIST))

    _move_into_local_organization()


def _move_into_local_organization() -> None:
    bind = op.get_bind()
    now = sa.func.now() if bind.dialect.name == "postgresql" else sa.text("CURRENT_TIMESTAMP")
    organizations = sa.table("organizations", sa.column("id"), sa.column("name"), sa.column("created_at"))
    users = sa.table(
        "users",
        sa.column("id"),
        sa.column("organization_id"),
        sa.column("name"),
        sa.column("is_admin"),
        sa.column("created_at"),
    )
    op.execute(organizations.insert().values(id=1, name="local", created_at=now))
    op.execute(users.insert().values(id=1, organization_id=1, name="local", is_admin=True, created_at=now))
    if bind.dialect.name == "postgresql":
        for table in ("organizations", "users"):
            op.execute(
                f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT max(id) FROM {table}))"
            )
    # SDK documentation is public; an organisation's own documents stay inside it.
    op.execute("UPDATE sources SET visibility = 'public' WHERE sdk_name IS NOT NULL")
    op.execute(
        "UPDATE documents SET "
        + ", ".join(
            f"{column} = (SELECT {column} FROM sources WHERE sources.id = documents.source_id)"
            for column in ("visibility", "document_type", "category", "tags")
        )
    )
    for grant, visibility in (("public", "public"), ("org:1", "organization")):
        op.execute(f"UPDATE documents SET access_grants = '[\"{grant}\"]' WHERE visibility = '{visibility}'")
    for grant, condition in (("public", "sdk_name IS NOT NULL"), ("org:1", "sdk_name IS NULL")):
        grants = f"'[\"{grant}\"]'"
        op.execute(
            f"UPDATE chunks SET access_grants = {grants}, "
            f"search_scope = TRIM(search_scope || ' ' || '{_grant_token(grant)}') WHERE {condition}"
        )
    clock = "now()" if bind.dialect.name == "postgresql" else "CURRENT_TIMESTAMP"
    op.execute(
        "INSERT INTO vector_outbox (chunk_id, operation, created_at) "
        f"SELECT id, 'upsert', {clock} FROM chunks"
    )
    if bind.dialect.name == "postgresql":
        op.execute("CREATE INDEX ix_chunks_access_grants ON chunks USING GIN (access_grants)")
        op.execute("CREATE INDEX ix_documents_access_grants ON documents USING GIN (access_grants)")


def downgrade() -> None:
    if op.get_context().dialect.name == "postgresql":
        op.execute("DROP INDEX IF EXISTS ix_chunks_access_grants")
        op.execute("DROP INDEX IF EXISTS ix_documents_access_grants")
    op.drop_column("chunks", "access_grants")
    for column in ("fields", "created_by"):
        op.drop_column("document_versions", column)
    for column in (
        "access_grants",
        "last_used_at",
        "feedback_count",
        "usefulness_score",
        "view_count",
        "updated_by",
        "attributes",
        "content_structured",
        "source_type",
        "tags",
        "category",
        "document_type",
        "description",
    ):
        op.drop_column("documents", column)
    for table in ("documents", "sources"):
        op.drop_index(f"ix_{table}_organization_id", table_name=table)
        for column in ("allowed_teams", "visibility", "created_by", "organization_id"):
            op.drop_column(table, column)
    for table in ("knowledge_feedback", "api_tokens", "team_members", "users", "teams", "organizations"):
        op.drop_table(table)
