"""Worker roles: executor, evaluator, orchestrator, or all of them in one process.

- **executor** consumes the dispatch queue: claims the attempt in the database (``in_progress``; a
  stale or duplicated message is ignored), runs the executor in the workflow's sandbox while a
  heartbeat renews its lease, publishes the result on the results queue and only *then* acknowledges
  the dispatch message. Killed mid-task, its message is redelivered and its lease expires, so the task
  runs again as a new attempt. With a prefetch above 1 it runs the messages waiting as a batch and
  publishes their results as one bundle (:func:`~librarian.runtime.broker.replies.replying_in_batches`).
- **evaluator** consumes the results queue (plain results and bundles): validates the output,
  computes the reward and applies it to the database idempotently (a result for an attempt that is
  no longer current is logged and ignored), then acknowledges.
- **orchestrator** runs the dispatch and correction loop
  (:class:`~librarian.runtime.orchestrator.Orchestrator`).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from sqlalchemy.orm import Session, sessionmaker

from librarian.config import Settings
from librarian.correction.triggers import WarningCheck, load_trigger_rules
from librarian.errors import BackendUnavailableError, InvalidInputError, LibrarianError
from librarian.runtime import attempt_claims, attempt_results, store, wakeup
from librarian.runtime.broker.base import Broker, Handler
from librarian.runtime.broker.batches import BatchBroker, BatchHandler
from librarian.runtime.broker.replies import ReplyHandler, replying, replying_in_batches, unbundled
from librarian.runtime.claims import BatchClaims, Claimer, Claims
from librarian.runtime.contracts import ExecutionResult, TaskSpec
from librarian.runtime.correctors import CorrectorRegistry
from librarian.runtime.evaluator import Rewards, evaluate
from librarian.runtime.executors.base import from_error
from librarian.runtime.executors.registry import ExecutorRegistry, build_registry
from librarian.runtime.orchestrator import Orchestrator, worker_name
from librarian.runtime.sandbox import EnvironmentManager
from librarian.runtime.surgery import Limits

logger = logging.getLogger(__name__)

# Results applied in one transaction at most (only when that many are already waiting).
_RESULT_BATCH = 50

Role = Literal["executor", "evaluator", "orchestrator", "all"]
ROLES: tuple[Role, ...] = ("executor", "evaluator", "orchestrator", "all")


@dataclass
class Services:
    """Everything the roles share in one process."""

    settings: Settings
    sessions: sessionmaker[Session]
    broker: Broker
    correctors: CorrectorRegistry
    # How long one corrector may think (research, an LLM) before it counts as a rejected strategy.
    corrector_timeout_seconds: float = 300.0
    registry: ExecutorRegistry = field(init=False)
    environment: EnvironmentManager = field(init=False)
    rewards: Rewards = field(init=False)
    # The trigger rules that also fire on success ("flag ignored" warnings): they fail the task.
    warnings: WarningCheck = field(init=False)

    def __post_init__(self) -> None:
        self.environment = EnvironmentManager.from_settings(self.settings)
        self.registry = build_registry(self.settings, environment=self.environment)
        self.rewards = Rewards.from_settings(self.settings)
        self.warnings = WarningCheck(load_trigger_rules(self.settings.correction_trigger_files))

    def orchestrator(self, name: str | None = None) -> Orchestrator:
        """An orchestrator configured from the settings."""
        return Orchestrator(
            self.sessions,
            self.broker,
            correctors=self.correctors,
            known_executor_types=self.registry.executor_types(),
            limits=Limits(
                max_retries=self.settings.runtime_max_retries,
                max_depth=self.settings.runtime_max_surgery_depth,
            ),
            lease_seconds=self.settings.runtime_lease_seconds,
            invalid_plan_reward=self.settings.runtime_reward_invalid_output,
            name=name,
            corrector_timeout_seconds=self.corrector_timeout_seconds,
        )


def executor_handler(
    services: Services, name: str, claims: Claimer, keeper: LeaseKeeper | None = None
) -> ReplyHandler:
    """The handler of dispatch messages for the executor called ``name``: it returns the result message.

    :func:`~librarian.runtime.broker.replies.replying` publishes that reply to the results
    queue before the dispatch message is acknowledged: a crash in between re-runs the task, never
    loses it. ``claims`` is shared by the executors of a process, which closes it once
    they have stopped (or is a :class:`~librarian.runtime.claims.BatchClaims` over it).

    Without ``keeper`` the handler renews the lease of the attempt it runs until the task ends. With
    one, the attempt stays held after the task ends, and the caller releases it once the result is
    published: an executor that sends a batch's results together keeps the lease of a finished task
    alive while the rest of the batch runs.
    """
    leases = keeper if keeper is not None else LeaseKeeper(services, name)

    def handle(message: dict[str, Any]) -> dict[str, Any] | None:
        if services.environment.closed:
            # The worker is stopping: claim nothing more (a claimed task would wait for its lease to
            # expire); the message, unacknowledged, goes to another executor at once.
            raise BackendUnavailableError("the executor is stopping")
        try:
            spec = TaskSpec.from_dict(message)
            claimed = claims.claim(spec, worker=name)
        except (KeyError, TypeError, InvalidInputError) as exc:
            # A malformed message would be redelivered forever; the database still has the task,
            # and an expired lease dispatches it again.
            logger.error("dropping malformed dispatch message %.200r: %s", message, exc)
            return None
        if not claimed:
            return None  # duplicate or superseded: acknowledging drops it
        leases.hold(spec)
        try:
            result = run_task(services, spec)
        finally:
            if keeper is None:
                leases.release(spec)
        if services.environment.closed:
            # The worker is stopping and killed the task: its result says nothing about the task.
            # Raising leaves the message unacknowledged; the lease expires and the task runs again.
            raise BackendUnavailableError(f"task {spec.task_id} was stopped with its worker")
        return {"task": message, "result": _as_message(result), "worker": name}

    return handle


def _as_message(result: ExecutionResult) -> dict[str, Any]:
    # ``ExecutionResult.to_dict`` deep-copies (dataclasses.asdict); the message is encoded at once,
    # so a shallow dict is enough and costs a fraction.
    return {
        "ok": result.ok,
        "feedback": result.feedback,
        "output": result.output,
        "duration_seconds": result.duration_seconds,
    }


def run_task(services: Services, spec: TaskSpec) -> ExecutionResult:
    """Run one attempt in its workflow's workspace; our own errors become a failed result."""
    try:
        workspace = services.environment.workspace_for(spec.workflow_id)
        executor = services.registry.get_executor(spec.executor_type)
        return executor.execute(spec, workspace)
    except LibrarianError as exc:
        return from_error(exc)


