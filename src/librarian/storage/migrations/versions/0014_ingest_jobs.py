"""Stored ingest jobs: ``ingest_jobs``.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

JSON_TYPE = sa.JSON().with_variant(JSONB(), "postgresql")
TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "ingest_jobs",
        sa.Column("seq", sa.Integer, primary_key=True),
        sa.Column("id", sa.String(32), nullable=False, unique=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("organization_id", sa.Integer, nullable=False),
        sa.Column("created_by", sa.Integer, nullable=True),
        sa.Column("request", JSON_TYPE, nullable=False),
        sa.Column("progress", JSON_TYPE, nullable=False),
        sa.Column("result", JSON_TYPE, nullable=True),
        sa.Column("error", JSON_TYPE, nullable=True),
        sa.Column("cancel_requested", sa.Boolean, nullable=False),
        sa.Column("resumed_from", sa.String(32), nullable=True),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("started_at", TS, nullable=True),
        sa.Column("finished_at", TS, nullable=True),
        sa.Column("heartbeat_at", TS, nullable=True),
    )
    op.create_index("ix_ingest_jobs_organization", "ingest_jobs", ["organization_id", "seq"])


def downgrade() -> None:
    op.drop_index("ix_ingest_jobs_organization", table_name="ingest_jobs")
    op.drop_table("ingest_jobs")
