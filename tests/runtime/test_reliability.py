"""Crash tests with real processes on PostgreSQL and RabbitMQ: kill -9 each role at its worst moment.

After a restart every workflow completes, no task is lost, no result is applied twice, and the event
log says what happened (lease expired, stale dispatch or result ignored, correction started again).
"""

from __future__ import annotations

import pytest

from librarian.runtime.spec import WorkflowBuilder
from tests.runtime.cluster import Cluster, assert_applied_once, kinds, wait_for

pytestmark = pytest.mark.slow


def test_an_executor_killed_mid_task_is_replaced_and_the_task_runs_again(cluster: Cluster) -> None:
    spec = (
        WorkflowBuilder("crashy")
        .task(
            "slow",
            "command_executor",
            {"script": "if [ -f started ]; then echo again; else touch started; sleep 20; fi"},
        )
        .task("side", "command_executor", {"argv": ["echo", "independent"]})
        .task("after", "command_executor", {"argv": ["echo", "after"]}, depends_on=["slow", "side"])
        .build()
    )
    cluster.start("orchestrator")
    cluster.start("evaluator")
    doomed = cluster.start("executor")
    workflow_id = cluster.submit(spec)
    # Killed once the script runs (its marker file exists), not merely once the task is claimed.
    marker = cluster.home / "workspaces" / workflow_id / "started"
    wait_for(marker.is_file, what="slow running")
    assert cluster.report(workflow_id).task("slow").status == "in_progress"
    cluster.kill(doomed)
    cluster.start("executor")

    report = cluster.runtime.wait(workflow_id, timeout=60)
    assert report.status == "success", report.failure_report
    assert_applied_once(report)
    slow = kinds(report, "slow")
    # The lost attempt's lease expired and the task ran again (a later lease may also run out
    # while the replacement worker starts up; every superseded attempt is refused the same way).
    assert "lease_expired" in slow and report.task("slow").attempt >= 2
    # RabbitMQ redelivered the dead worker's unacknowledged message; the database refused it.
    assert "stale_dispatch_ignored" in slow


def test_an_executor_killed_in_the_middle_of_a_batch_loses_and_repeats_nothing(cluster: Cluster) -> None:
    # An executor holding four dispatch messages (--prefetch 4): a task it finished has its result
    # held for the batch's one reply message, and the tasks after the slow one have not started.
    builder = WorkflowBuilder("batched").task("first", "command_executor", {"argv": ["echo", "first"]})
    builder.task(
        "slow",
        "command_executor",
        {"script": "if [ -f started ]; then echo again; else touch started; sleep 20; fi"},
    )
    quick = [f"q{index}" for index in range(6)]
    for key in quick:
        builder.task(key, "command_executor", {"argv": ["echo", key]})
    spec = builder.task(
        "after", "command_executor", {"argv": ["true"]}, depends_on=["first", "slow", *quick]
    ).build()
    cluster.start("orchestrator")
    cluster.start("evaluator")
    workflow_id = cluster.submit(spec)
    # Every task waits in the queue before the executor starts, so its first batch holds several.
    wait_for(
        lambda: sum(task.status == "dispatched" for task in cluster.report(workflow_id).tasks) == 8,
        what="eight tasks dispatched",
    )
    doomed = cluster.start("executor", "--prefetch", "4")
    marker = cluster.home / "workspaces" / workflow_id / "started"
    wait_for(marker.is_file, what="slow running")
    cluster.kill(doomed)
    cluster.start("executor", "--prefetch", "4")

    report = cluster.runtime.wait(workflow_id, timeout=90)
    assert report.status == "success", report.failure_report
    assert_applied_once(report)  # nothing lost, nothing applied twice
    assert "lease_expired" in kinds(report, "slow") and report.task("slow").attempt >= 2
    # "first" ran in the killed batch before "slow": its result, held for the batch, died with the
    # executor; the redelivered message was refused and the task ran again once its lease expired.
    first = kinds(report, "first")
    assert first.count("started") == 2 and "stale_dispatch_ignored" in first and "lease_expired" in first


def test_an_orchestrator_killed_mid_surgery_corrects_again_after_restart(cluster: Cluster) -> None:
    spec = (
        WorkflowBuilder("fixme")
        .task("read", "command_executor", {"argv": ["cat", "input.txt"]})
        .task("after", "command_executor", {"argv": ["echo", "done"]}, depends_on=["read"])
        .build()
    )
    doomed = cluster.start("orchestrator", "--slow-corrector", "30")
    cluster.start("evaluator")
    cluster.start("executor")
    workflow_id = cluster.submit(spec)
    wait_for(lambda: "correction_started" in kinds(cluster.report(workflow_id)), what="correction")
    cluster.kill(doomed)
    interrupted = cluster.report(workflow_id)
    assert interrupted.task("read").status == "failed" and len(interrupted.tasks) == 2  # nothing half-done
    cluster.start("orchestrator")

    report = cluster.runtime.wait(workflow_id, timeout=60)
    assert report.status == "success", report.failure_report
    assert_applied_once(report)
    read = kinds(report, "read")
    assert read.count("correction_started") == 2 and read.count("surgery") == 1
    assert report.task("read").retries == 1 and len(report.tasks) == 3


def test_an_evaluator_killed_before_acknowledging_does_not_apply_twice(cluster: Cluster) -> None:
    spec = WorkflowBuilder("once").task("only", "command_executor", {"argv": ["echo", "hello"]}).build()
    cluster.start("orchestrator")
    cluster.start("executor")
    doomed = cluster.start("evaluator", "--pause-after-apply", "30")
    workflow_id = cluster.submit(spec)
    assert doomed.stdout is not None
    assert doomed.stdout.readline().strip() == "applied"  # committed; the ack has not been sent
    cluster.kill(doomed)
    cluster.start("evaluator")

    wait_for(lambda: "stale_result_ignored" in kinds(cluster.report(workflow_id)), what="redelivery")
    report = cluster.runtime.wait(workflow_id, timeout=30)
    assert report.status == "success"
    assert_applied_once(report)
    assert report.total_reward == pytest.approx(1.0)
