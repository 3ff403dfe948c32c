"""The MCP adapter over the :class:`~librarian.app.Librarian` facade."""

from librarian.mcp.server import create_mcp_server, mount_streamable_http, run_stdio

__all__ = ["create_mcp_server", "mount_streamable_http", "run_stdio"]
