"""The durable task runtime: workflows, tasks (a DAG), the per-task event log and strategy statistics.

On PostgreSQL ids are ``uuid``, ``tasks.dependencies`` is ``uuid[]`` and ``feedback_notes`` is
``jsonb``; on SQLite the same columns are a 32-character uuid text and JSON text. ``task_events`` is
append-only: every status change and every inserted task has a row saying who did it and why.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import ARRAY, JSONB

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

JSON_TYPE = sa.JSON().with_variant(JSONB(), "postgresql")
UUID_ARRAY = sa.JSON().with_variant(ARRAY(sa.Uuid()), "postgresql")
TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "workflows",
        sa.Column("workflow_id", sa.Uuid(), primary_key=True),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("user_prompt", sa.Text(), nullable=False),
        sa.Column("creation_timestamp", TS, nullable=False),
        sa.Column("last_update_timestamp", TS, nullable=False),
        sa.Column("final_status", sa.String(16), nullable=False),
        sa.Column("total_reward", sa.Float(), nullable=False, server_default=sa.text("0")),
        sa.Column("spec", JSON_TYPE, nullable=False),
        sa.Column("failure_report", JSON_TYPE, nullable=True),
        sa.Column("finished_at", TS, nullable=True),
    )
    op.create_index("ix_workflows_final_status", "workflows", ["final_status"])
    op.create_table(
        "tasks",
        sa.Column("task_id", sa.Uuid(), primary_key=True),
        sa.Column(
            "workflow_id",
            sa.Uuid(),
            sa.ForeignKey("workflows.workflow_id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("parent_id", sa.Uuid(), sa.ForeignKey("tasks.task_id", ondelete="CASCADE"), nullable=True),
        sa.Column("task_order", sa.Integer(), nullable=False),
        sa.Column("task_key", sa.String(255), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("dependencies", UUID_ARRAY, nullable=False),
        sa.Column("executor_type", sa.String(64), nullable=False),
        sa.Column("reward", sa.Float(), nullable=True),
        sa.Column("feedback_notes", JSON_TYPE, nullable=True),
        sa.Column("retries", sa.Integer(), nullable=False, server_default=sa.text("0")),
        sa.Column("creation_timestamp", TS, nullable=False),
        sa.Column("last_update_timestamp", TS, nullable=False),
        sa.Column("payload", JSON_TYPE, nullable=False),
        sa.Column("idempotency_key", sa.String(80), nullable=True),
        sa.Column("lease_owner", sa.String(255), nullable=True),
        sa.Column("lease_expires_at", TS, nullable=True),
        sa.Column("attempt", sa.Integer(), nullable=False, server_default=sa.text("0")),
        sa.Column("rationale", sa.Text(), nullable=True),
        sa.Column("correction_strategy", sa.String(128), nullable=True),
        sa.Column("error_category", sa.String(128), nullable=True),
        sa.UniqueConstraint("workflow_id", "task_key", name="uq_tasks_workflow_key"),
    )
    op.create_index("ix_tasks_status", "tasks", ["status"])
    op.create_index("ix_tasks_workflow_id", "tasks", ["workflow_id"])
    op.create_index("ix_tasks_parent_id", "tasks", ["parent_id"])
    op.create_table(
        "task_events",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("task_id", sa.Uuid(), nullable=True),
        sa.Column(
            "workflow_id",
            sa.Uuid(),
            sa.ForeignKey("workflows.workflow_id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("at", TS, nullable=False),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("from_status", sa.String(16), nullable=True),
        sa.Column("to_status", sa.String(16), nullable=True),
        sa.Column("actor", sa.String(255), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("data", JSON_TYPE, nullable=False),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_task_events_task_id", "task_events", ["task_id"])
    op.create_index("ix_task_events_workflow_id", "task_events", ["workflow_id"])
    op.create_table(
        "strategy_stats",
        sa.Column("error_category", sa.String(128), primary_key=True),
        sa.Column("strategy", sa.String(128), primary_key=True),
        sa.Column("trials", sa.Integer(), nullable=False, server_default=sa.text("0")),
        sa.Column("total_reward", sa.Float(), nullable=False, server_default=sa.text("0")),
        sa.Column("last_update_timestamp", TS, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("strategy_stats")
    op.drop_index("ix_task_events_workflow_id", table_name="task_events")
    op.drop_index("ix_task_events_task_id", table_name="task_events")
    op.drop_table("task_events")
    op.drop_index("ix_tasks_parent_id", table_name="tasks")
    op.drop_index("ix_tasks_workflow_id", table_name="tasks")
    op.drop_index("ix_tasks_status", table_name="tasks")
    op.drop_table("tasks")
    op.drop_index("ix_workflows_final_status", table_name="workflows")
    op.drop_table("workflows")
