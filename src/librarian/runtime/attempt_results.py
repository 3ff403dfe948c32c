"""The end of an attempt in the database: its evaluated result applied once, and what it changes.

A result names the attempt it belongs to; it is applied only while that attempt is still the task's
current one and in flight (a compare-and-set ``UPDATE``), with its ``result_applied`` event and the
workflow's reward, so a result delivered twice, or late after a lease expired, changes nothing. The
statements are built once at import, as in :mod:`librarian.runtime.attempts`, the rest of an
attempt's life.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import bindparam, exists, literal_column, select, text, update
from sqlalchemy.orm import Session

from librarian.runtime.attempts import insert_events
from librarian.runtime.contracts import TaskSpec, TaskStatus, WorkflowStatus
from librarian.runtime.evaluator import Evaluation
from librarian.runtime.models import TASK_EVENTS as _EVENTS
from librarian.runtime.models import TASKS as _TASKS
from librarian.runtime.models import WORKFLOWS as _WORKFLOWS
from librarian.runtime.store import (
    IN_FLIGHT,
    WAITING,
    add_strategy_reward,
    as_uuid,
    event_row,
)
from librarian.storage.models import utcnow

_RUNNING = WorkflowStatus.RUNNING.value


class TaskState(NamedTuple):
    """What applying a result needs to know about the task first."""

    workflow_id: uuid.UUID
    status: str
    attempt: int
    retries: int
    reward: float | None
    correction_strategy: str | None
    error_category: str | None


# -- statements, built once ----------------------------------------------------------------------

# The columns of TaskState, in its order; _STATES adds the task id to key the rows.
_STATE_COLUMNS = [_TASKS.c[name] for name in TaskState._fields]
_STATE = select(*_STATE_COLUMNS).where(_TASKS.c.task_id == bindparam("p_task_id"))
_STATES = select(*_STATE_COLUMNS, _TASKS.c.task_id).where(
    _TASKS.c.task_id.in_(bindparam("p_ids", expanding=True))
)

_APPLY = (
    update(_TASKS)
    .where(
        _TASKS.c.task_id == bindparam("p_task_id"),
        # Literal values, not an expanding IN: that would be re-rendered for every execution, and
        # this statement runs once per result (a tenth of the evaluator's CPU went to it).
        _TASKS.c.status.in_([literal_column(f"'{status}'") for status in IN_FLIGHT]),
        _TASKS.c.attempt == bindparam("p_attempt"),
    )
    .values(
        status=bindparam("p_status"),
        reward=bindparam("p_reward"),
        feedback_notes=bindparam("p_feedback"),
        lease_owner=None,
        lease_expires_at=None,
        # The outcome of a repaired task's retry is the verdict on the strategy; it is given once.
        correction_strategy=None,
        last_update_timestamp=bindparam("p_now"),
    )
)

_ADD_REWARD = (
    update(_WORKFLOWS)
    .where(_WORKFLOWS.c.workflow_id == bindparam("p_workflow_id"))
    .values(
        total_reward=_WORKFLOWS.c.total_reward + bindparam("p_delta"),
        last_update_timestamp=bindparam("p_now"),
    )
)

# PostgreSQL: a whole batch of results in one statement. Each JSON row carries one result and its
# ``result_applied`` event; a row is applied only if its attempt is still the task's current one and
# in flight (the compare-and-set of _APPLY), its event is written in the same statement, and the ids
# of the applied tasks come back. Faster than one UPDATE per result by the number of results.
_APPLY_ALL = text(
    """
    WITH result AS (
        SELECT (r->>'task_id')::uuid AS task_id, (r->>'attempt')::int AS attempt,
               r->>'status' AS status, (r->>'reward')::float8 AS reward, r->'feedback' AS feedback,
               r->>'before' AS before, r->>'reason' AS reason, r->'data' AS data
        FROM jsonb_array_elements(CAST(:p_rows AS jsonb)) AS r
    ), applied AS (
        UPDATE tasks
        SET status = result.status, reward = result.reward, feedback_notes = result.feedback,
            lease_owner = NULL, lease_expires_at = NULL, correction_strategy = NULL,
            last_update_timestamp = :p_now
        FROM result
        WHERE tasks.task_id = result.task_id AND tasks.attempt = result.attempt
          AND tasks.status IN ({in_flight})
        RETURNING tasks.task_id, tasks.workflow_id, result.before, result.status, result.reason, result.data
    )
    INSERT INTO task_events (task_id, workflow_id, at, kind, from_status, to_status, actor, reason, data)
    SELECT task_id, workflow_id, :p_now, 'result_applied', before, status, :p_actor, reason, data
    FROM applied
    RETURNING task_id
    """.format(in_flight=", ".join(f"'{status}'" for status in IN_FLIGHT))
).bindparams(bindparam("p_now", type_=_EVENTS.c.at.type))

# Whether the orchestrator has anything to do after results of these workflows succeeded: a task
# waiting to be dispatched (its dependencies may now be met), or a workflow now wholly successful.
# Both read one entry of ix_tasks_workflow_status per workflow.
_ORCHESTRATOR_NEEDED = select(
    exists().where(
        _TASKS.c.workflow_id.in_(bindparam("p_workflows", expanding=True)), _TASKS.c.status.in_(WAITING)
    )
    | exists().where(
        _WORKFLOWS.c.workflow_id.in_(bindparam("p_workflows", expanding=True)),
        _WORKFLOWS.c.final_status == _RUNNING,
        ~exists().where(
            _TASKS.c.workflow_id == _WORKFLOWS.c.workflow_id, _TASKS.c.status != TaskStatus.SUCCESS.value
        ),
    )
)


def task_state(session: Session, task_id: str | uuid.UUID) -> TaskState | None:
    """The fields of a task that evaluating and applying a result need, or ``None`` if it is gone."""
    row = session.execute(_STATE, {"p_task_id": as_uuid(task_id, "task id")}).first()
    return TaskState(*row) if row is not None else None


def task_states(session: Session, task_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, TaskState]:
    """:func:`task_state` of several tasks in one query (missing tasks are left out)."""
    if not task_ids:
        return {}
    rows = session.execute(_STATES, {"p_ids": list(set(task_ids))})
    return {row[-1]: TaskState(*row[:-1]) for row in rows}


def apply_result(
    session: Session,
    spec: TaskSpec,
    evaluation: Evaluation,
    *,
    actor: str,
    state: TaskState | None = None,
) -> bool:
    """Record the evaluated outcome of one attempt, exactly once; returns whether it was applied.

    ``False`` means the attempt is no longer current (a duplicate message, or a result arriving after
    its lease expired and the task was dispatched again); that is written to the event log and
    changes nothing else. ``state`` is :func:`task_state`, when the caller already read it.
    """
    task_id = as_uuid(spec.task_id, "task id")
    states = {task_id: state} if state is not None else None
    return apply_results(session, [(spec, evaluation)], actor=actor, states=states)[0]


def apply_results(
    session: Session,
    results: Sequence[tuple[TaskSpec, Evaluation]],
    *,
    actor: str,
    states: Mapping[uuid.UUID, TaskState] | None = None,
) -> list[bool]:
    """:func:`apply_result` for several attempts in one transaction; one flag per result, in order.

    Each result is still its own compare-and-set, so a duplicate within the batch is ignored like any
    other; the event rows are inserted together and the reward of each workflow is updated once. On
    PostgreSQL a batch without duplicates is applied by one statement (:data:`_APPLY_ALL`).
    """
    ids = [as_uuid(spec.task_id, "task id") for spec, _ in results]
    known = dict(states) if states is not None else task_states(session, ids)
    now = utcnow()
    # One by one, rows are locked in task-id order (then workflows in id order), so two evaluators
    # applying overlapping batches never wait on each other in a cycle. The one statement of a
    # PostgreSQL batch locks in its plan's order instead; overlapping batches (only redelivered
    # duplicates) can then deadlock, which PostgreSQL detects: the batch fails and is redelivered.
    order = [i for i in sorted(range(len(ids)), key=lambda i: (ids[i], i)) if ids[i] in known]
    set_based = session.get_bind().dialect.name == "postgresql" and len(set(ids)) == len(ids)
    won_by_statement = _apply_all(session, results, ids, known, order, actor, now) if set_based else set()
    rows: list[dict[str, Any]] = []
    deltas: dict[uuid.UUID, float] = {}
    applied = [False] * len(ids)
    for index in order:
        task_id = ids[index]
        spec, evaluation = results[index]
        state = known[task_id]
        status = TaskStatus(evaluation.status)
        if set_based:
            won = task_id in won_by_statement
        else:
            won = session.execute(_APPLY, _apply_parameters(task_id, spec, evaluation, now)).rowcount == 1  # type: ignore[attr-defined]
        if not won:
            current = task_state(session, task_id) or state
            rows.append(
                event_row(
                    state.workflow_id,
                    task_id,
                    "stale_result_ignored",
                    actor,
                    f"result of attempt {spec.attempt} ignored: the task is {current.status} at attempt "
                    f"{current.attempt} (already applied, or superseded after a lease expired)",
                    None,
                    None,
                    now,
                    {"attempt": spec.attempt, "status": evaluation.status},
                )
            )
            continue
        if not set_based:
            event = _applied_event(spec, evaluation, state)
            rows.append(
                event_row(
                    state.workflow_id,
                    task_id,
                    "result_applied",
                    actor,
                    event["reason"],
                    event["before"],
                    status.value,
                    now,
                    event["data"],
                )
            )
        if state.correction_strategy and state.error_category:
            add_strategy_reward(session, state.error_category, state.correction_strategy, evaluation.reward)
            rows.append(
                event_row(
                    state.workflow_id,
                    task_id,
                    "strategy_rewarded",
                    actor,
                    f"strategy {state.correction_strategy!r} for {state.error_category!r} earned "
                    f"{evaluation.reward:+.2f} (retry {status.value})",
                    None,
                    None,
                    now,
                    {"strategy": state.correction_strategy, "category": state.error_category},
                )
            )
        # The total is the sum of the task rewards; this reward replaces the task's previous one.
        delta = evaluation.reward - (state.reward or 0.0)
        deltas[state.workflow_id] = deltas.get(state.workflow_id, 0.0) + delta
        # Another result for this task in the same batch must see it applied already.
        known[task_id] = state._replace(status=status.value, reward=evaluation.reward)
        applied[index] = True
    insert_events(session, rows)
    for workflow_id, delta in sorted(deltas.items()):
        session.execute(_ADD_REWARD, {"p_workflow_id": workflow_id, "p_delta": delta, "p_now": now})
    return applied


def orchestrator_needed(session: Session, applied: Sequence[tuple[uuid.UUID, Evaluation]]) -> bool:
    """Whether results just applied (``(workflow id, evaluation)``) give the orchestrator work.

    A failure always does (correction). Successes do only when their workflow still has tasks waiting
    to be dispatched or has now wholly succeeded: the results of a fan-out of independent tasks then
    wake the orchestrator once, at the end, instead of once per batch. (Two evaluators finishing the
    last tasks of a workflow at once may each see the other's task unfinished; the orchestrator's idle
    pass, at most ``idle_seconds`` later, then finishes it.)
    """
    if not applied:
        return False
    if any(evaluation.status != TaskStatus.SUCCESS for _, evaluation in applied):
        return True
    workflows = sorted({workflow_id for workflow_id, _ in applied})
    return bool(session.scalar(_ORCHESTRATOR_NEEDED, {"p_workflows": workflows}))


def _apply_parameters(
    task_id: uuid.UUID, spec: TaskSpec, evaluation: Evaluation, now: datetime
) -> dict[str, Any]:
    return {
        "p_task_id": task_id,
        "p_attempt": spec.attempt,
        "p_status": evaluation.status,
        "p_reward": evaluation.reward,
        "p_feedback": evaluation.feedback,
        "p_now": now,
    }


def _applied_event(spec: TaskSpec, evaluation: Evaluation, state: TaskState) -> dict[str, Any]:
    """What the ``result_applied`` event of a result says: status before, reason and data."""
    return {
        "before": state.status if state.status in IN_FLIGHT else TaskStatus.IN_PROGRESS.value,
        "reason": f"attempt {spec.attempt} {evaluation.status} (reward {evaluation.reward:+.2f})",
        "data": {"attempt": spec.attempt, "reward": evaluation.reward},
    }


def _apply_all(
    session: Session,
    results: Sequence[tuple[TaskSpec, Evaluation]],
    ids: Sequence[uuid.UUID],
    known: Mapping[uuid.UUID, TaskState],
    order: Sequence[int],
    actor: str,
    now: datetime,
) -> set[uuid.UUID]:
    """PostgreSQL: apply every result of ``order`` with :data:`_APPLY_ALL`; the ids of those applied."""
    if not order:
        return set()
    rows = []
    for index in order:
        spec, evaluation = results[index]
        rows.append(
            {
                "task_id": str(ids[index]),
                "attempt": spec.attempt,
                "status": evaluation.status,
                "reward": evaluation.reward,
                "feedback": evaluation.feedback,
                **_applied_event(spec, evaluation, known[ids[index]]),
            }
        )
    applied = session.execute(_APPLY_ALL, {"p_rows": json.dumps(rows), "p_now": now, "p_actor": actor})
    return {as_uuid(task_id, "task id") for task_id in applied.scalars()}
