"""Correction mode for one failed task: ask the strategies in the policy's order, apply the first usable plan.

:class:`Corrector` is called with the failed task's context (goal, error, successes so far, answers
to earlier questions). Its answer is one of

- a plan: validated (:mod:`librarian.runtime.plan`) and applied by atomic surgery;
- a question (:class:`~librarian.runtime.correctors.ClarificationRequest`): the workflow pauses
  until the user answers (:mod:`librarian.runtime.clarify`);
- nothing, an invalid plan, a crash or no answer within ``timeout_seconds``: recorded as a rejected
  strategy (with the reason, and the invalid-plan reward in the policy's statistics); the next
  strategy is tried.

When no strategy helps, or a retry, depth or question limit is reached, the workflow fails with a
report. A corrector runs in a thread of its own, so a slow one costs at most its timeout and never
holds the orchestrator's dispatch loop (which runs corrections in the background).
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Collection
from typing import Any, TypeVar

from sqlalchemy.orm import Session, sessionmaker

from librarian.runtime import clarify, store
from librarian.runtime.contracts import TaskStatus, WorkflowStatus
from librarian.runtime.correctors import (
    ClarificationRequest,
    CompletedTask,
    CorrectionContext,
    CorrectionProposal,
    CorrectorRegistry,
    FailedTask,
    error_category,
)
from librarian.runtime.models import Task
from librarian.runtime.plan import PlanRejectedError, validate_plan
from librarian.runtime.policy import StrategyPolicy
from librarian.runtime.surgery import Limits, fail_workflow, limit_reached, perform_surgery

logger = logging.getLogger(__name__)

T = TypeVar("T")
Proposal = CorrectionProposal | ClarificationRequest | None


class CorrectorTimeoutError(Exception):
    """A corrector did not answer in time (it is abandoned; its late answer is ignored)."""


def call_with_timeout(function: Callable[[], T], seconds: float, name: str) -> T:
    """``function()`` in a daemon thread of its own; raises :class:`CorrectorTimeoutError` after ``seconds``.

    A thread cannot be killed, so a corrector that hangs keeps its thread; being a daemon, it never
    keeps the process alive, and nothing it returns later is used.
    """
    outcome: dict[str, Any] = {}
    done = threading.Event()

    def target() -> None:
        try:
            outcome["value"] = function()
        except BaseException as exc:  # handed to the caller, which decides what it means
            outcome["error"] = exc
        finally:
            done.set()

    threading.Thread(target=target, name=f"corrector-{name}", daemon=True).start()
    if not done.wait(seconds):
        raise CorrectorTimeoutError(f"no answer within {seconds:g}s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]  # type: ignore[no-any-return]


class CorrectionMode:
    """Corrects failed tasks with the registered strategies.

    Args:
        sessions: session factory of the runtime database.
        correctors: the strategies.
        policy: orders the strategies per error category.
        known_executor_types: executor types a plan may use.
        limits: retry, surgery-depth and question limits.
        invalid_plan_reward: recorded for a strategy whose answer could not be used.
        timeout_seconds: how long one corrector may take before it counts as rejected.
        actor: the name written in events.
    """

    def __init__(
        self,
        sessions: sessionmaker[Session],
        correctors: CorrectorRegistry,
        policy: StrategyPolicy,
        *,
        known_executor_types: Collection[str],
        limits: Limits,
        invalid_plan_reward: float,
        timeout_seconds: float,
        actor: str,
    ) -> None:
        self.sessions = sessions
        self.correctors = correctors
        self.policy = policy
        self.known_executor_types = tuple(known_executor_types)
        self.limits = limits
        self.invalid_plan_reward = invalid_plan_reward
        self.timeout_seconds = timeout_seconds
        self.actor = actor

    def correct(self, task_id: uuid.UUID) -> None:
        """Run correction mode for one failed task (see the module docstring)."""
        with self.sessions.begin() as session:
            task = session.get(Task, task_id)
            if task is None or task.status != TaskStatus.FAILED.value:
                return
            if store.get_workflow(session, task.workflow_id).final_status != WorkflowStatus.RUNNING.value:
                return  # paused for a question, or ended, since the pass that found it
            workflow_id = str(task.workflow_id)
            reason = limit_reached(session, task, self.limits)
            if reason is not None:
                fail_workflow(session, task, reason, actor=self.actor)
            else:
                context = self.context(session, task)
                category = context.failed.error_category
                order = self.policy.choose(session, category, self.correctors.names())
                store.record_event(
                    session,
                    workflow_id=task.workflow_id,
                    task_id=task.task_id,
                    kind="correction_started",
                    actor=self.actor,
                    reason=f"{category} failure; trying strategies in order {order}",
                    data={"category": category, "order": order},
                )
        if reason is not None:
            self.correctors.workflow_finished(workflow_id)  # after the commit that ended it
            return
        rejected: list[dict[str, Any]] = []
        for strategy in order:
            if self._try_strategy(task_id, strategy, context, rejected):
                return
        with self.sessions.begin() as session:
            task = session.get(Task, task_id)
            if task is None or task.status != TaskStatus.FAILED.value:
                return
            fail_workflow(
                session,
                task,
                f"no correction strategy produced a usable plan for {task.task_key!r} ({category})",
                actor=self.actor,
                rejected=rejected,
            )
        self.correctors.workflow_finished(workflow_id)

    def _try_strategy(
        self, task_id: uuid.UUID, strategy: str, context: CorrectionContext, rejected: list[dict[str, Any]]
    ) -> bool:
        """Ask one strategy and act on its answer; ``False`` when it gave nothing usable."""
        category = context.failed.error_category
        corrector = self.correctors.get(strategy)
        problem: str | None = None
        proposal: Proposal = None
        try:
            proposal = call_with_timeout(lambda: corrector.propose(context), self.timeout_seconds, strategy)
        except CorrectorTimeoutError as exc:
            problem = f"the corrector timed out: {exc}"
        except Exception as exc:
            # A corrector is plug-in code; its crash is one rejected strategy, not a dead orchestrator.
            logger.exception("corrector %s raised", strategy)
            problem = f"the corrector raised {type(exc).__name__}: {exc}"
        if proposal is None:
            rejected.append({"strategy": strategy, "reason": problem or "no proposal"})
            if problem:
                self._reject(task_id, strategy, category, problem)
            return False
        if isinstance(proposal, ClarificationRequest):
            return self._ask(task_id, strategy, proposal, category, rejected)
        try:
            plan = validate_plan(
                proposal.plan,
                known_executor_types=self.known_executor_types,
                failed_executor_type=context.failed.executor_type,
            )
        except PlanRejectedError as exc:
            rejected.append({"strategy": strategy, "reason": exc.reason})
            self._reject(task_id, strategy, category, exc.reason, raw=proposal.plan)
            return False
        with self.sessions.begin() as session:
            task = session.get(Task, task_id)
            if task is None:
                return True
            if store.get_workflow(session, task.workflow_id).final_status != WorkflowStatus.RUNNING.value:
                return True
            perform_surgery(
                session,
                task,
                plan,
                strategy=strategy,
                category=category,
                rationale=proposal.rationale,
                actor=self.actor,
            )
        return True

    def _ask(
        self,
        task_id: uuid.UUID,
        strategy: str,
        request: ClarificationRequest,
        category: str,
        rejected: list[dict[str, Any]],
    ) -> bool:
        question = request.question.strip()
        with self.sessions.begin() as session:
            task = session.get(Task, task_id)
            if task is None or task.status != TaskStatus.FAILED.value:
                return True
            asked = clarify.questions_asked(session, task_id)
            if question and asked < self.limits.max_questions:
                clarify.ask(
                    session,
                    task,
                    strategy=strategy,
                    question=question,
                    rationale=request.rationale,
                    category=category,
                    actor=self.actor,
                )
                return True
        reason = (
            "the corrector asked an empty question"
            if not question
            else f"already asked {asked} question(s) about this task (limit {self.limits.max_questions})"
        )
        rejected.append({"strategy": strategy, "reason": reason})
        self._reject(task_id, strategy, category, reason, raw={"question": request.question})
        return False

    def _reject(self, task_id: uuid.UUID, strategy: str, category: str, reason: str, raw: Any = None) -> None:
        with self.sessions.begin() as session:
            task = session.get(Task, task_id)
            if task is None:
                return
            store.record_event(
                session,
                workflow_id=task.workflow_id,
                task_id=task.task_id,
                kind="plan_rejected",
                actor=self.actor,
                reason=f"strategy {strategy!r}: {reason}",
                data={"strategy": strategy, "category": category, "plan": raw},
            )
            self.policy.record(session, category, strategy, self.invalid_plan_reward)

    def context(self, session: Session, task: Task) -> CorrectionContext:
        """What the correctors are told about the failed ``task``."""
        workflow = store.get_workflow(session, task.workflow_id)
        feedback = dict(task.feedback_notes or {})
        failed = FailedTask(
            key=task.task_key,
            description=task.description,
            executor_type=task.executor_type,
            payload=dict(task.payload),
            feedback_notes=feedback,
            retries=task.retries,
            error_category=error_category(feedback),
        )
        history = tuple(
            CompletedTask(
                key=done.task_key,
                description=done.description,
                executor_type=done.executor_type,
                payload=dict(done.payload),
                notes=str((done.feedback_notes or {}).get("notes", "")),
            )
            for done in store.successful_tasks(session, task.workflow_id)
        )
        return CorrectionContext(
            goal=workflow.user_prompt,
            failed=failed,
            history=history,
            answers=clarify.answers(session, task.workflow_id),
            workflow_id=str(task.workflow_id),
            task_id=str(task.task_id),
        )
