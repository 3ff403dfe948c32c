"""The Sources page: every source with its last run and per-file errors, refresh, add, live job progress."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from librarian.catalog.jobs import IngestRequest
from librarian.errors import InvalidInputError, LibrarianError

if TYPE_CHECKING:
    from librarian.web.app import Pages

PAGE_SIZE = 25
JOBS_SHOWN = 10


def source_router(pages: Pages) -> APIRouter:
    """``/ui/sources`` and its forms."""
    router = APIRouter(prefix="/ui/sources", include_in_schema=False)
    lib = pages.lib

    def context(request: Request, after: int = 0) -> dict[str, Any]:
        principal = pages.caller(request)
        sources = lib.catalog.list_sources(principal, after_id=after, limit=PAGE_SIZE)
        jobs = lib.jobs.list_jobs(principal, limit=JOBS_SHOWN)["jobs"]
        return {
            "sources": sources,
            "next_after": sources[-1]["id"] if len(sources) == PAGE_SIZE else None,
            "jobs": jobs,
            "active": any(job["status"] in ("queued", "running") for job in jobs),
        }

    @router.get("", response_class=HTMLResponse)
    def listing(request: Request, after: int = Query(0, ge=0, le=2**62)) -> HTMLResponse:
        try:
            return pages.render(request, "sources.html", **context(request, after))
        except LibrarianError as exc:
            return pages.render(request, "error.html", exc.status_code, error=exc.message)

    @router.get("/jobs", response_class=HTMLResponse)
    def jobs(request: Request) -> HTMLResponse:
        """The jobs table alone (ui.js refreshes it while a job runs)."""
        return pages.render(request, "source_jobs.html", **context(request))

    @router.post("", response_class=HTMLResponse)
    def add(
        request: Request,
        uri: str = Form(""),
        sdk_name: str = Form(""),
        sdk_version: str = Form(""),
        document_type: str = Form(""),
        kind: str = Form("auto"),
        csrf: str = Form(""),
    ) -> Response:
        try:
            pages.check_form(request, csrf)
            if not uri.strip():
                raise InvalidInputError("Location: give a git URL or a folder the server allows")
            if sdk_version.strip() and not sdk_name.strip():
                raise InvalidInputError("SDK version: give the SDK name too")
            lib.jobs.submit_ingest(
                pages.caller(request),
                IngestRequest(
                    uri=uri.strip(),
                    sdk_name=sdk_name.strip() or None,
                    sdk_version=sdk_version.strip() or None,
                    document_type=document_type.strip() or None,
                    kind=kind,
                ),
                pages.policy,
            )
        except LibrarianError as exc:
            return _with_error(pages, request, exc)
        return RedirectResponse("/ui/sources", status_code=303)

    @router.post("/{source_id}/refresh", response_class=HTMLResponse)
    def refresh(request: Request, source_id: int, csrf: str = Form("")) -> Response:
        try:
            pages.check_form(request, csrf)
            lib.jobs.submit_refresh(pages.caller(request), str(source_id))
        except LibrarianError as exc:
            return _with_error(pages, request, exc)
        return RedirectResponse("/ui/sources", status_code=303)

    def _with_error(pages: Pages, request: Request, exc: LibrarianError) -> HTMLResponse:
        try:
            extra = context(request)
        except LibrarianError:
            extra = {"sources": [], "next_after": None, "jobs": [], "active": False}
        return pages.render(request, "sources.html", exc.status_code, error=exc.message, **extra)

    return router
