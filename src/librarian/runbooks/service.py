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

import yaml
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from librarian.errors import ConflictError, InvalidInputError, LibrarianError, NotFoundError
from librarian.knowledge.access import Principal, Scope, can_change, can_read
from librarian.runbooks.catalog import RunbookCatalog, RunbookInput, runbook_view
from librarian.runbooks.dry_run import dry_run
from librarian.runbooks.engine import ExecutionStatus, Finished, RunbookEngine
from librarian.runbooks.format import RunbookInvalidError, load_runbook, parse_runbook_text
from librarian.runbooks.matching import RunbookIndex, score
from librarian.runbooks.models import RunbookExecution, RunbookProposal, RunbookRow, RunbookStepRun
from librarian.runbooks.steps import CommandRunner, RuntimeCommandRunner, templated_again
from librarian.runbooks.tracking import execution_view, step_statistics
from librarian.storage.models import as_utc, utcnow

if TYPE_CHECKING:
    from librarian.app import Librarian
    from librarian.runtime.engine import Runtime

logger = logging.getLogger(__name__)
OUTCOMES = ("resolved", "partially_resolved", "escalated", "failed")
PROPOSAL_STATUSES = ("pending", "accepted", "rejected")


class RunbookService:
    """Runbooks for every interface (CLI, REST, MCP): the domain logic lives here, adapters call it.

    Args:
        lib: the facade (store, embeddings, knowledge, incidents, LLM).
        commands: runs ``bash`` steps; default: the task runtime with the self-correcting loop,
            created on first use and closed by :meth:`close`.
    """

    def __init__(self, lib: Librarian, commands: CommandRunner | None = None) -> None:
        self._lib = lib
        self.catalog = RunbookCatalog(lib)
        self._index: RunbookIndex | None = None
        self._commands = commands
        self._runtime: Runtime | None = None
        self._correctors: list[Any] = []
        self._lock = threading.Lock()
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
                from librarian.correction.loop import loop_correctors
                from librarian.runtime.engine import Runtime

                settings = self._lib.settings
                self._correctors = loop_correctors(settings, library=self._lib)
                self._runtime = Runtime(settings, correctors=self._correctors)
                self._commands = RuntimeCommandRunner(self._runtime)
            return self._commands

    def close(self) -> None:
        """Stop the task runtime this service started (embedded workers), if any."""
        with self._lock:
            runtime, self._runtime = self._runtime, None
            if runtime is not None:
                self._commands = None
        if runtime is not None:
            for corrector in self._correctors:
                close = getattr(corrector, "close", None)
                if callable(close):
                    close()
            runtime.close()

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
        for execution_id in self.engine.interrupted():
            try:
                with self._lib.sessions() as session:
                    mode = session.scalar(
                        select(RunbookExecution.mode).where(RunbookExecution.id == execution_id)
                    )
                if mode == "auto":
                    self.engine.drive(execution_id)
                    touched.append(execution_id)
            except ConflictError:
                continue
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
                from librarian.runbooks.engine import effectiveness

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
        """Corrections the loop made to a runbook's commands, offered as new versions."""
        if status is not None and status not in PROPOSAL_STATUSES:
            raise InvalidInputError(f"status: {status!r} is not one of {', '.join(PROPOSAL_STATUSES)}")
        with self._lib.sessions() as session:
            self.catalog.readable(session, principal, runbook_id)
            query = (
                select(RunbookProposal)
                .where(RunbookProposal.runbook_id == runbook_id)
                .order_by(RunbookProposal.id)
            )
            if status is not None:
                query = query.where(RunbookProposal.status == status)
            return [_proposal_view(proposal) for proposal in session.scalars(query)]

    def decide_proposal(self, principal: Principal, proposal_id: int, *, accept: bool) -> dict[str, Any]:
        """Accept a proposal (a new version with that step's corrected command) or reject it.

        Raises:
            ConflictError: already decided, or the runbook changed that step since.
        """
        with self._lib.sessions() as session:
            proposal = session.get(RunbookProposal, proposal_id)
            if proposal is None:
                raise NotFoundError(f"no runbook proposal {proposal_id}")
            runbook_id = proposal.runbook_id
            try:  # deciding changes the runbook: its author or an administrator decides
                row = self.catalog.changeable(session, principal, runbook_id)
            except NotFoundError:
                raise NotFoundError(f"no runbook proposal {proposal_id}") from None
            if proposal.status != "pending":
                raise ConflictError(f"proposal {proposal_id} was already {proposal.status}")
            definition = dict(row.definition)
            base_version, step_number, new_command = row.version, proposal.step_number, proposal.new_command
            old_command = proposal.old_command
        if accept:
            steps = [dict(step) for step in definition["steps"]]
            for step in steps:
                if step["step"] == step_number:
                    if step.get("command", "").strip() != old_command.strip():
                        raise ConflictError(
                            f"step {step_number} of runbook {runbook_id} changed since the proposal was made"
                        )
                    step["command"] = new_command
            definition["steps"] = steps
            text = yaml.safe_dump(definition, sort_keys=False, allow_unicode=True)
            self.catalog.update(
                principal,
                runbook_id,
                RunbookInput(text, origin=f"proposal {proposal_id}", note=f"accepted proposal {proposal_id}"),
                base_version=base_version,
            )
        with self._lib.sessions.begin() as session:
            proposal = session.get(RunbookProposal, proposal_id)
            assert proposal is not None
            proposal.status = "accepted" if accept else "rejected"
            proposal.decided_by = principal.user_id
            proposal.decided_at = utcnow()
            view = _proposal_view(proposal)
        return view

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

    def _finished(self, finished: Finished) -> None:
        """After an execution ends: propose corrected commands, save the investigation."""
        try:
            self._propose(finished)
            self._save_investigation(finished)
        except LibrarianError as exc:  # the run itself is recorded; these are extras
            logger.warning(
                "runbook execution %s: could not record its follow-up: %s", finished.execution_id, exc
            )

    def _propose(self, finished: Finished) -> None:
        with self._lib.sessions.begin() as session:
            execution = session.get(RunbookExecution, finished.execution_id)
            row = session.get(RunbookRow, finished.runbook_id)
            if execution is None or row is None:
                return
            runbook = self.catalog.definition(session, row, execution.runbook_version)
            corrected = session.scalars(
                select(RunbookStepRun).where(
                    RunbookStepRun.execution_id == execution.id,
                    RunbookStepRun.status == "succeeded",
                    RunbookStepRun.corrected_command.is_not(None),
                )
            )
            for run in corrected:
                step = runbook.step(run.step_number)
                assert step.command is not None and run.corrected_command is not None
                new_command = templated_again(
                    run.corrected_command, step.command, execution.execution_context or {}
                )
                exists = session.scalar(
                    select(RunbookProposal.id).where(
                        RunbookProposal.runbook_id == row.id,
                        RunbookProposal.step_number == step.number,
                        RunbookProposal.new_command == new_command,
                        RunbookProposal.status == "pending",
                    )
                )
                if exists is None:
                    session.add(
                        RunbookProposal(
                            runbook_id=row.id,
                            base_version=execution.runbook_version,
                            step_number=step.number,
                            old_command=step.command,
                            new_command=new_command,
                            execution_id=execution.id,
                        )
                    )

    def _save_investigation(self, finished: Finished) -> None:
        from librarian.incidents.service import IncidentDraft
        from librarian.incidents.signature import ProblemSignature

        with self._lib.sessions() as session:
            execution = session.get(RunbookExecution, finished.execution_id)
            row = session.get(RunbookRow, finished.runbook_id)
            if execution is None or row is None or execution.incident_id is not None:
                return
            runs = list(
                session.scalars(
                    select(RunbookStepRun)
                    .where(RunbookStepRun.execution_id == execution.id)
                    .order_by(RunbookStepRun.sequence)
                )
            )
            steps = tuple(
                f"step {run.step_number} {run.title}: {run.status}"
                + (f" ({run.error[:200]})" if run.error else "")
                for run in runs
            )
            errors = tuple(run.error[:500] for run in runs if run.error)[:5]
            principal = Principal(organization_id=execution.organization_id, user_id=execution.user_id or 1)
            visibility = row.visibility if row.visibility != "public" else "organization"
            draft = IncidentDraft(
                title=(execution.problem.strip() or f"Runbook run: {row.name}")[:500],
                description=f"Runbook {row.name!r} (version {execution.runbook_version}) "
                f"ended {finished.status} after {len(runs)} step runs.",
                signature=ProblemSignature(
                    symptoms=tuple((row.trigger_patterns or {}).get("symptoms") or ())[:10],
                    error_messages=errors,
                    affected_services=tuple((row.trigger_patterns or {}).get("services") or ())[:10],
                ),
                solution_applied=f"Followed runbook {row.name!r}",
                resolution_steps=steps[:100],
                was_successful=finished.status == ExecutionStatus.COMPLETED,
                tags=("runbook",),
                category=row.category,
                visibility=visibility,
                allowed_teams=tuple(row.allowed_teams or ()),
                origin={"runbook_id": row.id, "runbook_execution": execution.id},
            )
        incident = self._lib.incidents.create(principal, draft)
        with self._lib.sessions.begin() as session:
            execution = session.get(RunbookExecution, finished.execution_id)
            if execution is not None:
                execution.incident_id = int(incident["id"])


def _proposal_view(proposal: RunbookProposal) -> dict[str, Any]:
    return {
        "id": proposal.id,
        "runbook_id": proposal.runbook_id,
        "base_version": proposal.base_version,
        "step": proposal.step_number,
        "old_command": proposal.old_command,
        "new_command": proposal.new_command,
        "execution_id": proposal.execution_id,
        "status": proposal.status,
        "decided_by": proposal.decided_by,
        "decided_at": None if proposal.decided_at is None else as_utc(proposal.decided_at).isoformat(),
        "created_at": as_utc(proposal.created_at).isoformat(),
    }
