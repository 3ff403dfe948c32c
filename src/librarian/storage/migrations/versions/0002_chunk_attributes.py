"""Chunk attributes: structured facts from connectors (options of a command, an operation's method).

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A plain ADD COLUMN: SQLite supports it in place, and recreating `chunks` would break the FTS5
    # external-content table and its triggers.
    op.add_column(
        "chunks",
        sa.Column(
            "attributes",
            sa.JSON().with_variant(JSONB(), "postgresql"),
            nullable=False,
            server_default=sa.text("'{}'"),
        ),
    )


def downgrade() -> None:
    with op.batch_alter_table("chunks") as batch:
        batch.drop_column("attributes")
