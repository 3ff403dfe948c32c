"""Correction plans: valid ones parse; bad ones are rejected with a reason that says why."""

from __future__ import annotations

import json
from typing import Any

import pytest

from librarian.runtime.plan import PlanRejectedError, validate_plan

KNOWN = ("command_executor", "file_writer")


def step(description: str, **extra: Any) -> dict[str, Any]:
    return {
        "description": description,
        "executor_type": "command_executor",
        "payload": {"argv": ["true"]},
        "rationale": f"because {description}",
        **extra,
    }


def check(plan: Any) -> Any:
    return validate_plan(plan, known_executor_types=KNOWN, failed_executor_type="command_executor")


def test_a_valid_plan_chains_its_steps_and_ends_with_the_retry() -> None:
    plan = check(json.dumps({"steps": [step("mkdir"), step("touch"), step("retry", retry_failed_task=True)]}))
    assert [s.id for s in plan.steps] == ["step1", "step2"]
    assert plan.steps[1].depends_on == ("step1",)
    assert plan.retry_depends_on == ("step2",)
    assert plan.retry_payload == {"argv": ["true"]}


def test_a_retry_only_plan_inserts_nothing() -> None:
    plan = check({"steps": [step("again", retry_failed_task=True)]})
    assert plan.steps == () and plan.retry_depends_on == ()


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("{not json", "not valid JSON"),
        (json.dumps({"steps": []}), "empty"),
        (json.dumps({"plan": "x"}), "'steps' is a required property"),
        (json.dumps({"steps": [step("go")]}), "last step must retry"),
        (
            json.dumps(
                {"steps": [{**step("x"), "executor_type": "teleporter"}, step("r", retry_failed_task=True)]}
            ),
            "unknown executor type 'teleporter'",
        ),
        (
            json.dumps({"steps": [{**step("r"), "executor_type": "file_writer", "retry_failed_task": True}]}),
            "changes the executor type",
        ),
        (
            json.dumps(
                {
                    "steps": [
                        step("a", id="a", depends_on=["b"]),
                        step("b", id="b", depends_on=["a"]),
                        step("r", retry_failed_task=True),
                    ]
                }
            ),
            "dependency cycle",
        ),
        (
            json.dumps({"steps": [step("a", depends_on=["ghost"]), step("r", retry_failed_task=True)]}),
            "ghost",
        ),
        (json.dumps({"steps": [{"description": "x"}]}), "required property"),
    ],
)
def test_bad_plans_are_rejected_with_a_reason(raw: str, reason: str) -> None:
    with pytest.raises(PlanRejectedError) as caught:
        check(raw)
    assert reason in caught.value.reason
