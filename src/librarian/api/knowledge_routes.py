"""REST routes of organisational knowledge: documents with versions, search_knowledge and feedback.

Every route acts for the caller the authentication middleware resolved (``request.state``), so what
it reads and changes is filtered by that caller's organisation, teams and scopes.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request, status
from pydantic import BaseModel, ConfigDict, Field

from librarian.api.auth import principal_of
from librarian.app import Librarian
from librarian.knowledge.access import Principal, local_principal
from librarian.knowledge.documents import DocumentDraft
from librarian.knowledge.search import KnowledgeFilters

# Ids and versions are 32-bit integers in the store (PostgreSQL's integer).
MAX_ID = 2_147_483_647
DocumentId = Annotated[int, Path(ge=1, le=MAX_ID, description="The document's id.")]

_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": dict[str, Any]} for code in (401, 403, 404, 409, 422)
}


class DocumentFields(BaseModel):
    """Fields of a knowledge document; on an edit, fields left out keep their value."""

    model_config = ConfigDict(extra="forbid")

    title: str | None = Field(default=None, min_length=1, max_length=500)
    content: str | None = Field(default=None, min_length=1, max_length=2_000_000, description="Markdown.")
    description: str | None = Field(default=None, max_length=10_000)
    document_type: str | None = Field(
        default=None, description="runbook, incident_report, documentation (default), wiki or solution."
    )
    category: str | None = Field(default=None, max_length=255)
    tags: list[str] | None = None
    content_structured: dict[str, Any] | None = Field(default=None, description="Structured JSON content.")
    severity: str | None = Field(default=None, description="critical, high, medium or low.")
    visibility: str | None = Field(
        default=None, description="private, teams, organization (default) or public (administrators only)."
    )
    allowed_teams: list[int | str] | None = Field(
        default=None, description="Team ids or names (visibility teams)."
    )
    source_type: str | None = Field(
        default=None, description="manual (default), investigation, import or github."
    )
    source_url: str | None = Field(default=None, max_length=2000)
    source_file_path: str | None = Field(default=None, max_length=2000)

    def draft(self) -> DocumentDraft:
        """The fields as the knowledge service takes them."""
        values = self.model_dump()
        tags, teams = values.pop("tags"), values.pop("allowed_teams")
        return DocumentDraft(
            **values,
            tags=None if tags is None else tuple(tags),
            allowed_teams=None if teams is None else tuple(teams),
        )


class NewDocument(DocumentFields):
    """A knowledge document to add: a title and content at least."""

    title: str = Field(min_length=1, max_length=500)
    content: str = Field(min_length=1, max_length=2_000_000, description="Markdown.")


class DocumentEdit(DocumentFields):
    """An edit: the version it was based on, and the fields to change."""

    base_version: int = Field(
        ge=1, description="The version you read; a newer one makes this a 409 conflict."
    )


class RestoreRequest(BaseModel):
    """Bring an earlier version back as a new version."""

    model_config = ConfigDict(extra="forbid")

    version: int = Field(ge=1, le=MAX_ID)
    base_version: int = Field(ge=1, le=MAX_ID)


class SearchFilters(BaseModel):
    """Filters of search_knowledge; unknown keys are refused."""

    model_config = ConfigDict(extra="forbid")

    document_type: list[str] = Field(default_factory=list, description="Any of these types.")
    category: str | None = None
    tags: list[str] = Field(default_factory=list, description="Documents must carry every one.")
    created_after: str | None = Field(default=None, description="ISO 8601; changed on or after.")
    created_before: str | None = Field(default=None, description="ISO 8601; changed on or before.")
    severity: list[str] = Field(default_factory=list, description="Any of critical, high, medium, low.")
    min_usefulness_score: float | None = Field(default=None, ge=0, le=5)
    sdk_name: str | None = None


class SearchRequest(BaseModel):
    """search_knowledge: a natural-language query over the documents the caller may read."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=4000)
    filters: SearchFilters = Field(default_factory=SearchFilters)
    limit: int = Field(default=10, ge=1, le=50)


