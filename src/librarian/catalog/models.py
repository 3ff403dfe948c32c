"""The stored ingest jobs (``ingest_jobs``): what was asked, where it stands, and how it ended.

Jobs are rows, not threads' memory, so a restarted server still knows them. A running job beats a
heartbeat; one whose heartbeat stopped (its process died) reads as ``interrupted`` and can be resumed,
which runs the same request again (ingests are incremental, so it goes on where it stopped).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Boolean, DateTime, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from librarian.storage.models import Base, JSONType, utcnow


class IngestJob(Base):
    """One background ingest or refresh."""

    __tablename__ = "ingest_jobs"
    __table_args__ = (Index("ix_ingest_jobs_organization", "organization_id", "seq"),)

    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    # The public id: random, so ids reveal nothing about other organisations' jobs.
    id: Mapped[str] = mapped_column(String(32), unique=True)
    kind: Mapped[str] = mapped_column(String(16))
    status: Mapped[str] = mapped_column(String(16))
    organization_id: Mapped[int] = mapped_column(Integer)
    created_by: Mapped[int | None] = mapped_column(Integer)
    # What to run: the source and its options, and the address policy it was accepted under.
    request: Mapped[dict[str, Any]] = mapped_column(JSONType)
    progress: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    result: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    error: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    resumed_from: Mapped[str | None] = mapped_column(String(32))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    heartbeat_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
