"""SQLAlchemy models of what the self-correcting loop remembers (tables made by migrations 0005, 0008).

- :class:`VerifiedFix`: a correction that succeeded and passed the evaluator, stored as a fix template
  (:mod:`~librarian.correction.fix_templates`) under the *problem signature* it solved: the tool, its
  version, the normalized error and the intent (the command's shape). Its success and failure counts
  change every time it is reused, and it keeps the research snippets it was derived from.
- :class:`CorrectionAttempt`: one correction the loop proposed for one failed task (a command line
  or a task's Python code), waiting for its verdict; a correction of a correction that met a new
  error links to it (``chain_parent_id``), so the whole chain is learned when its end succeeds.
  When the retried task (and what depends on it) succeeds, the attempt becomes a verified fix (or
  adds a success to the fix it reused); when it fails, the reused fix gets a failure.

Migration 0005 made both tables; 0008 added code corrections and chains. Both live in the runtime's
database, next to the tasks they refer to, so a crash between a retry and its verdict loses nothing:
the attempt is settled the next time anyone looks (:mod:`.fixes`).
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import DateTime, Float, ForeignKey, Index, Integer, String, Text, UniqueConstraint, Uuid
from sqlalchemy.orm import Mapped, mapped_column

from librarian.storage.models import Base, JSONType, utcnow

__all__ = ["ERROR_TEXT_CHARS", "CorrectionAttempt", "VerifiedFix"]

# How much of a failed run's output (its end, scrubbed) an attempt keeps as its error text.
ERROR_TEXT_CHARS = 4000


class VerifiedFix(Base):
    """A verified fix: the failed and fixed command templates of one problem signature."""

    __tablename__ = "verified_fixes"
    __table_args__ = (
        UniqueConstraint("signature", "template_key", name="uq_verified_fixes_signature_template"),
        Index("ix_verified_fixes_problem", "tool", "intent"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    signature: Mapped[str] = mapped_column(String(64), index=True)
    kind: Mapped[str] = mapped_column(String(16), default="command")
    tool: Mapped[str] = mapped_column(String(255))
    tool_version: Mapped[str | None] = mapped_column(String(255))
    normalized_error: Mapped[str] = mapped_column(Text)
    intent: Mapped[str] = mapped_column(Text)
    template_key: Mapped[str] = mapped_column(String(64))
    # A command fix: the failed and fixed argv templates. A code fix: ``[]`` and the edits.
    failed_template: Mapped[list[Any]] = mapped_column(JSONType)
    fixed_template: Mapped[list[Any]] = mapped_column(JSONType)
    strategy: Mapped[str] = mapped_column(String(64))
    rationale: Mapped[str] = mapped_column(Text, default="")
    snippets: Mapped[list[dict[str, Any]]] = mapped_column(JSONType, default=list)
    successes: Mapped[int] = mapped_column(Integer, default=0)
    failures: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    last_used_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    last_outcome: Mapped[str | None] = mapped_column(String(16))
    # A fix that turned out wrong is retired (migration 0015): never reused, still on record.
    retired_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    retired_by: Mapped[str | None] = mapped_column(String(255), nullable=True)
    retired_reason: Mapped[str | None] = mapped_column(Text, nullable=True)


class CorrectionAttempt(Base):
    """One correction proposed for one failed task, until its outcome is known."""

    __tablename__ = "correction_attempts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    workflow_id: Mapped[uuid.UUID] = mapped_column(
        Uuid(), ForeignKey("workflows.workflow_id", ondelete="CASCADE"), index=True
    )
    task_id: Mapped[uuid.UUID] = mapped_column(Uuid(), ForeignKey("tasks.task_id", ondelete="CASCADE"))
    task_key: Mapped[str] = mapped_column(String(255))
    kind: Mapped[str] = mapped_column(String(16), default="command")
    signature: Mapped[str] = mapped_column(String(64))
    tool: Mapped[str] = mapped_column(String(255))
    tool_version: Mapped[str | None] = mapped_column(String(255))
    normalized_error: Mapped[str] = mapped_column(Text)
    error_text: Mapped[str] = mapped_column(Text, default="")
    exit_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    intent: Mapped[str] = mapped_column(Text)
    trigger_category: Mapped[str] = mapped_column(String(32))
    failed_argv: Mapped[list[str]] = mapped_column(JSONType)
    corrected_argv: Mapped[list[str]] = mapped_column(JSONType)
    failed_code: Mapped[str | None] = mapped_column(Text, nullable=True)
    corrected_code: Mapped[str | None] = mapped_column(Text, nullable=True)
    edits: Mapped[list[dict[str, Any]] | None] = mapped_column(JSONType, nullable=True)
    # The attempt whose correction this one corrects further (a chain), and its depth in the chain.
    chain_parent_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    depth: Mapped[int] = mapped_column(Integer, default=0)
    # What this correction introduced that the tool then rejected (set when its retry fails so).
    blamed: Mapped[list[str] | None] = mapped_column(JSONType, nullable=True)
    strategy: Mapped[str] = mapped_column(String(64))
    source: Mapped[str] = mapped_column(String(32))
    confidence: Mapped[float] = mapped_column(Float)
    rationale: Mapped[str] = mapped_column(Text, default="")
    fix_id: Mapped[int | None] = mapped_column(
        Integer, ForeignKey("verified_fixes.id", ondelete="SET NULL"), nullable=True
    )
    snippets: Mapped[list[dict[str, Any]]] = mapped_column(JSONType, default=list)
    research_calls: Mapped[int] = mapped_column(Integer, default=0)
    failed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    proposed_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    outcome: Mapped[str] = mapped_column(String(16), default="proposed", index=True)
    settled_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    reward: Mapped[float | None] = mapped_column(Float)
