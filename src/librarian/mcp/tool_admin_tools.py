"""MCP tools that read and administer the verb and tool registry (``lib.discovery``), as the CLI's
``tools``/``verbs`` commands and the REST routes under ``/tools``, ``/verbs`` and ``/tool-sources`` do:
``import_tool_source``, ``list_tool_sources``, ``sync_tool_source``, ``delete_tool_source``,
``list_verbs``, ``get_verb``, ``delete_verb``, ``list_tools``, ``get_tool``, ``get_tool_stats`` and
``record_tool_use``.

Every tool acts for the MCP caller and leaves each decision to the service: who may import, sync or
delete a source (its owner or an administrator; a source that runs a program on the server, the
server's operator only), whether imported tools wait quarantined, what another organisation sees.
Names differ from the documentation catalog's ``list_sources`` and ``delete_source``: a tool source is
an MCP server, OpenAPI document, Python module or indexed CLI, not documentation.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ToolAnnotations
from pydantic import Field

from librarian.app import Librarian
from librarian.mcp.caller import tool_caller
from librarian.mcp.errors import tool_errors
from librarian.mcp.metadata import DELETES, READ_ONLY, WRITES

# Listing a source reaches its MCP server or OpenAPI document; a tool it no longer lists is removed.
SYNCS = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=True
)
# Lists are read a page at a time; a page of summaries stays agent-sized.
Limit = Annotated[int, Field(ge=1, le=200)]
Cursor = Annotated[int, Field(ge=0)]
# A sync report names each tool; an OpenAPI document can hold thousands of operations.
MAX_NAMED = 50
CHANGES = ("added", "changed", "removed", "unchanged", "errors")


def _report(report: dict[str, Any]) -> dict[str, Any]:
    """A sync report with at most :data:`MAX_NAMED` names per list and ``counts`` of each list."""
    counts = {key: len(report.get(key) or []) for key in CHANGES}
    brief = {**report, **{key: list(report.get(key) or [])[:MAX_NAMED] for key in CHANGES}}
    return {**brief, "counts": counts, "truncated": any(count > MAX_NAMED for count in counts.values())}


def _page(key: str, rows: list[dict[str, Any]], limit: int) -> dict[str, Any]:
    """A page of ``rows`` with ``next``: the cursor of the next page, null on the last one."""
    return {key: rows, "next": rows[-1]["id"] if len(rows) == limit else None}


def register_tool_admin_tools(server: MCPServer[Any], lib: Librarian) -> None:
    """Add the registry's reading and administration tools to ``server``."""
    discovery = lib.discovery

    # -- sources --------------------------------------------------------------------------------

    @server.tool(title="Import a tool source", annotations=SYNCS)
    def import_tool_source(
        kind: Literal["mcp", "openapi", "python", "cli"],
        name: str,
        spec: dict[str, Any],
        approve: bool = False,
        visibility: str | None = None,
        allowed_teams: list[str] | None = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Import every tool of an MCP server, OpenAPI document, Python module or indexed CLI.

        Imported tools start quarantined (out of discover_tools and call_tool) until an
        administrator approves them with set_tool_status, unless an administrator imports with
        `approve`. Importing again under the same name re-lists the source, as sync_tool_source
        does. A source that runs a program on the server (an MCP server started by command, a
        Python module, a local OpenAPI file) is for the server's operator only.

        Args:
            kind: mcp, openapi, python or cli.
            name: your name for the source (1-128 letters, digits, '-', '_' or '.'); it prefixes
                the toolIds of its tools.
            spec: where the tools are, by kind: mcp {"url": "https://host/mcp", "headers": {...}} or
                {"command": ["mcp-server-time"], "env": {...}}; openapi {"location": the
                document's URL, "base_url", "headers"}; python {"module": ..., "functions": [...]}
                or {"entry_point_group": ...}; cli {"sdk_name": ..., "sdk_version": ...} (a CLI
                indexed with ingest-cli).
            approve: import the tools active instead of quarantined (administrators only).
            visibility: private, teams, organization (default) or public (administrators only).
            allowed_teams: team names or ids, with visibility teams.

        Returns:
            What changed: `added`, `changed`, `removed`, `unchanged` (toolIds, at most 50 each),
            `errors` (each tool skipped and why), `counts` of each, `truncated` and the `status`
            the new tools got (quarantined or active).
        """
        with tool_errors():
            principal = tool_caller(lib, ctx)
            teams = (
                lib.identity.team_ids_of(principal.organization_id, allowed_teams) if allowed_teams else ()
            )
            report = discovery.import_source(
                kind,
                name,
                spec,
                principal=principal,
                approve=approve,
                visibility=visibility,
                allowed_teams=teams,
            )
            return _report(report)

    @server.tool(title="List tool sources", annotations=READ_ONLY)
    def list_tool_sources(ctx: Context | None = None) -> dict[str, Any]:
        """List your organisation's tool sources (MCP servers, OpenAPI documents, Python modules,
        CLIs whose tools were imported), with when each was last synced and what changed then.

        Returns:
            `sources`, each with id, name, kind, spec (null unless you may change the source;
            secret values shown as ***), visibility, last_synced_at, last_error and last_changes
            (how many tools were added, changed, removed, unchanged).
        """
        with tool_errors():
            return {"sources": discovery.sources(principal=tool_caller(lib, ctx))}

    @server.tool(title="Sync a tool source", annotations=SYNCS)
    def sync_tool_source(source: str, ctx: Context | None = None) -> dict[str, Any]:
        """List a tool source again and apply what changed: new tools are added (quarantined as the
        server is configured), changed ones updated (keeping their review status), and tools the
        source no longer lists are removed.

        A source that cannot be listed changes nothing; its error is kept on the source (see
        list_tool_sources). Only who imported the source, or an administrator, may sync it; a
        source that runs a program on the server, only the server's operator.

        Args:
            source: the source's name or id, as list_tool_sources shows it.

        Returns:
            What changed: `added`, `changed`, `removed`, `unchanged` (toolIds, at most 50 each),
            `errors`, `counts` of each, `truncated` and the `status` new tools got.
        """
        with tool_errors():
            return _report(discovery.sync_source(source, principal=tool_caller(lib, ctx)))

    @server.tool(title="Delete a tool source", annotations=DELETES)
    def delete_tool_source(source: str, ctx: Context | None = None) -> dict[str, Any]:
        """Delete a tool source and every tool imported from it, with what was learned from their
        use (who imported it, or an administrator).

        Args:
            source: the source's name or id, as list_tool_sources shows it.

        Returns:
            `source` (its name) and `removed_tools` (how many tools went with it).
        """
        with tool_errors():
            return discovery.delete_source(source, principal=tool_caller(lib, ctx))

    # -- verbs ----------------------------------------------------------------------------------

    @server.tool(title="List verbs", annotations=READ_ONLY)
    def list_verbs(
        status: Literal["active", "novel"] | None = None,
        after: Cursor = 0,
        limit: Limit = 20,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """List the registered verbs (named capabilities, e.g. GET_WEATHER) you may read, oldest
        first; to find one by what it does, use discover_verbs.

        Args:
            status: only verbs in this status: active, or novel (named by a plan, carried out by
                no tool yet).
            after: the cursor of the page to read (the previous answer's `next`; 0 to start).
            limit: how many verbs (1-200, default 20).

        Returns:
            `verbs` (verb, description, capabilities, examples, inputDefinitions,
            outputDefinitions, decomposition, status...) and `next` (null on the last page).
        """
        with tool_errors():
            rows = discovery.verbs(
                principal=tool_caller(lib, ctx), status=status, limit=limit, after_id=after
            )
            return _page("verbs", rows, limit)

    @server.tool(title="Read a verb", annotations=READ_ONLY)
    def get_verb(verb: str, ctx: Context | None = None) -> dict[str, Any]:
        """Read one registered verb: what it does, its inputs, outputs and decomposition.

        Args:
            verb: the verb, e.g. GET_WEATHER ("get weather" means the same).

        Returns:
            The verb: verb, description, capabilities, category, examples, inputDefinitions,
            outputDefinitions, decomposition (the verbs that carry it out), status and visibility.
        """
        with tool_errors():
            return discovery.verb(verb, principal=tool_caller(lib, ctx))

    @server.tool(title="Delete a verb", annotations=DELETES)
    def delete_verb(verb: str, ctx: Context | None = None) -> dict[str, Any]:
        """Delete a registered verb (its author or an administrator); refused while another verb's
        decomposition still names it.

        Args:
            verb: the verb, e.g. GET_WEATHER.

        Returns:
            The deleted verb.
        """
        with tool_errors():
            return discovery.delete_verb(verb, principal=tool_caller(lib, ctx))

    # -- tools ----------------------------------------------------------------------------------

    @server.tool(title="List registered tools", annotations=READ_ONLY)
    def list_tools(
        status: Literal["active", "quarantined", "inactive"] | None = None,
        type: Literal["mcp", "openapi", "python", "cli"] | None = None,
        source_id: int | None = None,
        after: Cursor = 0,
        limit: Limit = 20,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """List the registered tools you may read, oldest first, e.g. the quarantined ones waiting
        for review; to find a tool by what it does, use discover_tools.

        Args:
            status: only tools in this review status: active, quarantined (imported, waiting for
                an administrator) or inactive (deactivated).
            type: only tools of this type: mcp, openapi, python or cli.
            source_id: only the tools imported from this source (its id in list_tool_sources).
            after: the cursor of the page to read (the previous answer's `next`; 0 to start).
            limit: how many tools (1-200, default 20).

        Returns:
            `tools` (toolId, name, type, description, actionVerbs, capabilities, category,
            version, status, health) and `next` (null on the last page).
        """
        with tool_errors():
            rows = discovery.tools(
                principal=tool_caller(lib, ctx),
                status=status,
                tool_type=type,
                source_id=source_id,
                limit=limit,
                after_id=after,
            )
            return _page("tools", rows, limit)

    @server.tool(title="Read a registered tool", annotations=READ_ONLY)
    def get_tool(tool_id: str, ctx: Context | None = None) -> dict[str, Any]:
        """Read one registered tool in full: its inputSchema, examples, review status, health and
        call counts.

        Args:
            tool_id: the tool's toolId (or its numeric id).

        Returns:
            The tool: toolId, name, type, description, inputSchema, examples, binding (how it is
            called; null unless you may change it), status, health, source_id, visibility and
            `calls` (succeeded, failed, consecutive_failures, last_error, last_called_at).
        """
        with tool_errors():
            return discovery.tool(tool_id, principal=tool_caller(lib, ctx))

    @server.tool(title="Tool registry statistics", annotations=READ_ONLY)
    def get_tool_stats(ctx: Context | None = None) -> dict[str, int]:
        """Count the verbs, tools and tool sources you see, the tools by review status.

        Returns:
            `verbs`, `sources`, and `tools_active`, `tools_quarantined`, `tools_inactive` (a
            status with no tools is left out).
        """
        with tool_errors():
            return discovery.stats(principal=tool_caller(lib, ctx))

    # Each report is one more use learned from: reporting twice counts twice.
    @server.tool(title="Record a tool's use", annotations=WRITES)
    def record_tool_use(
        tool_id: str, request: str, succeeded: bool = True, ctx: Context | None = None
    ) -> dict[str, Any]:
        """Report that you chose a registered tool for a request and called it yourself (not
        through call_tool), and whether it served the request: discover_tools then ranks it
        higher for similar requests in your organisation.

        Args:
            tool_id: the tool's toolId.
            request: what you used the tool for, in plain words.
            succeeded: false when the tool did not serve the request.

        Returns:
            `tool`, `request` and `succeeded`, as recorded.
        """
        with tool_errors():
            return discovery.record_use(
                tool_id, request, succeeded=succeeded, principal=tool_caller(lib, ctx)
            )
