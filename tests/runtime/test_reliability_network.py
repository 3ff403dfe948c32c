"""The RabbitMQ connections of every worker process are cut under load: they reconnect and the run completes.

The workers reach RabbitMQ through a TCP proxy in the test process; cutting it closes every connection
at once (consumers, publishers), as a network failure or a RabbitMQ restart would. Messages held by a
dead connection are redelivered, results published twice are applied once, and the database (the
truth) ends with every task succeeded exactly once.
"""

from __future__ import annotations

from collections.abc import Iterator

import pika
import pytest

from librarian.runtime.spec import WorkflowBuilder
from tests.runtime.cluster import RABBIT_URL, Cluster, assert_applied_once, kinds, wait_for
from tests.runtime.tcp_proxy import TcpProxy

pytestmark = pytest.mark.slow


@pytest.fixture
def proxy() -> Iterator[TcpProxy]:
    parts = pika.URLParameters(RABBIT_URL)
    forwarder = TcpProxy((parts.host, parts.port))
    yield forwarder
    forwarder.close()


def test_workers_reconnect_after_their_rabbitmq_connections_are_cut_under_load(
    cluster: Cluster, proxy: TcpProxy
) -> None:
    builder = WorkflowBuilder("under-load", goal="keep going through network failures")
    fan_out = [f"t{index}" for index in range(40)]
    for key in fan_out:
        builder.task(key, "command_executor", {"argv": ["sleep", "0.05"]})
    builder.task("join", "command_executor", {"argv": ["echo", "all done"]}, depends_on=fan_out)
    cluster.broker_url = proxy.url(RABBIT_URL)
    # A lease longer than the queue's backlog, so what the test sees is reconnection, not expiry.
    roles = ("orchestrator", "evaluator", "executor", "executor")
    workers = [cluster.start(role, "--lease-seconds", "10") for role in roles]
    workflow_id = cluster.submit(builder.build())

    def applied() -> int:
        return kinds(cluster.report(workflow_id)).count("result_applied")

    wait_for(lambda: applied() >= 8, timeout=60, what="the first results")
    connections_before = proxy.accepted
    proxy.cut()  # in the middle of the fan-out: messages in flight on every connection
    wait_for(lambda: applied() >= 24, timeout=60, what="progress after the first cut")
    proxy.cut()

    report = cluster.runtime.wait(workflow_id, timeout=90)
    assert report.status == "success", report.failure_report
    assert_applied_once(report)
    assert [process.poll() for process in workers] == [None] * 4, "a worker died instead of reconnecting"
    # Every process opened new connections: at least the orchestrator's publisher, the evaluator's
    # and both executors' consumers, after each of the two cuts.
    assert proxy.accepted >= connections_before + 4
