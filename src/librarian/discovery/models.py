"""Tables of the verb and tool registry (the design's ``verbs`` and ``tools`` collections), the
sources tools were imported from, and every recorded use of a tool.

Verbs and tools belong to an organisation and carry the grants of who may read them, like
documents. Their search text is embedded once and kept in the embedding cache under
``search_hash``; the discovery index reads the vectors from there.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Boolean, DateTime, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from librarian.storage.models import Base, JSONType, utcnow


class VerbRow(Base):
    """An action verb (``GET_WEATHER``): what it does, its inputs and outputs, how it decomposes."""

    __tablename__ = "verbs"
    __table_args__ = (UniqueConstraint("organization_id", "verb"), {"sqlite_autoincrement": True})

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    organization_id: Mapped[int] = mapped_column(Integer)
    created_by: Mapped[int | None] = mapped_column(Integer)
    visibility: Mapped[str] = mapped_column(String(16), default="organization")
    allowed_teams: Mapped[list[int]] = mapped_column(JSONType, default=list)
    access_grants: Mapped[list[str]] = mapped_column(JSONType, default=list)
    verb: Mapped[str] = mapped_column(String(128))
    description: Mapped[str] = mapped_column(Text, default="")
    capabilities: Mapped[list[str]] = mapped_column(JSONType, default=list)
    category: Mapped[str | None] = mapped_column(String(100))
    examples: Mapped[list[str]] = mapped_column(JSONType, default=list)
    input_definitions: Mapped[list[dict[str, Any]]] = mapped_column(JSONType, default=list)
    output_definitions: Mapped[list[dict[str, Any]]] = mapped_column(JSONType, default=list)
    # Verbs this one is carried out by, in order (a decomposition); checked for cycles on save.
    decomposition: Mapped[list[str]] = mapped_column(JSONType, default=list)
    # active | novel (created by a workflow, awaiting implementation) | inactive
    status: Mapped[str] = mapped_column(String(16), default="active")
    search_hash: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class ToolSourceRow(Base):
    """Where a set of tools was imported from (an MCP server, an OpenAPI document, a module...)."""

    __tablename__ = "tool_sources"
    __table_args__ = (UniqueConstraint("organization_id", "name"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    organization_id: Mapped[int] = mapped_column(Integer)
    created_by: Mapped[int | None] = mapped_column(Integer)
    name: Mapped[str] = mapped_column(String(128))
    # mcp | openapi | python | cli
    kind: Mapped[str] = mapped_column(String(16))
    # How to reach it again: {"command": [...]} or {"url": ...} for MCP, {"location": ...} for OpenAPI...
    spec: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    visibility: Mapped[str] = mapped_column(String(16), default="organization")
    allowed_teams: Mapped[list[int]] = mapped_column(JSONType, default=list)
    last_synced_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_error: Mapped[str | None] = mapped_column(Text)
    last_changes: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class ToolRow(Base):
    """A callable tool, where it came from, the verbs it serves, its review status and its health."""

    __tablename__ = "tools"
    __table_args__ = (
        UniqueConstraint("organization_id", "tool_key"),
        # Ids are never reused, so (count, max id, max updated_at) tells the index to reload.
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    organization_id: Mapped[int] = mapped_column(Integer)
    created_by: Mapped[int | None] = mapped_column(Integer)
    visibility: Mapped[str] = mapped_column(String(16), default="organization")
    allowed_teams: Mapped[list[int]] = mapped_column(JSONType, default=list)
    access_grants: Mapped[list[str]] = mapped_column(JSONType, default=list)
    # The design's ``toolId``: unique in an organisation (``time.get_current_time``).
    tool_key: Mapped[str] = mapped_column(String(255))
    name: Mapped[str] = mapped_column(String(255))
    # mcp | openapi | python | cli
    tool_type: Mapped[str] = mapped_column(String(16))
    description: Mapped[str] = mapped_column(Text, default="")
    action_verbs: Mapped[list[str]] = mapped_column(JSONType, default=list)
    capabilities: Mapped[list[str]] = mapped_column(JSONType, default=list)
    category: Mapped[str | None] = mapped_column(String(100))
    examples: Mapped[list[str]] = mapped_column(JSONType, default=list)
    input_schema: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    # How to call it: the MCP server and tool name, the OpenAPI base URL and operation, the module...
    binding: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    source_id: Mapped[int | None] = mapped_column(ForeignKey("tool_sources.id", ondelete="SET NULL"))
    version: Mapped[str | None] = mapped_column(String(64))
    # SHA-256 of the manifest as imported: a sync changes the tool only when this changes.
    content_hash: Mapped[str] = mapped_column(String(64))
    # Questions derived offline (and by the LLM when configured) from the description and parameters.
    enrichment: Mapped[list[str]] = mapped_column(JSONType, default=list)
    search_hash: Mapped[str] = mapped_column(String(64))
    # active | quarantined (imported, awaiting review) | inactive (deactivated by hand)
    status: Mapped[str] = mapped_column(String(16), default="active")
    # For a tool that runs a program on the server: the SHA-256 of the type and binding its
    # operator approved. Only that binding may be (re)activated by anyone else.
    approved_hash: Mapped[str | None] = mapped_column(String(64))
    # healthy | failing (recent failures) | open (the circuit breaker took it out of use)
    health: Mapped[str] = mapped_column(String(16), default="healthy")
    consecutive_failures: Mapped[int] = mapped_column(Integer, default=0)
    success_count: Mapped[int] = mapped_column(Integer, default=0)
    failure_count: Mapped[int] = mapped_column(Integer, default=0)
    last_error: Mapped[str | None] = mapped_column(Text)
    last_called_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    circuit_opened_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class ToolUse(Base):
    """One use of a tool: a call's outcome, and the request it answered (what discovery learns from)."""

    __tablename__ = "tool_uses"
    __table_args__ = (
        Index("ix_tool_uses_tool", "tool_id", "created_at"),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    tool_id: Mapped[int] = mapped_column(ForeignKey("tools.id", ondelete="CASCADE"))
    organization_id: Mapped[int] = mapped_column(Integer, index=True)
    user_id: Mapped[int | None] = mapped_column(Integer)
    # call | selection (an agent chose it for a request) | probe (the circuit breaker's test call)
    kind: Mapped[str] = mapped_column(String(16))
    request: Mapped[str | None] = mapped_column(Text)
    # SHA-256 of the request: its vector is in the embedding cache under this hash.
    request_hash: Mapped[str | None] = mapped_column(String(64))
    succeeded: Mapped[bool] = mapped_column(Boolean)
    duration_ms: Mapped[int | None] = mapped_column(Integer)
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
