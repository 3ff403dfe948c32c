"""The orchestrator: dispatches ready tasks, re-dispatches expired leases, corrects failures, ends workflows.

Each :meth:`Orchestrator.tick` is a pass over the database (the truth) in one short transaction:

1. tasks whose lease expired are dispatched again as a new attempt -- checked about once a second
   (leases last minutes; checking on every pass read every task in flight) and, for a task never
   claimed, only when the dispatch queue is empty: while other messages wait, its own most likely
   waits with them, so its lease is renewed instead of adding a duplicate to the backlog;
2. pending (or paused, once their corrective tasks succeeded) tasks whose dependencies all succeeded
   are leased and published on the dispatch queue -- always *after* the lease is committed, so a
   crash between the two only delays the task until its lease expires;
3. workflows whose tasks all succeeded are finished with their total reward;
4. each failed task enters correction (:mod:`librarian.runtime.corrections`): its dependents stay
   pending (the branch halts), the policy orders the strategies, the first usable plan is applied by
   atomic surgery, a question pauses the workflow, and no usable plan, or a retry/depth limit, ends
   the workflow with a report. In :meth:`Orchestrator.run` corrections run in background threads, so
   a corrector that thinks for a minute does not stop other workflows from being dispatched.

The loop sleeps until woken: by the evaluator of the same process, by a PostgreSQL notification
from other processes (:mod:`librarian.runtime.wakeup`), or at the latest after ``idle_seconds``.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Collection, Sequence

from sqlalchemy.orm import Session, sessionmaker

from librarian.runtime import attempts, store
from librarian.runtime.broker.base import Broker, QueueInspector
from librarian.runtime.broker.batches import publish_all
from librarian.runtime.contracts import TaskSpec, TaskStatus, WorkflowStatus
from librarian.runtime.corrections import CorrectionMode
from librarian.runtime.correctors import CorrectorRegistry
from librarian.runtime.policy import StrategyPolicy
from librarian.runtime.surgery import Limits

logger = logging.getLogger(__name__)

# Ready tasks leased per pass; a full batch makes the loop pass again at once.
_DISPATCH_BATCH = 500
# After a pass that did nothing, how long the next one waits for more wake-ups to gather.
_IDLE_COALESCE_SECONDS = 0.02
# Expired leases are looked for at most this often (and at least ten times per lease).
_LEASE_CHECK_SECONDS = 1.0


def worker_name(role: str) -> str:
    """``role@host:pid:random``: unique per process, readable in the event log."""
    return f"{role}@{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class Orchestrator:
    """The dispatch and correction loop of the runtime.

    Args:
        sessions: session factory of the runtime database.
        broker: where dispatch messages go.
        correctors: the correction strategies.
        known_executor_types: executor types a plan may use.
        limits: retry, surgery-depth and question limits.
        lease_seconds: lease of a dispatched task.
        invalid_plan_reward: reward recorded for a strategy whose plan was rejected.
        policy: orders the strategies (default: UCB1 over the persisted rewards).
        name: the actor name written in events.
        corrector_timeout_seconds: how long one corrector may think before it counts as rejected.
        correction_threads: failed tasks corrected at once in the background.
        lease_check_seconds: how often expired leases are looked for (default: a second, or a tenth of
            the lease when that is shorter).
    """

    def __init__(
        self,
        sessions: sessionmaker[Session],
        broker: Broker,
        *,
        correctors: CorrectorRegistry,
        known_executor_types: Collection[str],
        limits: Limits,
        lease_seconds: float,
        invalid_plan_reward: float = -0.5,
        policy: StrategyPolicy | None = None,
        name: str | None = None,
        corrector_timeout_seconds: float = 300.0,
        correction_threads: int = 2,
        lease_check_seconds: float | None = None,
    ) -> None:
        self.sessions = sessions
        self.broker = broker
        self.correctors = correctors
        self.known_executor_types = tuple(known_executor_types)
        self.limits = limits
        self.lease_seconds = lease_seconds
        self.invalid_plan_reward = invalid_plan_reward
        self.policy = policy or StrategyPolicy()
        self.name = name or worker_name("orchestrator")
        self.correction_threads = correction_threads
        self.lease_check_seconds = (
            min(_LEASE_CHECK_SECONDS, lease_seconds / 10)
            if lease_check_seconds is None
            else lease_check_seconds
        )
        self._next_lease_check = 0.0
        self.corrections = CorrectionMode(
            sessions,
            correctors,
            self.policy,
            known_executor_types=self.known_executor_types,
            limits=limits,
            invalid_plan_reward=invalid_plan_reward,
            timeout_seconds=corrector_timeout_seconds,
            actor=self.name,
        )
        self._wake = threading.Event()
        self._more_to_do = False
        # The failed tasks being corrected in the background, and the thread correcting each.
        self._correcting: dict[uuid.UUID, threading.Thread] = {}
        self._correcting_lock = threading.Lock()

    # -- the loop ---------------------------------------------------------------------------------

    def wake(self) -> None:
        """Make a waiting :meth:`run` pass start now (a result arrived, a workflow was submitted)."""
        self._wake.set()

    def run(self, stop: threading.Event, *, idle_seconds: float = 0.5) -> None:
        """Tick until ``stop`` is set, sleeping up to ``idle_seconds`` when a pass found nothing to do."""
        while not stop.is_set():
            self._wake.clear()
            try:
                did = self.tick(background=True)
                again = self._more_to_do
            except Exception:
                # The loop must outlive a database hiccup; the next pass retries from the truth.
                logger.exception("orchestrator pass failed; retrying")
                did, again = 0, False
            # New work arrives with a wake-up (a result, a submission); only a pass that inserted
            # corrective tasks or left ready tasks behind is followed at once by another.
            if again:
                continue
            self._wake.wait(idle_seconds)
            if not did:
                # A pass that found nothing to do (results of independent tasks) makes the next one
                # wait a moment, so a burst of wake-ups is served by one pass instead of one each.
                stop.wait(_IDLE_COALESCE_SECONDS)

    def tick(self, *, background: bool = False) -> int:
        """One pass; returns how many things it did (0 when idle).

        The reads and the dispatch leases of a pass share one short transaction; messages are
        published after it commits. Failed tasks are then corrected: here, one after the other
        (``background=False``, what tests and tools want), or in threads of their own while the loop
        goes on dispatching other work (``background=True``, as :meth:`run` does).
        """
        with self.sessions.begin() as session:
            messages = self._redispatch_expired(session)
            ready = attempts.ready_tasks(session, limit=_DISPATCH_BATCH)
            messages += attempts.dispatch_ready(
                session, ready, owner=self.name, lease_seconds=self.lease_seconds
            )
            failed = attempts.failed_task_ids(session)
            finished = self._finish_workflows(session)
        self._publish(messages)
        self._tell_correctors(finished)
        if background:
            self._correct_in_background(failed)
            self._more_to_do = len(ready) == _DISPATCH_BATCH
        else:
            for task_id in failed:
                self.correct(task_id)
            self._more_to_do = bool(failed) or len(ready) == _DISPATCH_BATCH
        return len(messages) + len(failed) + len(finished)

    # -- dispatch ---------------------------------------------------------------------------------

    def _redispatch_expired(self, session: Session) -> list[TaskSpec]:
        now = time.monotonic()
        if now < self._next_lease_check:
            return []
        self._next_lease_check = now + self.lease_check_seconds
        expired = attempts.expired_leases(session)
        never_claimed = any(task.status == TaskStatus.DISPATCHED.value for task in expired)
        waiting = self._dispatch_backlog() if never_claimed else 0
        messages = []
        for task in expired:
            if waiting and task.status == TaskStatus.DISPATCHED.value:
                attempts.extend_queued_lease(
                    session, task, owner=self.name, lease_seconds=self.lease_seconds, waiting=waiting
                )
            elif spec := attempts.redispatch_expired(
                session, task, owner=self.name, lease_seconds=self.lease_seconds
            ):
                messages.append(spec)
        return messages

    def _dispatch_backlog(self) -> int:
        """Messages waiting in the dispatch queue, or 0 when the broker cannot tell."""
        if not isinstance(self.broker, QueueInspector):
            return 0
        try:
            return self.broker.message_count("dispatch")
        except Exception:
            logger.warning(
                "could not count the dispatch queue; expired leases are dispatched again", exc_info=True
            )
            return 0

    def _publish(self, messages: Sequence[TaskSpec]) -> None:
        if not messages:
            return
        try:
            # One wait for the whole batch: a fan-out of 500 tasks is not 500 confirmations in a row.
            publish_all(self.broker, "dispatch", [spec.to_dict() for spec in messages])
        except Exception:
            # The leases are committed: when they expire the tasks are dispatched again.
            logger.exception(
                "publishing %d dispatch message(s) failed; their leases will expire", len(messages)
            )

    # -- correction -------------------------------------------------------------------------------

    def correct(self, task_id: uuid.UUID) -> None:
        """Run correction mode for one failed task now, in this thread (see :mod:`.corrections`)."""
        self.corrections.correct(task_id)

    def _correct_in_background(self, failed: Sequence[uuid.UUID]) -> None:
        """Start correcting each failed task not already being corrected, in threads of their own."""
        for task_id in failed:
            with self._correcting_lock:
                if task_id in self._correcting or len(self._correcting) >= self.correction_threads:
                    continue  # a later pass picks it up
                thread = threading.Thread(
                    target=self._correct_then_wake, args=(task_id,), name=f"correct-{task_id}", daemon=True
                )
                # Started under the lock: join_corrections never sees a thread it cannot join yet.
                thread.start()
                self._correcting[task_id] = thread

    def join_corrections(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the background corrections to end; whether they all did.

        A stopping worker waits here so that a correction ends with its commit and its correctors'
        ``workflow_finished`` hooks, rather than being cut off at exit. One cut off loses nothing but
        that hook: its task stays failed and the next orchestrator corrects it again.
        """
        deadline = time.monotonic() + timeout
        while True:
            with self._correcting_lock:
                running = list(self._correcting.values())
            if not running:
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            running[0].join(remaining)

    def _correct_then_wake(self, task_id: uuid.UUID) -> None:
        try:
            self.corrections.correct(task_id)
        except Exception:
            # The task stays failed, so a later pass tries again from the truth.
            logger.exception("correcting task %s failed; it will be tried again", task_id)
        finally:
            with self._correcting_lock:
                self._correcting.pop(task_id, None)
            self.wake()  # its corrective tasks (or the next failure) want a pass now

    # -- completion -------------------------------------------------------------------------------

    def _finish_workflows(self, session: Session) -> list[uuid.UUID]:
        finished = []
        for workflow_id in attempts.finishable_workflow_ids(session):
            workflow = store.get_workflow(session, workflow_id)
            total = store.update_total_reward(session, workflow_id)
            if store.finish_workflow(
                session,
                workflow,
                WorkflowStatus.SUCCESS,
                actor=self.name,
                reason=f"every task succeeded; total reward {total:+.2f}",
                total_updated=True,
            ):
                finished.append(workflow_id)
        return finished

    def _tell_correctors(self, finished: list[uuid.UUID]) -> None:
        """After the commit: strategies that learn settle the workflows this pass finished."""
        for workflow_id in finished:
            self.correctors.workflow_finished(str(workflow_id))
