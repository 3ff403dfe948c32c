"""Workflows can be submitted with an idempotency key.

A client that retries a submission after a crash or a lost answer must not start the workflow twice:
``workflows.submission_key`` holds the key the client gave, unique, so the second submission finds
the first workflow instead of creating another.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("workflows", sa.Column("submission_key", sa.String(255), nullable=True))
    # Unique among the workflows that have one (NULLs are distinct in SQLite and PostgreSQL alike).
    op.create_index("ix_workflows_submission_key", "workflows", ["submission_key"], unique=True)


def downgrade() -> None:
    op.drop_index("ix_workflows_submission_key", table_name="workflows")
    op.drop_column("workflows", "submission_key")
