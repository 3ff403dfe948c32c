"""The knowledge service the facade exposes as ``lib.knowledge``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from librarian.knowledge.access import Principal
from librarian.knowledge.documents import KnowledgeDocuments
from librarian.knowledge.feedback import record_feedback
from librarian.knowledge.search import KnowledgeFilters, search_knowledge

if TYPE_CHECKING:
    from librarian.app import Librarian


class KnowledgeService:
    """Knowledge documents (``documents``), ``search`` over them and ``feedback`` on them."""

    def __init__(self, lib: Librarian) -> None:
        self._lib = lib
        self.documents = KnowledgeDocuments(lib)

    def search(
        self,
        query: str,
        *,
        filters: KnowledgeFilters | None = None,
        limit: int = 10,
        principal: Principal | None = None,
    ) -> list[dict[str, Any]]:
        """``search_knowledge``: see :func:`librarian.knowledge.search.search_knowledge`."""
        return search_knowledge(self._lib, principal or self._lib.default_principal, query, filters, limit)

    def feedback(
        self,
        document_id: int,
        feedback_type: str,
        *,
        rating: int | None = None,
        comment: str | None = None,
        search_query: str | None = None,
        was_used: bool = False,
        principal: Principal | None = None,
    ) -> dict[str, Any]:
        """``record_knowledge_feedback``: see :func:`librarian.knowledge.feedback.record_feedback`."""
        return record_feedback(
            self._lib.sessions,
            principal or self._lib.default_principal,
            document_id,
            feedback_type,
            rating=rating,
            comment=comment,
            search_query=search_query,
            was_used=was_used,
        )
