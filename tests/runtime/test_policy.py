"""The UCB1 policy: untried strategies first, then the one that earned more; its choice follows rewards."""

from __future__ import annotations

from pathlib import Path

from librarian.runtime.correctors import ScriptedCorrector
from librarian.runtime.policy import StrategyPolicy
from librarian.runtime.spec import WorkflowBuilder
from librarian.storage.database import open_database
from tests.runtime.conftest import RuntimeFactory


def test_the_choice_changes_after_rewards(tmp_path: Path) -> None:
    _, sessions = open_database(f"sqlite:///{tmp_path / 'p.db'}")
    policy = StrategyPolicy()
    with sessions.begin() as session:
        assert policy.choose(session, "missing_path", ["mkdir", "retry"]) == ["mkdir", "retry"]
        policy.record(session, "missing_path", "mkdir", -1.0)
        # An untried strategy comes before one that was tried.
        assert policy.choose(session, "missing_path", ["mkdir", "retry"]) == ["retry", "mkdir"]
        for _ in range(3):
            policy.record(session, "missing_path", "retry", 1.5)
        assert policy.choose(session, "missing_path", ["mkdir", "retry"]) == ["retry", "mkdir"]
        for _ in range(6):
            policy.record(session, "missing_path", "mkdir", 1.5)
            policy.record(session, "missing_path", "retry", -1.0)
        assert policy.choose(session, "missing_path", ["mkdir", "retry"]) == ["mkdir", "retry"]
        # Categories learn separately.
        assert policy.choose(session, "timeout", ["mkdir", "retry"]) == ["mkdir", "retry"]


def test_the_runtime_tries_the_strategy_that_worked_first_next_time(open_runtime: RuntimeFactory) -> None:
    fix = {
        "steps": [
            {
                "description": "create it",
                "executor_type": "file_writer",
                "payload": {"path": "in.txt", "content": "x"},
                "rationale": "missing",
            },
            {
                "description": "retry",
                "executor_type": "command_executor",
                "payload": {"argv": ["cat", "in.txt"]},
                "rationale": "exists now",
                "retry_failed_task": True,
            },
        ]
    }
    runtime = open_runtime(
        correctors=[ScriptedCorrector("garbage", ["nope"] * 2), ScriptedCorrector("works", [fix] * 2)]
    )
    spec = WorkflowBuilder("w").task("read", "command_executor", {"argv": ["cat", "in.txt"]}).build()
    orders = []
    for _ in range(2):
        report = runtime.run(spec, timeout=60)
        assert report.status == "success", report.failure_report
        started = next(event for event in report.events if event.kind == "correction_started")
        orders.append(started.reason)
    assert "['garbage', 'works']" in orders[0]
    assert "['works', 'garbage']" in orders[1]
