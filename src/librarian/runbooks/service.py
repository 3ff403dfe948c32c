"""``lib.runbooks``: store, find, run and track runbooks on behalf of a principal.

Composes the catalog (stored runbooks and versions), the matcher (``get_runbook``), the step engine
(executions on the task runtime) and the tracking views (executions, statistics, proposals).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from librarian.errors import ConflictError, InvalidInputError, LibrarianError, NotFoundError
from librarian.knowledge.access import Principal, Scope, can_change, can_read
from librarian.runbooks.catalog import RunbookCatalog, RunbookInput, runbook_view
from librarian.runbooks.dry_run import dry_run
from librarian.runbooks.engine import ExecutionStatus, Finished, RunbookEngine
from librarian.runbooks.follow_up import RunbookFollowUps
from librarian.runbooks.format import RunbookInvalidError, load_runbook, parse_runbook_text
from librarian.runbooks.matching import RunbookIndex, score
from librarian.runbooks.models import RunbookExecution, RunbookProposal, RunbookRow, RunbookStepRun
from librarian.runbooks.steps import CommandRunner, RuntimeCommandRunner
from librarian.runbooks.tracking import effectiveness, execution_view, step_statistics
from librarian.storage.models import utcnow

if TYPE_CHECKING:
    from librarian.app import Librarian

logger = logging.getLogger(__name__)
OUTCOMES = ("resolved", "partially_resolved", "escalated", "failed")


class RunbookService:
    """Runbooks for every interface (CLI, REST, MCP): the domain logic lives here, adapters call it.

    Args:
        lib: the facade (store, embeddings, knowledge, incidents, LLM).
        commands: runs ``bash`` steps; default: the facade's task runtime with the self-correcting
            loop (``lib.runtime_host``), created on first use.
    """

    def __init__(self, lib: Librarian, commands: CommandRunner | None = None) -> None:
        self._lib = lib
        self.catalog = RunbookCatalog(lib)
        self.follow_ups = RunbookFollowUps(lib, self.catalog)
        self._index: RunbookIndex | None = None
        self._commands = commands
        self._lock = threading.Lock()
        self._sweeping = threading.Event()
        self._sweeper: threading.Thread | None = None
        self.engine = RunbookEngine(
            lib.sessions,
            lambda session, row, version: self.catalog.definition(session, row, version),
            self._command_runner,
            lambda: lib.llm,
            self._finished,
            task_timeout=None,
        )

    # -- wiring -------------------------------------------------------------------------------

    def _command_runner(self) -> CommandRunner:
        with self._lock:
            if self._commands is None:
                # The facade's one runtime, which REST and MCP workflows use too (workflows/host.py).
                self._commands = RuntimeCommandRunner(self._lib.runtime_host.get())
            return self._commands

    def start_sweeper(self, interval_seconds: float = 30.0) -> None:
        """Call :meth:`resume_interrupted` now and every ``interval_seconds`` in a background thread
        (``librarian serve`` does): runs whose process died go on, overdue waits time out."""
        with self._lock:
            if self._sweeper is not None:
                return
            self._sweeping.clear()
            self._sweeper = threading.Thread(
                target=self._sweep, args=(interval_seconds,), name="runbook-sweeper", daemon=True
            )
            self._sweeper.start()

    def _sweep(self, interval_seconds: float) -> None:
        while not self._sweeping.is_set():
            try:
                self.resume_interrupted()
            except LibrarianError as exc:  # a database hiccup must not end the sweeps
                logger.warning("runbook sweep failed: %s", exc.message)
            self._sweeping.wait(interval_seconds)

    def close(self) -> None:
        """Stop the sweeper (the facade closes the task runtime the steps ran on)."""
        self._sweeping.set()
        sweeper, self._sweeper = self._sweeper, None
        if sweeper is not None:
            sweeper.join(timeout=30)

    @property
    def index(self) -> RunbookIndex:
        """The in-memory matcher (built on first use)."""
        if self._index is None:
            self._index = RunbookIndex(self._lib.sessions, self._lib.cache)
        return self._index

    # -- the catalog ----------------------------------------------------------------------------

    def add(self, principal: Principal, given: RunbookInput) -> dict[str, Any]:
        """Store a runbook (or a new version of the same-named one). See :meth:`RunbookCatalog.add`."""
        return self.catalog.add(principal, given)

    def add_file(self, principal: Principal, path: Path, *, visibility: str | None = None) -> dict[str, Any]:
        """Store the runbook in a YAML or JSON file."""
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidInputError(f"cannot read runbook file {path}: {exc}") from exc
        return self.add(
            principal,
            RunbookInput(
                text, origin=str(path), json_format=path.suffix.lower() == ".json", visibility=visibility
            ),
        )

    def validate(self, text: str, *, origin: str = "runbook", json_format: bool = False) -> dict[str, Any]:
        """Check a runbook without storing it: ``{"valid", "problems", "required_variables"}``."""
        try:
            runbook = parse_runbook_text(text, origin=origin, json_format=json_format)
        except RunbookInvalidError as exc:
            return {"valid": False, "origin": origin, "problems": exc.problems, "required_variables": []}
        except InvalidInputError as exc:
            return {"valid": False, "origin": origin, "problems": [exc.message], "required_variables": []}
        return {
            "valid": True,
            "origin": origin,
            "problems": [],
            "name": runbook.name,
            "steps": len(runbook.steps),
            "required_variables": runbook.required_variables,
        }

    def validate_file(self, path: Path) -> dict[str, Any]:
        """:meth:`validate` for a file."""
        try:
            load_runbook(path)
        except RunbookInvalidError as exc:
            return {"valid": False, "origin": str(path), "problems": exc.problems, "required_variables": []}
        except InvalidInputError as exc:
            return {"valid": False, "origin": str(path), "problems": [exc.message], "required_variables": []}
        return self.validate(
            path.read_text(encoding="utf-8"), origin=str(path), json_format=path.suffix.lower() == ".json"
        )

    # -- finding --------------------------------------------------------------------------------

    def find(
        self,
        principal: Principal,
        *,
        runbook_id: int | None = None,
        topic: str | None = None,
        problem_description: str | None = None,
        limit: int = 5,
    ) -> dict[str, Any]:
        """The design's ``get_runbook``: by id, or the best matches for a topic or a problem.

        Returns ``{"runbook": <the best one, with steps and statistics>, "matches": [{id, name,
        score, reasons, ...}]}`` (``runbook`` is ``None`` when nothing matches).

        Raises:
            InvalidInputError: none of the three given.
        """
        principal.require(Scope.READ, "reading runbooks")
        if runbook_id is not None:
            return {"runbook": self.catalog.get(principal, runbook_id), "matches": []}
        text = " ".join(part for part in (topic, problem_description) if part and part.strip())
        if not text:
            raise InvalidInputError("give runbook_id, topic or problem_description")
        if not 1 <= limit <= 50:
            raise InvalidInputError("limit: use 1 to 50")
        matches = self.match(principal, text, limit=limit)
        best = self.catalog.get(principal, matches[0]["id"]) if matches else None
        return {"runbook": best, "matches": matches}

    def match(
        self, principal: Principal, text: str, *, limit: int = 5, minimum: float = 0.0
    ) -> list[dict[str, Any]]:
        """Runbooks ranked for ``text``, each with its score and why it matched."""
        candidates = self.index.candidates(text, principal.grants)
        if not candidates:
            return []
        with self._lib.sessions() as session:
            # Only what ranking and the answer need: a row's definition can be large.
            rows = {
                row.id: row
                for row in session.execute(
                    select(
                        RunbookRow.id,
                        RunbookRow.name,
                        RunbookRow.description,
                        RunbookRow.category,
                        RunbookRow.effectiveness_score,
                        RunbookRow.execution_count,
                        RunbookRow.success_count,
                    ).where(RunbookRow.id.in_([c.runbook_id for c in candidates]))
                )
            }
        ranked: list[dict[str, Any]] = []
        for candidate in candidates:
            row = rows.get(candidate.runbook_id)
            if row is None:
                continue
            value = score(candidate, row.effectiveness_score)
            if value < minimum:
                continue
            reasons = list(candidate.reasons)
            reasons.append(f"meaning {candidate.meaning:.2f}")
            if row.execution_count:
                reasons.append(f"{row.success_count} of {row.execution_count} runs completed")
            ranked.append(
                {
                    "id": row.id,
                    "name": row.name,
                    "description": row.description,
                    "category": row.category,
                    "score": round(value, 4),
                    "reasons": reasons,
                    "effectiveness_score": row.effectiveness_score,
                    "execution_count": row.execution_count,
                    "url": f"/runbooks/{row.id}",
                }
            )
        ranked.sort(key=lambda item: (-item["score"], item["id"]))
        return ranked[:limit]

    # -- running --------------------------------------------------------------------------------

    def start(
        self,
        principal: Principal,
        runbook_id: int,
        *,
        variables: Mapping[str, Any] | None = None,
        problem: str = "",
        mode: str = "auto",
        agent_driven: bool = False,
        run: bool = True,
    ) -> dict[str, Any]:
        """Start an execution of a runbook's current version and (``run``) drive it until it waits or ends.

        ``mode="step"`` runs nothing now: each :meth:`step` call runs one step (an agent driving
        the runbook). ``agent_driven`` sends ``agent_prompt`` steps to the caller even when an LLM
        is configured.

        Raises:
            NotFoundError: no such runbook. ForbiddenError: no ``write`` scope.
            InvalidInputError: a required variable is missing; the runbook is retired.
        """
        principal.require(Scope.WRITE, "running runbooks")
        with self._lib.sessions.begin() as session:
            row = self.catalog.readable(session, principal, runbook_id)
            if not row.is_active:
                raise InvalidInputError(f"runbook {runbook_id} is retired", hint="activate it again first")
            runbook = self.catalog.definition(session, row)
            grants = sorted(set(row.access_grants) | {f"user:{principal.user_id}"})
            execution_id = self.engine.start(
                session,
                row,
                runbook,
                user_id=principal.user_id,
                grants=grants,
                variables=dict(variables or {}),
                problem=problem,
                mode=mode,
                agent_driven=agent_driven,
                claimed=run and mode == "auto",
            )
        if run and mode == "auto":
            self.engine.drive(execution_id)
        return self.execution(principal, execution_id)

    def step(self, principal: Principal, execution_id: str, answer: str | None = None) -> dict[str, Any]:
        """Run the next step of an execution (answering the waiting one first when ``answer`` is given).

        The design's ``execute_runbook_step``: an agent calls it repeatedly, reading each step's
        result, and supplies its analysis as ``answer`` when an ``agent_prompt`` step waits.
        """
        execution = self._changeable(principal, execution_id)
        if execution.status == ExecutionStatus.WAITING:
            if answer is None:
                return self.execution(principal, execution_id)
            self._answer(principal, execution_id, answer, approved=None, drive=False)
        elif answer is not None:
            raise ConflictError(f"execution {execution_id} is {execution.status}: it waits for no answer")
        self.engine.drive(execution_id, max_steps=1)
        return self.execution(principal, execution_id)

    def answer(self, principal: Principal, execution_id: str, text: str) -> dict[str, Any]:
        """Answer a waiting ``agent_prompt`` or ``manual`` step; the run goes on (in ``auto`` mode)."""
        return self._answer(principal, execution_id, text, approved=None)

    def approve(
        self, principal: Principal, execution_id: str, *, approved: bool = True, comment: str = ""
    ) -> dict[str, Any]:
        """Approve a waiting approval step (or reject it: ``approved=False`` follows its ``on_failure``)."""
        return self._answer(principal, execution_id, comment, approved=approved)

    def _answer(
        self, principal: Principal, execution_id: str, text: str, *, approved: bool | None, drive: bool = True
    ) -> dict[str, Any]:
        # Anyone who may read the run and write answers it: the person it waits for is often not the
        # one who started it. An approval step also names who may approve.
        principal.require(Scope.WRITE, "answering runbook steps")
        with self._lib.sessions() as session:
            execution = self._readable(session, principal, execution_id)
            session.expunge(execution)
        expired = self.engine.expire(execution_id)
        if expired is not None:  # it timed out before this answer came: its follow-ups still happen
            self._finished(expired)

        def may_approve(approvers: list[str]) -> bool:
            return self._may_approve(principal, approvers)

        finished = self.engine.answer(
            execution_id, text=text, actor=principal.user_name, approved=approved, may_approve=may_approve
        )
        if finished is not None:
            self._finished(finished)
        elif drive and execution.mode == "auto":
            self.engine.drive(execution_id)
        return self.execution(principal, execution_id)

    def _may_approve(self, principal: Principal, approvers: list[str]) -> bool:
        """Whether ``principal`` is one of ``approvers``: a user name, user:ID, team:NAME or team:ID."""
        if not approvers or principal.sees_everything:
            return True
        if principal.user_name in approvers or f"user:{principal.user_id}" in approvers:
            return True
        for approver in approvers:
            if not approver.startswith("team:") or not principal.team_ids:
                continue
            try:
                team_ids = self._lib.identity.team_ids_of(principal.organization_id, [approver[5:]])
            except LibrarianError:  # a team this organisation does not have approves nothing
                continue
            if not principal.team_ids.isdisjoint(team_ids):
                return True
        return False

    def resume(self, principal: Principal, execution_id: str) -> dict[str, Any]:
        """Go on with an execution whose process died (or time out its overdue waiting step)."""
        execution = self._changeable(principal, execution_id)
        finished = self.engine.expire(execution_id)
        if finished is not None:
            self._finished(finished)
        if execution.mode == "auto" or finished is not None:
            self.engine.drive(execution_id)
        else:
            self.engine.drive(execution_id, max_steps=1)
        return self.execution(principal, execution_id)

    def resume_interrupted(self) -> list[str]:
        """Drive every running execution no live process drives, and time out overdue waits (a server
        calls this at start and periodically). Returns the ids it touched."""
        touched = []
        for execution_id in self.engine.overdue():
            finished = self.engine.expire(execution_id)
            if finished is not None:
                self._finished(finished)
            touched.append(execution_id)
        for execution_id in self.engine.lease.interrupted():
            try:
                self.engine.drive(execution_id)
            except ConflictError:  # another process took it meanwhile
                continue
            touched.append(execution_id)
        return touched

    def cancel(
        self, principal: Principal, execution_id: str, reason: str = "cancelled by request"
    ) -> dict[str, Any]:
        """Stop an execution; what it did stays recorded."""
        self._changeable(principal, execution_id)
        finished = self.engine.cancel(execution_id, reason)
        if finished is not None:
            self._finished(finished)
        return self.execution(principal, execution_id)

    def close_execution(
        self,
        principal: Principal,
        execution_id: str,
        *,
        outcome: str | None = None,
        notes: str | None = None,
        rating: int | None = None,
    ) -> dict[str, Any]:
        """Record how an execution ended for the problem (outcome, notes) and a 1-5 effectiveness rating."""
        if outcome is not None and outcome not in OUTCOMES:
            raise InvalidInputError(f"outcome: {outcome!r} is not one of {', '.join(OUTCOMES)}")
        if rating is not None and not 1 <= rating <= 5:
            raise InvalidInputError("rating: give 1 to 5 stars")
        with self._lib.sessions.begin() as session:
            execution = self._changeable_in(session, principal, execution_id)
            if execution.status not in ExecutionStatus.FINAL:
                raise ConflictError(
                    f"execution {execution_id} is {execution.status}: finish or cancel it first"
                )
            row = session.get(RunbookRow, execution.runbook_id)
            assert row is not None
            if rating is not None:
                if execution.effectiveness_rating is not None:
                    row.rating_sum -= execution.effectiveness_rating
                    row.rating_count -= 1
                row.rating_sum += rating
                row.rating_count += 1
                execution.effectiveness_rating = rating
                row.effectiveness_score = effectiveness(row)
            if outcome is not None:
                execution.outcome = outcome
            if notes is not None:
                execution.resolution_notes = notes
            execution.updated_at = utcnow()
        return self.execution(principal, execution_id)

    # -- reading --------------------------------------------------------------------------------

    def execution(self, principal: Principal, execution_id: str) -> dict[str, Any]:
        """An execution with every step run, its status and, while it waits, what it waits for."""
        with self._lib.sessions() as session:
            execution = self._readable(session, principal, execution_id)
            row = session.get(RunbookRow, execution.runbook_id)
            runs = list(
                session.scalars(
                    select(RunbookStepRun)
                    .where(RunbookStepRun.execution_id == execution_id)
                    .order_by(RunbookStepRun.sequence)
                )
            )
            return execution_view(execution, row, runs)

    def executions(
        self,
        principal: Principal,
        *,
        runbook_id: int | None = None,
        status: str | None = None,
        limit: int = 50,
    ) -> list[dict[str, Any]]:
        """Executions the caller may read, newest first (without step runs)."""
        principal.require(Scope.READ, "reading runbook executions")
        if not 1 <= limit <= 500:
            raise InvalidInputError("limit: use 1 to 500")
        statuses = (*ExecutionStatus.FINAL, ExecutionStatus.RUNNING, ExecutionStatus.WAITING)
        if status is not None and status not in statuses:
            raise InvalidInputError(f"status: {status!r} is not one of {', '.join(statuses)}")
        from librarian.index.grants_sql import grants_condition

        with self._lib.sessions() as session:
            query = (
                select(RunbookExecution)
                .where(
                    grants_condition(
                        session.get_bind().dialect.name, RunbookExecution.access_grants, principal.grants
                    )
                )
                .order_by(RunbookExecution.started_at.desc())
                .limit(limit)
            )
            if runbook_id is not None:
                query = query.where(RunbookExecution.runbook_id == runbook_id)
            if status is not None:
                query = query.where(RunbookExecution.status == status)
            executions = list(session.scalars(query))
            names = {
                row.id: row
                for row in session.scalars(
                    select(RunbookRow).where(RunbookRow.id.in_({e.runbook_id for e in executions}))
                )
            }
            return [
                execution_view(execution, names.get(execution.runbook_id), None) for execution in executions
            ]

    def stats(self, principal: Principal, runbook_id: int) -> dict[str, Any]:
        """A runbook's statistics (runs, successes, average duration, last run, effectiveness) and,
        per step, how often it ran, failed, timed out and was corrected."""
        with self._lib.sessions() as session:
            row = self.catalog.readable(session, principal, runbook_id)
            view = runbook_view(row, row.definition, row.version, row.version_label)
            steps = step_statistics(session, runbook_id)
            pending = session.scalar(
                select(func.count())
                .select_from(RunbookProposal)
                .where(RunbookProposal.runbook_id == runbook_id, RunbookProposal.status == "pending")
            )
        summary = {key: value for key, value in view.items() if key not in ("steps", "variables")}
        return {**summary, "steps": steps, "pending_proposals": int(pending or 0)}

    def dry_run(
        self,
        principal: Principal,
        runbook_id: int,
        *,
        variables: Mapping[str, Any] | None = None,
        assume: Mapping[str, Any] | None = None,
        version: int | None = None,
    ) -> dict[str, Any]:
        """Every step rendered with these variables, and the path a run would take; nothing runs."""
        with self._lib.sessions() as session:
            row = self.catalog.readable(session, principal, runbook_id)
            runbook = self.catalog.definition(session, row, version)
        return {"runbook_id": runbook_id, **dry_run(runbook, dict(variables or {}), assume)}

    # -- proposals ------------------------------------------------------------------------------

    def proposals(
        self, principal: Principal, runbook_id: int, *, status: str | None = "pending"
    ) -> list[dict[str, Any]]:
        """Corrections the loop made to a runbook's commands, offered as new versions (``status``:
        pending, accepted, rejected, or ``None`` for all)."""
        return self.follow_ups.proposals(principal, runbook_id, status=status)

    def decide_proposal(self, principal: Principal, proposal_id: int, *, accept: bool) -> dict[str, Any]:
        """Accept a proposal (a new version with that step's corrected command) or reject it.

        Raises:
            NotFoundError: no proposal of a runbook the caller may change.
            ConflictError: already decided, or the runbook changed that step since.
        """
        return self.follow_ups.decide(principal, proposal_id, accept=accept)

    def _finished(self, finished: Finished) -> None:
        self.follow_ups.after(finished)

    # -- internals ------------------------------------------------------------------------------

    def _readable(self, session: Session, principal: Principal, execution_id: str) -> RunbookExecution:
        principal.require(Scope.READ, "reading runbook executions")
        execution = session.get(RunbookExecution, execution_id)
        if execution is None or not can_read(principal, execution.access_grants):
            raise NotFoundError(f"no runbook execution {execution_id}")
        return execution

    def _changeable_in(self, session: Session, principal: Principal, execution_id: str) -> RunbookExecution:
        principal.require(Scope.WRITE, "running runbooks")
        execution = self._readable(session, principal, execution_id)
        if not (
            principal.user_id == execution.user_id or can_change(principal, execution.organization_id, None)
        ):
            raise NotFoundError(f"no runbook execution {execution_id}")
        return execution

    def _changeable(self, principal: Principal, execution_id: str) -> RunbookExecution:
        with self._lib.sessions() as session:
            execution = self._changeable_in(session, principal, execution_id)
            session.expunge(execution)
            return execution
