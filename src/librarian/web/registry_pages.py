"""The Incidents and Tools pages: past incidents with their similar ones (marked similar or not in the
page), and the tool registry with health, where an administrator approves quarantined tools."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from librarian.discovery.ranking import ToolFilters
from librarian.errors import InvalidInputError, LibrarianError

if TYPE_CHECKING:
    from librarian.web.app import Pages

PAGE_SIZE = 25
SIMILAR = 5
TOOL_STATUSES = ("active", "quarantined", "inactive")


def registry_router(pages: Pages) -> APIRouter:
    """``/ui/incidents`` and ``/ui/tools``."""
    router = APIRouter(prefix="/ui", include_in_schema=False)
    lib = pages.lib

    @router.get("/incidents", response_class=HTMLResponse)
    def incidents(
        request: Request, q: str = Query("", max_length=4000), after: int = Query(0, ge=0, le=2**62)
    ) -> HTMLResponse:
        principal = pages.caller(request)
        try:
            if q.strip():
                found = lib.incidents.find_similar(principal, q, limit=10)
            else:
                found = lib.incidents.list_incidents(principal, limit=PAGE_SIZE, after_id=after)
        except LibrarianError as exc:
            return pages.render(
                request, "incidents.html", exc.status_code, incidents=[], q=q, error=exc.message
            )
        more = found[-1]["id"] if not q.strip() and len(found) == PAGE_SIZE else None
        return pages.render(request, "incidents.html", incidents=found, q=q, more=more)

    @router.get("/incidents/{incident_id}", response_class=HTMLResponse)
    def incident(request: Request, incident_id: int) -> HTMLResponse:
        principal = pages.caller(request)
        try:
            found = lib.incidents.get(principal, incident_id)
            similar = lib.incidents.find_similar(
                principal, found["description"] or found["title"], limit=SIMILAR, incident_id=incident_id
            )
        except LibrarianError as exc:
            return pages.render(request, "error.html", exc.status_code, error=exc.message)
        return pages.render(request, "incident.html", incident=found, similar=similar)

    @router.post("/incidents/{incident_id}/similar/{other_id}", response_class=HTMLResponse)
    def mark(
        request: Request, incident_id: int, other_id: int, verdict: str = Form(""), csrf: str = Form("")
    ) -> Response:
        try:
            pages.check_form(request, csrf)
            if verdict not in ("similar", "not_similar"):
                raise InvalidInputError("verdict: similar or not_similar")
            lib.incidents.mark(pages.caller(request), incident_id, other_id, similar=verdict == "similar")
        except LibrarianError as exc:
            return pages.render(request, "error.html", exc.status_code, error=exc.message)
        return RedirectResponse(f"/ui/incidents/{incident_id}", status_code=303)

    @router.get("/tools", response_class=HTMLResponse)
    def tools(
        request: Request,
        q: str = Query("", max_length=2000),
        status: str = Query("", max_length=16),
        after: int = Query(0, ge=0, le=2**62),
    ) -> HTMLResponse:
        principal = pages.caller(request)
        chosen = status if status in TOOL_STATUSES else ""
        try:
            if q.strip():
                filters = ToolFilters(statuses=(chosen,)) if chosen else ToolFilters()
                found = lib.discovery.search_tools(q, principal=principal, top_k=20, filters=filters)[
                    "results"
                ]
            else:
                found = lib.discovery.tools(
                    principal=principal, status=chosen or None, limit=PAGE_SIZE, after_id=after
                )
        except LibrarianError as exc:
            return pages.render(
                request, "tools.html", exc.status_code, tools=[], q=q, status=chosen, error=exc.message
            )
        more = found[-1]["id"] if not q.strip() and len(found) == PAGE_SIZE else None
        return pages.render(
            request,
            "tools.html",
            tools=found,
            q=q,
            status=chosen,
            statuses=TOOL_STATUSES,
            more=more,
            is_admin=principal.is_admin,
        )

    @router.post("/tools/{tool_id}/status", response_class=HTMLResponse)
    def set_status(request: Request, tool_id: int, status: str = Form(""), csrf: str = Form("")) -> Response:
        try:
            pages.check_form(request, csrf)
            if status not in TOOL_STATUSES:
                raise InvalidInputError(f"status: one of {', '.join(TOOL_STATUSES)}")
            lib.discovery.set_status(tool_id, status, principal=pages.caller(request))
        except LibrarianError as exc:
            return pages.render(request, "error.html", exc.status_code, error=exc.message)
        return RedirectResponse(f"/ui/tools?status={status}", status_code=303)

    return router
