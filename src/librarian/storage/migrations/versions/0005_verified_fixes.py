"""What the self-correcting loop learns: verified fixes and the correction attempts awaiting a verdict.

``verified_fixes`` holds one row per (problem signature, fix template) with its success and failure
counts and the research snippets it came from; ``correction_attempts`` one row per correction the
loop proposed, settled when the retried task's outcome is known. Both refer to the runtime's tables
(revision 0004), so they share its database.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

JSON_TYPE = sa.JSON().with_variant(JSONB(), "postgresql")
TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "verified_fixes",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("signature", sa.String(64), nullable=False),
        sa.Column("tool", sa.String(255), nullable=False),
        sa.Column("tool_version", sa.String(255), nullable=True),
        sa.Column("normalized_error", sa.Text(), nullable=False),
        sa.Column("intent", sa.Text(), nullable=False),
        sa.Column("template_key", sa.String(64), nullable=False),
        sa.Column("failed_template", JSON_TYPE, nullable=False),
        sa.Column("fixed_template", JSON_TYPE, nullable=False),
        sa.Column("strategy", sa.String(64), nullable=False),
        sa.Column("rationale", sa.Text(), nullable=False),
        sa.Column("snippets", JSON_TYPE, nullable=False),
        sa.Column("successes", sa.Integer(), nullable=False, server_default=sa.text("0")),
        sa.Column("failures", sa.Integer(), nullable=False, server_default=sa.text("0")),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("last_used_at", TS, nullable=False),
        sa.Column("last_outcome", sa.String(16), nullable=True),
        sa.UniqueConstraint("signature", "template_key", name="uq_verified_fixes_signature_template"),
    )
    op.create_index("ix_verified_fixes_signature", "verified_fixes", ["signature"])
    op.create_index("ix_verified_fixes_problem", "verified_fixes", ["tool", "intent"])
    op.create_table(
        "correction_attempts",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column(
            "workflow_id",
            sa.Uuid(),
            sa.ForeignKey("workflows.workflow_id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("task_id", sa.Uuid(), sa.ForeignKey("tasks.task_id", ondelete="CASCADE"), nullable=False),
        sa.Column("task_key", sa.String(255), nullable=False),
        sa.Column("signature", sa.String(64), nullable=False),
        sa.Column("tool", sa.String(255), nullable=False),
        sa.Column("tool_version", sa.String(255), nullable=True),
        sa.Column("normalized_error", sa.Text(), nullable=False),
        sa.Column("error_text", sa.Text(), nullable=False),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("intent", sa.Text(), nullable=False),
        sa.Column("trigger_category", sa.String(32), nullable=False),
        sa.Column("failed_argv", JSON_TYPE, nullable=False),
        sa.Column("corrected_argv", JSON_TYPE, nullable=False),
        sa.Column("strategy", sa.String(64), nullable=False),
        sa.Column("source", sa.String(32), nullable=False),
        sa.Column("confidence", sa.Float(), nullable=False),
        sa.Column("rationale", sa.Text(), nullable=False),
        sa.Column(
            "fix_id", sa.Integer(), sa.ForeignKey("verified_fixes.id", ondelete="SET NULL"), nullable=True
        ),
        sa.Column("snippets", JSON_TYPE, nullable=False),
        sa.Column("research_calls", sa.Integer(), nullable=False, server_default=sa.text("0")),
        sa.Column("failed_at", TS, nullable=True),
        sa.Column("proposed_at", TS, nullable=False),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("settled_at", TS, nullable=True),
        sa.Column("reward", sa.Float(), nullable=True),
    )
    op.create_index("ix_correction_attempts_workflow_id", "correction_attempts", ["workflow_id"])
    op.create_index("ix_correction_attempts_outcome", "correction_attempts", ["outcome"])


def downgrade() -> None:
    op.drop_index("ix_correction_attempts_outcome", table_name="correction_attempts")
    op.drop_index("ix_correction_attempts_workflow_id", table_name="correction_attempts")
    op.drop_table("correction_attempts")
    op.drop_index("ix_verified_fixes_problem", table_name="verified_fixes")
    op.drop_index("ix_verified_fixes_signature", table_name="verified_fixes")
    op.drop_table("verified_fixes")
