"""Workflows get an owner, verified fixes can be retired.

``workflows.organization_id`` and ``workflows.created_by`` say who submitted a workflow, so REST and
MCP show a caller only the workflows it may see. Existing workflows were submitted from the CLI of the
machine: they belong to the implicit local organisation (1) with no creator (the operator).

``verified_fixes.retired_at`` (with who and why) takes a fix that turned out wrong out of reuse
without deleting the record of what it did.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    with op.batch_alter_table("workflows") as table:
        table.add_column(sa.Column("organization_id", sa.Integer, nullable=False, server_default="1"))
        table.add_column(sa.Column("created_by", sa.Integer, nullable=True))
    # Listing a caller's workflows, newest first, reads this index alone.
    op.create_index(
        "ix_workflows_owner", "workflows", ["organization_id", "creation_timestamp", "workflow_id"]
    )
    with op.batch_alter_table("verified_fixes") as table:
        table.add_column(sa.Column("retired_at", TS, nullable=True))
        table.add_column(sa.Column("retired_by", sa.String(255), nullable=True))
        table.add_column(sa.Column("retired_reason", sa.Text, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("verified_fixes") as table:
        table.drop_column("retired_reason")
        table.drop_column("retired_by")
        table.drop_column("retired_at")
    op.drop_index("ix_workflows_owner", table_name="workflows")
    with op.batch_alter_table("workflows") as table:
        table.drop_column("created_by")
        table.drop_column("organization_id")
