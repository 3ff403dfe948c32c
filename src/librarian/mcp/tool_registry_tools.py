"""MCP tools of the verb and tool registry (``lib.discovery``): ``discover_tools`` and ``call_tool``,
with which an agent finds and calls any tool the organisation registered (MCP servers, OpenAPI
operations, Python functions, CLI commands) through one server, and ``discover_verbs``,
``register_tool``, ``register_verb``, ``set_tool_status`` and ``delete_tool``. Listing, reading and
administering the registry (tool sources, verbs, stats, reported uses) is in
:mod:`librarian.mcp.tool_admin_tools`.

The tools are plain functions, which the MCP SDK runs on a worker thread, so a call that waits on
another process does not block the server.
"""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ToolAnnotations

from librarian.app import Librarian
from librarian.discovery.ranking import ToolFilters
from librarian.mcp.caller import tool_caller
from librarian.mcp.errors import tool_errors
from librarian.mcp.metadata import DELETES, READ_ONLY, WRITES_IDEMPOTENT

# What discover_tools shows of each tool: enough to choose one and call it, nothing more.
DISCOVERED_FIELDS = ("toolId", "name", "type", "description", "inputSchema", "score", "confidence", "why")
# A registered tool may do anything, anywhere.
CALLS_OUT = ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=True)
# Registering again replaces the entry: the same call twice leaves one.
REGISTERS = CHANGES = WRITES_IDEMPOTENT


