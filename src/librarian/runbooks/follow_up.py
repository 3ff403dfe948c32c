"""What follows a finished runbook execution: commands the self-correcting loop fixed become proposed
new versions (a person accepts or rejects each), and the run is saved as an investigation record
(an incident with its problem, the steps taken and the outcome), so the next agent finds it."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import yaml
from sqlalchemy import select

from librarian.errors import ConflictError, InvalidInputError, LibrarianError, NotFoundError
from librarian.knowledge.access import Principal
from librarian.runbooks.catalog import RunbookCatalog, RunbookInput
from librarian.runbooks.engine import ExecutionStatus, Finished
from librarian.runbooks.models import RunbookExecution, RunbookProposal, RunbookRow, RunbookStepRun
from librarian.runbooks.steps import templated_again
from librarian.storage.models import as_utc, utcnow

if TYPE_CHECKING:
    from librarian.app import Librarian

logger = logging.getLogger(__name__)
PROPOSAL_STATUSES = ("pending", "accepted", "rejected")


class RunbookFollowUps:
    """Proposals from corrected commands, and investigation records of finished runs."""

    def __init__(self, lib: Librarian, catalog: RunbookCatalog) -> None:
        self._lib = lib
        self.catalog = catalog

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

    def decide(self, principal: Principal, proposal_id: int, *, accept: bool) -> dict[str, Any]:
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

    def after(self, finished: Finished) -> None:
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
