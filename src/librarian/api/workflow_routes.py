"""REST routes of the task runtime (``lib.workflows``): workflows, their events, verified fixes, the policy.

A workflow is submitted as the CLI's file holds it (a JSON object, or YAML/JSON text) and validated the
same way; errors name the task and the field. Its progress can be polled (``GET /workflows/{id}``,
optionally waiting), read as an event log after a cursor (``GET /workflows/{id}/events``), or followed
live as server-sent events (``GET /workflows/{id}/follow``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Annotated, Any

from fastapi import APIRouter, Header, Path, Query, Request, status
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field

from librarian.api.knowledge_routes import MAX_ID, caller
from librarian.app import Librarian
from librarian.workflows.service import MAX_PAGE, MAX_WAIT_SECONDS, STATUSES

_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": dict[str, Any]} for code in (401, 403, 404, 409, 422)
}
WorkflowId = Annotated[str, Path(min_length=1, max_length=64, description="The workflow's id (a UUID).")]
FixId = Annotated[int, Path(ge=1, le=MAX_ID, description="The verified fix's id.")]
WaitSeconds = Annotated[
    float,
    Query(ge=0, le=MAX_WAIT_SECONDS, description="Wait up to this long for the workflow to end or ask."),
]


class WorkflowSubmission(BaseModel):
    """A workflow to run, as a workflow file holds it."""

    workflow: dict[str, Any] | str = Field(
        description="The workflow: an object ({name, goal, tasks: [{id, executor_type, payload, "
        "depends_on}]}) or the text of a YAML or JSON workflow file. See docs/runtime.md."
    )
    idempotency_key: str | None = Field(
        default=None,
        max_length=200,
        description="Submitting again with this key returns the first workflow instead of a second one.",
    )
    wait_seconds: float = Field(
        default=0.0,
        ge=0,
        le=MAX_WAIT_SECONDS,
        description="Answer when the workflow ends or asks a question, waiting up to this long.",
    )


class Answer(BaseModel):
    """The answer to the question a paused workflow asked."""

    answer: str = Field(min_length=1, max_length=10_000)


class PlanRequest(BaseModel):
    """A goal for the configured LLM to plan a workflow for."""

    goal: str = Field(min_length=1, max_length=10_000)
    context: str | None = Field(
        default=None, max_length=20_000, description="Facts the planner should know: tools, versions, hosts."
    )


class Retirement(BaseModel):
    """Why a verified fix is wrong."""

    reason: str = Field(min_length=1, max_length=2000)


def workflow_router(lib: Librarian) -> APIRouter:
    """``/workflows``, ``/verified-fixes`` and ``/strategy-stats``."""
    router = APIRouter(tags=["workflows"], responses=_ERRORS)
    workflows = lib.workflows

    @router.post("/workflows", status_code=status.HTTP_201_CREATED)
    def submit(body: WorkflowSubmission, request: Request) -> dict[str, Any]:
        """Run a workflow (a DAG of tasks) with the self-correcting loop; needs the ``write`` scope.

        Answers the workflow as ``GET /workflows/{id}`` does, once it ends or asks a question when
        ``wait_seconds`` is given, else at once (``running``). Tasks run in the server's sandbox; a
        task asking for the network (``payload.network``) needs an administrator. 422 names the task
        and field of an invalid workflow; 409 reports an idempotency key used for another workflow.
        """
        return workflows.submit(
            caller(request),
            body.workflow,
            idempotency_key=body.idempotency_key,
            wait_seconds=body.wait_seconds,
        )

    @router.post("/workflows/plan")
    def plan(body: PlanRequest, request: Request) -> dict[str, Any]:
        """A workflow the configured LLM plans for a goal, validated but not run (submit it to run it).

        422 when the server has no LLM configured.
        """
        return workflows.plan(caller(request), body.goal, context=body.context)

    @router.get("/workflows")
    def list_workflows(
        request: Request,
        workflow_status: str | None = Query(
            default=None, alias="status", description=f"Only workflows in this status: {', '.join(STATUSES)}."
        ),
        cursor: str | None = Query(default=None, max_length=200, description="A previous next_cursor."),
        limit: int = Query(default=20, ge=1, le=MAX_PAGE),
    ) -> dict[str, Any]:
        """The workflows the caller may see (its own; an administrator's organisation's), newest first."""
        return workflows.list(caller(request), status=workflow_status, cursor=cursor, limit=limit)

    @router.get("/workflows/{workflow_id}")
    def read(workflow_id: WorkflowId, request: Request, wait_seconds: WaitSeconds = 0.0) -> dict[str, Any]:
        """A workflow: status, reward, tasks (feedback notes, rewards, the corrective tasks surgery
        inserted and why), the event log with the loop's timeline steps (``kind`` ``correction_step``,
        ``data.stage``), the question it waits on and, once failed, the escalation report."""
        return workflows.get(caller(request), workflow_id, wait_seconds=wait_seconds)

    @router.get("/workflows/{workflow_id}/events")
    def events(
        workflow_id: WorkflowId,
        request: Request,
        after: int = Query(default=0, ge=0, le=2**62, description="Only events with an id above this."),
    ) -> dict[str, Any]:
        """The workflow's events after ``after``, oldest first, with its status and whether it ended."""
        return workflows.events(caller(request), workflow_id, after=after)

    @router.get(
        "/workflows/{workflow_id}/follow",
        response_class=StreamingResponse,
        responses={200: {"content": {"text/event-stream": {}}, "description": "Server-sent events."}},
    )
    def follow(
        workflow_id: WorkflowId,
        request: Request,
        after: int = Query(default=0, ge=0, le=2**62, description="Start after this event id."),
        last_event_id: str | None = Header(default=None, description="Set by a reconnecting EventSource."),
    ) -> StreamingResponse:
        """Follow a workflow live as server-sent events: one ``event`` per log entry (its ``kind``, its
        ``id`` as the SSE id, the entry as JSON data), then ``end`` with the status once the workflow
        stops running (ended, or paused with a question). A reconnecting client resumes after its
        ``Last-Event-ID``. The stream closes after five minutes; reconnect to go on."""
        start = _resume_point(after, last_event_id)
        batches = workflows.follow(caller(request), workflow_id, after=start)
        first = next(batches)  # checks access now: a 404 is an HTTP answer, not a broken stream
        return StreamingResponse(
            _server_sent_events(first, batches),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    @router.post("/workflows/{workflow_id}/answer")
    def answer(workflow_id: WorkflowId, body: Answer, request: Request) -> dict[str, Any]:
        """Answer the question a paused workflow asked; it runs again. 409 when it asks nothing."""
        return workflows.answer(caller(request), workflow_id, body.answer)

    @router.post("/workflows/{workflow_id}/cancel")
    def cancel(workflow_id: WorkflowId, request: Request) -> dict[str, Any]:
        """Cancel a running or paused workflow; running attempts finish, nothing new starts."""
        return workflows.cancel(caller(request), workflow_id)

    @router.post("/workflows/{workflow_id}/resume")
    def resume(workflow_id: WorkflowId, request: Request) -> dict[str, Any]:
        """Go on with a running workflow whose process died (an embedded run killed half-way): its
        tasks left in flight run again on this server. 409 when it is not running."""
        return workflows.resume(caller(request), workflow_id)

    @router.get("/verified-fixes", tags=["verified fixes"])
    def fixes(
        request: Request,
        tool: str | None = Query(default=None, max_length=255),
        include_retired: bool = Query(default=False),
        before: int | None = Query(default=None, ge=1, le=MAX_ID, description="A previous next_before."),
        limit: int = Query(default=20, ge=1, le=MAX_PAGE),
    ) -> dict[str, Any]:
        """The fixes the loop verified (failed and fixed templates, successes, failures), newest first."""
        return workflows.fixes.list(
            caller(request), tool=tool, include_retired=include_retired, before=before, limit=limit
        )

    @router.get("/verified-fixes/{fix_id}", tags=["verified fixes"])
    def fix(fix_id: FixId, request: Request) -> dict[str, Any]:
        """One verified fix with the research snippets it came from."""
        return workflows.fixes.get(caller(request), fix_id)

    @router.post("/verified-fixes/{fix_id}/retire", tags=["verified fixes"])
    def retire(fix_id: FixId, body: Retirement, request: Request) -> dict[str, Any]:
        """Retire a fix that turned out wrong (an administrator): it is never reused; its record stays."""
        return workflows.fixes.retire(caller(request), fix_id, body.reason)

    @router.get("/strategy-stats", tags=["verified fixes"])
    def strategy_stats(
        request: Request, category: str | None = Query(default=None, max_length=128)
    ) -> dict[str, Any]:
        """The strategy policy's record: per error category and strategy, trials and mean reward."""
        return workflows.fixes.strategy_stats(caller(request), category=category)

    return router


def _resume_point(after: int, last_event_id: str | None) -> int:
    """Where a stream starts: after the client's ``Last-Event-ID`` when it sent a valid one."""
    if last_event_id and last_event_id.strip().isdigit():
        return max(after, int(last_event_id.strip()))
    return after


def _server_sent_events(first: dict[str, Any], rest: Iterator[dict[str, Any]]) -> Iterator[str]:
    """The SSE text of the batches: each event, then ``end`` (stopped running) or ``timeout``."""
    batch = first
    while True:
        for event in batch["events"]:
            yield f"id: {event['id']}\nevent: {event['kind']}\ndata: {json.dumps(event)}\n\n"
        if batch["finished"]:
            yield f"event: end\ndata: {json.dumps({'status': batch['status']})}\n\n"
            return
        try:
            batch = next(rest)
        except StopIteration:  # the stream's time ran out with the workflow still running
            yield f"event: timeout\ndata: {json.dumps({'status': batch['status']})}\n\n"
            return
