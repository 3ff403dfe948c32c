"""Who an MCP tool call acts for.

Over streamable HTTP the REST app's authentication middleware resolved the caller from the bearer
token and left it in the request's ASGI scope; the MCP SDK hands that request to the tool through its
context. Over stdio there is no request: the server acts for the facade's own principal (the
operator, or the user of ``librarian --token ... mcp``).
"""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import Context

from librarian.api.auth import principal_of
from librarian.app import Librarian
from librarian.knowledge.access import Principal


def tool_caller(lib: Librarian, ctx: Context[Any, Any] | None) -> Principal:
    """The principal a tool call acts for."""
    request = None
    if ctx is not None:
        try:
            request = ctx.request_context.request
        except ValueError:  # called outside a request (tests calling the function directly)
            request = None
    scope = getattr(request, "scope", None)
    if isinstance(scope, dict):
        return principal_of(scope, lib.default_principal)
    return lib.default_principal
