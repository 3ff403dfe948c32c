"""The embedded runtime end to end: real commands in dependency order, correction by surgery, limits."""

from __future__ import annotations

import time
from typing import Any

import pytest

from librarian.runtime.correctors import ScriptedCorrector
from librarian.runtime.report import WorkflowReport
from librarian.runtime.spec import WorkflowBuilder, WorkflowSpec
from tests.runtime.conftest import RuntimeFactory


def chain_spec() -> WorkflowSpec:
    """a -> (b, c) -> d: d reads what a, b and c wrote, so it only passes if the order was kept."""
    return (
        WorkflowBuilder("chain", goal="write a log in order")
        .task("a", "command_executor", {"script": "echo a >> log.txt"})
        .task("b", "command_executor", {"script": "sleep 0.2; echo b >> log.txt"}, depends_on=["a"])
        .task("c", "file_writer", {"path": "notes/readme.txt", "content": "hello\n"}, depends_on=["a"])
        .task(
            "d",
            "command_executor",
            {"argv": ["cat", "log.txt", "notes/readme.txt"], "expect": {"stdout_contains": "a\nb\nhello"}},
            depends_on=["b", "c"],
        )
        .build()
    )


def assert_chain_succeeded(report: WorkflowReport) -> None:
    assert report.status == "success", report.failure_report
    assert [task.status for task in report.tasks] == ["success"] * 4
    assert report.total_reward == pytest.approx(4.0)
    kinds = [event.kind for event in report.events]
    assert kinds[0] == "workflow_submitted" and kinds[-1] == "workflow_success"


def test_embedded_runtime_runs_real_commands_in_dependency_order(open_runtime: RuntimeFactory) -> None:
    runtime = open_runtime()
    report = runtime.run(chain_spec(), timeout=60)
    assert_chain_succeeded(report)
    workspace = runtime.settings.home / "workspaces" / report.workflow_id
    assert (workspace / "log.txt").read_text() == "a\nb\n"


def test_the_runtime_runs_on_postgresql(open_runtime: RuntimeFactory, postgres_url: str) -> None:
    runtime = open_runtime(database_url=postgres_url)
    assert_chain_succeeded(runtime.run(chain_spec(), timeout=60))


def missing_input_spec() -> WorkflowSpec:
    return (
        WorkflowBuilder("report", goal="summarise the input")
        .task("prepare", "command_executor", {"argv": ["echo", "ready"]})
        .task(
            "read",
            "command_executor",
            {"argv": ["cat", "data/input.txt"], "expect": {"stdout_contains": "42"}},
            depends_on=["prepare"],
        )
        .task("after", "command_executor", {"argv": ["echo", "done"]}, depends_on=["read"])
        .build()
    )


def fix_plan() -> dict[str, Any]:
    return {
        "steps": [
            {
                "id": "dir",
                "description": "create the data directory",
                "executor_type": "command_executor",
                "payload": {"argv": ["mkdir", "-p", "data"]},
                "rationale": "cat failed because data/ does not exist",
            },
            {
                "id": "file",
                "description": "write the input",
                "executor_type": "file_writer",
                "payload": {"path": "data/input.txt", "content": "42\n"},
                "rationale": "the input file is missing",
            },
            {
                "description": "read again",
                "executor_type": "command_executor",
                "payload": {"argv": ["cat", "data/input.txt"], "expect": {"stdout_contains": "42"}},
                "rationale": "the input now exists",
                "retry_failed_task": True,
            },
        ]
    }


def test_a_failed_task_is_repaired_by_surgery_and_retried(open_runtime: RuntimeFactory) -> None:
    runtime = open_runtime(correctors=[ScriptedCorrector("scripted", [fix_plan()])])
    report = runtime.run(missing_input_spec(), timeout=60)

    assert report.status == "success", report.failure_report
    read = report.task("read")
    fixes = [task for task in report.tasks if task.parent_id == read.task_id]
    assert [task.key for task in fixes] == ["read.fix1.dir", "read.fix1.file"]
    assert all(task.status == "success" for task in fixes)
    assert fixes[1].depends_on == [fixes[0].task_id]
    assert fixes[1].task_id in read.depends_on
    assert read.retries == 1 and read.reward == pytest.approx(1.5)
    # prepare 1.0 + read 1.5 + two corrective tasks 1.0 each + after 1.0
    assert report.total_reward == pytest.approx(5.5)
    read_events = [event for event in report.events if event.task == "read"]
    transitions = [(event.kind, event.from_status, event.to_status) for event in read_events]
    assert ("result_applied", "in_progress", "failed") in transitions
    assert ("surgery", "failed", "paused") in transitions
    assert ("resumed", "paused", "pending") in transitions
    assert transitions[-2:] == [
        ("result_applied", "in_progress", "success"),
        ("strategy_rewarded", None, None),
    ]
    surgery = next(event for event in read_events if event.kind == "surgery")
    assert "scripted" in surgery.reason and "CommandFailedError" in surgery.reason
    inserted = [event for event in report.events if event.kind == "task_inserted"]
    assert len(inserted) == 2 and all("to repair 'read'" in event.reason for event in inserted)
    # The dependent waited: it started only after the retried task succeeded.
    after_started = next(e for e in report.events if e.task == "after" and e.kind == "dispatched")
    read_done = read_events[-2]
    assert after_started.at >= read_done.at