class LeaseKeeper:
    """The heartbeat of one executor: renews the leases of the attempts it holds every third of a lease.

    An attempt is held from its start until its result is published: one at a time, or several when
    an executor runs a batch and publishes their results together. One thread per executor (started
    with its first task, ended after a minute without any) rather than one per task: starting and
    joining a thread for every task cost more than a no-op task itself.
    """

    def __init__(self, services: Services, name: str) -> None:
        self._services = services
        self._name = name
        self._lease = services.settings.runtime_lease_seconds
        self._held: dict[tuple[str, int], TaskSpec] = {}
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def hold(self, spec: TaskSpec) -> None:
        """Keep renewing the lease of ``spec`` until it is released."""
        with self._lock:
            self._held[(spec.task_id, spec.attempt)] = spec
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, daemon=True, name=f"lease-{self._name}")
                self._thread.start()

    def release(self, spec: TaskSpec) -> None:
        """Stop renewing ``spec`` (its result is published, or about to be)."""
        with self._lock:
            self._held.pop((spec.task_id, spec.attempt), None)

    def release_all(self) -> None:
        """Stop renewing every attempt held (a batch's results are published)."""
        with self._lock:
            self._held.clear()

    def held(self) -> list[TaskSpec]:
        """The attempts whose leases are being renewed."""
        with self._lock:
            return list(self._held.values())

    def _run(self) -> None:
        interval = self._lease / 3
        idle = 0.0
        while True:
            time.sleep(interval)
            with self._lock:
                if not self._held:
                    idle += interval
                    if idle >= max(60.0, self._lease):
                        self._thread = None
                        return
                    continue
            idle = 0.0
            for spec in self.held():
                self._renew(spec)

    def _renew(self, spec: TaskSpec) -> None:
        try:
            with self._services.sessions.begin() as session:
                kept = attempt_claims.renew_lease(session, spec, worker=self._name, lease_seconds=self._lease)
        except Exception:
            logger.warning("renewing the lease of task %s failed", spec.task_id, exc_info=True)
            return
        if not kept:
            self.release(spec)  # superseded: its result will be ignored


def _executor_batches(services: Services, name: str, claims: Claims, keeper: LeaseKeeper) -> BatchHandler:
    """An executor thread's batch handler: claim the batch, run it, publish its results in one bundle.

    The attempts are claimed together before the first task runs (:class:`BatchClaims`); each
    task's lease is renewed from its start until the bundle is published; whatever was claimed and
    never started (the worker is stopping) is handed back, so another executor can take it at once.
    """
    batch_claims = BatchClaims(claims, worker=name)
    executor = executor_handler(services, name, batch_claims, keeper)
    run = replying_in_batches(services.broker, executor, "results")

    def handle(messages: list[dict[str, Any]]) -> None:
        if services.environment.closed:
            raise BackendUnavailableError("the executor is stopping")  # claim nothing: redelivered
        specs = []
        for message in messages:
            with contextlib.suppress(KeyError, TypeError, InvalidInputError):  # logged when it is run
                specs.append(TaskSpec.from_dict(message))
        batch_claims.claim_batch(specs)
        try:
            run(messages)
        finally:
            batch_claims.release_unstarted()
            keeper.release_all()

    return handle


