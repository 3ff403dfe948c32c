"""MCP tools and resources of the documentation catalog (``lib.catalog``): ``resolve_library``,
``read_page``, ``list_sources``, ``delete_source`` and ``get_store_stats``, and each library as a
resource template (``library://{name}``; ``list_sdks`` lists the names).

Resources are templates because only templates receive the request's context, and a library is
shown only to callers who may read it (a static resource could not know who asks).
"""

from __future__ import annotations

import json
from typing import Any

from mcp.server.mcpserver import Context, MCPServer

from librarian.app import Librarian
from librarian.catalog.libraries import ALIAS_SCORE
from librarian.catalog.pages import DEFAULT_MAX_CHARS, PageRequest
from librarian.errors import NotFoundError
from librarian.mcp.caller import tool_caller
from librarian.mcp.errors import tool_errors
from librarian.mcp.metadata import DELETES, READ_ONLY


def register_catalog_tools(server: MCPServer[Any], lib: Librarian) -> None:
    """Add the catalog's tools and library resources to ``server``."""
    catalog = lib.catalog

    @server.tool(title="Resolve a library name", annotations=READ_ONLY)
    def resolve_library(name: str, limit: int = 5, ctx: Context | None = None) -> dict[str, Any]:
        """Find which indexed library (SDK, CLI, API) a name means, before research or search.

        Args:
            name: what the library is called, e.g. "aws", "requests" or "kubectl".
            limit: how many candidates (1-50, default 5).

        Returns:
            `candidates`, best first: library_id (the sdk_name to pass to research_api_usage and
            search_documentation), score (1 exact, 0.95 an alias), description, versions (newest first,
            each with its chunk count), sources (uri, kind, last run) and last_updated. Empty when
            nothing indexed looks like the name: add its documentation first.
        """
        with tool_errors():
            return {"candidates": catalog.resolve_library(tool_caller(lib, ctx), name, limit=limit)}

    @server.tool(title="Read a whole page", annotations=READ_ONLY)
    def read_page(
        url: str | None = None,
        document_id: int | None = None,
        sdk_version: str | None = None,
        start_chunk: int = 0,
        max_chars: int = DEFAULT_MAX_CHARS,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Read the whole page a snippet came from, to see what surrounds it.

        Args:
            url: a result's source_url (https://..., cli://..., pypi://...; any #fragment is ignored).
            document_id: or the document's id.
            sdk_version: the version to read when the page is indexed at several (default: newest).
            start_chunk: where to start reading (the previous answer's next_chunk).
            max_chars: the most text to return (200-200000, default 20000); pages are cut between
                chunks.

        Returns:
            title, url, sdk_name, sdk_version, other_versions, document_version, fetched_at,
            chunk_count, sections (the chunks in this window), content, truncated and next_chunk
            (null at the end of the page).
        """
        with tool_errors():
            request = PageRequest(
                url=url,
                document_id=document_id,
                sdk_version=sdk_version,
                start_chunk=start_chunk,
                max_chars=max_chars,
            )
            return catalog.read_page(tool_caller(lib, ctx), request)

    @server.tool(title="List documentation sources", annotations=READ_ONLY)
    def list_sources(after: int = 0, limit: int = 20, ctx: Context | None = None) -> dict[str, Any]:
        """List the documentation sources you may read, with their last ingest and its errors.

        Args:
            after: the cursor of the page to read (the previous answer's next_after; 0 to start).
            limit: how many sources (1-500, default 20).

        Returns:
            `sources` (id, uri, kind, sdk_name, sdk_version, documents, chunks, last_status,
            last_errors...) and `next_after` (null on the last page).
        """
        with tool_errors():
            found = catalog.list_sources(tool_caller(lib, ctx), after_id=after, limit=limit)
            return {"sources": found, "next_after": found[-1]["id"] if len(found) == limit else None}

    @server.tool(title="Store statistics", annotations=READ_ONLY)
    def get_store_stats(ctx: Context | None = None) -> dict[str, Any]:
        """The store's counts (sources, documents, chunks) and the vector index's state.

        They cover every organisation, so only the server's own organisation's administrators may
        read them.

        Returns:
            {sources, documents, chunks, ..., vector_index: {collection, model_version, dimension,
            built_at}, database_url, vector_url} (passwords hidden).
        """
        with tool_errors():
            return lib.stats(tool_caller(lib, ctx))

    @server.tool(title="Delete a documentation source", annotations=DELETES)
    def delete_source(source: str, every_match: bool = False, ctx: Context | None = None) -> dict[str, Any]:
        """Delete a documentation source with all its pages, their history and search index entries.

        Only the source's creator or an administrator of its organisation may.

        Args:
            source: the source's id (from list_sources), its URI or its SDK name.
            every_match: delete every source the name matches (an SDK name matches each version);
                without it, a name that matches several sources is refused.

        Returns:
            `deleted`: for each deleted source, its id, uri, and how many documents and chunks went.
        """
        with tool_errors():
            return {"deleted": catalog.delete_sources(tool_caller(lib, ctx), source, every_match=every_match)}

    @server.resource(
        "library://{name}",
        title="One library",
        description="A library's versions, sources and freshness.",
        mime_type="application/json",
    )
    def library(name: str, ctx: Context | None = None) -> str:
        candidates = catalog.resolve_library(tool_caller(lib, ctx), name, limit=5)
        exact = [c for c in candidates if c["score"] >= ALIAS_SCORE]
        if not exact:
            raise NotFoundError(f"no library {name!r} is indexed")
        return json.dumps(exact[0])
