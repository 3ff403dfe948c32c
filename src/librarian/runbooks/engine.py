"""The runbook step engine: a durable state machine over stored executions.

An execution's state is in the database (``runbook_executions``, one ``runbook_step_runs`` row per
visit and attempt of a step), and every transition is one transaction: a step run is recorded as
``running`` before its action starts, and its result, the values it extracted and the step it leads
to are written together when it ends. A process killed in the middle therefore leaves a run that
:meth:`RunbookEngine.drive` picks up where it stopped: finished steps are never run again, and a
``bash`` step that was running resubmits its workflow's idempotency key, which returns the same
workflow (finished, or resumed by the task runtime) instead of running the command twice.

One process drives an execution at a time: it holds a lease (``runner``, ``lease_until``) renewed
while a step runs; a run whose driver died is free once the lease expires.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from librarian.errors import ConflictError, ForbiddenError, InvalidInputError, NotFoundError
from librarian.runbooks.extract import ExtractError, extract
from librarian.runbooks.format import ABORT, Runbook, Step, outcomes
from librarian.runbooks.lease import LEASE_SECONDS, ExecutionLease
from librarian.runbooks.models import RunbookExecution, RunbookRow, RunbookStepRun
from librarian.runbooks.steps import (
    MAX_OUTPUT_CHARS,
    CommandRunner,
    StepResult,
    run_bash,
    run_condition,
    run_pause,
    run_prompt,
)
from librarian.runbooks.tracking import record_run
from librarian.storage.models import as_utc, utcnow

if TYPE_CHECKING:
    from librarian.llm.base import LLMClient

# A run visits at most this many steps in all, whatever the per-step bounds (a last safety net).
MAX_STEP_VISITS = 1000


class ExecutionStatus:
    """Where an execution is: ``running`` (a step is next or running), ``waiting`` (for a person or
    an agent), ``completed`` (a final step succeeded), ``failed`` (a step failed and led to ``abort``,
    or a bound was reached) and ``cancelled``."""

    RUNNING = "running"
    WAITING = "waiting"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    FINAL = ("completed", "failed", "cancelled")


@dataclass(frozen=True)
class Recorded:
    """What recording a step's result led to: the execution ended, or the step runs again."""

    finished: Finished | None = None
    retry: bool = False


@dataclass(frozen=True)
class Finished:
    """An execution that just ended (the service saves it as an investigation and updates statistics)."""

    execution_id: str
    runbook_id: int
    status: str


