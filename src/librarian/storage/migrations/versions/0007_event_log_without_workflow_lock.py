"""PostgreSQL: the event log no longer checks its workflow through a foreign key.

Every ``task_events`` insert ran the foreign key's check, which takes a ``FOR KEY SHARE`` lock on the
workflow's row. The executors, the evaluator and the orchestrator all append events for the same
workflow at once, so PostgreSQL had to create a MultiXact for nearly every task. Measured with
``bench/runtime_overhead.py`` (1,500 independent tasks, 4 executors, two runs each): PostgreSQL's CPU
fell from 2.9-3.1 s to 2.3-2.5 s and MultiXact SLRU lookups from about 105,000 to 47,000.

The log is append-only and written only by the runtime, always in a transaction that created or
read the workflow, and workflows are never deleted by Librarian; the index on ``workflow_id`` stays.
On SQLite the constraint stays: it takes no row locks there, and dropping it would rebuild the table.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-22
"""

from __future__ import annotations

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

_CONSTRAINT = "task_events_workflow_id_fkey"  # PostgreSQL's default name for it (revision 0004)


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"ALTER TABLE task_events DROP CONSTRAINT IF EXISTS {_CONSTRAINT}")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.create_foreign_key(
            _CONSTRAINT, "task_events", "workflows", ["workflow_id"], ["workflow_id"], ondelete="CASCADE"
        )
