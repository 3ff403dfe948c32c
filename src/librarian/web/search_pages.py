"""The Search, Research and Page views: documentation and organisational knowledge, read-only."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from librarian.catalog.pages import PageRequest
from librarian.errors import InvalidInputError, LibrarianError
from librarian.knowledge.search import KnowledgeFilters
from librarian.research.service import research_api_usage
from librarian.user_dates import parse_user_date
from librarian.web.highlight import query_spans, segments

if TYPE_CHECKING:
    from librarian.web.app import Pages

SNIPPET_CHARS = 600
PAGE_CHARS = 20_000
SCOPES = ("all", "docs", "knowledge")


def search_router(pages: Pages) -> APIRouter:
    """``/ui/search``, ``/ui/research`` and ``/ui/page``."""
    router = APIRouter(prefix="/ui", include_in_schema=False)
    lib = pages.lib

    @router.get("/search", response_class=HTMLResponse)
    def search(
        request: Request,
        q: str = Query("", max_length=2000),
        scope: str = Query("all"),
        sdk: str = Query("", max_length=255),
        version: str = Query("", max_length=255),
        document_type: str = Query("", max_length=64),
        category: str = Query("", max_length=255),
        tags: str = Query("", max_length=1000),
        after: str = Query("", max_length=32),
        before: str = Query("", max_length=32),
        limit: int = Query(10, ge=1, le=50),
    ) -> HTMLResponse:
        form = {
            "q": q,
            "scope": scope if scope in SCOPES else "all",
            "sdk": sdk,
            "version": version,
            "document_type": document_type,
            "category": category,
            "tags": tags,
            "after": after,
            "before": before,
            "limit": limit,
        }
        docs: list[dict[str, Any]] = []
        knowledge: list[dict[str, Any]] = []
        error = None
        if q.strip():
            principal = pages.caller(request)
            tag_list = tuple(t.strip() for t in tags.split(",") if t.strip())
            try:
                fetched_after, fetched_before = (
                    parse_user_date(after, "after"),
                    parse_user_date(before, "before"),
                )
                # Knowledge documents have no version: a version filter means documentation only.
                wanted_docs = form["scope"] in ("all", "docs")
                wanted_knowledge = form["scope"] in ("all", "knowledge") and not version
                chosen = {
                    "document_type": document_type,
                    "category": category,
                    "tags": list(tag_list),
                    "sdk_name": sdk,
                    "created_after": fetched_after.isoformat() if fetched_after else None,
                    "created_before": fetched_before.isoformat() if fetched_before else None,
                }
                filters = KnowledgeFilters.from_mapping({k: v for k, v in chosen.items() if v})
                found_docs = (
                    lib.search(
                        q,
                        sdk_name=sdk or None,
                        sdk_version=version or None,
                        document_type=document_type or None,
                        category=category or None,
                        tags=tag_list,
                        fetched_after=fetched_after,
                        fetched_before=fetched_before,
                        top_k=limit,
                        principal=principal,
                    )
                    if wanted_docs
                    else []
                )
                found_knowledge = (
                    lib.knowledge.search(q, filters=filters, limit=limit, principal=principal)
                    if wanted_knowledge
                    else []
                )
                docs = [_doc_hit(hit.to_dict(), q) for hit in found_docs]
                # Ingested documentation is knowledge too: list each page once, with the docs.
                shown = {hit["source_url"] for hit in docs}
                knowledge = [
                    _knowledge_hit(hit)
                    for hit in found_knowledge
                    if not hit.get("source_url") or hit["source_url"] not in shown
                ]
            except LibrarianError as exc:
                error = exc.message
        full = limit < 50 and limit in (len(docs), len(knowledge))
        more = request.url.include_query_params(limit=min(limit * 2, 50)) if full else None
        return pages.render(
            request,
            "search.html",
            form=form,
            docs=docs,
            knowledge=knowledge,
            error=error,
            searched=bool(q.strip()),
            more=f"{more.path}?{more.query}" if more else None,
        )

    @router.get("/research", response_class=HTMLResponse)
    def research(
        request: Request,
        sdk: str = Query("", max_length=255),
        version: str = Query("", max_length=255),
        q: str = Query("", max_length=4000),
        error_text: str = Query("", max_length=20_000),
    ) -> HTMLResponse:
        form = {"sdk": sdk, "version": version, "q": q, "error_text": error_text}
        answer = None
        error = None
        if sdk.strip() or q.strip():
            try:
                if not sdk.strip():
                    raise InvalidInputError("SDK: say which SDK or tool, e.g. aws-cli or requests")
                if not q.strip():
                    raise InvalidInputError("Question: say what you are trying to do")
                answer = research_api_usage(
                    lib,
                    sdk.strip(),
                    q,
                    version.strip() or None,
                    error_text or None,
                    principal=pages.caller(request),
                )
            except LibrarianError as exc:
                error = exc.message
        return pages.render(request, "research.html", form=form, answer=answer, error=error)

    @router.get("/page", response_class=HTMLResponse)
    def page(
        request: Request,
        url: str | None = Query(None, max_length=4000),
        document_id: int | None = Query(None, ge=1, le=2**62),
        version: str | None = Query(None, max_length=255),
        start_chunk: int = Query(0, ge=0, le=10**6),
    ) -> HTMLResponse:
        try:
            found = lib.catalog.read_page(
                pages.caller(request),
                PageRequest(
                    url=url,
                    document_id=document_id,
                    sdk_version=version,
                    start_chunk=start_chunk,
                    max_chars=PAGE_CHARS,
                ),
            )
        except LibrarianError as exc:
            return pages.render(request, "error.html", exc.status_code, error=exc.message)
        return pages.render(request, "page.html", page=found)

    return router


def _doc_hit(hit: dict[str, Any], query: str) -> dict[str, Any]:
    text = hit["content"][:SNIPPET_CHARS]
    return {
        **hit,
        "segments": segments(text, query_spans(text, query)),
        "cut": len(hit["content"]) > SNIPPET_CHARS,
    }


def _knowledge_hit(hit: dict[str, Any]) -> dict[str, Any]:
    snippet = hit.get("snippet") or ""
    return {**hit, "segments": segments(snippet, hit.get("highlights") or [])}
