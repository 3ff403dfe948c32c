"""The runtime facade: submit workflows, wait for them, read their state, cancel them.

Embedded (no ``broker_url``): every role runs in this process on an in-memory queue, with
``runtime_workers`` executor threads, started on the first submission. With ``broker_url`` set the
runtime only writes workflows to the database; ``librarian worker`` processes (possibly on other
hosts, sharing the database and RabbitMQ) do the work.

Example:
    >>> with Runtime(Settings.load()) as runtime:  # doctest: +SKIP
    ...     report = runtime.run(load_spec(Path("build.yaml")), timeout=60)
    ...     print(report.status, report.total_reward)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from librarian.config import Settings
from librarian.errors import ConflictError, InvalidInputError, TaskFailedError
from librarian.runtime import clarify, recovery, store, wakeup
from librarian.runtime.broker.base import Broker
from librarian.runtime.broker.factory import broker_from_url
from librarian.runtime.broker.memory import InMemoryBroker
from librarian.runtime.contracts import WorkflowOwner, WorkflowStatus
from librarian.runtime.correctors import Corrector, CorrectorRegistry, default_correctors
from librarian.runtime.executors.registry import build_registry
from librarian.runtime.orchestrator import worker_name
from librarian.runtime.report import WorkflowReport, build_report, summary
from librarian.runtime.spec import WorkflowSpec, load_spec
from librarian.runtime.worker import Services, WorkerGroup
from librarian.storage.database import open_database

# ``wait`` polls the workflow's status quickly at first (a short workflow returns at once), then
# less and less often: a client polling every 20 ms cost the workers of a long run 5 % of the machine.
_FIRST_POLL_SECONDS = 0.02
_MAX_POLL_SECONDS = 0.2


class Runtime:
    """Submit and follow workflows (embedded workers, or a shared database and broker).

    Args:
        settings: configuration (database, broker, limits, rewards).
        correctors: correction strategies; default: :func:`default_correctors`.
        broker: a broker to use instead of the one ``settings.broker_url`` names; passing one makes
            the runtime embedded-style (it runs the workers itself).
        corrector_timeout_seconds: how long one corrector may take before it counts as rejected
            (default: ``settings.runtime_corrector_timeout_seconds``).
    """

    def __init__(
        self,
        settings: Settings,
        *,
        correctors: Iterable[Corrector] | None = None,
        broker: Broker | None = None,
        corrector_timeout_seconds: float | None = None,
    ) -> None:
        self.settings = settings
        settings.home.mkdir(parents=True, exist_ok=True)
        self.engine: Engine
        self.sessions: sessionmaker[Session]
        self.engine, self.sessions = open_database(settings.resolved_database_url)
        self.correctors = CorrectorRegistry(default_correctors() if correctors is None else correctors)
        self.embedded = broker is not None or not settings.broker_url
        self.corrector_timeout_seconds = (
            settings.runtime_corrector_timeout_seconds
            if corrector_timeout_seconds is None
            else corrector_timeout_seconds
        )
        self._broker = broker
        self._workers: WorkerGroup | None = None
        self._lock = threading.Lock()
        self.executor_types = build_registry(settings).executor_types()
        self.name = worker_name("runtime")

    # -- lifecycle --------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the embedded workers (idempotent; a no-op with a remote broker).

        Tasks a dead process of this machine left in flight (an embedded run killed with
        ``kill -9``) are dispatched again at once: their workflows go on here.
        """
        with self._lock:
            if not self.embedded or self._workers is not None:
                return
            with self.sessions.begin() as session:
                recovery.release_orphans(session, actor=self.name)
            broker = self._broker or InMemoryBroker()
            self._broker = broker
            services = Services(
                self.settings, self.sessions, broker, self.correctors, self.corrector_timeout_seconds
            )
            self._workers = WorkerGroup(services)
            self._workers.start("all", executor_threads=self.settings.runtime_workers)

    def close(self) -> None:
        """Stop embedded workers and release the database."""
        with self._lock:
            workers, self._workers = self._workers, None
        if workers is not None:
            workers.stop()
            workers.services.broker.close()
        self.engine.dispose()

    def __enter__(self) -> Runtime:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()

    # -- workflows --------------------------------------------------------------------------------

    def load(self, path: Path) -> WorkflowSpec:
        """Read a workflow file, checking its executor types against the registered ones."""
        return load_spec(path, known_executor_types=self.executor_types)

    def submit(
        self, spec: WorkflowSpec, *, idempotency_key: str | None = None, owner: WorkflowOwner | None = None
    ) -> str:
        """Store a workflow as running and return its id (embedded: start the workers too).

        Args:
            spec: the workflow.
            idempotency_key: a key of the client's choosing (1-255 printable characters). Submitting
                again with the same key and the same workflow returns the first workflow's id instead
                of starting it twice (a client retrying after a crash or a lost answer).
            owner: who submits it (default: the operator of the local organisation).

        Raises:
            InvalidInputError: a task names an unknown executor type, or the key is not valid.
            ConflictError: the key was used for a different workflow.
        """
        from librarian.runtime.spec import parse_spec

        # Re-validating catches a spec built without executor types checked.
        parse_spec(spec.to_dict(), origin=f"workflow {spec.name!r}", known_executor_types=self.executor_types)
        if idempotency_key is not None:
            _check_key(idempotency_key)
            existing = self._submitted(idempotency_key, spec)
            if existing is not None:
                self.start()
                return existing
        try:
            with self.sessions.begin() as session:
                who = owner or WorkflowOwner()
                workflow = store.create_workflow(
                    session,
                    spec,
                    actor=self.name,
                    submission_key=idempotency_key,
                    organization_id=who.organization_id,
                    created_by=who.created_by,
                )
                workflow_id = str(workflow.workflow_id)
                if not self.embedded:
                    wakeup.notify(session)  # the orchestrators of `librarian worker` processes
        except IntegrityError:
            # Submitted with the same key at the same moment: the other submission won.
            existing = self._submitted(idempotency_key, spec) if idempotency_key is not None else None
            if existing is None:
                raise
            workflow_id = existing
        self.start()
        if self._workers is not None:
            self._workers.wake()
        return workflow_id

    def _submitted(self, key: str, spec: WorkflowSpec) -> str | None:
        """The id of the workflow submitted with ``key``, if any; a different workflow is a conflict."""
        with self.sessions() as session:
            workflow = store.workflow_by_submission_key(session, key)
            if workflow is None:
                return None
            if workflow.spec != spec.to_dict():
                raise ConflictError(
                    f"the idempotency key {key!r} was used for another workflow ({workflow.workflow_id})",
                    hint="use a new key for a new workflow",
                )
            return str(workflow.workflow_id)

    def resume(self, workflow_id: str) -> WorkflowReport:
        """Go on with a running workflow whose process died (an embedded run killed with ``kill -9``).

        Tasks left in flight by a dead process of this machine are dispatched again at once, as new
        attempts; embedded, this runtime's workers then run the workflow. Follow it with :meth:`wait`.

        Raises:
            NotFoundError: no such workflow.
            ConflictError: the workflow is not running (finished, cancelled, or paused for an answer).
        """
        with self.sessions.begin() as session:
            workflow = store.get_workflow(session, workflow_id)
            if workflow.final_status != WorkflowStatus.RUNNING.value:
                hint = (
                    f"answer it: librarian workflow answer {workflow_id} TEXT"
                    if workflow.final_status == WorkflowStatus.PAUSED.value
                    else "submit it again to run it again"
                )
                raise ConflictError(
                    f"workflow {workflow_id} is {workflow.final_status}, not running", hint=hint
                )
            recovery.release_orphans(session, actor=self.name, workflow_id=workflow.workflow_id)
            if not self.embedded:
                wakeup.notify(session)
        self.start()
        if self._workers is not None:
            self._workers.wake()
        return self.status(workflow_id)

    def run(
        self,
        spec: WorkflowSpec,
        *,
        wait: bool = True,
        timeout: float | None = None,
        idempotency_key: str | None = None,
        owner: WorkflowOwner | None = None,
    ) -> WorkflowReport:
        """Submit ``spec`` (see :meth:`submit`) and, with ``wait``, block until it ends (see :meth:`wait`)."""
        workflow_id = self.submit(spec, idempotency_key=idempotency_key, owner=owner)
        return self.wait(workflow_id, timeout=timeout) if wait else self.status(workflow_id)

    def wait(
        self,
        workflow_id: str,
        *,
        timeout: float | None = None,
        first_poll: float = _FIRST_POLL_SECONDS,
        max_poll: float = _MAX_POLL_SECONDS,
    ) -> WorkflowReport:
        """Block until the workflow reaches a final status or pauses with a question for the user.

        Args:
            workflow_id: the workflow.
            timeout: give up after this many seconds.
            first_poll: the first pause between status reads (they grow by half each time, to
                ``max_poll``); a caller waiting for a one-task workflow, such as a runbook step, polls
                sooner and more often.
            max_poll: the longest pause between status reads.

        Raises:
            TaskFailedError: ``timeout`` seconds passed first (the workflow keeps running).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = first_poll
        while True:
            with self.sessions() as session:
                status = store.workflow_status(session, workflow_id)
            if status != WorkflowStatus.RUNNING.value:
                return self.status(workflow_id)
            if deadline is not None and time.monotonic() > deadline:
                raise TaskFailedError(
                    f"workflow {workflow_id} still running after {timeout:g}s",
                    hint=f"follow it with: librarian workflow status {workflow_id}",
                )
            time.sleep(pause)
            pause = min(pause * 1.5, max_poll)

    def status(self, workflow_id: str) -> WorkflowReport:
        """The workflow's tree of tasks and its event log.

        Raises:
            NotFoundError: no such workflow. InvalidInputError: not a workflow id.
        """
        with self.sessions() as session:
            return build_report(session, workflow_id)

    def list(self, limit: int = 100) -> list[dict[str, Any]]:
        """The newest workflows first, one summary each."""
        with self.sessions() as session:
            return [summary(workflow) for workflow in store.list_workflows(session, limit)]

    def cancel(self, workflow_id: str) -> WorkflowReport:
        """Stop dispatching the workflow's tasks; running attempts finish but start nothing new.

        A running or paused workflow is cancelled; a finished one is left as it is.

        Raises:
            NotFoundError: no such workflow.
        """
        with self.sessions.begin() as session:
            workflow = store.get_workflow(session, workflow_id)
            store.finish_workflow(
                session,
                workflow,
                WorkflowStatus.CANCELLED,
                actor=self.name,
                reason="cancelled by request",
                from_statuses=(WorkflowStatus.RUNNING, WorkflowStatus.PAUSED),
            )
        return self.status(workflow_id)

    def answer(self, workflow_id: str, text: str) -> WorkflowReport:
        """Answer the question a paused workflow asked, and set it running again.

        The correctors see the answer (``CorrectionContext.answers``) when they correct the failed
        task again, which the orchestrator does at its next pass. Embedded, this starts the workers.

        Raises:
            NotFoundError: no such workflow. InvalidInputError: an empty answer.
            ConflictError: the workflow is not waiting for an answer.
        """
        with self.sessions.begin() as session:
            clarify.answer(session, workflow_id, text, actor=self.name)
            if not self.embedded:
                wakeup.notify(session)
        self.start()
        if self._workers is not None:
            self._workers.wake()
        return self.status(workflow_id)


def _check_key(key: str) -> None:
    if not 1 <= len(key) <= 255 or not key.isprintable():
        raise InvalidInputError(
            f"idempotency key {key[:40]!r} is not valid", hint="use 1-255 printable characters, e.g. a UUID"
        )


def remote_broker(settings: Settings) -> Broker:
    """The broker ``settings.broker_url`` names (for ``librarian worker``)."""
    return broker_from_url(settings.broker_url)
