"""The verb and tool registry: ``verbs``, ``tool_sources``, ``tools`` and ``tool_uses``.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

JSON_TYPE = sa.JSON().with_variant(JSONB(), "postgresql")
TS = sa.DateTime(timezone=True)


def _ownership() -> list[sa.Column]:  # type: ignore[type-arg]
    return [
        sa.Column("organization_id", sa.Integer, nullable=False),
        sa.Column("created_by", sa.Integer, nullable=True),
        sa.Column("visibility", sa.String(16), nullable=False),
        sa.Column("allowed_teams", JSON_TYPE, nullable=False),
    ]


def upgrade() -> None:
    op.create_table(
        "verbs",
        sa.Column("id", sa.Integer, primary_key=True),
        *_ownership(),
        sa.Column("access_grants", JSON_TYPE, nullable=False),
        sa.Column("verb", sa.String(128), nullable=False),
        sa.Column("description", sa.Text, nullable=False),
        sa.Column("capabilities", JSON_TYPE, nullable=False),
        sa.Column("category", sa.String(100), nullable=True),
        sa.Column("examples", JSON_TYPE, nullable=False),
        sa.Column("input_definitions", JSON_TYPE, nullable=False),
        sa.Column("output_definitions", JSON_TYPE, nullable=False),
        sa.Column("decomposition", JSON_TYPE, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("search_hash", sa.String(64), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("updated_at", TS, nullable=False),
        sa.UniqueConstraint("organization_id", "verb"),
        sqlite_autoincrement=True,
    )
    op.create_table(
        "tool_sources",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("organization_id", sa.Integer, nullable=False),
        sa.Column("created_by", sa.Integer, nullable=True),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("spec", JSON_TYPE, nullable=False),
        sa.Column("visibility", sa.String(16), nullable=False),
        sa.Column("allowed_teams", JSON_TYPE, nullable=False),
        sa.Column("last_synced_at", TS, nullable=True),
        sa.Column("last_error", sa.Text, nullable=True),
        sa.Column("last_changes", JSON_TYPE, nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.UniqueConstraint("organization_id", "name"),
    )
    op.create_table(
        "tools",
        sa.Column("id", sa.Integer, primary_key=True),
        *_ownership(),
        sa.Column("access_grants", JSON_TYPE, nullable=False),
        sa.Column("tool_key", sa.String(255), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("tool_type", sa.String(16), nullable=False),
        sa.Column("description", sa.Text, nullable=False),
        sa.Column("action_verbs", JSON_TYPE, nullable=False),
        sa.Column("capabilities", JSON_TYPE, nullable=False),
        sa.Column("category", sa.String(100), nullable=True),
        sa.Column("examples", JSON_TYPE, nullable=False),
        sa.Column("input_schema", JSON_TYPE, nullable=False),
        sa.Column("binding", JSON_TYPE, nullable=False),
        sa.Column("source_id", sa.Integer, sa.ForeignKey("tool_sources.id", ondelete="SET NULL")),
        sa.Column("version", sa.String(64), nullable=True),
        sa.Column("content_hash", sa.String(64), nullable=False),
        sa.Column("enrichment", JSON_TYPE, nullable=False),
        sa.Column("search_hash", sa.String(64), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("approved_hash", sa.String(64), nullable=True),
        sa.Column("health", sa.String(16), nullable=False),
        sa.Column("consecutive_failures", sa.Integer, nullable=False),
        sa.Column("success_count", sa.Integer, nullable=False),
        sa.Column("failure_count", sa.Integer, nullable=False),
        sa.Column("last_error", sa.Text, nullable=True),
        sa.Column("last_called_at", TS, nullable=True),
        sa.Column("circuit_opened_at", TS, nullable=True),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("updated_at", TS, nullable=False),
        sa.UniqueConstraint("organization_id", "tool_key"),
        sqlite_autoincrement=True,
    )
    op.create_table(
        "tool_uses",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("tool_id", sa.Integer, sa.ForeignKey("tools.id", ondelete="CASCADE"), nullable=False),
        sa.Column("organization_id", sa.Integer, nullable=False),
        sa.Column("user_id", sa.Integer, nullable=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("request", sa.Text, nullable=True),
        sa.Column("request_hash", sa.String(64), nullable=True),
        sa.Column("succeeded", sa.Boolean, nullable=False),
        sa.Column("duration_ms", sa.Integer, nullable=True),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("created_at", TS, nullable=False),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_tool_uses_tool", "tool_uses", ["tool_id", "created_at"])
    op.create_index("ix_tool_uses_organization_id", "tool_uses", ["organization_id"])


def downgrade() -> None:
    for table in ("tool_uses", "tools", "tool_sources", "verbs"):
        op.drop_table(table)
