"""SQLAlchemy models of the runtime (tables made by migration 0004).

A workflow is a DAG of tasks. ``tasks.dependencies`` lists the ids a task waits for; corrective tasks
inserted by DAG surgery point at the task they repair through ``parent_id``. Every status change
writes a :class:`TaskEvent`, so the log explains why each task exists and how it got where it is.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, cast

from sqlalchemy import (
    JSON,
    DateTime,
    Dialect,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Table,
    Text,
    TypeDecorator,
    UniqueConstraint,
    Uuid,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Mapped, mapped_column
from sqlalchemy.types import TypeEngine

from librarian.storage.models import Base, JSONType, utcnow


class UuidList(TypeDecorator[list[uuid.UUID]]):
    """A list of uuids: ``uuid[]`` on PostgreSQL, a JSON array of hex strings elsewhere."""

    impl = JSON
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "postgresql":
            return dialect.type_descriptor(ARRAY(Uuid()))
        return dialect.type_descriptor(JSON())

    def process_bind_param(self, value: list[uuid.UUID] | None, dialect: Dialect) -> Any:
        if value is None:
            return None
        if dialect.name == "postgresql":
            return [uuid.UUID(str(item)) for item in value]
        return [uuid.UUID(str(item)).hex for item in value]

    def process_result_value(self, value: Any, dialect: Dialect) -> list[uuid.UUID] | None:
        if value is None:
            return None
        return [item if isinstance(item, uuid.UUID) else uuid.UUID(str(item)) for item in value]


class Workflow(Base):
    """One submitted workflow; ``final_status`` is ``running`` until it ends."""

    __tablename__ = "workflows"
    __table_args__ = (Index("ix_workflows_owner", "organization_id", "creation_timestamp", "workflow_id"),)

    workflow_id: Mapped[uuid.UUID] = mapped_column(Uuid(), primary_key=True, default=uuid.uuid4)
    name: Mapped[str] = mapped_column(String(255))
    user_prompt: Mapped[str] = mapped_column(Text)
    creation_timestamp: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    last_update_timestamp: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    final_status: Mapped[str] = mapped_column(String(16), index=True)
    total_reward: Mapped[float] = mapped_column(Float, default=0.0)
    # The submitted document, kept for the record: deferred, so loading a workflow (every status poll)
    # never decodes a spec of thousands of tasks.
    spec: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict, deferred=True)
    # Why the workflow failed (which task, which limit, what the correctors said), for the report.
    failure_report: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # The idempotency key the client submitted it with, if any (migration 0009).
    submission_key: Mapped[str | None] = mapped_column(String(255), unique=True, index=True)
    # Who submitted it (migration 0015): the organisation and user, so REST and MCP show a caller
    # only its own workflows (its organisation's, to an administrator). ``created_by`` is ``None``
    # for the machine's operator (the CLI on the data directory).
    organization_id: Mapped[int] = mapped_column(Integer, default=1, server_default="1")
    created_by: Mapped[int | None] = mapped_column(Integer, nullable=True)


# The statuses looked for across all workflows (ready to dispatch, awaiting correction): the only ones
# the partial index on status holds (migration 0006).
_SEARCHED_STATUSES = "status IN ('pending', 'paused', 'failed')"


class Task(Base):
    """One node of a workflow's DAG, original or inserted by surgery."""

    __tablename__ = "tasks"
    __table_args__ = (
        UniqueConstraint("workflow_id", "task_key", name="uq_tasks_workflow_key"),
        # Serves every lookup by workflow; "a task of this workflow not yet successful" reads one
        # entry, since every other status sorts before "success" (migration 0006).
        Index("ix_tasks_workflow_status", "workflow_id", "status"),
        # Partial: only the statuses searched across workflows. A full index on status looked as cheap
        # as the primary key to a planner without statistics, and lookups by task_id scanned it.
        Index(
            "ix_tasks_status",
            "status",
            postgresql_where=text(_SEARCHED_STATUSES),
            sqlite_where=text(_SEARCHED_STATUSES),
        ),
    )

    task_id: Mapped[uuid.UUID] = mapped_column(Uuid(), primary_key=True, default=uuid.uuid4)
    workflow_id: Mapped[uuid.UUID] = mapped_column(
        Uuid(), ForeignKey("workflows.workflow_id", ondelete="CASCADE")
    )
    parent_id: Mapped[uuid.UUID | None] = mapped_column(
        Uuid(), ForeignKey("tasks.task_id", ondelete="CASCADE"), index=True
    )
    task_order: Mapped[int] = mapped_column(Integer)
    # The name the workflow file gave the task (or ``<failed key>.fix<n>.<step>`` for corrective ones).
    task_key: Mapped[str] = mapped_column(String(255))
    description: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(16))
    dependencies: Mapped[list[uuid.UUID]] = mapped_column(UuidList(), default=list)
    executor_type: Mapped[str] = mapped_column(String(64))
    reward: Mapped[float | None] = mapped_column(Float)
    feedback_notes: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    retries: Mapped[int] = mapped_column(Integer, default=0)
    creation_timestamp: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    last_update_timestamp: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    payload: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    # ``<task_id>:<attempt>`` of the current dispatch; a result carrying another key is stale.
    idempotency_key: Mapped[str | None] = mapped_column(String(80))
    lease_owner: Mapped[str | None] = mapped_column(String(255))
    # Indexed so the orchestrator's expired-lease check reads only the expired ones.
    lease_expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), index=True)
    attempt: Mapped[int] = mapped_column(Integer, default=0)
    rationale: Mapped[str | None] = mapped_column(Text)
    # Set by surgery on the repaired task: the strategy whose reward its next outcome decides.
    correction_strategy: Mapped[str | None] = mapped_column(String(128))
    error_category: Mapped[str | None] = mapped_column(String(128))


class TaskEvent(Base):
    """One entry of the append-only event log (``task_id`` is null for workflow-level events)."""

    __tablename__ = "task_events"
    __table_args__ = ({"sqlite_autoincrement": True},)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    task_id: Mapped[uuid.UUID | None] = mapped_column(Uuid(), index=True)
    # No foreign key on PostgreSQL (migration 0007): its check locked the workflow's row for every
    # event, and concurrent writers turned those locks into MultiXacts.
    workflow_id: Mapped[uuid.UUID] = mapped_column(Uuid(), index=True)
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    kind: Mapped[str] = mapped_column(String(64))
    from_status: Mapped[str | None] = mapped_column(String(16))
    to_status: Mapped[str | None] = mapped_column(String(16))
    actor: Mapped[str] = mapped_column(String(255))
    reason: Mapped[str] = mapped_column(Text)
    data: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)


class StrategyStat(Base):
    """Aggregated reward of one correction strategy on one error category (the policy's memory)."""

    __tablename__ = "strategy_stats"

    error_category: Mapped[str] = mapped_column(String(128), primary_key=True)
    strategy: Mapped[str] = mapped_column(String(128), primary_key=True)
    trials: Mapped[int] = mapped_column(Integer, default=0)
    total_reward: Mapped[float] = mapped_column(Float, default=0.0)
    last_update_timestamp: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


# The Core tables of the models, for statements built once at import (the hot path: attempts.py and
# attempt_results.py), which Core runs without the ORM's per-call cost.
TASKS = cast(Table, Task.__table__)
WORKFLOWS = cast(Table, Workflow.__table__)
TASK_EVENTS = cast(Table, TaskEvent.__table__)