def evaluator_handler(
    services: Services, name: str, *, on_applied: Callable[[], None] | None = None
) -> Handler:
    """The handler of result messages: evaluate, apply once, then (by returning) acknowledge.

    ``on_applied`` wakes an orchestrator of the same process; without one, the commit of an applied
    result sends a PostgreSQL notification (:mod:`librarian.runtime.wakeup`) to the orchestrators of
    other processes.
    """
    batch = evaluator_batch_handler(services, name, on_applied=on_applied)

    def handle(message: dict[str, Any]) -> None:
        batch([message])

    return handle


def evaluator_batch_handler(
    services: Services, name: str, *, on_applied: Callable[[], None] | None = None
) -> BatchHandler:
    """:func:`evaluator_handler` for several result messages (plain or bundles), applied together."""

    def handle(messages: list[dict[str, Any]]) -> None:
        parsed: list[tuple[TaskSpec, uuid.UUID, ExecutionResult]] = []
        for message in _replies_in(messages):
            try:
                spec = TaskSpec.from_dict(message["task"])
                task_id = store.as_uuid(spec.task_id, "task id")
                parsed.append((spec, task_id, ExecutionResult.from_dict(message["result"])))
            except (KeyError, TypeError, InvalidInputError) as exc:
                # A malformed message can never be applied; redelivering it forever would block the queue.
                logger.error("dropping a malformed result message: %s", exc)
        # Bundles can make a batch of messages hold many results: one transaction per
        # ``_RESULT_BATCH`` of them keeps each short (a redelivery finds the committed ones applied).
        wake = False
        for first in range(0, len(parsed), _RESULT_BATCH):
            wake = apply(parsed[first : first + _RESULT_BATCH]) or wake
        if wake and on_applied is not None:
            on_applied()

    def apply(parsed: list[tuple[TaskSpec, uuid.UUID, ExecutionResult]]) -> bool:
        """Apply ``parsed`` in one transaction; whether the orchestrator has work to do."""
        with services.sessions.begin() as session:
            states = attempt_results.task_states(session, [task_id for _, task_id, _ in parsed])
            evaluated = [
                (
                    spec,
                    state,
                    evaluate(
                        spec,
                        result,
                        state.retries,
                        rewards=services.rewards,
                        warning_check=services.warnings,
                    ),
                )
                for spec, task_id, result in parsed
                if (state := states.get(task_id)) is not None
            ]
            results = [(spec, evaluation) for spec, _, evaluation in evaluated]
            flags = attempt_results.apply_results(session, results, actor=name, states=states)
            applied = [
                (state.workflow_id, evaluation)
                for (_, state, evaluation), won in zip(evaluated, flags, strict=True)
                if won
            ]
            # Only results that can give the orchestrator work wake it (not every one of a fan-out).
            wake = attempt_results.orchestrator_needed(session, applied)
            if wake and on_applied is None:
                wakeup.notify(session)
        return wake

    return handle


