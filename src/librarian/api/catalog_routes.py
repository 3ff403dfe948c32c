"""REST routes of the documentation catalog: list and delete sources, read whole pages, resolve libraries.

Each route is a thin call of ``lib.catalog`` for the caller the authentication middleware resolved.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request

from librarian.api.knowledge_routes import MAX_ID, caller
from librarian.app import Librarian
from librarian.catalog.pages import DEFAULT_MAX_CHARS, MAX_CHARS, PageRequest

_ERRORS: dict[int | str, dict[str, Any]] = {code: {"model": dict[str, Any]} for code in (401, 403, 404, 422)}


def catalog_router(lib: Librarian) -> APIRouter:
    """Routes ``GET /sources``, ``DELETE /sources/{selector}``, ``GET /pages``, ``/libraries``."""
    router = APIRouter(tags=["sources"], responses=_ERRORS)
    catalog = lib.catalog

    @router.get("/sources")
    def list_sources(
        request: Request,
        limit: int = Query(default=50, ge=1, le=500),
        after: int = Query(
            default=0, ge=0, le=MAX_ID, description="Cursor: the last id of the previous page."
        ),
    ) -> dict[str, Any]:
        """Sources whose documents the caller may read, by id, with their last run, errors per file
        and document and chunk counts; ``next_after`` is the cursor of the next page (null at the end).
        """
        found = catalog.list_sources(caller(request), after_id=after, limit=limit)
        return {"sources": found, "next_after": found[-1]["id"] if len(found) == limit else None}

    @router.delete("/sources/{selector:path}")
    def delete_sources(
        selector: str,
        request: Request,
        every_match: bool = Query(
            default=False,
            alias="all",
            description="Delete every source the selector names (an SDK name names each of its versions).",
        ),
    ) -> dict[str, Any]:
        """Delete a source (by id, key prefix, URI or SDK name) with its documents, their versions,
        chunks and vectors. Only its creator or an administrator of its organisation may; a selector
        naming several sources answers 422 unless ``all=true``.
        """
        return {"deleted": catalog.delete_sources(caller(request), selector, every_match=every_match)}

    @router.get("/pages")
    def read_page(
        request: Request,
        url: str | None = Query(default=None, max_length=4000, description="A result's source_url."),
        document_id: int | None = Query(default=None, ge=1, le=MAX_ID),
        sdk_version: str | None = Query(default=None, max_length=255),
        start_chunk: int = Query(default=0, ge=0, le=1_000_000, description="Where the window starts."),
        max_chars: int = Query(default=DEFAULT_MAX_CHARS, ge=200, le=MAX_CHARS),
    ) -> dict[str, Any]:
        """A whole document (by ``url`` or ``document_id``) reassembled from its chunks in order, with
        its version; a long one comes in windows of whole chunks (``next_chunk`` starts the next).
        """
        page = PageRequest(
            url=url,
            document_id=document_id,
            sdk_version=sdk_version,
            start_chunk=start_chunk,
            max_chars=max_chars,
        )
        return catalog.read_page(caller(request), page)

    @router.get("/libraries")
    def libraries(request: Request) -> dict[str, Any]:
        """Every library (SDK) the caller may read, with its versions (newest first) and chunk count."""
        return {"libraries": catalog.libraries(caller(request))}

    @router.get("/libraries/resolve")
    def resolve_library(
        request: Request,
        name: str = Query(
            min_length=1, max_length=255, description="What the user called it: aws, requests."
        ),
        limit: int = Query(default=5, ge=1, le=50),
    ) -> dict[str, Any]:
        """Libraries ``name`` may mean, best first, as Context7's resolve-library-id: each with its
        score, versions and chunk counts, sources and when it was last updated.
        """
        return {"candidates": catalog.resolve_library(caller(request), name, limit=limit)}

    return router