class RunbookEngine:
    """Start, drive, answer and cancel runbook executions.

    Args:
        sessions: the store.
        definition_of: the validated runbook of a stored runbook at a version.
        commands: the runner of ``bash`` steps (created on first use: the task runtime).
        llm: the configured LLM, or ``None`` (``agent_prompt`` steps then wait for the caller).
        on_finished: called after an execution ends (outside any transaction).
        task_timeout: the default timeout of a ``bash`` step without ``timeout_seconds``.
    """

    def __init__(
        self,
        sessions: sessionmaker[Session],
        definition_of: Callable[[Session, RunbookRow, int], Runbook],
        commands: Callable[[], CommandRunner],
        llm: Callable[[], LLMClient | None],
        on_finished: Callable[[Finished], None],
        task_timeout: float | None = None,
    ) -> None:
        self._sessions = sessions
        self._definition_of = definition_of
        self._commands = commands
        self._llm = llm
        self._on_finished = on_finished
        self._task_timeout = task_timeout
        self.lease = ExecutionLease(sessions)
        # The lease names a process; two threads of this one (two requests on one run, or a request
        # and the sweeper) are kept apart here.
        self._driving: set[str] = set()
        self._driving_lock = threading.Lock()

    # -- starting ---------------------------------------------------------------------------------

    def start(
        self,
        session: Session,
        row: RunbookRow,
        runbook: Runbook,
        *,
        user_id: int | None,
        grants: list[str],
        variables: Mapping[str, Any],
        problem: str,
        mode: str,
        agent_driven: bool,
        claimed: bool = False,
    ) -> str:
        """Create an execution of ``runbook`` (the current version of ``row``) at its first step.

        ``claimed`` creates it held by this process, which is about to drive it (a server's sweep
        for interrupted runs must not take it first).

        Raises:
            InvalidInputError: a variable the runbook needs has no value, a value is not a scalar, or
                an unknown mode.
        """
        if mode not in ("auto", "step"):
            raise InvalidInputError(f"mode: {mode!r} is not 'auto' or 'step'")
        context = {name: value for name, value in runbook.variables.items() if value is not None}
        for name, value in variables.items():
            if not isinstance(value, (str, int, float, bool)):
                raise InvalidInputError(f"variables.{name}: give text, a number or true/false")
            context[name] = value
        missing = [name for name in runbook.required_variables if name not in context]
        if missing:
            raise InvalidInputError(
                f"variables: {', '.join(missing)} {'has' if len(missing) == 1 else 'have'} no value",
                hint="pass them with --var NAME=VALUE (CLI) or variables={...}",
            )
        execution = RunbookExecution(
            id=str(uuid.uuid4()),
            runbook_id=row.id,
            runbook_version=row.version,
            organization_id=row.organization_id,
            user_id=user_id,
            access_grants=grants,
            problem=problem,
            execution_context=context,
            mode=mode,
            agent_driven=agent_driven,
            status=ExecutionStatus.RUNNING,
            current_step_number=runbook.first.number,
            visits={},
            completed_steps=[],
            failed_steps=[],
            runner=self.lease.name if claimed else None,
            lease_until=utcnow() + timedelta(seconds=LEASE_SECONDS) if claimed else None,
        )
        session.add(execution)
        session.flush()
        return execution.id

    # -- driving ----------------------------------------------------------------------------------

    def drive(self, execution_id: str, *, max_steps: int | None = None) -> None:
        """Run steps until the execution waits, ends, or ``max_steps`` steps were taken.

        Raises:
            ConflictError: another live process is driving this execution.
        """
        with self._driving_lock:
            if execution_id in self._driving:
                raise ConflictError(
                    f"execution {execution_id} is running a step now", hint="wait for it, then read it again"
                )
            self._driving.add(execution_id)
        try:
            self.lease.claim(execution_id)
        except BaseException:
            with self._driving_lock:
                self._driving.discard(execution_id)
            raise
        try:
            taken = 0
            while max_steps is None or taken < max_steps:
                prepared = self._next(execution_id)
                if prepared is None:
                    break
                runbook, step, run_id, values, key, deadline, agent_driven = prepared
                result = self._act(step, values, key=key, deadline=deadline, agent_driven=agent_driven)
                recorded = self._record(execution_id, runbook, step, run_id, result)
                if recorded.finished is not None:
                    self._on_finished(recorded.finished)
                    break
                if result.status == "wait":
                    break
                if recorded.retry:
                    time.sleep(step.retry_delay_seconds)
                    continue
                taken += 1
        finally:
            self.lease.release(execution_id)
            with self._driving_lock:
                self._driving.discard(execution_id)

    def _act(
        self,
        step: Step,
        values: Mapping[str, Any],
        *,
        key: str,
        deadline: float | None,
        agent_driven: bool,
    ) -> StepResult:
        if step.action_type == "bash":
            return run_bash(
                step,
                values,
                self._commands(),
                key=key,
                on_wait=self.lease.renew,
                task_timeout=self._task_timeout,
            )
        if step.action_type == "conditional":
            return run_condition(step, values)
        if step.action_type == "agent_prompt":
            return run_prompt(step, values, self._llm(), agent_driven=agent_driven, deadline=deadline)
        return run_pause(step, values, deadline)

    def _next(
        self, execution_id: str
    ) -> tuple[Runbook, Step, int, dict[str, Any], str, float | None, bool] | None:
        """Open (or reopen, after a crash) the step run of the execution's current step."""
        with self._sessions.begin() as session:
            execution = _get(session, execution_id)
            if execution.status != ExecutionStatus.RUNNING or execution.current_step_number is None:
                return None
            row = session.get(RunbookRow, execution.runbook_id)
            assert row is not None
            runbook = self._definition_of(session, row, execution.runbook_version)
            step = runbook.step(execution.current_step_number)
            run = _open_run(session, execution_id)
            if run is None or run.step_number != step.number:
                visits = dict(execution.visits or {})
                count = visits.get(str(step.number), 0) + 1
                total = sum(visits.values()) + 1
                bound = step.max_visits
                if (bound is not None and count > bound) or total > MAX_STEP_VISITS:
                    limit = (
                        f"its max_visits ({bound})"
                        if bound is not None and count > bound
                        else f"{MAX_STEP_VISITS} steps in all"
                    )
                    self._finish(
                        session, execution, ExecutionStatus.FAILED, f"{step.label} would run past {limit}"
                    )
                    finished = Finished(execution.id, execution.runbook_id, ExecutionStatus.FAILED)
                else:
                    visits[str(step.number)] = count
                    execution.visits = visits
                    run = _new_run(session, execution, step, attempt=1)
                    finished = None
            else:
                finished = None
            if finished is None:
                assert run is not None
                values = dict(execution.execution_context or {})
                values.update(_outputs(session, execution_id))
                deadline = (
                    time.time() + step.timeout_seconds
                    if step.timeout_seconds and step.action_type in ("manual", "approval", "agent_prompt")
                    else None
                )
                key = f"runbook:{execution.id}:{run.sequence}:{run.attempt}"
                return runbook, step, run.id, values, key, deadline, execution.agent_driven
        self._on_finished(finished)
        return None

    def _record(
        self, execution_id: str, runbook: Runbook, step: Step, run_id: int, result: StepResult
    ) -> Recorded:
        """Write a step's result and move the execution on, in one transaction."""
        with self._sessions.begin() as session:
            execution = _get(session, execution_id)
            run = session.get(RunbookStepRun, run_id)
            assert run is not None
            run.rendered = result.rendered[:MAX_OUTPUT_CHARS]
            run.workflow_id = result.workflow_id
            run.corrected_command = result.corrected_command
            if result.status == "wait":
                run.status = "waiting"
                execution.status = ExecutionStatus.WAITING
                execution.pending = result.pending
                execution.updated_at = utcnow()
                return Recorded()
            values = result.extracted
            if result.status == "succeeded" and step.extract:
                try:
                    values = extract(result.output, step.extract)
                except ExtractError as exc:
                    result = StepResult(
                        "failed", output=result.output, error=str(exc), rendered=result.rendered
                    )
            _close_run(run, result, values)
            if (
                result.status == "failed"
                and step.action_type in ("bash", "agent_prompt")
                and run.attempt <= step.retries
            ):
                _new_run(session, execution, step, attempt=run.attempt + 1)
                return Recorded(retry=True)
            return Recorded(finished=self._route(session, execution, runbook, step, result, values))

    def _route(
        self,
        session: Session,
        execution: RunbookExecution,
        runbook: Runbook,
        step: Step,
        result: StepResult,
        values: Mapping[str, Any],
    ) -> Finished | None:
        context = dict(execution.execution_context or {})
        context.update(values)
        if result.status == "succeeded":
            execution.completed_steps = [*execution.completed_steps, step.number]
            outcome = result.branch or "on_success"
        else:
            execution.failed_steps = [*execution.failed_steps, step.number]
            outcome = "on_failure"
        execution.execution_context = context
        execution.pending = None
        execution.updated_at = utcnow()
        target = outcomes(runbook, step)[outcome]
        if target == "end":
            status = ExecutionStatus.COMPLETED if result.status == "succeeded" else ExecutionStatus.FAILED
            self._finish(
                session, execution, status, None if status == ExecutionStatus.COMPLETED else result.error
            )
            return Finished(execution.id, execution.runbook_id, status)
        if target == ABORT:
            reason = (
                f"{step.label} failed: {result.error}"
                if result.status == "failed"
                else f"{step.label} took {outcome}, which aborts the run"
            )
            self._finish(session, execution, ExecutionStatus.FAILED, reason)
            return Finished(execution.id, execution.runbook_id, ExecutionStatus.FAILED)
        execution.status = ExecutionStatus.RUNNING
        execution.current_step_number = int(target)
        return None

    def _finish(self, session: Session, execution: RunbookExecution, status: str, reason: str | None) -> None:
        now = utcnow()
        execution.status = status
        execution.pending = None
        execution.completed_at = now
        execution.updated_at = now
        execution.duration_ms = int((now - as_utc(execution.started_at)).total_seconds() * 1000)
        if status == ExecutionStatus.FAILED and execution.outcome is None:
            execution.outcome = "failed"
        if reason and not execution.resolution_notes:
            execution.resolution_notes = reason
        row = session.get(RunbookRow, execution.runbook_id)
        if row is not None:
            record_run(row, execution, now)

    # -- answering --------------------------------------------------------------------------------

    def answer(
        self,
        execution_id: str,
        *,
        text: str,
        actor: str,
        approved: bool | None,
        may_approve: Callable[[list[str]], bool],
    ) -> Finished | None:
        """Give a waiting step its answer (an analysis, a person's result, an approval or rejection).

        Raises:
            ConflictError: the execution is not waiting, or waits for another kind of answer.
            ForbiddenError: an approval by someone the step does not name.
        """
        with self._sessions.begin() as session:
            execution = _get(session, execution_id)
            if execution.status != ExecutionStatus.WAITING or not execution.pending:
                raise ConflictError(
                    f"execution {execution_id} is {execution.status}, not waiting for an answer",
                    hint=f"see where it is with: librarian runbook execution {execution_id}",
                )
            pending = execution.pending
            if pending.get("kind") == "question" and not _overdue(pending):
                self._forward(session, execution, pending, text, actor)
                return None
            is_approval = pending.get("kind") == "approval"
            if is_approval and approved is None:
                raise ConflictError("this step waits for an approval: approve or reject it")
            if not is_approval and approved is not None:
                raise ConflictError(f"this step waits for {pending.get('kind')}, not an approval: answer it")
            if is_approval and not may_approve(list(pending.get("approvers") or [])):
                raise ForbiddenError(
                    f"step {pending.get('step')} may be approved only by {', '.join(pending['approvers'])}"
                )
            row = session.get(RunbookRow, execution.runbook_id)
            assert row is not None
            runbook = self._definition_of(session, row, execution.runbook_version)
            step = runbook.step(int(pending["step"]))
            run = _waiting_run(session, execution_id)
            if _overdue(pending):
                result = StepResult(
                    "failed", error=f"{step.label} timed out waiting for an answer", rendered=run.rendered
                )
                run.status = "timed_out"
            elif is_approval:
                verdict = "approved" if approved else "rejected"
                note = f"{verdict} by {actor}" + (f": {text}" if text else "")
                result = StepResult(
                    "succeeded" if approved else "failed",
                    output=note,
                    rendered=run.rendered,
                    error=None if approved else note,
                )
            else:
                if not text.strip():
                    raise InvalidInputError("answer: the step needs a non-empty answer")
                result = StepResult("succeeded", output=text[:MAX_OUTPUT_CHARS], rendered=run.rendered)
            run.actor = actor[:255]
            values: dict[str, Any] = {}
            if result.status == "succeeded" and step.extract:
                try:
                    values = extract(result.output, step.extract)
                except ExtractError as exc:
                    result = StepResult("failed", output=result.output, error=str(exc), rendered=run.rendered)
            status = run.status
            _close_run(run, result, values)
            if status == "timed_out":
                run.status = "timed_out"
            return self._route(session, execution, runbook, step, result, values)

    def _forward(
        self, session: Session, execution: RunbookExecution, pending: Mapping[str, Any], text: str, actor: str
    ) -> None:
        """Pass the answer to the question the loop asked about a step's command; the step runs on."""
        if not text.strip():
            raise InvalidInputError("answer: the question needs an answer (the command to run, or how)")
        self._commands().answer(str(pending["workflow_id"]), text)
        run = _waiting_run(session, execution.id)
        run.status = "running"  # the same step run (and workflow) goes on: drive() reopens it
        run.actor = actor[:255]
        execution.status = ExecutionStatus.RUNNING
        execution.pending = None
        execution.updated_at = utcnow()

    def expire(self, execution_id: str) -> Finished | None:
        """Time out the waiting step of an execution whose deadline passed (its ``on_failure`` follows)."""
        with self._sessions() as session:
            execution = _get(session, execution_id)
            pending = dict(execution.pending or {})
            if execution.status != ExecutionStatus.WAITING or not _overdue(pending):
                return None
        # ``answer`` sees the deadline passed and fails the step as timed out, whatever the answer.
        approved = False if pending.get("kind") == "approval" else None
        return self.answer(
            execution_id, text="", actor="timeout", approved=approved, may_approve=lambda _: True
        )

    def overdue(self) -> list[str]:
        """Executions waiting past their step's deadline."""
        with self._sessions() as session:
            rows = session.execute(
                select(RunbookExecution.id, RunbookExecution.pending).where(
                    RunbookExecution.status == ExecutionStatus.WAITING
                )
            ).all()
        return [identifier for identifier, pending in rows if _overdue(pending or {})]

    def cancel(self, execution_id: str, reason: str) -> Finished | None:
        """Stop an execution that has not ended; its step runs stay recorded."""
        with self._sessions.begin() as session:
            execution = _get(session, execution_id)
            if execution.status in ExecutionStatus.FINAL:
                return None
            for run in session.scalars(
                select(RunbookStepRun).where(
                    RunbookStepRun.execution_id == execution_id,
                    RunbookStepRun.status.in_(("running", "waiting")),
                )
            ):
                run.status = "cancelled"
                run.finished_at = utcnow()
            self._finish(session, execution, ExecutionStatus.CANCELLED, reason)
            return Finished(execution.id, execution.runbook_id, ExecutionStatus.CANCELLED)


