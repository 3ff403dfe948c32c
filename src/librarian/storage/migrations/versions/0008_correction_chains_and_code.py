"""Corrections of code tasks, and chains of corrections.

The self-correcting loop now corrects Python code as well as command lines, and corrects a
correction that met a new error from where it stands (a *chain*) instead of going back to the
original command:

- ``correction_attempts.kind`` (``command`` or ``code``), ``failed_code`` and ``corrected_code`` (the
  source of a code task before and after), ``edits`` (the syntax-tree or command-line edits made,
  as JSON);
- ``correction_attempts.chain_parent_id``: the attempt whose corrected command (or code) this
  attempt corrects further, and ``depth``, its place in the chain (0 for the first correction);
- ``correction_attempts.blamed``: the options, words or names this correction introduced that the
  tool then rejected, so no later candidate brings them back;
- ``verified_fixes.kind``: a command-line template or a list of code edits.

Existing rows are command corrections at depth 0.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

JSON_TYPE = sa.JSON().with_variant(JSONB(), "postgresql")


def upgrade() -> None:
    op.add_column(
        "correction_attempts", sa.Column("kind", sa.String(16), nullable=False, server_default="command")
    )
    op.add_column("correction_attempts", sa.Column("failed_code", sa.Text(), nullable=True))
    op.add_column("correction_attempts", sa.Column("corrected_code", sa.Text(), nullable=True))
    op.add_column("correction_attempts", sa.Column("edits", JSON_TYPE, nullable=True))
    # Chains are followed within one task's attempts, which are read together; no foreign key, so
    # SQLite needs no table rebuild.
    op.add_column("correction_attempts", sa.Column("chain_parent_id", sa.Integer(), nullable=True))
    op.add_column(
        "correction_attempts", sa.Column("depth", sa.Integer(), nullable=False, server_default=sa.text("0"))
    )
    op.add_column("correction_attempts", sa.Column("blamed", JSON_TYPE, nullable=True))
    op.add_column(
        "verified_fixes", sa.Column("kind", sa.String(16), nullable=False, server_default="command")
    )


def downgrade() -> None:
    op.drop_column("verified_fixes", "kind")
    for column in ("blamed", "depth", "chain_parent_id", "edits", "corrected_code", "failed_code", "kind"):
        op.drop_column("correction_attempts", column)
