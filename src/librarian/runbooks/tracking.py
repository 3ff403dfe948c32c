"""How runs went: an execution as the interfaces show it, and per-step statistics of a runbook."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import case, func, select
from sqlalchemy.orm import Session

from librarian.runbooks.models import RunbookExecution, RunbookRow, RunbookStepRun
from librarian.storage.models import as_utc

# Outputs shown per step run in an execution's view (the whole output stays stored).
SHOWN_OUTPUT_CHARS = 20_000


def _stamp(moment: Any) -> str | None:
    return None if moment is None else as_utc(moment).isoformat()


def step_run_view(run: RunbookStepRun) -> dict[str, Any]:
    """One step run: what ran (rendered), its output or error, and how long it took."""
    output = run.output or ""
    return {
        "sequence": run.sequence,
        "step": run.step_number,
        "title": run.title,
        "action_type": run.action_type,
        "attempt": run.attempt,
        "status": run.status,
        "rendered": run.rendered,
        "output": output[:SHOWN_OUTPUT_CHARS],
        "output_truncated": len(output) > SHOWN_OUTPUT_CHARS,
        "error": run.error,
        "error_context": run.error_context,
        "extracted": dict(run.extracted or {}),
        "workflow_id": run.workflow_id,
        "corrected_command": run.corrected_command,
        "actor": run.actor,
        "started_at": _stamp(run.started_at),
        "finished_at": _stamp(run.finished_at),
        "duration_ms": run.duration_ms,
    }


def execution_view(
    execution: RunbookExecution, row: RunbookRow | None, runs: Sequence[RunbookStepRun] | None
) -> dict[str, Any]:
    """An execution as the design's ``runbook_executions`` row, plus what it waits for and its steps."""
    view: dict[str, Any] = {
        "id": execution.id,
        "runbook_id": execution.runbook_id,
        "runbook_name": row.name if row is not None else None,
        "runbook_version": execution.runbook_version,
        "status": execution.status,
        "mode": execution.mode,
        "problem": execution.problem,
        "current_step_number": execution.current_step_number,
        "waiting_for": execution.pending,
        "variables": dict(execution.execution_context or {}),
        "completed_steps": list(execution.completed_steps or []),
        "failed_steps": list(execution.failed_steps or []),
        "outcome": execution.outcome,
        "resolution_notes": execution.resolution_notes,
        "effectiveness_rating": execution.effectiveness_rating,
        "incident_id": execution.incident_id,
        "user_id": execution.user_id,
        "started_at": _stamp(execution.started_at),
        "completed_at": _stamp(execution.completed_at),
        "duration_ms": execution.duration_ms,
        "url": f"/runbook-executions/{execution.id}",
    }
    if runs is not None:
        view["steps"] = [step_run_view(run) for run in runs]
    return view


def step_statistics(session: Session, runbook_id: int) -> list[dict[str, Any]]:
    """Per step of a runbook, over all its executions: runs, failures, timeouts, corrections, average time."""
    rows = session.execute(
        select(
            RunbookStepRun.step_number,
            func.max(RunbookStepRun.title),
            func.count(),
            func.sum(case((RunbookStepRun.status == "succeeded", 1), else_=0)),
            func.sum(case((RunbookStepRun.status == "failed", 1), else_=0)),
            func.sum(case((RunbookStepRun.status == "timed_out", 1), else_=0)),
            func.sum(case((RunbookStepRun.corrected_command.is_not(None), 1), else_=0)),
            func.avg(RunbookStepRun.duration_ms),
        )
        .where(RunbookStepRun.runbook_id == runbook_id)
        .group_by(RunbookStepRun.step_number)
        .order_by(RunbookStepRun.step_number)
    ).all()
    stats = []
    for number, title, runs, succeeded, failed, timed_out, corrected, average in rows:
        stats.append(
            {
                "step": number,
                "title": title,
                "runs": int(runs),
                "succeeded": int(succeeded or 0),
                "failed": int(failed or 0),
                "timed_out": int(timed_out or 0),
                "corrected": int(corrected or 0),
                "failure_rate": round(int(failed or 0) / int(runs), 3) if runs else None,
                "avg_duration_ms": None if average is None else round(float(average), 1),
            }
        )
    return stats


def record_run(row: RunbookRow, execution: RunbookExecution, now: datetime) -> None:
    """Count a finished execution in its runbook's statistics and effectiveness."""
    row.execution_count = (row.execution_count or 0) + 1
    if execution.status == "completed":
        row.success_count = (row.success_count or 0) + 1
    row.total_duration_ms = (row.total_duration_ms or 0) + (execution.duration_ms or 0)
    row.last_executed_at = now
    row.effectiveness_score = effectiveness(row)


def effectiveness(row: RunbookRow) -> float:
    """0-1: the success rate (smoothed toward one half while runs are few), blended half and half with
    the average rating (1-5 stars mapped to 0-1) once there are ratings."""
    runs, successes = row.execution_count or 0, row.success_count or 0
    rate = (successes + 1) / (runs + 2)
    if row.rating_count:
        stars = (row.rating_sum / row.rating_count - 1) / 4
        rate = 0.5 * rate + 0.5 * stars
    return round(rate, 3)