def _replies_in(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The result messages in ``messages``, bundles unpacked; a malformed bundle is logged and dropped."""
    replies: list[dict[str, Any]] = []
    for message in messages:
        try:
            replies.extend(unbundled(message))
        except TypeError as exc:
            logger.error("dropping a malformed bundle of results: %s", exc)
    return replies


class WorkerGroup:
    """The threads of one worker process (or of the embedded runtime)."""

    def __init__(self, services: Services) -> None:
        self.services = services
        self.stop_event = threading.Event()
        self.threads: list[threading.Thread] = []
        self.orchestrator: Orchestrator | None = None
        self.listener: wakeup.PostgresListener | None = None
        self.claims: Claims | None = None

    def start(
        self,
        role: Role,
        *,
        executor_threads: int = 1,
        evaluator_threads: int = 1,
        executor_prefetch: int = 1,
    ) -> None:
        """Start the threads of ``role`` (``all``: every role).

        Args:
            role: executor, evaluator, orchestrator or all.
            executor_threads: consumers of the dispatch queue (tasks run at once).
            evaluator_threads: consumers of the results queue. Applying a result is mostly waiting on
                the database, so on PostgreSQL a few evaluators keep up with many executors; on
                SQLite writes are serialised anyway and one is enough.
            executor_prefetch: dispatch messages one executor thread holds at once. Above 1 (on a
                broker that moves batches), it runs those already waiting one after another and
                sends their results in one message (``runtime_executor_prefetch``).

        Raises:
            InvalidInputError: unknown role, or a count below 1.
        """
        if executor_threads < 1 or evaluator_threads < 1 or executor_prefetch < 1:
            raise InvalidInputError(
                "executor_threads, evaluator_threads and executor_prefetch must be at least 1"
            )
        if role not in ROLES:
            raise InvalidInputError(f"unknown worker role {role!r}", hint=f"use one of {', '.join(ROLES)}")
        roles: Sequence[str] = ("orchestrator", "evaluator", "executor") if role == "all" else (role,)
        if "orchestrator" in roles:
            self.orchestrator = self.services.orchestrator(worker_name("orchestrator"))
            # Results applied and workflows submitted by other processes wake it at once.
            self.listener = wakeup.listener_for(
                self.services.settings.resolved_database_url, self.orchestrator.wake
            )
            self._spawn("orchestrator", self._orchestrate)
        if "evaluator" in roles:
            wake = self.orchestrator.wake if self.orchestrator is not None else None
            for index in range(evaluator_threads):
                results = evaluator_batch_handler(
                    self.services, worker_name(f"evaluator{index}"), on_applied=wake
                )
                consume = functools.partial(self._consume_batches, "results", results, _RESULT_BATCH)
                self._spawn(f"evaluator{index}", consume)
        if "executor" in roles:
            self.claims = Claims(
                self.services.sessions, lease_seconds=self.services.settings.runtime_lease_seconds
            )
            for index in range(executor_threads):
                name = worker_name(f"executor{index}")
                # Each result is stored in the results queue before its dispatch message is acked.
                if executor_prefetch > 1:
                    keeper = LeaseKeeper(self.services, name)
                    batches = _executor_batches(self.services, name, self.claims, keeper)
                    consume = functools.partial(self._consume_batches, "dispatch", batches, executor_prefetch)
                else:
                    dispatch = replying(
                        self.services.broker, executor_handler(self.services, name, self.claims), "results"
                    )
                    consume = functools.partial(self._consume, "dispatch", dispatch)
                self._spawn(f"executor{index}", consume)

    def wake(self) -> None:
        """Wake the orchestrator of this group, if it has one."""
        if self.orchestrator is not None:
            self.orchestrator.wake()

    def stop(self, timeout: float = 10.0) -> None:
        """Ask every thread to stop, kill the tasks running, and wait up to ``timeout`` seconds for each.

        A task's process group is killed rather than waited for: it could run for its whole timeout,
        and a worker that exits leaving it behind would see it run a second time once its lease
        expires. Killed tasks are not reported; they run again as new attempts.
        """
        self.stop_event.set()
        self.wake()
        self.services.environment.shutdown()
        if self.listener is not None:
            self.listener.stop(timeout)
        for thread in self.threads:
            thread.join(timeout)
        if self.orchestrator is not None and not self.orchestrator.join_corrections(timeout):
            logger.warning("stopping with a correction still running; the next orchestrator redoes it")
        if self.claims is not None and not any(thread.is_alive() for thread in self.threads):
            # A thread still claiming would wait on (or find closed) its connection; the process
            # exiting closes them then.
            self.claims.close()

    def wait(self) -> None:
        """Block until :meth:`stop` is called (from a signal handler, say)."""
        while not self.stop_event.wait(1.0):
            pass

    def _spawn(self, name: str, target: Callable[[], None]) -> None:
        thread = threading.Thread(target=target, name=f"librarian-{name}", daemon=True)
        thread.start()
        self.threads.append(thread)

    def _orchestrate(self) -> None:
        assert self.orchestrator is not None
        self.orchestrator.run(self.stop_event)

    def _consume_batches(
        self, queue: Literal["dispatch", "results"], handler: BatchHandler, max_batch: int
    ) -> None:
        """Hand ``handler`` whatever is waiting, up to ``max_batch`` messages, when the broker can."""
        broker = self.services.broker
        if not isinstance(broker, BatchBroker):
            self._consume(queue, lambda message: handler([message]))
            return
        while not self.stop_event.is_set():
            try:
                broker.consume_batches(queue, handler, self.stop_event, max_batch=max_batch)
            except Exception:
                logger.exception("consuming %s failed; retrying", queue)
                self.stop_event.wait(1.0)

    def _consume(self, queue: Literal["dispatch", "results"], handler: Handler) -> None:
        while not self.stop_event.is_set():
            try:
                self.services.broker.consume(queue, handler, self.stop_event, prefetch=1)
            except Exception:
                # consume() reconnects by itself; this guards against anything it could not handle.
                logger.exception("consuming %s failed; retrying", queue)
                self.stop_event.wait(1.0)
