"""``lib.catalog``: what documentation is indexed, whole pages of it, and the removal of sources.

Composes the source catalog (list, delete), the page reader (a document reassembled from its chunks)
and the library resolver (names to indexed SDKs), each filtered by the caller's grants.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from librarian.catalog.libraries import LibraryResolver
from librarian.catalog.pages import PageReader, PageRequest
from librarian.catalog.sources import SourceCatalog
from librarian.knowledge.access import Principal

if TYPE_CHECKING:
    from librarian.app import Librarian


class CatalogService:
    """Sources, pages and libraries on behalf of a principal."""

    def __init__(self, lib: Librarian) -> None:
        self._sources = SourceCatalog(lib)
        self._pages = PageReader(lib)
        self._libraries = LibraryResolver(lib)

    def list_sources(
        self, principal: Principal, *, after_id: int = 0, limit: int = 50
    ) -> list[dict[str, Any]]:
        """Sources whose documents the caller may read, by id, with document and chunk counts."""
        return self._sources.list_sources(principal, after_id=after_id, limit=limit)

    def delete_sources(
        self, principal: Principal, selector: str, *, every_match: bool = False
    ) -> list[dict[str, Any]]:
        """Delete sources with their documents, versions, chunks and vectors; see :class:`SourceCatalog`."""
        return self._sources.delete_sources(principal, selector, every_match=every_match)

    def read_page(self, principal: Principal, request: PageRequest) -> dict[str, Any]:
        """A whole document by id or URL, as a window of its chunks in order; see :class:`PageReader`."""
        return self._pages.read(principal, request)

    def libraries(self, principal: Principal) -> list[dict[str, Any]]:
        """Every SDK the caller may read: ``library_id``, ``versions`` (newest first), ``chunks``."""
        return [
            {"library_id": sdk.name, "versions": sdk.versions, "chunks": sdk.chunks}
            for sdk in self._libraries.list_libraries(principal)
        ]

    def resolve_library(self, principal: Principal, name: str, *, limit: int = 5) -> list[dict[str, Any]]:
        """The indexed SDKs ``name`` may mean, best first, with versions, sources and freshness."""
        return self._libraries.resolve(principal, name, limit=limit)
