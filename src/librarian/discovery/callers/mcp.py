"""The MCP caller: call one tool of an MCP server from the binding its import stored.

The server is reached the way it was listed (:mod:`librarian.discovery.mcp_client`): a fresh session
per call, started, initialised and answered within ``tools_call_timeout_seconds``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import mcp_types as types
from mcp.client.session import ClientSession

from librarian.config import Settings
from librarian.discovery.calling import CallResult
from librarian.discovery.mcp_client import BINDING_FIELDS, Progress, parse_server, with_session
from librarian.errors import InvalidInputError


def call_mcp_tool(binding: Mapping[str, Any], arguments: dict[str, Any], settings: Settings) -> CallResult:
    """Call the tool ``binding["tool"]`` of the server the binding names with ``arguments``.

    Returns:
        The structured content when the tool gives some, else its content blocks as dicts; ``text``
        joins its text blocks; ``is_error`` is the tool's own verdict.

    Raises:
        InvalidInputError: the binding is malformed (by field), or its URL is not allowed.
        McpServerError: the server could not be started or reached, exited, refused the call or did
            not answer in time (named, with the tool).
    """
    tool = binding.get("tool")
    if not isinstance(tool, str) or not tool:
        raise InvalidInputError("binding: tool: the MCP tool's name is missing")
    server = parse_server(binding, settings, origin=f"tool {tool} binding", allowed=BINDING_FIELDS)

    async def work(
        session: ClientSession, _initialized: types.InitializeResult, progress: Progress
    ) -> types.CallToolResult:
        progress.step = f"tools/call {tool}"
        return await session.call_tool(tool, arguments)

    result = with_session(server, settings, work)
    text = "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))
    if result.structured_content is not None:
        content: Any = result.structured_content
    else:
        content = [
            block.model_dump(mode="json", by_alias=True, exclude_none=True) for block in result.content
        ]
    return CallResult(content=content, is_error=result.is_error, text=text)
