"""Feedback is read by organisation: search learns from the queries its readers found answered.

Every search of an organisation checks whether its helpful verdicts changed (their count and last
id), so ``knowledge_feedback`` gets an index on ``(organization_id, id)``.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-29
"""

from __future__ import annotations

from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_knowledge_feedback_organization", "knowledge_feedback", ["organization_id", "id"])


def downgrade() -> None:
    op.drop_index("ix_knowledge_feedback_organization", table_name="knowledge_feedback")