def register_tool_registry_tools(server: MCPServer[Any], lib: Librarian) -> None:
    """Add the tool registry's tools to ``server``."""
    discovery = lib.discovery

    @server.tool(annotations=READ_ONLY)
    def discover_tools(
        query: str,
        top_k: int = 5,
        type: str | None = None,
        category: str | None = None,
        capability: str | None = None,
        status: str | None = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Find the registered tools that can do what you need; then run one with call_tool.

        Use this when no tool you already have fits the task: the organisation's tools (MCP
        servers, REST API operations, Python functions, CLI commands) are all reachable through
        this server. Describe the task in plain words, the way you would ask a colleague.

        Args:
            query: what the tool should do, e.g. "current weather for a city".
            top_k: how many tools (1-50, default 5).
            type: only tools of this type: mcp, openapi, python or cli.
            category: only tools of this category.
            capability: only tools with this capability label.
            status: administrators reviewing tools: search those in this status instead of the
                active ones, quarantined (imports waiting for review) or inactive.

        Returns:
            `tools`, best first, each with `toolId` (pass it to call_tool), name, type,
            description, `inputSchema` (the JSON Schema the `arguments` of call_tool must follow),
            `score`, `confidence` (0-1; below 0.5 the tool may not do what you asked) and `why` it
            matched. An empty list means no registered tool fits.
        """
        with tool_errors():
            principal = tool_caller(lib, ctx)
            filters = ToolFilters(
                tool_type=type,
                category=category,
                capability=capability,
                statuses=(status,) if status else ("active",),
            )
            found = discovery.search_tools(query, principal=principal, top_k=top_k, filters=filters)
            tools = [{field: hit[field] for field in DISCOVERED_FIELDS} for hit in found["results"]]
            return {"query": found["query"], "tools": tools}

    @server.tool(annotations=CALLS_OUT)
    def call_tool(
        tool_id: str,
        arguments: dict[str, Any] | None = None,
        request: str | None = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Call a registered tool by its toolId (from discover_tools) and get what it answered.

        The arguments are checked against the tool's inputSchema first: a missing or wrong
        argument is refused with a message naming it, and nothing runs. A tool that fails answers
        with an error saying what went wrong; a tool that is under review (quarantined),
        deactivated or out of use after repeated failures is refused: choose another with
        discover_tools.

        Args:
            tool_id: the tool's `toolId`, exactly as discover_tools returned it.
            arguments: the arguments as an object following the tool's `inputSchema`, e.g.
                {"city": "Paris"}.
            request: what you wanted the tool for, in plain words; a successful call makes
                discover_tools rank this tool higher for similar requests.

        Returns:
            `content`: what the tool answered (structured data when it gives some, else text),
            `text`: the answer as text, and `is_error`.
        """
        with tool_errors():
            result = discovery.call(
                tool_id, arguments or {}, principal=tool_caller(lib, ctx), request=request
            )
            return {
                "tool": tool_id,
                "content": result.content,
                "is_error": result.is_error,
                "text": result.text,
            }

    @server.tool(annotations=READ_ONLY)
    def discover_verbs(description: str, top_k: int = 5, ctx: Context | None = None) -> dict[str, Any]:
        """Find the registered verbs (named capabilities) and tools for a capability.

        Use this when planning: before inventing a new action verb, check whether one exists.

        Args:
            description: the capability in plain words, or a verb such as GET_WEATHER.
            top_k: how many verbs and how many tools (1-50, default 5).

        Returns:
            `verbs` (each with verb, description, inputDefinitions, outputDefinitions,
            decomposition, `score`, `confidence` 0-1 and `why`), `tools` (as discover_tools lists
            them, without inputSchema) and `best`: the single best match, with `kind` verb or tool,
            or null when nothing is registered.
        """
        with tool_errors():
            return discovery.discover_verbs(description, principal=tool_caller(lib, ctx), top_k=top_k)

    @server.tool(annotations=REGISTERS)
    def register_tool(
        manifest: dict[str, Any],
        visibility: str | None = None,
        allowed_teams: list[str] | None = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Register a tool (or update the one with the same toolId) so discover_tools finds it.

        A manifest that breaks the format is refused with every field at fault named: fix them and
        call again.

        Args:
            manifest: the tool: `name` and `type` (mcp, openapi, python or cli) are required;
                `toolId` (default: the name), `description`, `actionVerbs` (e.g. ["GET_WEATHER"]),
                `capabilities`, `category`, `examples` (requests it serves), `inputSchema` (a JSON
                Schema of its arguments) and `binding` (how to call it, e.g. python
                {"module": ..., "function": ...}).
            visibility: private, teams, organization (default) or public (administrators only).
            allowed_teams: team names or ids, with visibility teams.

        Returns:
            The stored tool and `change`: created, updated or unchanged.
        """
        with tool_errors():
            principal = tool_caller(lib, ctx)
            teams = (
                lib.identity.team_ids_of(principal.organization_id, allowed_teams) if allowed_teams else ()
            )
            return discovery.register_tool(
                manifest, principal=principal, visibility=visibility, allowed_teams=teams
            )

    @server.tool(annotations=REGISTERS)
    def register_verb(
        manifest: dict[str, Any],
        visibility: str | None = None,
        allowed_teams: list[str] | None = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Register a verb (a named capability, e.g. GET_WEATHER), or update the one of that name.

        Args:
            manifest: the verb: `verb` and `description` are required; `capabilities`,
                `category`, `examples`, `inputDefinitions` and `outputDefinitions` (lists of
                objects with a `name`) and `decomposition` (existing verbs that carry it out).
            visibility: private, teams, organization (default) or public (administrators only).
            allowed_teams: team names or ids, with visibility teams.

        Returns:
            The stored verb and `change`: created or updated.
        """
        with tool_errors():
            principal = tool_caller(lib, ctx)
            teams = (
                lib.identity.team_ids_of(principal.organization_id, allowed_teams) if allowed_teams else ()
            )
            return discovery.register_verb(
                manifest, principal=principal, visibility=visibility, allowed_teams=teams
            )

    @server.tool(annotations=CHANGES)
    def set_tool_status(tool_id: str, status: str, ctx: Context | None = None) -> dict[str, Any]:
        """Approve, deactivate or reactivate a registered tool.

        Args:
            tool_id: the tool's toolId.
            status: active (approve a quarantined tool: administrators only; or reactivate),
                inactive (discover_tools and call_tool ignore it) or quarantined (back to review).

        Returns:
            The tool as stored, with its new status.
        """
        with tool_errors():
            return discovery.set_status(tool_id, status, principal=tool_caller(lib, ctx))

    @server.tool(annotations=DELETES)
    def delete_tool(tool_id: str, ctx: Context | None = None) -> dict[str, Any]:
        """Delete a registered tool and what was learned from its use (its author or an administrator).

        Args:
            tool_id: the tool's toolId.

        Returns:
            The deleted tool's short view.
        """
        with tool_errors():
            return discovery.delete_tool(tool_id, principal=tool_caller(lib, ctx))
