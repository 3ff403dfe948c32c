"""The Workflows pages: the list, a new workflow, one workflow (DAG, timeline, question, report), live."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse

from librarian.correction.timeline import STEP_KIND
from librarian.errors import InvalidInputError, LibrarianError
from librarian.web.dag import NODE_HEIGHT, NODE_WIDTH, as_submitted, layout
from librarian.workflows.service import STATUSES

if TYPE_CHECKING:
    from librarian.web.app import Pages

PAGE_SIZE = 25
EXAMPLE = """\
name: hello
goal: Say hello and check it
tasks:
  - id: greet
    executor_type: command_executor
    payload: {argv: [echo, hello]}
  - id: check
    executor_type: command_executor
    payload: {argv: [sh, -c, "test $(echo hello) = hello"]}
    depends_on: [greet]
"""
# Log entries shown on the page (the newest); the REST route and the CLI have them all.
MAX_EVENTS = 200


def workflow_router(pages: Pages) -> APIRouter:
    """``/ui/workflows`` and its children."""
    router = APIRouter(prefix="/ui/workflows", include_in_schema=False)
    workflows = pages.lib.workflows

    @router.get("", response_class=HTMLResponse)
    def listing(
        request: Request,
        status: str = Query("", max_length=16),
        cursor: str = Query("", max_length=200),
    ) -> HTMLResponse:
        try:
            page = workflows.list(
                pages.caller(request),
                status=status if status in STATUSES else None,
                cursor=cursor or None,
                limit=PAGE_SIZE,
            )
        except LibrarianError as exc:
            return pages.render(request, "error.html", exc.status_code, error=exc.message)
        return pages.render(
            request,
            "workflows.html",
            page=page,
            status=status,
            statuses=STATUSES,
            example=EXAMPLE,
        )

    @router.post("", response_class=HTMLResponse)
    def submit(request: Request, workflow: str = Form(""), csrf: str = Form("")) -> Response:
        try:
            pages.check_form(request, csrf)
            if not workflow.strip():
                raise InvalidInputError("workflow: paste a workflow in YAML or JSON (see the example)")
            view = workflows.submit(pages.caller(request), workflow)
        except LibrarianError as exc:
            page: dict[str, Any] = {"workflows": [], "next_cursor": None}
            return pages.render(
                request,
                "workflows.html",
                exc.status_code,
                page=page,
                status="",
                statuses=STATUSES,
                example=workflow or EXAMPLE,
                error=exc.message,
            )
        return RedirectResponse(f"/ui/workflows/{view['workflow_id']}", status_code=303)

    @router.get("/{workflow_id}", response_class=HTMLResponse)
    def detail(request: Request, workflow_id: str) -> HTMLResponse:
        try:
            view = workflows.get(pages.caller(request), workflow_id)
        except LibrarianError as exc:
            return pages.render(request, "error.html", exc.status_code, error=exc.message)
        return pages.render(request, "workflow.html", **_context(view))

    @router.get("/{workflow_id}/live", response_class=HTMLResponse)
    def live(request: Request, workflow_id: str) -> HTMLResponse:
        """The part of the page that changes while the workflow runs (fetched by ui.js)."""
        try:
            view = workflows.get(pages.caller(request), workflow_id)
        except LibrarianError as exc:
            return pages.render(request, "error.html", exc.status_code, error=exc.message)
        return pages.render(request, "workflow_live.html", **_context(view))

    @router.get("/{workflow_id}/follow")
    def follow(request: Request, workflow_id: str) -> Response:
        """Server-sent events for ui.js: ``change`` per new batch of events, ``end`` when it stops."""
        try:
            batches = workflows.follow(pages.caller(request), workflow_id, poll_seconds=0.2)
            first = next(batches)
        except LibrarianError as exc:
            return pages.render(request, "error.html", exc.status_code, error=exc.message)
        return StreamingResponse(
            _changes(first, batches),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    @router.post("/{workflow_id}/answer", response_class=HTMLResponse)
    def answer(request: Request, workflow_id: str, answer: str = Form(""), csrf: str = Form("")) -> Response:
        try:
            pages.check_form(request, csrf)
            workflows.answer(pages.caller(request), workflow_id, answer)
        except LibrarianError as exc:
            return _detail_with_error(pages, request, workflow_id, exc)
        return RedirectResponse(f"/ui/workflows/{workflow_id}", status_code=303)

    @router.post("/{workflow_id}/cancel", response_class=HTMLResponse)
    def cancel(request: Request, workflow_id: str, csrf: str = Form("")) -> Response:
        try:
            pages.check_form(request, csrf)
            workflows.cancel(pages.caller(request), workflow_id)
        except LibrarianError as exc:
            return _detail_with_error(pages, request, workflow_id, exc)
        return RedirectResponse(f"/ui/workflows/{workflow_id}", status_code=303)

    return router


def _detail_with_error(pages: Pages, request: Request, workflow_id: str, exc: LibrarianError) -> HTMLResponse:
    try:
        view = pages.lib.workflows.get(pages.caller(request), workflow_id)
    except LibrarianError:
        return pages.render(request, "error.html", exc.status_code, error=exc.message)
    return pages.render(request, "workflow.html", exc.status_code, error=exc.message, **_context(view))


def _context(view: dict[str, Any]) -> dict[str, Any]:
    keys = {task["task_id"]: task["key"] for task in view["tasks"]}
    events = view["events"][-MAX_EVENTS:]
    timeline = [event for event in events if event["kind"] == STEP_KIND]
    corrected = {event["task"] for event in timeline if event.get("data", {}).get("stage") == "correction"}
    return {
        "workflow": view,
        "dag": layout(view["tasks"], corrected=corrected),
        # The DAG as submitted, drawn beside the corrected one once the loop changed anything.
        "dag_before": layout(submitted, corrected=corrected)
        if (submitted := as_submitted(view["tasks"], corrected))
        else None,
        "submitted_commands": _submitted_commands(timeline),
        "node_width": NODE_WIDTH,
        "node_height": NODE_HEIGHT,
        "keys": keys,
        "timeline": timeline,
        "events": events,
        "events_hidden": len(view["events"]) - len(events),
        "running": view["status"] == "running",
    }


def _submitted_commands(timeline: list[dict[str, Any]]) -> dict[str, str]:
    """Per corrected task, the command it was submitted with: what its first correction replaced."""
    commands: dict[str, str] = {}
    for event in timeline:
        data = event.get("data") or {}
        if data.get("stage") == "correction" and isinstance(data.get("failed_argv"), list):
            commands.setdefault(event["task"], " ".join(str(part) for part in data["failed_argv"]))
    return commands


def _changes(first: dict[str, Any], rest: Iterator[dict[str, Any]]) -> Iterator[str]:
    batch = first
    while True:
        if batch["events"]:
            yield f"id: {batch['events'][-1]['id']}\nevent: change\ndata: {json.dumps(batch['status'])}\n\n"
        if batch["finished"]:
            yield f"event: end\ndata: {json.dumps(batch['status'])}\n\n"
            return
        try:
            batch = next(rest)
        except StopIteration:
            return
