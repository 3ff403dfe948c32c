"""The MCP importer: list the tools of an MCP server (a command over stdio or a streamable HTTP URL).

Each tool becomes a manifest with ``toolId`` ``<server>.<tool>`` (the server is the spec's ``name``,
else the name the server gives itself at ``initialize``), its description and input schema as the
server lists them, the server's version, the hints of its annotations as capabilities
(``read_only``, ``destructive``, ``idempotent``, ``open_world``), and a binding that reaches the same
server again to call it. :mod:`librarian.discovery.sync` validates and stores the manifests.

Example:
    >>> lib.discovery.import_source("mcp", "time", {"command": ["mcp-server-time"]})  # doctest: +SKIP
    {'source': 'time', 'added': ['mcp-time.convert_time', 'mcp-time.get_current_time'], ...}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.client.session import ClientSession

from librarian.discovery.mcp_client import (
    McpServer,
    McpServerError,
    Progress,
    Work,
    parse_server,
    server_name,
    with_session,
)
from librarian.discovery.registry import may_run_programs
from librarian.discovery.sync import Listing
from librarian.errors import ForbiddenError, InvalidInputError
from librarian.knowledge.access import Principal

if TYPE_CHECKING:
    from librarian.app import Librarian

MAX_PAGES = 100
_HINTS = (
    ("read_only_hint", "read_only"),
    ("destructive_hint", "destructive"),
    ("idempotent_hint", "idempotent"),
    ("open_world_hint", "open_world"),
)


def list_mcp_tools(spec: Mapping[str, Any], lib: Librarian, principal: Principal) -> Listing:
    """The tools of the MCP server ``spec`` describes, as raw manifests.

    Args:
        spec: ``{"command": ["mcp-server-time", "--local-timezone", "UTC"], "env": {...}, "cwd": ...}``
            for a server started over stdio, or ``{"url": "https://host/mcp", "headers": {...}}`` for
            streamable HTTP; ``name`` (optional) is the first part of each ``toolId``.
        lib: the facade (its settings: the time limit and ``allowed_private_hosts``).
        principal: who imports; a command runs on this host, so only the server's operator may give one.

    Raises:
        InvalidInputError: a field of ``spec`` at fault, a command that does not exist, a URL on a
            non-public address that is not allowed.
        ForbiddenError: a command given by someone who is not the server's operator.
        McpServerError: the server exited, hung or answered nonsense (named, with the step).
    """
    server = parse_server(spec, lib.settings, origin="MCP source")
    if server.command and not may_run_programs(principal):
        raise ForbiddenError(
            "command: only the server's operator can import an MCP server started as a command "
            "(it runs on the Librarian host)",
            hint="run the import on the server's data directory, or import a server reachable by 'url'",
        )
    given_name = spec.get("name")
    if given_name is not None and (not isinstance(given_name, str) or not server_name(given_name).strip()):
        raise InvalidInputError("MCP source: name: must be a non-empty string of letters, digits, '_.-'")
    tools, info = with_session(server, lib.settings, _list_tools(server))
    prefix = server_name(given_name if isinstance(given_name, str) else info.name)
    version = (info.version or "").strip()[:64] or None
    return Listing(
        manifests=[_manifest(tool, prefix, version, server) for tool in tools],
        errors=[],
        version=version,
    )


def _list_tools(server: McpServer) -> Work[tuple[list[types.Tool], types.Implementation]]:
    """Every page of ``tools/list``, and who the server says it is."""

    async def work(
        session: ClientSession, initialized: types.InitializeResult, progress: Progress
    ) -> tuple[list[types.Tool], types.Implementation]:
        progress.step = "tools/list"
        tools: list[types.Tool] = []
        cursor: str | None = None
        seen: set[str] = set()
        for _ in range(MAX_PAGES):
            params = None if cursor is None else types.PaginatedRequestParams(cursor=cursor)
            result = await session.list_tools(params=params)
            tools.extend(result.tools)
            cursor = result.next_cursor
            if not cursor:
                return tools, initialized.server_info
            if cursor in seen:
                raise McpServerError(f"{server.label}: tools/list returned the cursor {cursor!r} twice")
            seen.add(cursor)
        raise McpServerError(f"{server.label}: tools/list did not end after {MAX_PAGES} pages")

    return work


def _manifest(tool: types.Tool, prefix: str, version: str | None, server: McpServer) -> dict[str, Any]:
    """A tool as the manifest format of :func:`librarian.discovery.manifest.parse_tool`."""
    annotations = tool.annotations
    title = tool.title or (annotations.title if annotations else None)
    capabilities = [
        capability
        for hint, capability in _HINTS
        if annotations is not None and getattr(annotations, hint) is True
    ]
    return {
        "toolId": f"{prefix}.{tool.name}",
        "name": tool.name,
        "type": "mcp",
        "description": tool.description or title or "",
        "inputSchema": tool.input_schema,
        "version": version,
        "capabilities": capabilities,
        "binding": {**server.binding(), "tool": tool.name},
    }