class FeedbackRequest(BaseModel):
    """Whether a document helped."""

    model_config = ConfigDict(extra="forbid")

    feedback_type: str = Field(description="helpful, not_helpful, outdated or incorrect.")
    rating: int | None = Field(default=None, ge=1, le=5)
    comment: str | None = Field(default=None, max_length=10_000)
    search_query: str | None = Field(
        default=None,
        max_length=4000,
        description=(
            "What was searched for when the document was found. With a helpful verdict (or 4-5 "
            "stars), later searches of the organisation for similar questions rank it higher."
        ),
    )
    was_used: bool = False


def caller(request: Request) -> Principal:
    """The principal the authentication middleware resolved for ``request``."""
    return principal_of(request.scope, local_principal(operator=False))


def knowledge_router(lib: Librarian) -> APIRouter:
    """Routes under ``/knowledge``: documents, versions, search and feedback."""
    router = APIRouter(prefix="/knowledge", tags=["knowledge"], responses=_ERRORS)
    documents = lib.knowledge.documents

    @router.post("/search")
    def search(body: SearchRequest, request: Request) -> dict[str, Any]:
        """search_knowledge: documents ranked by relevance and usefulness, with highlighted snippets.

        Each result has ``id``, ``title``, ``document_type``, ``category``, ``relevance_score``,
        ``score`` (relevance scaled by usefulness), ``snippet`` with ``highlights`` (``[start, end)``
        offsets of matched terms), ``last_used``, ``usefulness_score``, ``flags`` (outdated or
        incorrect votes on the current version) and ``url``.
        """
        filters = KnowledgeFilters.from_mapping(body.filters.model_dump(exclude_defaults=True))
        return {
            "results": lib.knowledge.search(
                body.query, filters=filters, limit=body.limit, principal=caller(request)
            )
        }

    @router.post("/documents", status_code=status.HTTP_201_CREATED)
    def create(body: NewDocument, request: Request) -> dict[str, Any]:
        """Add a document (version 1); searchable when this answers. Needs the ``write`` scope."""
        return documents.create(caller(request), body.draft())

    @router.get("/documents")
    def list_documents(
        request: Request,
        document_type: str | None = None,
        limit: int = Query(default=50, ge=1, le=500),
        after: int = Query(
            default=0, ge=0, le=MAX_ID, description="Cursor: the last id of the previous page."
        ),
    ) -> dict[str, Any]:
        """Documents the caller may read, by id; ``next_after`` is the cursor of the next page."""
        found = documents.list_documents(
            caller(request), document_type=document_type, limit=limit, after_id=after
        )
        return {"documents": found, "next_after": found[-1]["id"] if len(found) == limit else None}

    @router.get("/documents/{document_id}")
    def read(
        document_id: DocumentId, request: Request, version: int | None = Query(default=None, ge=1, le=MAX_ID)
    ) -> dict[str, Any]:
        """A document with its full content: the current version, or ``version``."""
        return documents.get(caller(request), document_id, version)

    @router.patch("/documents/{document_id}")
    def edit(document_id: DocumentId, body: DocumentEdit, request: Request) -> dict[str, Any]:
        """Save a new version; 409 when the document is no longer at ``base_version``."""
        fields = DocumentFields(**body.model_dump(exclude={"base_version"}))
        return documents.update(caller(request), document_id, body.base_version, fields.draft())

    @router.delete("/documents/{document_id}")
    def delete(
        document_id: DocumentId,
        request: Request,
        base_version: int | None = Query(default=None, ge=1, le=MAX_ID),
    ) -> dict[str, Any]:
        """Remove a document from search (its history is kept); 409 if not at ``base_version``."""
        return documents.delete(caller(request), document_id, base_version)

    @router.get("/documents/{document_id}/versions")
    def versions(document_id: DocumentId, request: Request) -> dict[str, Any]:
        """Every version of a document, newest first."""
        return {"versions": documents.history(caller(request), document_id)}

    @router.post("/documents/{document_id}/restore")
    def restore(document_id: DocumentId, body: RestoreRequest, request: Request) -> dict[str, Any]:
        """Save a new version equal to ``version``; 409 when not at ``base_version``."""
        return documents.restore(caller(request), document_id, body.version, body.base_version)

    @router.post("/documents/{document_id}/feedback", status_code=status.HTTP_201_CREATED)
    def feedback(document_id: DocumentId, body: FeedbackRequest, request: Request) -> dict[str, Any]:
        """record_knowledge_feedback: the new usefulness score, vote count and flags."""
        return lib.knowledge.feedback(document_id, principal=caller(request), **body.model_dump())

    return router
