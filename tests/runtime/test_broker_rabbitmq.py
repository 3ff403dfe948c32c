"""The RabbitMQ broker on the machine's real RabbitMQ: topology, persistence, acks, prefetch, reconnection.

Every test declares its own exchange and queues (uuid suffix) and deletes them afterwards, so tests
never see each other's messages. Lost connections are simulated with a TCP proxy between the broker and
RabbitMQ whose connections the test cuts, as a network failure or a RabbitMQ restart would.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pika = pytest.importorskip("pika")

from librarian.errors import BackendUnavailableError, InvalidInputError  # noqa: E402
from librarian.runtime.broker.factory import broker_from_url  # noqa: E402
from librarian.runtime.broker.rabbitmq import RabbitMQBroker, redact_url  # noqa: E402
from tests.runtime.tcp_proxy import TcpProxy  # noqa: E402
from tests.runtime.test_broker_memory import (  # noqa: E402
    Recorder,
    check_consume_returns_promptly_on_stop_and_on_close,
    check_prefetch_one_leaves_the_next_message_to_another_consumer,
    running_consumer,
    wait_until,
)
from tests.skipping import unavailable  # noqa: E402

RABBITMQ_URL = os.environ.get("LIBRARIAN_TEST_RABBITMQ_URL", "amqp://guest:guest@127.0.0.1:5672/")
pytestmark = pytest.mark.timeout(120)


@dataclass(frozen=True)
class Topology:
    """The per-test names of the exchange and the two queues."""

    exchange: str
    dispatch_queue: str
    results_queue: str

    def broker(self, url: str = RABBITMQ_URL, **options: Any) -> RabbitMQBroker:
        return RabbitMQBroker(
            url,
            exchange=self.exchange,
            dispatch_queue=self.dispatch_queue,
            results_queue=self.results_queue,
            **options,
        )


def _raw_connection() -> Any:
    return pika.BlockingConnection(pika.URLParameters(RABBITMQ_URL))


@pytest.fixture
def topology() -> Iterator[Topology]:
    """Unique names, and the deletion of whatever the test declared under them."""
    try:
        _raw_connection().close()
    except pika.exceptions.AMQPError as exc:
        unavailable(f"RabbitMQ at {redact_url(RABBITMQ_URL)} unreachable: {exc!r}")
    suffix = uuid.uuid4().hex[:10]
    names = Topology(f"test_exchange_{suffix}", f"test_dispatch_{suffix}", f"test_results_{suffix}")
    yield names
    connection = _raw_connection()
    channel = connection.channel()
    channel.queue_delete(names.dispatch_queue)
    channel.queue_delete(names.results_queue)
    channel.exchange_delete(names.exchange)
    connection.close()


@pytest.fixture
def broker(topology: Topology) -> Iterator[RabbitMQBroker]:
    rabbit = topology.broker(redelivery_delay=0.05)
    yield rabbit
    rabbit.close()


@pytest.fixture
def proxy() -> Iterator[TcpProxy]:
    parts = pika.URLParameters(RABBITMQ_URL)
    forwarder = TcpProxy((parts.host, parts.port))
    yield forwarder
    forwarder.close()


def _queue_state(name: str) -> tuple[int, int]:
    """(ready messages, consumers) of queue ``name``, from a passive declare."""
    connection = _raw_connection()
    try:
        frame = connection.channel().queue_declare(name, passive=True)
        return int(frame.method.message_count), int(frame.method.consumer_count)
    finally:
        connection.close()


def test_round_trip_on_both_queues(broker: RabbitMQBroker) -> None:
    for i in range(5):
        broker.publish("dispatch", {"id": i, "payload": {"argv": ["echo", str(i)]}})
        broker.publish("results", {"id": 100 + i, "ok": True})
    dispatched, results = Recorder(), Recorder()
    with running_consumer(broker, "dispatch", dispatched), running_consumer(broker, "results", results):
        wait_until(lambda: len(dispatched.messages) == 5 and len(results.messages) == 5, what="10 messages")
    assert dispatched.ids() == [0, 1, 2, 3, 4]
    assert results.ids() == [100, 101, 102, 103, 104]
    assert dispatched.messages[3] == {"id": 3, "payload": {"argv": ["echo", "3"]}}
    assert broker.message_count("dispatch") == broker.message_count("results") == 0


def test_topology_is_durable_and_messages_persistent(broker: RabbitMQBroker, topology: Topology) -> None:
    broker.publish("results", {"id": "r1"})
    connection = _raw_connection()
    try:
        channel = connection.channel()
        # Re-declaring with the same arguments succeeds only if they match what the broker declared.
        channel.exchange_declare(topology.exchange, exchange_type="direct", durable=True)
        channel.queue_declare(topology.results_queue, durable=True)
        assert channel.basic_get(topology.dispatch_queue, auto_ack=True) == (None, None, None)
        method, properties, body = channel.basic_get(topology.results_queue, auto_ack=True)
        assert method.routing_key == "results" and method.exchange == topology.exchange
        assert properties.delivery_mode == 2
        assert properties.content_type == "application/json"
        assert json.loads(body) == {"id": "r1"}
        with pytest.raises(pika.exceptions.ChannelClosedByBroker) as refused:
            channel.queue_declare(topology.dispatch_queue, durable=False)
        assert refused.value.reply_code == 406, "a non-durable re-declaration must clash"
    finally:
        connection.close()


def test_bad_input_is_refused(broker: RabbitMQBroker) -> None:
    with pytest.raises(InvalidInputError, match="not JSON-serialisable"):
        broker.publish("dispatch", {"when": object()})
    with pytest.raises(InvalidInputError, match="unknown queue"):
        broker.publish("elsewhere", {})  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="not an AMQP URL"):
        RabbitMQBroker("http://user:secret@localhost/")


def test_a_failing_handler_gets_the_message_again_then_it_is_acked(
    broker: RabbitMQBroker, topology: Topology
) -> None:
    attempts: list[Any] = []

    def flaky(message: dict[str, Any]) -> None:
        attempts.append(message["id"])
        if len(attempts) == 1:
            raise RuntimeError("first attempt fails")

    broker.publish("dispatch", {"id": "a"})
    with running_consumer(broker, "dispatch", flaky):
        wait_until(lambda: len(attempts) >= 2, what="the redelivery")
        time.sleep(0.3)  # a missing ack would show as a third delivery or a message left behind
    assert attempts == ["a", "a"]
    assert _queue_state(topology.dispatch_queue) == (0, 0), "acknowledged, so not requeued at close"


def test_a_long_handler_keeps_the_connection_alive(topology: Topology) -> None:
    # With a 1 s heartbeat RabbitMQ drops a silent connection after about 2 s; the handler runs 4 s.
    broker = topology.broker(heartbeat=1)
    broker.publish("dispatch", {"id": "long"})
    attempts: list[Any] = []
    finished = threading.Event()

    def long_task(message: dict[str, Any]) -> None:
        attempts.append(message["id"])
        time.sleep(4)
        finished.set()

    with running_consumer(broker, "dispatch", long_task):
        wait_until(finished.is_set, 10, "the long handler")
        time.sleep(0.5)  # a redelivery would arrive by now
    assert attempts == ["long"], "a dropped connection would have redelivered the message"
    assert _queue_state(topology.dispatch_queue) == (0, 0)
    broker.close()


def test_a_finished_handler_is_acked_at_once(broker: RabbitMQBroker) -> None:
    count = 50
    for i in range(count):
        broker.publish("dispatch", {"id": i})
    received = Recorder()
    started = time.monotonic()
    with running_consumer(broker, "dispatch", received, prefetch=1):
        wait_until(lambda: len(received.messages) == count, what=f"{count} messages")
        elapsed = time.monotonic() - started
    # Waiting out the 0.1 s poll before each ack would take 5 s; a handful of ms each is expected.
    assert elapsed < 2.5, f"{elapsed / count * 1000:.0f} ms per message"


def test_prefetch_one_leaves_the_next_message_to_another_consumer(broker: RabbitMQBroker) -> None:
    check_prefetch_one_leaves_the_next_message_to_another_consumer(broker, settle_seconds=0.3)


def test_prefetch_two_lets_a_busy_consumer_hold_two(broker: RabbitMQBroker, topology: Topology) -> None:
    release = threading.Event()
    handled: list[Any] = []

    def slow(message: dict[str, Any]) -> None:
        handled.append(message["id"])
        release.wait(20)

    for i in range(3):
        broker.publish("dispatch", {"id": i})
    with running_consumer(broker, "dispatch", slow, prefetch=2):
        wait_until(lambda: handled == [0], what="the consumer to take message 0")
        wait_until(lambda: _queue_state(topology.dispatch_queue)[0] == 1, what="message 1 to be prefetched")
        release.set()
        wait_until(lambda: handled == [0, 1, 2], what="all three messages")


def test_a_malformed_message_is_dropped_not_redelivered(broker: RabbitMQBroker, topology: Topology) -> None:
    connection = _raw_connection()
    channel = connection.channel()
    broker.publish("dispatch", {"id": "declares the topology"})
    for body in (b"not json", b"[1, 2]", b"\xff\xfe"):
        channel.basic_publish(topology.exchange, "dispatch", body)
    connection.close()
    broker.publish("dispatch", {"id": "good"})
    received = Recorder()
    with running_consumer(broker, "dispatch", received):
        wait_until(lambda: len(received.messages) == 2, what="the two good messages")
        time.sleep(0.3)  # a requeued malformed message would be back by now
    assert received.ids() == ["declares the topology", "good"]
    assert _queue_state(topology.dispatch_queue) == (0, 0)


def test_consumer_reconnects_after_the_connection_is_cut_and_loses_nothing(
    topology: Topology, proxy: TcpProxy
) -> None:
    direct = topology.broker()
    through_proxy = topology.broker(proxy.url(RABBITMQ_URL))
    count = 40
    for i in range(count):
        direct.publish("dispatch", {"id": i})
    received = Recorder()

    def handle(message: dict[str, Any]) -> None:
        received(message)
        time.sleep(0.01)  # keeps messages in flight when the cut happens

    with running_consumer(through_proxy, "dispatch", handle, prefetch=5):
        wait_until(lambda: len(received.messages) >= 10, what="the first 10 messages")
        proxy.cut()
        wait_until(lambda: set(received.ids()) == set(range(count)), what="every message after the cut")
    assert proxy.accepted >= 2, "the consumer must have opened a new connection"
    # Messages handled but not yet acknowledged at the cut come back: at least once, never lost.
    assert len(received.ids()) <= count + 5
    assert _queue_state(topology.dispatch_queue) == (0, 0)
    direct.close()
    through_proxy.close()


def test_publisher_reconnects_after_the_connection_is_cut(topology: Topology, proxy: TcpProxy) -> None:
    broker = topology.broker(proxy.url(RABBITMQ_URL))
    broker.publish("results", {"id": 1})
    proxy.cut()
    broker.publish("results", {"id": 2})
    assert proxy.accepted == 2
    assert broker.message_count("results") == 2
    broker.close()


def test_a_publisher_idle_longer_than_the_heartbeat_still_publishes(topology: Topology) -> None:
    broker = topology.broker(heartbeat=1)  # RabbitMQ drops the idle connection after about 2 s
    broker.publish("results", {"id": 1})
    time.sleep(3.5)
    broker.publish("results", {"id": 2})
    assert broker.message_count("results") == 2
    broker.close()


def test_unreachable_rabbitmq_fails_publish_and_consume_still_stops(topology: Topology) -> None:
    with socket.create_server(("127.0.0.1", 0)) as placeholder:
        port = placeholder.getsockname()[1]  # a port nothing listens on once this closes
    broker = topology.broker(f"amqp://guest:secret@127.0.0.1:{port}/", publish_timeout=0.5)
    started = time.monotonic()
    with pytest.raises(BackendUnavailableError, match="did not confirm") as failure:
        broker.publish("dispatch", {"id": 1})
    assert time.monotonic() - started < 5
    assert "secret" not in str(failure.value)
    with pytest.raises(BackendUnavailableError, match="unreachable"):
        broker.message_count("dispatch")
    with running_consumer(broker, "dispatch", Recorder()):
        time.sleep(0.5)  # it keeps retrying the connection; leaving the block checks a prompt stop


def test_consume_returns_promptly_on_stop_and_on_close(broker: RabbitMQBroker) -> None:
    check_consume_returns_promptly_on_stop_and_on_close(broker, settle_seconds=1.5)


_CONSUMER_SCRIPT = textwrap.dedent(
    """
    import json, signal, sys, threading, time
    from librarian.runtime.broker.rabbitmq import RabbitMQBroker

    url, exchange, dispatch, results, out = sys.argv[1:]
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    broker = RabbitMQBroker(url, exchange=exchange, dispatch_queue=dispatch, results_queue=results)
    with open(out, "a", buffering=1) as log:
        def handle(message):
            time.sleep(0.002)
            log.write(json.dumps(message["id"]) + "\\n")
        broker.consume("dispatch", handle, stop)
    broker.close()
    """
)


def test_two_consumer_processes_share_a_queue_and_handle_each_message_once(
    broker: RabbitMQBroker, topology: Topology, tmp_path: Path
) -> None:
    broker.publish("results", {"id": "declares the topology"})
    outputs = [tmp_path / "consumer0.log", tmp_path / "consumer1.log"]
    processes = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                _CONSUMER_SCRIPT,
                RABBITMQ_URL,
                topology.exchange,
                topology.dispatch_queue,
                topology.results_queue,
                str(output),
            ]
        )
        for output in outputs
    ]

    def handled() -> list[int]:
        return [int(line) for output in outputs if output.exists() for line in output.read_text().split()]

    try:
        wait_until(lambda: _queue_state(topology.dispatch_queue)[1] == 2, 30, "both consumers to attach")
        count = 300
        for i in range(count):
            broker.publish("dispatch", {"id": i})
        wait_until(lambda: len(handled()) >= count, 60, f"{count} messages")
    finally:
        for process in processes:
            process.terminate()
        codes = [process.wait(10) for process in processes]
    assert codes == [0, 0], "SIGTERM sets stop, so both consumers exit cleanly"
    assert sorted(handled()) == list(range(count))
    assert all(output.read_text().strip() for output in outputs), "both processes took a share"
    assert _queue_state(topology.dispatch_queue) == (0, 0)


def test_factory_builds_the_rabbitmq_broker_for_amqp_urls() -> None:
    assert isinstance(broker_from_url(RABBITMQ_URL), RabbitMQBroker)
