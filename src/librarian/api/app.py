"""The REST adapter: ``create_app(lib)`` exposes the facade over HTTP, one router per feature.

Endpoints are thin: they validate input with pydantic models (so ``/openapi.json`` documents every
field), call :class:`~librarian.app.Librarian` or the research service, and return plain dicts.
Blocking work runs in FastAPI's thread pool (sync endpoints) or, for ingests, in a background job.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fastapi import APIRouter, FastAPI, Request, status
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from librarian.api.admin_routes import admin_router
from librarian.api.auth import install_authentication
from librarian.api.catalog_routes import catalog_router
from librarian.api.docs_pages import install_docs_pages
from librarian.api.incident_routes import incident_router
from librarian.api.job_routes import job_router
from librarian.api.knowledge_routes import caller, knowledge_router
from librarian.api.runbook_routes import runbook_router
from librarian.api.tool_routes import tool_router
from librarian.api.workflow_routes import workflow_router
from librarian.app import Librarian
from librarian.budget import MAX_CHARS, MAX_TOP_K, MIN_CHARS, chars_for, fit
from librarian.catalog.policy import SourcePolicy
from librarian.errors import LibrarianError
from librarian.knowledge.access import Scope
from librarian.research.feedback import record_feedback
from librarian.research.sdks import indexed_sdks
from librarian.research.service import research_api_usage
from librarian.web.app import install_web

logger = logging.getLogger(__name__)


# -- models -------------------------------------------------------------------------------------


class ErrorResponse(BaseModel):
    """What every Librarian error looks like over HTTP."""

    error: bool = True
    category: str = Field(description="not_found, conflict, invalid_input, backend_unavailable, ...")
    message: str = Field(description="What was wrong.")
    hint: str | None = Field(default=None, description="What to do about it.")


_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorResponse} for code in (400, 404, 409, 422, 500, 503)
}


class HealthResponse(BaseModel):
    """Liveness answer."""

    status: str = "ok"


class ResearchRequest(BaseModel):
    """A question about an SDK, optionally with the error text a failed command printed."""

    sdk_name: str = Field(min_length=1, description="SDK or tool name; aliases like `aws-cli` resolve.")
    query: str = Field(min_length=1, description="What you are trying to do, in plain words.")
    version: str | None = Field(
        default=None, description="Exact version, prefix (`2.1`), range (`>=2,<3`) or `latest` (default)."
    )
    error_text: str | None = Field(default=None, description="The error output of the failed command.")
    max_chars: int | None = Field(
        default=None, ge=MIN_CHARS, le=MAX_CHARS, description="Budget: the most characters of snippets."
    )
    max_tokens: int | None = Field(
        default=None, ge=1, le=MAX_CHARS // 4, description="Budget in tokens (about 4 characters each)."
    )


class Snippet(BaseModel):
    """One piece of documentation backing a research answer, with provenance."""

    model_config = ConfigDict(extra="allow")

    content: str
    source_url: str
    sdk_version: str | None
    entity_name: str | None
    last_fetched_at: str
    score: float
    trust_level: str
    flags: list[str]


class ResearchResponse(BaseModel):
    """The research answer; ``error`` is true (with suggestions) when the SDK is not indexed."""

    model_config = ConfigDict(extra="allow")

    error: bool
    summary: str
    confidence_score: float = Field(description="Calibrated probability that the top snippet answers.")
    resolved_version: str | None
    version_note: str
    snippets: list[Snippet]
    fallback_suggestions: list[str]
    summary_method: str = Field(
        default="extractive",
        description="`llm` when the configured LLM wrote the summary, else `extractive`.",
    )


class FeedbackRequest(BaseModel):
    """Which research snippet resolved (or did not resolve) which error."""

    sdk_name: str = Field(min_length=1, description="The SDK the research was about; aliases resolve.")
    error_text: str = Field(
        min_length=1, description="The failed command's error output; secrets are scrubbed before storing."
    )
    source_url: str = Field(min_length=1, description="The snippet's `source_url`, as research returned it.")
    entity_name: str | None = Field(default=None, description="The snippet's `entity_name`.")
    sdk_version: str | None = Field(default=None, description="The version the snippet documents.")
    command: str | None = Field(default=None, description="The failed command (scrubbed before storing).")
    query: str | None = Field(default=None, description="The research question (scrubbed before storing).")
    chunk_content_hash: str | None = Field(
        default=None, pattern="^[0-9a-fA-F]{64}$", description="SHA-256 of the snippet's content (hex)."
    )
    helpful: bool = Field(default=True, description="False when the snippet did not resolve the error.")


class FeedbackRecord(BaseModel):
    """A stored feedback record, scrubbed, with the signature later errors are matched by."""

    id: int
    sdk_name: str = Field(description="The SDK's normal form (`aws-cli` is stored as `aws`).")
    sdk_version: str | None
    error_signature: str = Field(description="SHA-256 of the normalised error (64 hex characters).")
    error_text: str
    command: str | None
    query: str | None
    entity_name: str | None
    source_url: str
    chunk_content_hash: str | None
    helpful: bool
    created_at: str | None


class KnowledgeQuery(BaseModel):
    """A search over everything indexed, optionally narrowed by SDK, version and labels."""

    query: str = Field(min_length=1)
    sdk_name: str | None = None
    sdk_version: str | None = None
    document_type: str | None = None
    category: str | None = None
    tags: list[str] = Field(default_factory=list, description="Chunks must carry every one of these.")
    top_k: int = Field(default=10, ge=1, le=MAX_TOP_K)
    max_chars: int | None = Field(
        default=None, ge=MIN_CHARS, le=MAX_CHARS, description="Budget: the most characters of results."
    )
    max_tokens: int | None = Field(
        default=None, ge=1, le=MAX_CHARS // 4, description="Budget in tokens (about 4 characters each)."
    )


class SearchHit(BaseModel):
    """One search result with its provenance and scores."""

    chunk_id: int
    content: str
    score: float
    sdk_name: str | None
    sdk_version: str | None
    entity_name: str | None
    entity_type: str
    section_path: str
    source_url: str
    last_fetched_at: str
    embedding_model_version: str
    document_type: str | None
    category: str | None
    tags: list[str]
    attributes: dict[str, Any]
    vector_score: float | None
    lexical_score: float | None
    learned_similarity: float | None = Field(
        default=None,
        description="Similarity to a past query this result's document was marked helpful for.",
    )
    document_id: int | None = Field(
        default=None, description="The document holding the chunk (what feedback on it names)."
    )
    truncated: bool = Field(default=False, description="The content was cut to fit the budget.")


class KnowledgeResults(BaseModel):
    """Search results, best first; ``trimmed`` says what a budget left out (null when nothing)."""

    results: list[SearchHit]
    trimmed: dict[str, Any] | None = None


class IngestResult(BaseModel):
    """What one ingest run did."""

    model_config = ConfigDict(extra="allow")

    source_id: int | None
    uri: str
    status: str = Field(description="ok, partial, failed or unchanged")
    revision: str | None
    files_seen: int
    added: int
    updated: int
    unchanged: int
    deleted: int
    failed: int
    chunks_written: int
    chunks_embedded: int
    seconds: float
    problems: list[dict[str, str]]


class SdkInfo(BaseModel):
    """One indexed SDK: its canonical name, versions (newest first) and chunk count."""

    sdk_name: str
    versions: list[str]
    chunks: int


# -- routers --------------------------------------------------------------------------------------


def _health_router() -> APIRouter:
    router = APIRouter(tags=["health"])

    @router.get("/health", response_model=HealthResponse)
    def health() -> dict[str, str]:
        """Liveness check: answers without touching the store or the model."""
        return {"status": "ok"}

    return router


def _research_router(lib: Librarian) -> APIRouter:
    router = APIRouter(tags=["research"], responses=_ERRORS)

    @router.post("/research", response_model=ResearchResponse)
    def research(body: ResearchRequest, request: Request) -> dict[str, Any]:
        """Version-correct documentation for a task or a failed command.

        Resolves the SDK (aliases) and version, searches only that version, and returns an
        extractive summary, snippets with provenance, a calibrated confidence and fallbacks. An
        unknown SDK is not an HTTP error: the answer has ``error: true`` and suggestions.
        """
        return research_api_usage(
            lib,
            body.sdk_name,
            body.query,
            body.version,
            body.error_text,
            principal=caller(request),
            max_chars=chars_for(body.max_chars, body.max_tokens),
        )

    @router.post("/feedback", status_code=status.HTTP_201_CREATED, response_model=FeedbackRecord)
    def feedback(body: FeedbackRequest, request: Request) -> dict[str, Any]:
        """Record that a research snippet resolved (or, with ``helpful: false``, did not resolve) an error.

        Later research for the same or a similar error ranks that snippet higher (or lower), by at
        most 0.3 of score. The error text, command and query are scrubbed of secrets, e-mail addresses
        and home directories before they are stored; the stored record is returned. Answers 422,
        naming the field, for empty or malformed input.
        """
        caller(request).require(Scope.WRITE, "recording research feedback")
        return record_feedback(lib.sessions, **body.model_dump())

    return router


def _knowledge_router(lib: Librarian) -> APIRouter:
    router = APIRouter(prefix="/knowledge", tags=["knowledge"], responses=_ERRORS)

    @router.post("/query", response_model=KnowledgeResults)
    def query(body: KnowledgeQuery, request: Request) -> dict[str, Any]:
        """Hybrid (vector + lexical) search over the chunks the caller may read, best first."""
        hits = lib.search(
            body.query,
            sdk_name=body.sdk_name,
            sdk_version=body.sdk_version,
            document_type=body.document_type,
            category=body.category,
            tags=tuple(body.tags),
            top_k=body.top_k,
            principal=caller(request),
        )
        results, trimmed = fit([hit.to_dict() for hit in hits], chars_for(body.max_chars, body.max_tokens))
        return {"results": results, "trimmed": trimmed}

    return router


def _sdks_router(lib: Librarian) -> APIRouter:
    router = APIRouter(tags=["sdks"], responses=_ERRORS)

    @router.get("/sdks", response_model=list[SdkInfo])
    def sdks(request: Request) -> list[dict[str, Any]]:
        """Every SDK with documentation the caller may read, its versions (newest first) and chunks."""
        with lib.sessions() as session:
            known = indexed_sdks(session, caller(request).grants)
        return [{"sdk_name": s.name, "versions": s.versions, "chunks": s.chunks} for s in known]

    return router


# -- the app ----------------------------------------------------------------------------------


def create_app(
    lib: Librarian,
    *,
    allowed_roots: Sequence[Path | str] = (),
    allow_private: bool = False,
    allow_ssh: bool = False,
) -> FastAPI:
    """The REST API over ``lib``.

    Args:
        lib: the facade to serve (the caller owns it and closes it).
        allowed_roots: local folders ``POST /sources`` may ingest from; empty means git URLs only.
        allow_private: let ``POST /sources`` clone http(s) URLs on loopback or private addresses.
        allow_ssh: let ``POST /sources`` clone over ssh (never with the server's keys or agent).

    When ``lib.settings.api_token`` is set, every request except ``GET /health`` and the OpenAPI
    documentation needs ``Authorization: Bearer <token>``; that includes MCP mounted later with
    :func:`~librarian.mcp.mount_streamable_http`.

    Example:
        >>> app = create_app(Librarian(Settings.load()), allowed_roots=["/srv/docs"])  # doctest: +SKIP
        >>> uvicorn.run(app, host="127.0.0.1", port=8000)  # doctest: +SKIP
    """
    policy = SourcePolicy.of(
        allowed_roots,
        allow_private=allow_private,
        allow_ssh=allow_ssh,
        allowed_private_hosts=lib.settings.allowed_private_hosts,
    )
    app = FastAPI(
        title="Librarian",
        summary="Version-correct documentation search with provenance, for AI agents.",
        version="0.1.0",
        docs_url=None,  # served by install_docs_pages, with assets from the package (offline)
        redoc_url=None,
    )
    install_docs_pages(app)
    app.state.librarian = lib
    app.include_router(_health_router())
    app.include_router(_research_router(lib))
    app.include_router(_knowledge_router(lib))
    app.include_router(knowledge_router(lib))
    app.include_router(incident_router(lib))
    app.include_router(runbook_router(lib))
    app.include_router(tool_router(lib))
    app.include_router(_sdks_router(lib))
    app.include_router(catalog_router(lib))
    app.include_router(job_router(lib, policy))
    app.include_router(workflow_router(lib))
    app.include_router(admin_router(lib))
    install_web(app, lib, policy)

    @app.exception_handler(LibrarianError)
    async def librarian_error(request: Request, exc: LibrarianError) -> JSONResponse:
        return JSONResponse(status_code=exc.status_code, content=exc.to_dict())

    # Every answer that is not a success has the ErrorResponse shape the OpenAPI document promises:
    # FastAPI's own validation errors, unknown routes and methods, and crashes (never a traceback).
    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        return _error_response(422, "invalid_input", validation_message(exc.errors()))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        category = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return _error_response(exc.status_code, category, str(exc.detail), headers=exc.headers)

    @app.exception_handler(Exception)
    async def unexpected_error(request: Request, exc: Exception) -> JSONResponse:
        logger.exception("unexpected error answering %s %s", request.method, request.url.path)
        return _error_response(500, "internal", "internal error; the server log has the details")

    install_authentication(app, lib)
    return app


def _error_response(
    status_code: int, category: str, message: str, *, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    body = {"error": True, "category": category, "message": message, "hint": None}
    return JSONResponse(status_code=status_code, content=body, headers=dict(headers or {}))


def validation_message(errors: Sequence[Any]) -> str:
    """FastAPI's validation errors as one line: ``body.query: String should have at least 1 character``."""
    parts = []
    for error in list(errors)[:5]:
        where = ".".join(str(part) for part in error.get("loc", ()))
        parts.append(f"{where}: {error.get('msg', 'invalid')}" if where else str(error.get("msg", "invalid")))
    more = len(errors) - len(parts)
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")
