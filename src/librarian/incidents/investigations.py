"""Investigations save themselves: every failure the self-correcting loop fixed, and every one it
escalated, becomes an incident the next investigation can find.

A fixed failure is recorded with its signature (the tool as affected service, its version as
infrastructure, the failure's error text, whose normal form matches later occurrences, and the
trigger's category as symptom), the commands tried, the final command and the evaluator's verdict,
``was_successful`` true. Its solution is the loop's verified fix, which ``get_solution`` reads from
the loop's own table with its success and failure counts (the settlement just counted this outcome),
so nothing is stored twice. An escalation is recorded with ``was_successful`` false, the candidates
that were rejected and the next steps the report suggests.

Recording never undoes what the loop learned: a failure to record is logged and the loop goes on.
"""

from __future__ import annotations

import logging
import shlex
from typing import TYPE_CHECKING, Any

from librarian.errors import LibrarianError
from librarian.incidents.service import IncidentDraft
from librarian.incidents.signature import ProblemSignature

if TYPE_CHECKING:
    from librarian.app import Librarian
    from librarian.correction.escalation import EscalationReport
    from librarian.correction.fixes import Settlement
    from librarian.correction.models import CorrectionAttempt

logger = logging.getLogger(__name__)
# The loop keeps at most 4,000 characters of a failure's output (ERROR_TEXT_CHARS); so does a signature.
_ERROR_CHARS = 4000


def record_fixed(lib: Librarian, attempt: CorrectionAttempt, settlement: Settlement) -> int | None:
    """Record a failure the loop fixed as an incident; returns its id (``None`` if not recorded)."""
    if settlement.outcome != "succeeded":
        return None
    failed = shlex.join(attempt.failed_argv) if attempt.failed_argv else "a code task"
    fixed = shlex.join(attempt.corrected_argv) if attempt.corrected_argv else "an edited script"
    error = (attempt.error_text or attempt.normalized_error)[-_ERROR_CHARS:]
    draft = IncidentDraft(
        title=f"{attempt.tool} {attempt.tool_version or ''}: {failed}".replace("  ", " ")[:500],
        description=f"Goal: {attempt.intent}. The command failed ({attempt.trigger_category}); "
        f"the self-correcting loop fixed it with {attempt.strategy}.",
        incident_type="error",
        severity="low",
        signature=ProblemSignature(
            symptoms=(attempt.trigger_category.replace("_", " "),),
            error_messages=(error,) if error.strip() else (),
            affected_services=(attempt.tool,),
            infrastructure=f"{attempt.tool} {attempt.tool_version}" if attempt.tool_version else None,
        ),
        root_cause=attempt.rationale or None,
        solution_applied=f"Ran `{fixed}` instead of `{failed}`.",
        resolution_steps=(f"failed: {failed}", f"corrected ({attempt.strategy}, {attempt.source}): {fixed}"),
        tags=("self-correction", attempt.tool),
        was_successful=True,
        resolution_time_minutes=None
        if settlement.correction_seconds is None
        else max(0, round(settlement.correction_seconds / 60)),
        workflow_id=str(attempt.workflow_id),
        origin={
            "workflow_id": str(attempt.workflow_id),
            "task_key": attempt.task_key,
            "attempt_id": attempt.id,
            "verified_fix_id": settlement.chain_fix_id or settlement.fix_id,
            "evaluator_reward": settlement.reward,
            "strategy": attempt.strategy,
        },
    )
    return _record(lib, draft)


def record_escalation(lib: Librarian, report: EscalationReport) -> int | None:
    """Record an escalated failure as an incident whose fix did not work (yet)."""
    data: dict[str, Any] = report.to_dict()
    last = data["failures"][-1] if data["failures"] else {}
    command = shlex.join(last.get("argv") or []) or report.task_key
    error = str(last.get("stderr") or "")[-_ERROR_CHARS:]
    rejected = [
        f"{candidate.get('shown') or candidate.get('strategy')}: {candidate.get('rejected_because')}"
        for candidate in data["candidates"][:5]
    ]
    draft = IncidentDraft(
        title=f"Escalated: {report.tool or 'task'} {report.version or ''}: {command}".replace("  ", " ")[
            :500
        ],
        description=f"Goal: {data['goal']}. {data['reason']}",
        incident_type="error",
        severity="medium",
        signature=ProblemSignature(
            error_messages=(error,) if error.strip() else (),
            affected_services=(report.tool,) if report.tool else (),
            infrastructure=f"{report.tool} {report.version}" if report.tool and report.version else None,
        ),
        root_cause=None,
        solution_applied=None,
        resolution_steps=tuple([*(f"rejected {line}" for line in rejected), *data["next_steps"]]),
        tags=("escalation", *((report.tool,) if report.tool else ())),
        was_successful=False,
        workflow_id=report.workflow_id,
        origin={"workflow_id": report.workflow_id, "task_key": report.task_key, "escalation": True},
    )
    return _record(lib, draft)


def _record(lib: Librarian, draft: IncidentDraft) -> int | None:
    try:
        return int(lib.incidents.create(lib.default_principal, draft)["id"])
    except LibrarianError as exc:
        logger.warning(
            "could not save the investigation of workflow %s as an incident: %s", draft.workflow_id, exc
        )
        return None