def test_the_built_in_corrector_creates_a_missing_file(open_runtime: RuntimeFactory) -> None:
    spec = WorkflowBuilder("touchy").task("read", "command_executor", {"argv": ["cat", "config.ini"]}).build()
    report = open_runtime().run(spec, timeout=60)
    assert report.status == "success", report.failure_report
    fix = next(task for task in report.tasks if task.parent_id is not None)
    assert fix.executor_type == "file_writer" and "config.ini" in fix.description


def cycle_plan() -> dict[str, Any]:
    plan = fix_plan()
    plan["steps"][0]["depends_on"] = ["file"]
    plan["steps"][1]["depends_on"] = ["dir"]
    return plan


def test_invalid_plans_are_rejected_with_reasons_and_the_workflow_fails_cleanly(
    open_runtime: RuntimeFactory,
) -> None:
    correctors = [
        ScriptedCorrector("json_garbage", ["{this is not json"]),
        ScriptedCorrector("nothing", [{"steps": []}]),
        ScriptedCorrector("loops", [cycle_plan()]),
    ]
    report = open_runtime(correctors=correctors).run(missing_input_spec(), timeout=60)

    assert report.status == "failed"
    assert report.failure_report is not None
    reasons = {item["strategy"]: item["reason"] for item in report.failure_report["rejected_plans"]}
    assert "not valid JSON" in reasons["json_garbage"]
    assert "empty" in reasons["nothing"]
    assert "dependency cycle" in reasons["loops"]
    rejected = [event for event in report.events if event.kind == "plan_rejected"]
    assert len(rejected) == 3
    assert report.task("after").status == "pending"  # the branch halted: never dispatched
    assert len(report.tasks) == 3  # nothing inserted


def test_after_a_rejected_plan_the_next_strategy_is_tried(open_runtime: RuntimeFactory) -> None:
    correctors = [ScriptedCorrector("json_garbage", ["]"]), ScriptedCorrector("good", [fix_plan()])]
    report = open_runtime(correctors=correctors).run(missing_input_spec(), timeout=60)
    assert report.status == "success", report.failure_report
    kinds = [event.kind for event in report.events if event.task == "read"]
    assert kinds.index("plan_rejected") < kinds.index("surgery")


def retry_forever() -> ScriptedCorrector:
    retry = {
        "steps": [
            {
                "description": "retry",
                "executor_type": "command_executor",
                "payload": {"argv": ["sh", "-c", "exit 3"]},
                "rationale": "maybe it was transient",
                "retry_failed_task": True,
            }
        ]
    }
    return ScriptedCorrector("stubborn", [retry] * 10)


def test_the_retry_limit_ends_the_workflow_with_a_report(open_runtime: RuntimeFactory) -> None:
    spec = WorkflowBuilder("flaky").task("fail", "command_executor", {"argv": ["sh", "-c", "exit 3"]}).build()
    report = open_runtime(correctors=[retry_forever()], runtime_max_retries=2).run(spec, timeout=60)
    assert report.status == "failed"
    assert report.failure_report is not None
    assert "after 2 retries (limit 2)" in report.failure_report["reason"]
    assert report.failure_report["failure"]["details"]["exit_code"] == 3
    task = report.task("fail")
    assert task.retries == 2 and task.reward == pytest.approx(-1.2)


def test_the_surgery_depth_limit_ends_the_workflow(open_runtime: RuntimeFactory) -> None:
    failing_fix = {
        "steps": [
            {
                "description": "a fix that fails too",
                "executor_type": "command_executor",
                "payload": {"argv": ["sh", "-c", "exit 4"]},
                "rationale": "try something",
            },
            {
                "description": "retry",
                "executor_type": "command_executor",
                "payload": {"argv": ["sh", "-c", "exit 3"]},
                "rationale": "after the fix",
                "retry_failed_task": True,
            },
        ]
    }
    spec = WorkflowBuilder("deep").task("fail", "command_executor", {"argv": ["sh", "-c", "exit 3"]}).build()
    runtime = open_runtime(
        correctors=[ScriptedCorrector("nested", [failing_fix] * 5)], runtime_max_surgery_depth=1
    )
    report = runtime.run(spec, timeout=60)
    assert report.status == "failed"
    assert report.failure_report is not None
    assert "surgery depth limit 1" in report.failure_report["reason"]
    assert report.failure_report["task_key"] == "fail.fix1.step1"


def test_cancel_stops_dispatching(open_runtime: RuntimeFactory) -> None:
    spec = (
        WorkflowBuilder("long")
        .task("slow", "command_executor", {"argv": ["sleep", "1"]})
        .task("next", "command_executor", {"argv": ["true"]}, depends_on=["slow"])
        .build()
    )
    runtime = open_runtime()
    workflow_id = runtime.submit(spec)
    deadline = time.monotonic() + 20
    while runtime.status(workflow_id).task("slow").status != "in_progress":
        assert time.monotonic() < deadline
        time.sleep(0.02)
    runtime.cancel(workflow_id)
    # The running attempt still finishes and is recorded; nothing may be dispatched after it.
    while runtime.status(workflow_id).task("slow").status != "success":
        assert time.monotonic() < deadline
        time.sleep(0.02)
    report = runtime.status(workflow_id)
    assert report.status == "cancelled"
    assert report.task("next").status == "pending"
    assert any(event.kind == "workflow_cancelled" for event in report.events)
