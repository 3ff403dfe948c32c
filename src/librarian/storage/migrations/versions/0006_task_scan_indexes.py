"""Indexes that keep the runtime's hot queries from reading every task in flight.

Measured on PostgreSQL with 1,000 independent tasks in flight (``bench/runtime_overhead.py``): about
3,000 index entries were read per task run, because

- the expired-lease query could only use ``ix_tasks_status`` (every dispatched task matches);
- "has this workflow a task that has not succeeded?" walked ``ix_tasks_workflow_id`` in heap order;
- on a tasks table not yet analysed (a new database, a first large workflow) the planner costed
  ``ix_tasks_status`` like the primary key, and the executor's claim and the evaluator's update --
  both by ``task_id`` -- scanned every dispatched task to find one.

``ix_tasks_lease_expires_at`` makes the first a range scan over the expired leases only (``NULL``
for tasks at rest). ``ix_tasks_workflow_status`` (workflow_id, status) replaces the plain
``ix_tasks_workflow_id``: it serves every lookup by workflow, and because each status other than
``success`` sorts before it, the first entry of a workflow that is not finished answers the second.
``ix_tasks_status`` becomes partial: it holds only the statuses searched across all workflows
(``pending``, ``paused``: ready to dispatch; ``failed``: awaiting correction), so it can no longer
stand in for the primary key, and a task moving between the in-flight statuses and ``success``
leaves it untouched.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


# The statuses the partial ``ix_tasks_status`` holds (the same as in ``librarian.runtime.models``).
_SEARCHED = sa.text("status IN ('pending', 'paused', 'failed')")


def upgrade() -> None:
    op.create_index("ix_tasks_lease_expires_at", "tasks", ["lease_expires_at"])
    op.create_index("ix_tasks_workflow_status", "tasks", ["workflow_id", "status"])
    op.drop_index("ix_tasks_workflow_id", table_name="tasks")
    op.drop_index("ix_tasks_status", table_name="tasks")
    op.create_index(
        "ix_tasks_status", "tasks", ["status"], postgresql_where=_SEARCHED, sqlite_where=_SEARCHED
    )


def downgrade() -> None:
    op.drop_index("ix_tasks_status", table_name="tasks")
    op.create_index("ix_tasks_status", "tasks", ["status"])
    op.create_index("ix_tasks_workflow_id", "tasks", ["workflow_id"])
    op.drop_index("ix_tasks_workflow_status", table_name="tasks")
    op.drop_index("ix_tasks_lease_expires_at", table_name="tasks")
