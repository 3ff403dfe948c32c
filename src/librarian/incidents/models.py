"""Tables of incidents (the design's ``incident_knowledge``), similarity verdicts, solutions and their
outcomes. Every row carries its organisation and the grants of who may read it, like documents."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Boolean, DateTime, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from librarian.storage.models import Base, JSONType, utcnow


class Incident(Base):
    """One past incident with its problem signature, what fixed it, and whether that held."""

    __tablename__ = "incident_knowledge"
    __table_args__ = (
        Index("ix_incident_knowledge_org", "organization_id", "severity"),
        # Ids are never reused, so the recent ids tell the similarity index when to reload.
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
    workflow_id: Mapped[str | None] = mapped_column(String(64), index=True)
    title: Mapped[str] = mapped_column(String(500))
    description: Mapped[str] = mapped_column(Text, default="")
    incident_type: Mapped[str | None] = mapped_column(String(100))
    severity: Mapped[str | None] = mapped_column(String(16))
    # The problem signature as given (symptoms, error_messages, affected_services, infrastructure).
    problem_signature: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    # Normal forms used for matching: symptom terms, normalised errors, lower-case services.
    normalized: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    # SHA-256 of the embedded problem text: its vector is in the embedding cache under this hash.
    problem_hash: Mapped[str] = mapped_column(String(64))
    root_cause: Mapped[str | None] = mapped_column(Text)
    solution_applied: Mapped[str | None] = mapped_column(Text)
    resolution_steps: Mapped[list[Any]] = mapped_column(JSONType, default=list)
    tags: Mapped[list[str]] = mapped_column(JSONType, default=list)
    related_incidents: Mapped[list[int]] = mapped_column(JSONType, default=list)
    resolution_time_minutes: Mapped[int | None] = mapped_column(Integer)
    was_successful: Mapped[bool | None] = mapped_column(Boolean)
    recurred: Mapped[bool] = mapped_column(Boolean, default=False)
    occurred_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # Where it came from: a file and line of an import, a workflow, or by hand.
    origin: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class SimilarityVerdict(Base):
    """A user's verdict that two incidents are (or are not) similar, with the features they shared."""

    __tablename__ = "incident_similarity_feedback"
    __table_args__ = (UniqueConstraint("incident_id", "other_id", "user_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    incident_id: Mapped[int] = mapped_column(
        ForeignKey("incident_knowledge.id", ondelete="CASCADE"), index=True
    )
    other_id: Mapped[int] = mapped_column(ForeignKey("incident_knowledge.id", ondelete="CASCADE"))
    organization_id: Mapped[int] = mapped_column(Integer, index=True)
    user_id: Mapped[int] = mapped_column(Integer)
    similar: Mapped[bool] = mapped_column(Boolean)
    # Which features matched when the pair was shown ("service:checkout", "symptom:oomkilled"...).
    features: Mapped[list[str]] = mapped_column(JSONType, default=list)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Solution(Base):
    """A solution linked to a problem signature, with how often it worked."""

    __tablename__ = "solutions"
    __table_args__ = (Index("ix_solutions_signature", "organization_id", "signature_key"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    organization_id: Mapped[int] = mapped_column(Integer)
    created_by: Mapped[int | None] = mapped_column(Integer)
    visibility: Mapped[str] = mapped_column(String(16), default="organization")
    allowed_teams: Mapped[list[int]] = mapped_column(JSONType, default=list)
    access_grants: Mapped[list[str]] = mapped_column(JSONType, default=list)
    # SHA-256 of the normalised signature: exact lookups; similar signatures match by their terms.
    signature_key: Mapped[str] = mapped_column(String(64))
    problem_signature: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    normalized: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    title: Mapped[str] = mapped_column(String(500))
    solution: Mapped[str] = mapped_column(Text)
    knowledge_document_id: Mapped[int | None] = mapped_column(
        ForeignKey("documents.id", ondelete="SET NULL"), nullable=True
    )
    successes: Mapped[int] = mapped_column(Integer, default=0)
    failures: Mapped[int] = mapped_column(Integer, default=0)
    uses: Mapped[int] = mapped_column(Integer, default=0)
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class SolutionOutcome(Base):
    """One use of a solution and whether it worked (optionally for one incident)."""

    __tablename__ = "solution_outcomes"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    solution_id: Mapped[int] = mapped_column(ForeignKey("solutions.id", ondelete="CASCADE"), index=True)
    incident_id: Mapped[int | None] = mapped_column(
        ForeignKey("incident_knowledge.id", ondelete="SET NULL"), nullable=True
    )
    user_id: Mapped[int | None] = mapped_column(Integer)
    worked: Mapped[bool] = mapped_column(Boolean)
    note: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
