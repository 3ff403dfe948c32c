"""Runbooks, their versions, executions, step runs and proposed corrections.

``runbooks`` (the design's table: metadata, trigger patterns, the current version's steps, running
statistics), ``runbook_versions`` (every version's document), ``runbook_executions`` (the design's
table: status, current step, completed and failed steps, outcome, rating, plus the run's values and
its lease), ``runbook_step_runs`` (each visit of each step with its output or error) and
``runbook_proposals`` (a corrected command offered as a new version).

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

JSON_TYPE = sa.JSON().with_variant(JSONB(), "postgresql")
TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "runbooks",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("organization_id", sa.Integer, nullable=False),
        sa.Column("created_by", sa.Integer, nullable=True),
        sa.Column("visibility", sa.String(16), nullable=False),
        sa.Column("allowed_teams", JSON_TYPE, nullable=False),
        sa.Column("access_grants", JSON_TYPE, nullable=False),
        sa.Column("knowledge_document_id", sa.Integer, sa.ForeignKey("documents.id", ondelete="SET NULL")),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("description", sa.Text, nullable=False),
        sa.Column("category", sa.String(100), nullable=True),
        sa.Column("tags", JSON_TYPE, nullable=False),
        sa.Column("trigger_patterns", JSON_TYPE, nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("version_label", sa.String(64), nullable=False),
        sa.Column("definition", JSON_TYPE, nullable=False),
        sa.Column("search_hash", sa.String(64), nullable=False),
        sa.Column("is_active", sa.Boolean, nullable=False),
        sa.Column("execution_count", sa.Integer, nullable=False),
        sa.Column("success_count", sa.Integer, nullable=False),
        sa.Column("total_duration_ms", sa.Integer, nullable=False),
        sa.Column("rating_sum", sa.Integer, nullable=False),
        sa.Column("rating_count", sa.Integer, nullable=False),
        sa.Column("effectiveness_score", sa.Float, nullable=True),
        sa.Column("last_executed_at", TS, nullable=True),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("updated_at", TS, nullable=False),
        sa.UniqueConstraint("organization_id", "name"),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_runbooks_category", "runbooks", ["organization_id", "category"])
    op.create_table(
        "runbook_versions",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("runbook_id", sa.Integer, sa.ForeignKey("runbooks.id", ondelete="CASCADE"), nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("version_label", sa.String(64), nullable=False),
        sa.Column("definition", JSON_TYPE, nullable=False),
        sa.Column("source_text", sa.Text, nullable=False),
        sa.Column("note", sa.Text, nullable=False),
        sa.Column("created_by", sa.Integer, nullable=True),
        sa.Column("created_at", TS, nullable=False),
        sa.UniqueConstraint("runbook_id", "version"),
    )
    op.create_index("ix_runbook_versions_runbook_id", "runbook_versions", ["runbook_id"])
    op.create_table(
        "runbook_executions",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("runbook_id", sa.Integer, sa.ForeignKey("runbooks.id", ondelete="CASCADE"), nullable=False),
        sa.Column("runbook_version", sa.Integer, nullable=False),
        sa.Column("organization_id", sa.Integer, nullable=False),
        sa.Column("user_id", sa.Integer, nullable=True),
        sa.Column("access_grants", JSON_TYPE, nullable=False),
        sa.Column("problem", sa.Text, nullable=False),
        sa.Column("execution_context", JSON_TYPE, nullable=False),
        sa.Column("mode", sa.String(8), nullable=False),
        sa.Column("agent_driven", sa.Boolean, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("current_step_number", sa.Integer, nullable=True),
        sa.Column("pending", JSON_TYPE, nullable=True),
        sa.Column("visits", JSON_TYPE, nullable=False),
        sa.Column("completed_steps", JSON_TYPE, nullable=False),
        sa.Column("failed_steps", JSON_TYPE, nullable=False),
        sa.Column("outcome", sa.String(32), nullable=True),
        sa.Column("resolution_notes", sa.Text, nullable=True),
        sa.Column("effectiveness_rating", sa.Integer, nullable=True),
        sa.Column("incident_id", sa.Integer, nullable=True),
        sa.Column("runner", sa.String(255), nullable=True),
        sa.Column("lease_until", TS, nullable=True),
        sa.Column("started_at", TS, nullable=False),
        sa.Column("updated_at", TS, nullable=False),
        sa.Column("completed_at", TS, nullable=True),
        sa.Column("duration_ms", sa.Integer, nullable=True),
    )
    op.create_index("ix_runbook_executions_runbook", "runbook_executions", ["runbook_id", "started_at"])
    op.create_index("ix_runbook_executions_status", "runbook_executions", ["status"])
    op.create_table(
        "runbook_step_runs",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column(
            "execution_id",
            sa.String(36),
            sa.ForeignKey("runbook_executions.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("runbook_id", sa.Integer, nullable=False),
        sa.Column("sequence", sa.Integer, nullable=False),
        sa.Column("step_number", sa.Integer, nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("action_type", sa.String(16), nullable=False),
        sa.Column("title", sa.String(500), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("rendered", sa.Text, nullable=False),
        sa.Column("output", sa.Text, nullable=True),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("error_context", JSON_TYPE, nullable=True),
        sa.Column("extracted", JSON_TYPE, nullable=False),
        sa.Column("workflow_id", sa.String(64), nullable=True),
        sa.Column("corrected_command", sa.Text, nullable=True),
        sa.Column("actor", sa.String(255), nullable=True),
        sa.Column("started_at", TS, nullable=False),
        sa.Column("finished_at", TS, nullable=True),
        sa.Column("duration_ms", sa.Integer, nullable=True),
        sa.UniqueConstraint("execution_id", "sequence"),
    )
    op.create_index("ix_runbook_step_runs_runbook_id", "runbook_step_runs", ["runbook_id"])
    op.create_table(
        "runbook_proposals",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("runbook_id", sa.Integer, sa.ForeignKey("runbooks.id", ondelete="CASCADE"), nullable=False),
        sa.Column("base_version", sa.Integer, nullable=False),
        sa.Column("step_number", sa.Integer, nullable=False),
        sa.Column("old_command", sa.Text, nullable=False),
        sa.Column("new_command", sa.Text, nullable=False),
        sa.Column("execution_id", sa.String(36), nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("decided_by", sa.Integer, nullable=True),
        sa.Column("decided_at", TS, nullable=True),
        sa.Column("created_at", TS, nullable=False),
    )
    op.create_index("ix_runbook_proposals_runbook_id", "runbook_proposals", ["runbook_id"])


def downgrade() -> None:
    for table in (
        "runbook_proposals",
        "runbook_step_runs",
        "runbook_executions",
        "runbook_versions",
        "runbooks",
    ):
        op.drop_table(table)
