"""``lib.workflows``: the task runtime on behalf of a principal, for REST, MCP and the web UI.

The CLI drives :class:`~librarian.runtime.engine.Runtime` directly as the machine's operator. A REST
or MCP caller is someone else: this service submits its workflows under its organisation and user,
shows it only the workflows it may see, and refuses what its token may not do.

Who sees a workflow: its creator, the administrators of its organisation, and the operator. Others
get "not found" (never "forbidden": that would tell them the id exists). Workflows are not shared
more widely because their payloads (commands, environment variables) often hold what only the
submitter should read.

What a submission may ask for: a ``write`` token runs tasks in the runtime's sandbox. Two things the
sandbox cannot take back need an administrator: a task that asks for the machine's network
(``network: true`` under ``runtime_sandbox_network = "per_task"``: the network is where the private
services are), and any task at all when the operator turned isolation off
(``runtime_sandbox_isolation = "none"``: tasks then run as the server's own user).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from librarian.errors import ForbiddenError, InvalidInputError, NotFoundError, TaskFailedError
from librarian.knowledge.access import Principal, Scope
from librarian.runtime import store
from librarian.runtime.contracts import WorkflowOwner, WorkflowStatus
from librarian.runtime.models import Workflow
from librarian.runtime.report import WorkflowReport, events_after, summary
from librarian.runtime.spec import WorkflowSpec, parse_spec, parse_workflow_text
from librarian.storage.models import as_utc
from librarian.workflows.cursor import decode_cursor, encode_cursor
from librarian.workflows.fixes import FixCatalog
from librarian.workflows.host import RuntimeHost

if TYPE_CHECKING:
    from librarian.app import Librarian

__all__ = ["MAX_PAGE", "MAX_WAIT_SECONDS", "WorkflowService"]

MAX_PAGE = 100
# The longest a request may hold its connection waiting for a workflow; longer: poll or follow events.
MAX_WAIT_SECONDS = 300.0
STATUSES = tuple(status.value for status in WorkflowStatus)
# How often a follower re-reads the event log (a workflow's events arrive in bursts per task).
_FOLLOW_POLL_SECONDS = 0.25


class WorkflowService:
    """Submit, read, answer and cancel workflows as a principal; the verified fixes and the policy.

    Args:
        lib: the facade (its store, settings, LLM and the runtime host).
        host: the runtime to run on (default: ``lib.runtime_host``).
    """

    def __init__(self, lib: Librarian, host: RuntimeHost | None = None) -> None:
        self._lib = lib
        self._host = host or lib.runtime_host
        self.fixes = FixCatalog(lib)

    # -- submitting -----------------------------------------------------------------------------

    def parse(self, document: Mapping[str, Any] | str, *, origin: str = "workflow") -> WorkflowSpec:
        """Validate a workflow given as a decoded document or as YAML/JSON text, as the CLI does a file.

        Raises:
            InvalidInputError: the message names the task and the field (or the line of the text).
        """
        known = self._host.executor_types()
        if isinstance(document, str):
            text = document.strip()
            return parse_workflow_text(
                text, origin=origin, as_json=text.startswith("{"), known_executor_types=known
            )
        return parse_spec(dict(document), origin=origin, known_executor_types=known)

    def submit(
        self,
        principal: Principal,
        document: Mapping[str, Any] | str,
        *,
        idempotency_key: str | None = None,
        wait_seconds: float = 0.0,
    ) -> dict[str, Any]:
        """Submit a workflow for ``principal``; with ``wait_seconds``, return when it ends or pauses.

        Args:
            principal: who submits it (needs ``write``).
            document: the workflow, as the CLI's file holds it (a mapping, or YAML/JSON text).
            idempotency_key: submitting again with this key returns the first workflow. Keys are the
                caller's own: another user's identical key is another workflow.
            wait_seconds: wait up to this long (at most :data:`MAX_WAIT_SECONDS`) for the workflow to end
                or ask a question; a workflow still running is returned as ``running``.

        Returns:
            The workflow (see :meth:`get`).

        Raises:
            InvalidInputError: an invalid workflow, key or wait.
            ForbiddenError: the token lacks ``write``, or a task needs an administrator (see the module).
        """
        principal.require(Scope.WRITE, "running workflows")
        _check_wait(wait_seconds)
        spec = self.parse(document)
        self._check_allowed(principal, spec)
        runtime = self._host.get()
        key = None if idempotency_key is None else _own_key(principal, idempotency_key)
        owner = WorkflowOwner(principal.organization_id, None if principal.is_operator else principal.user_id)
        workflow_id = runtime.submit(spec, idempotency_key=key, owner=owner)
        return self._report_view(self._waited(workflow_id, wait_seconds))

    def plan(self, principal: Principal, goal: str, *, context: str | None = None) -> dict[str, Any]:
        """A workflow planned by the configured LLM for ``goal``, validated but not run.

        Raises:
            InvalidInputError: no LLM is configured, or the goal is empty.
            LLMOutputError: the model gave no valid workflow.
        """
        principal.require(Scope.WRITE, "planning workflows")
        from librarian.runtime.planner import plan_workflow

        llm = self._lib.llm
        if llm is None:
            raise InvalidInputError(
                "planning from a goal needs an LLM, and none is configured",
                hint="set LIBRARIAN_LLM_PROVIDER, LIBRARIAN_LLM_URL and LIBRARIAN_LLM_MODEL on the server, "
                "or write the workflow yourself and submit it",
            )
        spec = plan_workflow(llm, goal, known_executor_types=self._host.executor_types(), context=context)
        return {"workflow": spec.to_dict()}

    def _check_allowed(self, principal: Principal, spec: WorkflowSpec) -> None:
        if principal.is_operator or principal.is_admin:
            return
        settings = self._lib.settings
        if settings.runtime_sandbox_isolation == "none":
            raise ForbiddenError(
                "this server runs tasks without isolation (runtime_sandbox_isolation = 'none'): "
                "only an administrator may submit workflows",
                hint="ask the operator to enable isolation, or an administrator to run it",
            )
        if settings.runtime_sandbox_network != "per_task":
            return  # "off": nobody gets a network; "on": the operator gave it to every task
        for task in spec.tasks:
            if task.payload.get("network") is True:
                raise ForbiddenError(
                    f"task {task.id!r}, field payload.network: only an administrator may give a task the "
                    "server's network",
                    hint="remove network: true, or ask an administrator to submit the workflow",
                )

    def _waited(self, workflow_id: str, wait_seconds: float) -> WorkflowReport:
        runtime = self._host.get()
        if wait_seconds <= 0:
            return runtime.status(workflow_id)
        try:
            return runtime.wait(workflow_id, timeout=wait_seconds)
        except TaskFailedError:  # still running when the wait ran out: the caller polls on
            return runtime.status(workflow_id)

    # -- reading --------------------------------------------------------------------------------

    def get(self, principal: Principal, workflow_id: str, *, wait_seconds: float = 0.0) -> dict[str, Any]:
        """A workflow with its DAG, tasks (feedback notes, rewards, corrective tasks and why they exist),
        the event log with the loop's timeline steps, and the question it waits on, if any.

        Raises:
            NotFoundError: no such workflow the caller may see.
        """
        principal.require(Scope.READ, "reading workflows")
        _check_wait(wait_seconds)
        self._visible(principal, workflow_id)
        return self._report_view(self._waited(workflow_id, wait_seconds))

    def list(
        self,
        principal: Principal,
        *,
        status: str | None = None,
        cursor: str | None = None,
        limit: int = 20,
    ) -> dict[str, Any]:
        """The workflows the caller may see, newest first: ``{"workflows": [...], "next_cursor": ...}``.

        Raises:
            InvalidInputError: an unknown status, a bad cursor or a limit outside 1-100.
        """
        principal.require(Scope.READ, "listing workflows")
        if status is not None and status not in STATUSES:
            raise InvalidInputError(f"status: one of {', '.join(STATUSES)}, not {status!r}")
        if not 1 <= limit <= MAX_PAGE:
            raise InvalidInputError(f"limit: use 1 to {MAX_PAGE}, not {limit}")
        before = decode_cursor(cursor) if cursor else None
        organization, creator = _listing_scope(principal)
        with self._lib.sessions() as session:
            rows = store.list_workflows(
                session,
                limit,
                organization_id=organization,
                created_by=creator,
                status=status,
                before=before,
            )
        views = [{**summary(row), **_owner(row)} for row in rows]
        last = rows[-1] if len(rows) == limit else None
        next_cursor = (
            None if last is None else encode_cursor(as_utc(last.creation_timestamp), last.workflow_id)
        )
        return {"workflows": views, "next_cursor": next_cursor}

    def events(self, principal: Principal, workflow_id: str, *, after: int = 0) -> dict[str, Any]:
        """The workflow's events after event ``after`` (oldest first), its status, and whether it ended.

        Raises:
            NotFoundError: no such workflow the caller may see.
        """
        principal.require(Scope.READ, "reading workflows")
        workflow = self._visible(principal, workflow_id)
        with self._lib.sessions() as session:
            found = [asdict(event) for event in events_after(session, workflow.workflow_id, after)]
            status = store.workflow_status(session, workflow_id)
        return {
            "workflow_id": str(workflow.workflow_id),
            "status": status,
            "finished": status not in (WorkflowStatus.RUNNING.value,),
            "events": found,
        }

    def follow(
        self,
        principal: Principal,
        workflow_id: str,
        *,
        after: int = 0,
        timeout: float = MAX_WAIT_SECONDS,
        poll_seconds: float = _FOLLOW_POLL_SECONDS,
    ) -> Iterator[dict[str, Any]]:
        """Yield each new batch of :meth:`events` until the workflow stops running or ``timeout`` passes.

        The first batch comes at once (what happened after ``after``); a paused workflow ends the
        stream, as the question it asks needs an answer first. Access is checked once, before the first
        batch.
        """
        deadline = time.monotonic() + min(timeout, MAX_WAIT_SECONDS)
        cursor = after
        while True:
            batch = self.events(principal, workflow_id, after=cursor)
            if batch["events"]:
                cursor = batch["events"][-1]["id"]
            yield batch
            if batch["finished"] or time.monotonic() >= deadline:
                return
            time.sleep(poll_seconds)

    # -- changing -------------------------------------------------------------------------------

    def answer(self, principal: Principal, workflow_id: str, text: str) -> dict[str, Any]:
        """Answer the question a paused workflow asked and set it running again.

        Raises:
            NotFoundError: no such workflow the caller may see. ConflictError: it asks nothing.
        """
        principal.require(Scope.WRITE, "answering workflows")
        self._visible(principal, workflow_id)
        return self._report_view(self._host.get().answer(workflow_id, text))

    def cancel(self, principal: Principal, workflow_id: str) -> dict[str, Any]:
        """Cancel a running or paused workflow (running attempts finish; nothing new starts)."""
        principal.require(Scope.WRITE, "cancelling workflows")
        self._visible(principal, workflow_id)
        return self._report_view(self._host.get().cancel(workflow_id))

    def resume(self, principal: Principal, workflow_id: str) -> dict[str, Any]:
        """Go on with a running workflow whose process died: its tasks left in flight run again.

        A server resumes its running workflows when it starts; this is for one that a process of
        another runtime (an embedded ``librarian workflow run`` killed half-way) left behind.

        Raises:
            NotFoundError: no such workflow the caller may see.
            ConflictError: it is not running (finished, cancelled, or paused for an answer).
        """
        principal.require(Scope.WRITE, "resuming workflows")
        self._visible(principal, workflow_id)
        return self._report_view(self._host.get().resume(workflow_id))

    def resume_running(self) -> bool:
        """Start the runtime when the store holds running workflows (``librarian serve`` does at start).

        A server that stopped or died leaves its workflows running with tasks in flight; starting the
        runtime dispatches those tasks again, so the workflows go on. Returns whether any was running.
        """
        with self._lib.sessions() as session:
            running = bool(store.list_workflows(session, 1, status=WorkflowStatus.RUNNING.value))
        if running:
            self._host.get().start()
        return running

    # -- helpers --------------------------------------------------------------------------------

    def _visible(self, principal: Principal, workflow_id: str) -> Workflow:
        with self._lib.sessions() as session:
            workflow = store.get_workflow(session, workflow_id)
            session.expunge(workflow)
        if not may_see(principal, workflow):
            raise NotFoundError(f"no workflow {workflow_id}")
        return workflow

    @staticmethod
    def _report_view(report: WorkflowReport) -> dict[str, Any]:
        return report.to_dict()  # the report carries the owner: no second read of the workflow


def may_see(principal: Principal, workflow: Workflow) -> bool:
    """Whether ``principal`` may read ``workflow``: its creator, an administrator of its organisation,
    the operator, or a principal that sees everything."""
    if principal.sees_everything or principal.is_operator:
        return True
    if principal.organization_id != workflow.organization_id:
        return False
    return principal.is_admin or (
        workflow.created_by is not None and workflow.created_by == principal.user_id
    )


def _listing_scope(principal: Principal) -> tuple[int | None, int | None]:
    """The (organisation, creator) filter a listing applies inside its query."""
    if principal.sees_everything or principal.is_operator:
        return None, None
    if principal.is_admin:
        return principal.organization_id, None
    return principal.organization_id, principal.user_id


def _owner(workflow: Workflow) -> dict[str, Any]:
    return {"organization_id": workflow.organization_id, "created_by": workflow.created_by}


def _own_key(principal: Principal, key: str) -> str:
    """The caller's key, namespaced by who it is: one user's key never finds another's workflow."""
    if principal.is_operator:
        return key
    return f"{principal.organization_id}.{principal.user_id}:{key}"


def _check_wait(wait_seconds: float) -> None:
    if not 0 <= wait_seconds <= MAX_WAIT_SECONDS:
        raise InvalidInputError(
            f"wait_seconds: use 0 to {MAX_WAIT_SECONDS:g}, not {wait_seconds:g}",
            hint="for longer, poll the workflow or follow its events",
        )
