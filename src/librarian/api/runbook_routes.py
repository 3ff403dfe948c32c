"""REST routes of runbooks (``/runbooks``), their executions (``/runbook-executions``) and the
corrections the loop proposes (``/runbook-proposals``). Every route acts for the caller the
authentication middleware resolved; the logic is all in :class:`~librarian.runbooks.service.RunbookService`.

Routes are plain ``def`` functions, so FastAPI runs them in its thread pool: starting or driving an
execution runs ``bash`` steps to completion in the sandbox, which can take a while, and must not
block the event loop.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query, Request, status
from pydantic import BaseModel, ConfigDict, Field

from librarian.api.knowledge_routes import MAX_ID, caller
from librarian.app import Librarian
from librarian.runbooks.catalog import RunbookInput
from librarian.runbooks.format import MAX_RUNBOOK_BYTES

RunbookId = Annotated[int, Path(ge=1, le=MAX_ID, description="The runbook's id.")]
ExecutionId = Annotated[
    str, Path(pattern=r"^[A-Za-z0-9-]{1,64}$", description="The execution's id (a UUID).")
]
ProposalId = Annotated[int, Path(ge=1, le=MAX_ID, description="The proposal's id.")]
_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": dict[str, Any]} for code in (401, 403, 404, 409, 422)
}
Scalar = str | int | float | bool
Variables = dict[Annotated[str, Field(max_length=64)], Scalar]
RunbookText = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_RUNBOOK_BYTES,
        description="The runbook in the runbook format (docs/runbooks.md), as YAML or JSON text.",
    ),
]
TextFormat = Annotated[
    Literal["yaml", "json"], Field(description="How `text` is written: yaml (default) or json.")
]


class NewRunbook(BaseModel):
    """A runbook to store; a runbook of the same name in your organisation gets a new version."""

    model_config = ConfigDict(extra="forbid")

    text: RunbookText
    format: TextFormat = "yaml"
    visibility: str | None = Field(
        default=None,
        description="private, teams, organization (default) or public (administrators only).",
    )
    allowed_teams: list[Annotated[int, Field(ge=1, le=MAX_ID)] | str] = Field(
        default_factory=list, max_length=100, description="Team ids or names (visibility teams)."
    )
    note: str = Field(default="", max_length=2000, description="What this version changes.")

    def given(self) -> RunbookInput:
        """As the runbook service takes it."""
        return RunbookInput(
            self.text,
            origin="request body",
            json_format=self.format == "json",
            visibility=self.visibility,
            allowed_teams=tuple(self.allowed_teams),
            note=self.note,
        )


class RunbookEdit(BaseModel):
    """A new version of a runbook from new text (its name may change)."""

    model_config = ConfigDict(extra="forbid")

    text: RunbookText
    format: TextFormat = "yaml"
    base_version: int = Field(
        ge=1, le=MAX_ID, description="The version you read; a newer one makes this a 409 conflict."
    )
    note: str = Field(default="", max_length=2000, description="What this version changes.")


class ValidateRequest(BaseModel):
    """A runbook to check without storing it."""

    model_config = ConfigDict(extra="forbid")

    text: RunbookText
    format: TextFormat = "yaml"


class FindRequest(BaseModel):
    """get_runbook: one runbook by id, or the best matches for a topic or a problem description."""

    model_config = ConfigDict(extra="forbid")

    runbook_id: int | None = Field(default=None, ge=1, le=MAX_ID, description="A runbook by its id.")
    topic: str | None = Field(default=None, max_length=4000, description="e.g. 'disk usage'.")
    problem_description: str | None = Field(
        default=None, max_length=20_000, description="The problem at hand, in plain words."
    )
    limit: int = Field(default=5, ge=1, le=50, description="How many matches.")


class DryRunRequest(BaseModel):
    """A dry run: every step rendered with these values, and the path a run would take."""

    model_config = ConfigDict(extra="forbid")

    variables: Variables = Field(default_factory=dict, description="The run's variables.")
    assume: dict[Annotated[str, Field(max_length=64)], Scalar] = Field(
        default_factory=dict,
        description="Values earlier steps would extract, to decide conditions on (nothing runs).",
    )
    version: int | None = Field(default=None, ge=1, le=MAX_ID, description="Default: the current one.")


class StartRequest(BaseModel):
    """An execution to start of a runbook's current version."""

    model_config = ConfigDict(extra="forbid")

    variables: Variables = Field(default_factory=dict, description="Values of the runbook's variables.")
    problem: str = Field(default="", max_length=20_000, description="The problem this run addresses.")
    mode: Literal["auto", "step"] = Field(
        default="auto",
        description="auto: run steps now until one waits or the run ends (the request waits for "
        "them); step: run nothing now, each POST /runbook-executions/{id}/step runs one step.",
    )
    agent_driven: bool = Field(
        default=False,
        description="Send agent_prompt steps to the caller even when an LLM is configured.",
    )