def _get(session: Session, execution_id: str) -> RunbookExecution:
    # Locked for the transaction (on PostgreSQL): two answers, or an answer and a cancel, never both
    # move the same run on from the same state.
    execution = session.get(RunbookExecution, execution_id, with_for_update=True)
    if execution is None:
        raise NotFoundError(f"no runbook execution {execution_id}")
    return execution


def _open_run(session: Session, execution_id: str) -> RunbookStepRun | None:
    """The step run left ``running`` (a crash mid-step, or a retry just opened)."""
    return session.scalar(
        select(RunbookStepRun)
        .where(RunbookStepRun.execution_id == execution_id, RunbookStepRun.status == "running")
        .order_by(RunbookStepRun.sequence.desc())
        .limit(1)
    )


def _waiting_run(session: Session, execution_id: str) -> RunbookStepRun:
    run = session.scalar(
        select(RunbookStepRun)
        .where(RunbookStepRun.execution_id == execution_id, RunbookStepRun.status == "waiting")
        .order_by(RunbookStepRun.sequence.desc())
        .limit(1)
    )
    if run is None:
        raise ConflictError(f"execution {execution_id} has no waiting step")
    return run


def _new_run(session: Session, execution: RunbookExecution, step: Step, *, attempt: int) -> RunbookStepRun:
    last = session.scalar(
        select(func.max(RunbookStepRun.sequence)).where(RunbookStepRun.execution_id == execution.id)
    )
    run = RunbookStepRun(
        execution_id=execution.id,
        runbook_id=execution.runbook_id,
        sequence=(last or 0) + 1,
        step_number=step.number,
        attempt=attempt,
        action_type=step.action_type,
        title=step.title,
        status="running",
        extracted={},
    )
    session.add(run)
    session.flush()
    return run


