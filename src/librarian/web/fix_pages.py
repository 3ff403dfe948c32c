"""The Fixes page: what the self-correcting loop learned (verified fixes, with the research they came
from, how often each worked) and the strategy policy's record, where an administrator retires a fix
that turned out wrong.

Verified fixes are the runtime's own knowledge (``workflows/fixes.py``): the page shows them to the
local organisation, and says so to anyone else instead of showing an empty list.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from librarian.errors import LibrarianError

if TYPE_CHECKING:
    from librarian.web.app import Pages

PAGE_SIZE = 25


def fix_router(pages: Pages) -> APIRouter:
    """``/ui/fixes``, ``/ui/fixes/{id}`` and the retire form."""
    router = APIRouter(prefix="/ui", include_in_schema=False)
    fixes = pages.lib.workflows.fixes

    @router.get("/fixes", response_class=HTMLResponse)
    def fix_list(
        request: Request,
        tool: str = Query("", max_length=255),
        retired: bool = Query(False),
        before: int | None = Query(None, ge=1, le=2**62),
    ) -> HTMLResponse:
        principal = pages.caller(request)
        context: dict[str, Any] = {"tool": tool, "retired": retired}
        try:
            found = fixes.list(
                principal, tool=tool.strip() or None, include_retired=retired, before=before, limit=PAGE_SIZE
            )
            strategies = fixes.strategy_stats(principal)["strategies"]
        except LibrarianError as exc:
            return pages.render(
                request, "fixes.html", exc.status_code, fixes=[], error=exc.message, **context
            )
        return pages.render(
            request,
            "fixes.html",
            fixes=found["fixes"],
            more=found["next_before"],
            strategies=strategies,
            **context,
        )

    @router.get("/fixes/{fix_id}", response_class=HTMLResponse)
    def fix_page(request: Request, fix_id: int) -> HTMLResponse:
        principal = pages.caller(request)
        try:
            fix = fixes.get(principal, fix_id)
        except LibrarianError as exc:
            return pages.render(request, "error.html", exc.status_code, error=exc.message)
        return pages.render(request, "fix.html", fix=fix, is_admin=principal.is_admin)

    @router.post("/fixes/{fix_id}/retire", response_class=HTMLResponse)
    def retire(request: Request, fix_id: int, reason: str = Form(""), csrf: str = Form("")) -> Response:
        principal = pages.caller(request)
        try:
            pages.check_form(request, csrf)
            fixes.retire(principal, fix_id, reason)
        except LibrarianError as exc:
            try:
                fix = fixes.get(principal, fix_id)
            except LibrarianError:
                return pages.render(request, "error.html", exc.status_code, error=exc.message)
            return pages.render(
                request, "fix.html", exc.status_code, fix=fix, is_admin=principal.is_admin, error=exc.message
            )
        return RedirectResponse(f"/ui/fixes/{fix_id}", status_code=303)

    return router