class StepRequest(BaseModel):
    """Run the next step; ``answer`` first answers the step the execution waits on."""

    model_config = ConfigDict(extra="forbid")

    answer: str | None = Field(
        default=None, max_length=100_000, description="The analysis of a waiting agent_prompt step."
    )


class AnswerRequest(BaseModel):
    """The answer to a waiting agent_prompt or manual step."""

    model_config = ConfigDict(extra="forbid")

    answer: str = Field(min_length=1, max_length=100_000, description="What was found or done.")


class ApprovalRequest(BaseModel):
    """A verdict on a waiting approval step."""

    model_config = ConfigDict(extra="forbid")

    approved: bool = Field(default=True, description="false rejects it: its on_failure follows.")
    comment: str = Field(default="", max_length=10_000)


class CancelRequest(BaseModel):
    """Why an execution is stopped."""

    model_config = ConfigDict(extra="forbid")

    reason: str = Field(default="cancelled by request", min_length=1, max_length=2000)


class CloseRequest(BaseModel):
    """How a finished execution went for the problem."""

    model_config = ConfigDict(extra="forbid")

    outcome: Literal["resolved", "partially_resolved", "escalated", "failed"] | None = None
    notes: str | None = Field(default=None, max_length=100_000, description="Resolution notes.")
    rating: int | None = Field(default=None, ge=1, le=5, description="How effective it was, 1-5 stars.")


