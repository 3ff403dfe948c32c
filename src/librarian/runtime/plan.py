"""Correction plans: the JSON a corrector returns, its schema and its validation.

A plan is ``{"steps": [...]}``. Every step has ``description``, ``executor_type``, ``payload`` and
``rationale``; steps may name themselves (``id``) and wait for earlier steps (``depends_on``; by
default each step waits for the one before it). The last step retries the failed task and says so
with ``"retry_failed_task": true``; its payload replaces the failed task's payload (a corrected
command), and its executor type must be the failed task's. A plan is refused, with the reason, when
it is not JSON, breaks the schema, is empty, names an unknown executor type or has a cycle.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

import jsonschema

from librarian.errors import InvalidInputError
from librarian.runtime.spec import TASK_ID_PATTERN, topological_order

PLAN_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["steps"],
    "properties": {
        "rationale": {"type": "string"},
        "steps": {
            "type": "array",
            "minItems": 1,
            "maxItems": 20,
            "items": {
                "type": "object",
                "required": ["description", "executor_type", "payload", "rationale"],
                "additionalProperties": False,
                "properties": {
                    "id": {"type": "string", "pattern": TASK_ID_PATTERN},
                    "description": {"type": "string", "minLength": 1},
                    "executor_type": {"type": "string", "minLength": 1},
                    "payload": {"type": "object"},
                    "rationale": {"type": "string", "minLength": 1},
                    "depends_on": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
                    "retry_failed_task": {"type": "boolean"},
                },
            },
        },
    },
}


class PlanRejectedError(InvalidInputError):
    """A corrector's plan cannot be used; ``reason`` is recorded in the event log."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"correction plan rejected: {reason}")
        self.reason = reason


@dataclass(frozen=True)
class PlanStep:
    """One corrective step (a task to insert)."""

    id: str
    description: str
    executor_type: str
    payload: dict[str, Any]
    rationale: str
    depends_on: tuple[str, ...]


@dataclass(frozen=True)
class CorrectionPlan:
    """A validated plan: corrective steps in dependency order, then the retry of the failed task."""

    steps: tuple[PlanStep, ...]
    retry_payload: dict[str, Any]
    retry_depends_on: tuple[str, ...]
    retry_rationale: str

    def to_dict(self) -> dict[str, Any]:
        """The plan as JSON (for the event log)."""
        steps: list[dict[str, Any]] = [
            {
                "id": step.id,
                "description": step.description,
                "executor_type": step.executor_type,
                "payload": step.payload,
                "rationale": step.rationale,
                "depends_on": list(step.depends_on),
            }
            for step in self.steps
        ]
        return {
            "steps": steps,
            "retry": {"payload": self.retry_payload, "depends_on": list(self.retry_depends_on)},
        }


def validate_plan(
    raw: str | dict[str, Any],
    *,
    known_executor_types: Collection[str],
    failed_executor_type: str,
) -> CorrectionPlan:
    """Parse and check a corrector's plan.

    Args:
        raw: the plan as JSON text or an already decoded object.
        known_executor_types: executor types that exist.
        failed_executor_type: the failed task's executor type (the retry step must keep it).

    Raises:
        PlanRejectedError: invalid JSON, schema violation, empty plan, unknown executor type, a last
            step that does not retry the failed task, an unknown dependency or a cycle.
    """
    if isinstance(raw, str):
        try:
            document: Any = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise PlanRejectedError(
                f"not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
            ) from exc
    else:
        document = raw
    if isinstance(document, dict) and document.get("steps") == []:
        raise PlanRejectedError("the plan is empty (no steps)")
    errors = sorted(
        jsonschema.Draft202012Validator(PLAN_SCHEMA).iter_errors(document),
        key=lambda error: list(error.absolute_path),
    )
    if errors:
        where = ".".join(str(part) for part in errors[0].absolute_path) or "(top level)"
        raise PlanRejectedError(f"schema violation at {where}: {errors[0].message}")
    items: list[dict[str, Any]] = document["steps"]
    *corrective, last = items
    if not last.get("retry_failed_task"):
        raise PlanRejectedError('the last step must retry the failed task ("retry_failed_task": true)')
    if any(item.get("retry_failed_task") for item in corrective):
        raise PlanRejectedError("only the last step may retry the failed task")
    if last["executor_type"] != failed_executor_type:
        raise PlanRejectedError(
            f"the retry step changes the executor type from {failed_executor_type!r} to "
            f"{last['executor_type']!r}"
        )
    for index, item in enumerate(items):
        if item["executor_type"] not in known_executor_types:
            raise PlanRejectedError(
                f"step {index + 1} uses unknown executor type {item['executor_type']!r} "
                f"(known: {', '.join(sorted(known_executor_types))})"
            )
    steps = _steps(corrective)
    ids = [step.id for step in steps]
    sinks = [step.id for step in steps if not any(step.id in other.depends_on for other in steps)]
    retry_depends_on = tuple(last.get("depends_on", sinks))
    unknown = [dependency for dependency in retry_depends_on if dependency not in ids]
    if unknown:
        raise PlanRejectedError(f"the retry step depends on unknown steps {unknown}")
    return CorrectionPlan(
        steps=steps,
        retry_payload=dict(last["payload"]),
        retry_depends_on=retry_depends_on,
        retry_rationale=last["rationale"],
    )


def _steps(items: list[dict[str, Any]]) -> tuple[PlanStep, ...]:
    ids = [item.get("id") or f"step{index + 1}" for index, item in enumerate(items)]
    if len(set(ids)) != len(ids):
        raise PlanRejectedError(f"repeated step ids in {ids}")
    steps: list[PlanStep] = []
    for index, item in enumerate(items):
        default = [ids[index - 1]] if index else []
        depends_on = tuple(item.get("depends_on", default))
        for dependency in depends_on:
            if dependency not in ids:
                raise PlanRejectedError(f"step {ids[index]!r} depends on unknown step {dependency!r}")
        steps.append(
            PlanStep(
                id=ids[index],
                description=item["description"],
                executor_type=item["executor_type"],
                payload=dict(item["payload"]),
                rationale=item["rationale"],
                depends_on=depends_on,
            )
        )
    try:
        order = topological_order({step.id: step.depends_on for step in steps}, "the plan")
    except InvalidInputError as exc:
        raise PlanRejectedError(exc.message.removeprefix("the plan: ")) from exc
    by_id = {step.id: step for step in steps}
    return tuple(by_id[step_id] for step_id in order)
