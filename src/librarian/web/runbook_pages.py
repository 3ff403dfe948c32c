"""The Runbooks pages: the list, one runbook as a flowchart with its statistics and history, and an
execution run step by step with its waiting steps answered or approved in the page."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from librarian.errors import InvalidInputError, LibrarianError

if TYPE_CHECKING:
    from librarian.web.app import Pages

PAGE_SIZE = 50
HISTORY = 20


def runbook_router(pages: Pages) -> APIRouter:
    """``/ui/runbooks`` and ``/ui/runbook-executions``."""
    router = APIRouter(prefix="/ui", include_in_schema=False)
    runbooks = pages.lib.runbooks

    @router.get("/runbooks", response_class=HTMLResponse)
    def listing(
        request: Request, q: str = Query("", max_length=2000), tag: str = Query("", max_length=255)
    ) -> HTMLResponse:
        principal = pages.caller(request)
        try:
            if q.strip():
                found = runbooks.find(principal, problem_description=q, limit=20)["matches"]
            else:
                found = runbooks.catalog.list_runbooks(principal, tag=tag or None, limit=PAGE_SIZE)
        except LibrarianError as exc:
            return pages.render(
                request, "runbooks.html", exc.status_code, runbooks=[], q=q, error=exc.message
            )
        return pages.render(request, "runbooks.html", runbooks=found, q=q, searched=bool(q.strip()))

    @router.get("/runbooks/{runbook_id}", response_class=HTMLResponse)
    def detail(request: Request, runbook_id: int) -> HTMLResponse:
        try:
            return pages.render(request, "runbook.html", **_runbook_context(pages, request, runbook_id))
        except LibrarianError as exc:
            return pages.render(request, "error.html", exc.status_code, error=exc.message)

    @router.post("/runbooks/{runbook_id}/executions", response_class=HTMLResponse)
    def start(
        request: Request,
        runbook_id: int,
        variables: str = Form(""),
        problem: str = Form(""),
        csrf: str = Form(""),
    ) -> Response:
        try:
            pages.check_form(request, csrf)
            started = runbooks.start(
                pages.caller(request),
                runbook_id,
                variables=parse_variables(variables),
                problem=problem,
                mode="step",
            )
        except LibrarianError as exc:
            try:
                context = _runbook_context(pages, request, runbook_id)
            except LibrarianError:
                return pages.render(request, "error.html", exc.status_code, error=exc.message)
            return pages.render(request, "runbook.html", exc.status_code, error=exc.message, **context)
        return RedirectResponse(f"/ui/runbook-executions/{started['id']}", status_code=303)

    @router.get("/runbook-executions/{execution_id}", response_class=HTMLResponse)
    def execution(request: Request, execution_id: str) -> HTMLResponse:
        try:
            view = runbooks.execution(pages.caller(request), execution_id)
        except LibrarianError as exc:
            return pages.render(request, "error.html", exc.status_code, error=exc.message)
        return pages.render(request, "runbook_execution.html", execution=view)

    @router.post("/runbook-executions/{execution_id}/step", response_class=HTMLResponse)
    def step(
        request: Request,
        execution_id: str,
        answer: str = Form(""),
        decision: str = Form(""),
        csrf: str = Form(""),
    ) -> Response:
        """Run the next step; a waiting step is answered (``answer``) or approved/rejected (``decision``)."""
        principal = pages.caller(request)
        try:
            pages.check_form(request, csrf)
            if decision in ("approve", "reject"):
                runbooks.approve(principal, execution_id, approved=decision == "approve", comment=answer)
                runbooks.step(principal, execution_id)
            elif answer.strip():
                runbooks.step(principal, execution_id, answer=answer)
            else:
                runbooks.step(principal, execution_id)
        except LibrarianError as exc:
            try:
                view = runbooks.execution(principal, execution_id)
            except LibrarianError:
                return pages.render(request, "error.html", exc.status_code, error=exc.message)
            return pages.render(
                request, "runbook_execution.html", exc.status_code, execution=view, error=exc.message
            )
        return RedirectResponse(f"/ui/runbook-executions/{execution_id}", status_code=303)

    return router


def parse_variables(text: str) -> dict[str, str]:
    """``name=value`` lines as variables; a line without ``=`` is an error naming its line."""
    found: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        name, sep, value = line.partition("=")
        if not sep or not name.strip():
            raise InvalidInputError(f"variables, line {number}: write name=value, not {line.strip()[:60]!r}")
        found[name.strip()] = value.strip()
    return found


def _runbook_context(pages: Pages, request: Request, runbook_id: int) -> dict[str, Any]:
    principal = pages.caller(request)
    runbook = pages.lib.runbooks.find(principal, runbook_id=runbook_id)["runbook"]
    stats = pages.lib.runbooks.stats(principal, runbook_id)
    history = pages.lib.runbooks.executions(principal, runbook_id=runbook_id, limit=HISTORY)
    by_step = {row["step"]: row for row in stats["steps"]}
    defaults = "\n".join(
        f"{name}={'' if value is None else value}" for name, value in runbook["variables"].items()
    )
    return {"runbook": runbook, "stats": stats, "by_step": by_step, "history": history, "defaults": defaults}
