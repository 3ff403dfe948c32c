"""Tables of runbooks (the design's ``runbooks``), their versions, executions (the design's
``runbook_executions``), each step of each execution, and proposed corrections.

A runbook belongs to an organisation and carries the grants of who may read it, like documents; its
text is also a knowledge document (``document_type: runbook``) so search finds it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Boolean, DateTime, Float, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from librarian.storage.models import Base, JSONType, utcnow


class RunbookRow(Base):
    """The current version of a runbook, its triggers and its running statistics."""

    __tablename__ = "runbooks"
    __table_args__ = (
        UniqueConstraint("organization_id", "name"),
        Index("ix_runbooks_category", "organization_id", "category"),
        # Ids are never reused, so (count, max id, max updated_at) tells the match index to reload.
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    organization_id: Mapped[int] = mapped_column(Integer)
    created_by: Mapped[int | None] = mapped_column(Integer)
    visibility: Mapped[str] = mapped_column(String(16), default="organization")
    allowed_teams: Mapped[list[int]] = mapped_column(JSONType, default=list)
    access_grants: Mapped[list[str]] = mapped_column(JSONType, default=list)
    knowledge_document_id: Mapped[int | None] = mapped_column(
        ForeignKey("documents.id", ondelete="SET NULL"), nullable=True
    )
    name: Mapped[str] = mapped_column(String(255))
    description: Mapped[str] = mapped_column(Text, default="")
    category: Mapped[str | None] = mapped_column(String(100))
    tags: Mapped[list[str]] = mapped_column(JSONType, default=list)
    trigger_patterns: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    # The current version's number (1, 2, ...) and the label the file gives (``version: 1.0``).
    version: Mapped[int] = mapped_column(Integer, default=1)
    version_label: Mapped[str] = mapped_column(String(64), default="")
    # The current version's validated document (name, variables, steps...), as the file gave it.
    definition: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    # SHA-256 of the text matched by meaning: its vector is in the embedding cache under this hash.
    search_hash: Mapped[str] = mapped_column(String(64))
    is_active: Mapped[bool] = mapped_column(Boolean, default=True)
    execution_count: Mapped[int] = mapped_column(Integer, default=0)
    success_count: Mapped[int] = mapped_column(Integer, default=0)
    total_duration_ms: Mapped[int] = mapped_column(Integer, default=0)
    rating_sum: Mapped[int] = mapped_column(Integer, default=0)
    rating_count: Mapped[int] = mapped_column(Integer, default=0)
    effectiveness_score: Mapped[float | None] = mapped_column(Float)
    last_executed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class RunbookVersion(Base):
    """One saved version of a runbook: every edit (and every accepted correction) adds one."""

    __tablename__ = "runbook_versions"
    __table_args__ = (UniqueConstraint("runbook_id", "version"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    runbook_id: Mapped[int] = mapped_column(ForeignKey("runbooks.id", ondelete="CASCADE"), index=True)
    version: Mapped[int] = mapped_column(Integer)
    version_label: Mapped[str] = mapped_column(String(64), default="")
    definition: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    source_text: Mapped[str] = mapped_column(Text, default="")
    note: Mapped[str] = mapped_column(Text, default="")
    created_by: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class RunbookExecution(Base):
    """One run of one version of a runbook: where it is, what it found, how it ended."""

    __tablename__ = "runbook_executions"
    __table_args__ = (Index("ix_runbook_executions_runbook", "runbook_id", "started_at"),)

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    runbook_id: Mapped[int] = mapped_column(ForeignKey("runbooks.id", ondelete="CASCADE"))
    runbook_version: Mapped[int] = mapped_column(Integer)
    organization_id: Mapped[int] = mapped_column(Integer)
    user_id: Mapped[int | None] = mapped_column(Integer)
    access_grants: Mapped[list[str]] = mapped_column(JSONType, default=list)
    problem: Mapped[str] = mapped_column(Text, default="")
    # The run's variables (defaults overridden by the caller's) and the values extracted so far.
    execution_context: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    # ``auto``: run until a step needs someone; ``step``: one step per call (an agent driving it).
    mode: Mapped[str] = mapped_column(String(8), default="auto")
    # Whether agent_prompt steps go to the caller even when an LLM is configured.
    agent_driven: Mapped[bool] = mapped_column(Boolean, default=False)
    status: Mapped[str] = mapped_column(String(16), index=True)
    current_step_number: Mapped[int | None] = mapped_column(Integer)
    # What a waiting run waits for: {kind, step, prompt, approvers, deadline}.
    pending: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    visits: Mapped[dict[str, int]] = mapped_column(JSONType, default=dict)
    completed_steps: Mapped[list[int]] = mapped_column(JSONType, default=list)
    failed_steps: Mapped[list[int]] = mapped_column(JSONType, default=list)
    outcome: Mapped[str | None] = mapped_column(String(32))
    resolution_notes: Mapped[str | None] = mapped_column(Text)
    effectiveness_rating: Mapped[int | None] = mapped_column(Integer)
    incident_id: Mapped[int | None] = mapped_column(Integer)
    # Which process drives the run, until when (a process that died lets another resume it).
    runner: Mapped[str | None] = mapped_column(String(255))
    lease_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    completed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    duration_ms: Mapped[int | None] = mapped_column(Integer)


class RunbookStepRun(Base):
    """One visit (and attempt) of one step in one execution, with its output or its error."""

    __tablename__ = "runbook_step_runs"
    __table_args__ = (UniqueConstraint("execution_id", "sequence"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    execution_id: Mapped[str] = mapped_column(ForeignKey("runbook_executions.id", ondelete="CASCADE"))
    runbook_id: Mapped[int] = mapped_column(Integer, index=True)
    sequence: Mapped[int] = mapped_column(Integer)
    step_number: Mapped[int] = mapped_column(Integer)
    attempt: Mapped[int] = mapped_column(Integer, default=1)
    action_type: Mapped[str] = mapped_column(String(16))
    title: Mapped[str] = mapped_column(String(500))
    # running, succeeded, failed, waiting (for a person or an agent), timed_out
    status: Mapped[str] = mapped_column(String(16))
    rendered: Mapped[str] = mapped_column(Text, default="")
    output: Mapped[str | None] = mapped_column(Text)
    error: Mapped[str | None] = mapped_column(Text)
    error_context: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    extracted: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    # The workflow that ran a bash step, and the command the self-correcting loop ran instead.
    workflow_id: Mapped[str | None] = mapped_column(String(64))
    corrected_command: Mapped[str | None] = mapped_column(Text)
    actor: Mapped[str | None] = mapped_column(String(255))
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    duration_ms: Mapped[int | None] = mapped_column(Integer)


class RunbookProposal(Base):
    """A new version proposed for a runbook (a step's command the loop corrected), for a person to accept."""

    __tablename__ = "runbook_proposals"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    runbook_id: Mapped[int] = mapped_column(ForeignKey("runbooks.id", ondelete="CASCADE"), index=True)
    base_version: Mapped[int] = mapped_column(Integer)
    step_number: Mapped[int] = mapped_column(Integer)
    old_command: Mapped[str] = mapped_column(Text)
    new_command: Mapped[str] = mapped_column(Text)
    execution_id: Mapped[str | None] = mapped_column(String(36))
    status: Mapped[str] = mapped_column(String(16), default="pending")  # pending, accepted, rejected
    decided_by: Mapped[int | None] = mapped_column(Integer)
    decided_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
