"""How a tool is shown in lists and search results: one summary, from a stored row or a row of the
columns the search index loads."""

from __future__ import annotations

from typing import Any, Protocol


class ToolSummaryFields(Protocol):
    """The columns a summary reads (an ORM ``ToolRow`` or a selected ``Row`` of them)."""

    id: int
    tool_key: str
    name: str
    tool_type: str
    description: str
    action_verbs: list[str]
    capabilities: list[str]
    category: str | None
    version: str | None
    status: str
    health: str


def tool_summary(row: ToolSummaryFields) -> dict[str, Any]:
    """A tool's short view (the design's names: ``toolId``, ``actionVerbs``...)."""
    return {
        "id": row.id,
        "toolId": row.tool_key,
        "name": row.name,
        "type": row.tool_type,
        "description": row.description,
        "actionVerbs": list(row.action_verbs or []),
        "capabilities": list(row.capabilities or []),
        "category": row.category,
        "version": row.version,
        "status": row.status,
        "health": row.health,
    }
