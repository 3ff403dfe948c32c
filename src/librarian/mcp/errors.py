"""How a Librarian error reaches an agent: as a tool error whose text says what was wrong and what
to do, so the agent can correct its call."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from mcp.server.mcpserver.exceptions import ToolError

from librarian.errors import LibrarianError


@contextmanager
def tool_errors() -> Iterator[None]:
    """Turn a :class:`LibrarianError` raised inside the block into a :class:`ToolError`."""
    try:
        yield
    except LibrarianError as exc:
        raise ToolError(str(exc)) from exc