def runbook_router(lib: Librarian) -> APIRouter:
    """Routes under ``/runbooks``, ``/runbook-executions`` and ``/runbook-proposals``."""
    router = APIRouter(responses=_ERRORS)
    runbooks = lib.runbooks
    catalog = runbooks.catalog

    # -- the catalog (fixed paths before /runbooks/{runbook_id}) -------------------------------------

    @router.post("/runbooks", status_code=status.HTTP_201_CREATED, tags=["runbooks"])
    def add(body: NewRunbook, request: Request) -> dict[str, Any]:
        """Store a runbook, with ``change``: created, new_version (same name, other text) or unchanged.

        A runbook that breaks the format is a 422 whose message names every step and field at fault.
        """
        return runbooks.add(caller(request), body.given())

    @router.get("/runbooks", tags=["runbooks"])
    def list_runbooks(
        request: Request,
        category: str | None = Query(default=None, max_length=255),
        tag: str | None = Query(default=None, max_length=255),
        include_inactive: bool = Query(default=False, description="Also retired runbooks."),
        limit: int = Query(default=100, ge=1, le=1000),
    ) -> dict[str, Any]:
        """Runbooks the caller may read, by name, with their statistics."""
        found = catalog.list_runbooks(
            caller(request), category=category, tag=tag, include_inactive=include_inactive, limit=limit
        )
        return {"runbooks": found}

    @router.post("/runbooks/validate", tags=["runbooks"])
    def validate(body: ValidateRequest) -> dict[str, Any]:
        """Check a runbook without storing it: ``valid``, ``problems`` (each naming the step and the
        field) and ``required_variables``."""
        return runbooks.validate(body.text, origin="request body", json_format=body.format == "json")

    @router.get("/runbooks/match", tags=["runbooks"])
    def match(
        request: Request,
        problem: str | None = Query(default=None, max_length=20_000, description="The problem at hand."),
        topic: str | None = Query(default=None, max_length=4000),
        limit: int = Query(default=5, ge=1, le=50),
    ) -> dict[str, Any]:
        """get_runbook by problem or topic: the best runbook with its steps, and ``matches`` (score
        and reasons)."""
        return runbooks.find(caller(request), topic=topic, problem_description=problem, limit=limit)

    @router.post("/runbooks/find", tags=["runbooks"])
    def find(body: FindRequest, request: Request) -> dict[str, Any]:
        """get_runbook: by id, or the best matches for a topic or a problem description."""
        return runbooks.find(
            caller(request),
            runbook_id=body.runbook_id,
            topic=body.topic,
            problem_description=body.problem_description,
            limit=body.limit,
        )

    @router.get("/runbooks/{runbook_id}", tags=["runbooks"])
    def read(
        runbook_id: RunbookId,
        request: Request,
        version: int | None = Query(default=None, ge=1, le=MAX_ID, description="Default: the current one."),
    ) -> dict[str, Any]:
        """A runbook (its current version, or ``version``) with its steps and statistics."""
        return catalog.get(caller(request), runbook_id, version)

    @router.put("/runbooks/{runbook_id}", tags=["runbooks"])
    def update(runbook_id: RunbookId, body: RunbookEdit, request: Request) -> dict[str, Any]:
        """Save a new version from new text; 409 when the runbook is no longer at ``base_version``."""
        given = RunbookInput(
            body.text, origin="request body", json_format=body.format == "json", note=body.note
        )
        return catalog.update(caller(request), runbook_id, given, base_version=body.base_version)

    @router.get("/runbooks/{runbook_id}/versions", tags=["runbooks"])
    def versions(runbook_id: RunbookId, request: Request) -> dict[str, Any]:
        """Every version of a runbook, newest first."""
        return {"versions": catalog.versions(caller(request), runbook_id)}

    @router.post("/runbooks/{runbook_id}/activate", tags=["runbooks"])
    def activate(runbook_id: RunbookId, request: Request) -> dict[str, Any]:
        """Bring a retired runbook back into recommendations and runs."""
        return catalog.set_active(caller(request), runbook_id, True)

    @router.post("/runbooks/{runbook_id}/deactivate", tags=["runbooks"])
    def deactivate(runbook_id: RunbookId, request: Request) -> dict[str, Any]:
        """Retire a runbook: no longer recommended and no new runs; its history stays."""
        return catalog.set_active(caller(request), runbook_id, False)

    @router.post("/runbooks/{runbook_id}/dry-run", tags=["runbooks"])
    def dry_run(runbook_id: RunbookId, request: Request, body: DryRunRequest | None = None) -> dict[str, Any]:
        """Every step rendered with these variables, the path a run would take and the variables a
        run would still need; nothing runs."""
        body = body or DryRunRequest()
        return runbooks.dry_run(
            caller(request), runbook_id, variables=body.variables, assume=body.assume, version=body.version
        )

    @router.get("/runbooks/{runbook_id}/stats", tags=["runbooks"])
    def stats(runbook_id: RunbookId, request: Request) -> dict[str, Any]:
        """Runs, success rate, average duration and effectiveness, and per step how often it ran,
        failed, timed out and was corrected."""
        return runbooks.stats(caller(request), runbook_id)

    @router.get("/runbooks/{runbook_id}/proposals", tags=["runbooks"])
    def proposals(
        runbook_id: RunbookId,
        request: Request,
        state: Literal["pending", "accepted", "rejected", "all"] = Query(
            default="pending", alias="status", description="Which proposals (default: pending)."
        ),
    ) -> dict[str, Any]:
        """Corrected commands the self-correcting loop proposes as new versions of the runbook."""
        chosen = None if state == "all" else state
        return {"proposals": runbooks.proposals(caller(request), runbook_id, status=chosen)}

    @router.post(
        "/runbooks/{runbook_id}/executions", status_code=status.HTTP_201_CREATED, tags=["runbook executions"]
    )
    def start(runbook_id: RunbookId, request: Request, body: StartRequest | None = None) -> dict[str, Any]:
        """Start an execution. In ``auto`` mode its steps run before this answers, until one waits
        (``status: waiting``, see ``waiting_for``) or the run ends; in ``step`` mode nothing runs yet."""
        body = body or StartRequest()
        return runbooks.start(
            caller(request),
            runbook_id,
            variables=body.variables,
            problem=body.problem,
            mode=body.mode,
            agent_driven=body.agent_driven,
        )

    # -- proposals --------------------------------------------------------------------------------

    @router.post("/runbook-proposals/{proposal_id}/accept", tags=["runbooks"])
    def accept(proposal_id: ProposalId, request: Request) -> dict[str, Any]:
        """Accept a proposal: a new version of the runbook with that step's corrected command."""
        return runbooks.decide_proposal(caller(request), proposal_id, accept=True)

    @router.post("/runbook-proposals/{proposal_id}/reject", tags=["runbooks"])
    def reject(proposal_id: ProposalId, request: Request) -> dict[str, Any]:
        """Reject a proposal; the runbook stays as it is."""
        return runbooks.decide_proposal(caller(request), proposal_id, accept=False)

    # -- executions -------------------------------------------------------------------------------

    @router.get("/runbook-executions", tags=["runbook executions"])
    def executions(
        request: Request,
        runbook_id: int | None = Query(default=None, ge=1, le=MAX_ID),
        state: Literal["running", "waiting", "completed", "failed", "cancelled"] | None = Query(
            default=None, alias="status"
        ),
        limit: int = Query(default=50, ge=1, le=500),
    ) -> dict[str, Any]:
        """Executions the caller may read, newest first (without their step runs)."""
        found = runbooks.executions(caller(request), runbook_id=runbook_id, status=state, limit=limit)
        return {"executions": found}

    @router.get("/runbook-executions/{execution_id}", tags=["runbook executions"])
    def execution(execution_id: ExecutionId, request: Request) -> dict[str, Any]:
        """An execution with every step run, and what it waits for (``waiting_for``) while it waits."""
        return runbooks.execution(caller(request), execution_id)

    @router.post("/runbook-executions/{execution_id}/step", tags=["runbook executions"])
    def step(execution_id: ExecutionId, request: Request, body: StepRequest | None = None) -> dict[str, Any]:
        """execute_runbook_step: run the next step (answering the waiting one first with ``answer``)."""
        return runbooks.step(caller(request), execution_id, body.answer if body else None)

    @router.post("/runbook-executions/{execution_id}/answer", tags=["runbook executions"])
    def answer(execution_id: ExecutionId, body: AnswerRequest, request: Request) -> dict[str, Any]:
        """Answer a waiting agent_prompt or manual step; an ``auto`` run goes on before this answers."""
        return runbooks.answer(caller(request), execution_id, body.answer)

    @router.post("/runbook-executions/{execution_id}/approve", tags=["runbook executions"])
    def approve(
        execution_id: ExecutionId, request: Request, body: ApprovalRequest | None = None
    ) -> dict[str, Any]:
        """Approve (or, with ``approved: false``, reject) a waiting approval step; 403 when the step
        names approvers and the caller is not one."""
        body = body or ApprovalRequest()
        return runbooks.approve(caller(request), execution_id, approved=body.approved, comment=body.comment)

    @router.post("/runbook-executions/{execution_id}/cancel", tags=["runbook executions"])
    def cancel(
        execution_id: ExecutionId, request: Request, body: CancelRequest | None = None
    ) -> dict[str, Any]:
        """Stop an execution; what it did stays recorded."""
        return runbooks.cancel(caller(request), execution_id, (body or CancelRequest()).reason)

    @router.post("/runbook-executions/{execution_id}/resume", tags=["runbook executions"])
    def resume(execution_id: ExecutionId, request: Request) -> dict[str, Any]:
        """Go on with an execution whose process died, or time out its overdue waiting step."""
        return runbooks.resume(caller(request), execution_id)

    @router.post("/runbook-executions/{execution_id}/close", tags=["runbook executions"])
    def close(execution_id: ExecutionId, body: CloseRequest, request: Request) -> dict[str, Any]:
        """Record how a finished execution went for the problem: outcome, notes and a 1-5 rating."""
        return runbooks.close_execution(
            caller(request), execution_id, outcome=body.outcome, notes=body.notes, rating=body.rating
        )

    return router
