"""An agent-sized view of a workflow: what an agent needs to decide its next step, not every log line.

A workflow's full report (``lib.workflows.get``) holds every event and each task's whole feedback notes;
a long run's report reaches hundreds of kilobytes, more than an agent's context should spend on it.
The brief view keeps each task's status, outcome and correction, the loop's timeline steps and the
newest events; the full report stays one REST call away.
"""

from __future__ import annotations

from typing import Any

from librarian.correction.timeline import STEP_KIND

__all__ = ["MAX_BRIEF_EVENTS", "brief_view"]

MAX_BRIEF_EVENTS = 20
MAX_TIMELINE_STEPS = 40
_TEXT_CHARS = 400


def brief_view(view: dict[str, Any]) -> dict[str, Any]:
    """The brief form of a full workflow view (``WorkflowService.get``)."""
    events = list(view.get("events", []))
    timeline = [event for event in events if event.get("kind") == STEP_KIND]
    others = [event for event in events if event.get("kind") != STEP_KIND]
    return {
        "workflow_id": view["workflow_id"],
        "name": view["name"],
        "status": view["status"],
        "total_reward": view["total_reward"],
        "created_at": view["created_at"],
        "finished_at": view["finished_at"],
        "question": view.get("question"),
        "failure_report": view.get("failure_report"),
        "tasks": [_task(task) for task in view.get("tasks", [])],
        "timeline": [_step(event) for event in timeline[-MAX_TIMELINE_STEPS:]],
        "recent_events": [_event(event) for event in others[-MAX_BRIEF_EVENTS:]],
        "events_total": len(events),
    }


def _task(task: dict[str, Any]) -> dict[str, Any]:
    brief = {
        "key": task["key"],
        "status": task["status"],
        "executor_type": task["executor_type"],
        "reward": task["reward"],
        "retries": task["retries"],
        "outcome": task["outcome"],
    }
    if task.get("parent_id"):  # a corrective task surgery inserted: say why it exists
        brief["inserted_for"] = task["parent_id"]
        brief["rationale"] = _short(task.get("rationale"))
    if task.get("correction_strategy"):
        brief["correction_strategy"] = task["correction_strategy"]
    if task.get("error_category"):
        brief["error_category"] = task["error_category"]
    return brief


def _step(event: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": event["id"],
        "at": event["at"],
        "task": event["task"],
        "stage": event.get("data", {}).get("stage"),
        "summary": _short(event["reason"]),
    }


def _event(event: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": event["id"],
        "at": event["at"],
        "task": event["task"],
        "kind": event["kind"],
        "to_status": event["to_status"],
        "reason": _short(event["reason"]),
    }


def _short(text: str | None) -> str | None:
    if text is None or len(text) <= _TEXT_CHARS:
        return text
    return text[: _TEXT_CHARS - 1] + "…"
