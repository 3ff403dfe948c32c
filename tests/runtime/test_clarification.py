"""Clarification end to end: a corrector asks, the workflow pauses, an answer resumes it and is used."""

from __future__ import annotations

import pytest
from rich.console import Console

from librarian.errors import ConflictError, InvalidInputError
from librarian.runtime.correctors import Clarification, ClarificationRequest, ScriptedCorrector
from librarian.runtime.report import WorkflowReport
from librarian.runtime.spec import WorkflowBuilder, WorkflowSpec
from tests.runtime.clarifying import QUESTION, AskingCorrector
from tests.runtime.conftest import RuntimeFactory


def needs_input() -> WorkflowSpec:
    return (
        WorkflowBuilder("needs-input", goal="print the input")
        .task("read", "command_executor", {"argv": ["cat", "data.txt"], "expect": {"stdout_contains": "42"}})
        .task("after", "command_executor", {"argv": ["echo", "done"]}, depends_on=["read"])
        .build()
    )


def test_a_question_pauses_the_workflow_and_the_answer_resumes_it(open_runtime: RuntimeFactory) -> None:
    corrector = AskingCorrector()
    runtime = open_runtime(correctors=[corrector])

    paused = runtime.run(needs_input(), timeout=60)
    assert paused.status == "paused" and not paused.finished
    assert paused.question is not None
    assert paused.question["question"] == QUESTION and paused.question["task"] == "read"
    assert paused.task("read").status == "failed" and paused.task("after").status == "pending"
    asked = [event for event in paused.events if event.kind == "clarification_requested"]
    assert len(asked) == 1 and asked[0].to_status == "paused" and QUESTION in asked[0].reason
    assert "librarian workflow answer" in str(_render(paused))

    resumed = runtime.answer(paused.workflow_id, "  42  ")
    assert resumed.status in ("running", "success") and resumed.question is None
    report = runtime.wait(paused.workflow_id, timeout=60)

    assert report.status == "success", report.failure_report
    assert report.task("read").retries == 1 and report.task("after").status == "success"
    workspace = runtime.settings.home / "workspaces" / report.workflow_id
    assert (workspace / "data.txt").read_text() == "42"
    # The second correction saw the answer, next to its question, with where the task is stored.
    second = corrector.contexts[-1]
    assert second.answers == (Clarification(QUESTION, "42", "ask_the_user", "read"),)
    assert second.workflow_id == report.workflow_id and second.task_id == report.task("read").task_id
    kinds = [event.kind for event in report.events]
    assert kinds.index("clarification_requested") < kinds.index("clarification_answered")
    answered = next(event for event in report.events if event.kind == "clarification_answered")
    assert (answered.from_status, answered.to_status) == ("paused", "running") and "42" in answered.reason


def _render(report: WorkflowReport) -> str:
    console = Console(width=200, record=True)
    console.print(report.tree())
    return console.export_text()


def test_answers_are_refused_when_nothing_was_asked_or_empty(open_runtime: RuntimeFactory) -> None:
    runtime = open_runtime(correctors=[AskingCorrector()])
    done = runtime.run(
        WorkflowBuilder("ok").task("a", "command_executor", {"argv": ["true"]}).build(), timeout=60
    )
    with pytest.raises(ConflictError, match="not waiting for an answer"):
        runtime.answer(done.workflow_id, "hello")
    paused = runtime.run(needs_input(), timeout=60)
    with pytest.raises(InvalidInputError, match="empty"):
        runtime.answer(paused.workflow_id, "   ")
    assert runtime.status(paused.workflow_id).status == "paused"


def test_a_paused_workflow_can_be_cancelled(open_runtime: RuntimeFactory) -> None:
    runtime = open_runtime(correctors=[AskingCorrector()])
    paused = runtime.run(needs_input(), timeout=60)
    cancelled = runtime.cancel(paused.workflow_id)
    assert cancelled.status == "cancelled" and cancelled.question is None
    event = cancelled.events[-1]
    assert (event.kind, event.from_status, event.to_status) == ("workflow_cancelled", "paused", "cancelled")


def test_a_corrector_that_only_asks_is_stopped_by_the_question_limit(open_runtime: RuntimeFactory) -> None:
    asker = ScriptedCorrector("asker", [ClarificationRequest("asker", "Which file?")] * 10)
    runtime = open_runtime(correctors=[asker])
    workflow_id = runtime.submit(needs_input())
    for _ in range(3):  # the default limit: three questions about one task
        report = runtime.wait(workflow_id, timeout=60)
        assert report.status == "paused", report.failure_report
        runtime.answer(workflow_id, "I don't know")
    report = runtime.wait(workflow_id, timeout=60)
    assert report.status == "failed"
    assert report.failure_report is not None
    rejected = report.failure_report["rejected_plans"]
    assert rejected == [
        {"strategy": "asker", "reason": "already asked 3 question(s) about this task (limit 3)"}
    ]