def _close_run(run: RunbookStepRun, result: StepResult, values: Mapping[str, Any]) -> None:
    now = utcnow()
    run.status = result.status
    run.output = result.output
    run.error = result.error
    run.error_context = result.error_context
    run.extracted = dict(values)
    run.finished_at = now
    run.duration_ms = int((now - as_utc(run.started_at)).total_seconds() * 1000)


def _outputs(session: Session, execution_id: str) -> dict[str, str]:
    """The outputs templates read, from the step runs (never copied into the run's values):
    ``step_N_output`` (the last finished visit of step N: its output, or its error when it failed)
    and ``all_previous_outputs`` (every finished step's, in order, under its title)."""
    rows = session.execute(
        select(RunbookStepRun.step_number, RunbookStepRun.title, RunbookStepRun.output, RunbookStepRun.error)
        .where(
            RunbookStepRun.execution_id == execution_id,
            RunbookStepRun.status.in_(("succeeded", "failed", "timed_out")),
        )
        .order_by(RunbookStepRun.sequence)
    ).all()
    outputs: dict[str, str] = {}
    parts = []
    for number, title, output, error in rows:
        text = output or error or ""
        outputs[f"step_{number}_output"] = text
        parts.append(f"## Step {number}: {title}\n{text.strip()}")
    outputs["all_previous_outputs"] = "\n\n".join(parts)[-MAX_OUTPUT_CHARS:]
    return outputs


def _overdue(pending: Mapping[str, Any]) -> bool:
    deadline = pending.get("deadline")
    return isinstance(deadline, (int, float)) and time.time() > deadline
