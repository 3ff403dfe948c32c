"""Request and reply (``replying``): the reply is stored before the request is acknowledged.

On the embedded broker, on a broker with only the base contract, and on the machine's real RabbitMQ,
where the handler runs in the consuming thread: a long handler keeps its connection through its
heartbeats, and a connection cut while a handler runs loses nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from librarian.runtime.broker.base import Broker, QueueName
from librarian.runtime.broker.memory import InMemoryBroker
from librarian.runtime.broker.replies import ReplyHandler, replying
from tests.runtime.test_broker_batches import OnlyTheContract
from tests.runtime.test_broker_memory import STOP_PROMPTNESS_SECONDS, Recorder, wait_until

pytestmark = pytest.mark.timeout(120)


@contextmanager
def answering(broker: Broker, handler: ReplyHandler, reply_to: Any = "results") -> Iterator[None]:
    """Consume ``dispatch`` with ``replying(handler)`` in a thread; on exit require a prompt return."""
    stop = threading.Event()
    errors: list[BaseException] = []

    def run() -> None:
        try:
            broker.consume("dispatch", replying(broker, handler, reply_to), stop)
        except BaseException as exc:  # reported to the test below, not swallowed
            errors.append(exc)

    thread = threading.Thread(target=run, name="test-answering", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(STOP_PROMPTNESS_SECONDS + 2.0)
        assert not thread.is_alive(), "consume did not return after stop was set"
        assert not errors, f"consume raised {errors[0]!r}"


def double_odd_ids(message: dict[str, Any]) -> dict[str, Any] | None:
    """Replies to odd ids only, so both a reply and no reply are exercised."""
    return {"id": message["id"], "double": message["id"] * 2} if message["id"] % 2 else None


def drain(broker: Broker, queue: QueueName, count: int) -> list[dict[str, Any]]:
    """The first ``count`` messages of ``queue`` (waits for them)."""
    received = Recorder()
    stop = threading.Event()
    thread = threading.Thread(target=lambda: broker.consume(queue, received, stop), daemon=True)
    thread.start()
    wait_until(lambda: len(received.messages) >= count, what=f"{count} message(s) on {queue}")
    stop.set()
    thread.join(5)
    return received.messages


@pytest.mark.parametrize("plain", [False, True], ids=["in-memory", "base-contract-only"])
def test_replies_are_published_and_none_sends_nothing(plain: bool) -> None:
    inner = InMemoryBroker()
    broker: Broker = OnlyTheContract(inner) if plain else inner
    for i in range(1, 5):
        broker.publish("dispatch", {"id": i})
    with answering(broker, double_odd_ids):
        wait_until(lambda: inner.message_count("dispatch") == 0, what="every request")
    assert drain(broker, "results", 2) == [{"id": 1, "double": 2}, {"id": 3, "double": 6}]
    assert inner.message_count("results") == 0


def test_a_failing_handler_gets_its_request_again_and_sends_no_reply() -> None:
    broker = InMemoryBroker(redelivery_delay=0.05)
    calls: list[int] = []

    def flaky(message: dict[str, Any]) -> dict[str, Any]:
        calls.append(message["id"])
        if len(calls) == 1:
            raise RuntimeError("first attempt fails")
        return {"id": message["id"]}

    broker.publish("dispatch", {"id": 7})
    with answering(broker, flaky):
        wait_until(lambda: len(calls) == 2, what="the redelivery")
    assert drain(broker, "results", 1) == [{"id": 7}]
    assert broker.message_count("results") == 0


def test_an_unknown_reply_queue_leaves_the_request_unacknowledged() -> None:
    broker = InMemoryBroker(redelivery_delay=0.05)
    calls: list[int] = []

    def answer(message: dict[str, Any]) -> dict[str, Any]:
        calls.append(message["id"])
        return {"id": message["id"]}

    broker.publish("dispatch", {"id": 3})
    with answering(broker, answer, reply_to="replies"):
        wait_until(lambda: len(calls) >= 2, what="the request delivered again")
    assert set(calls) == {3}
    assert broker.message_count("results") == 0


# -- RabbitMQ ------------------------------------------------------------------------------------

pika = pytest.importorskip("pika")

from tests.runtime.tcp_proxy import TcpProxy  # noqa: E402
from tests.runtime.test_broker_rabbitmq import (  # noqa: E402
    RABBITMQ_URL,
    Topology,
    _queue_state,
    proxy,
    topology,
)

__all__ = ["proxy", "topology"]  # fixtures, used by name


def test_rabbitmq_replies_are_stored_before_requests_are_acknowledged(
    topology: Topology, proxy: TcpProxy
) -> None:
    direct = topology.broker()
    through_proxy = topology.broker(proxy.url(RABBITMQ_URL))
    for i in range(1, 7):
        direct.publish("dispatch", {"id": i})
    with answering(through_proxy, double_odd_ids):
        wait_until(lambda: direct.message_count("results") == 3, what="three replies")
    # One connection consumed and acknowledged; the replies went out on the thread's publishing one.
    assert proxy.accepted == 2
    replies = drain(direct, "results", 3)
    assert sorted(reply["double"] for reply in replies) == [2, 6, 10]
    assert _queue_state(topology.dispatch_queue) == (0, 0), "every request acknowledged"
    direct.close()
    through_proxy.close()


def test_rabbitmq_a_long_handler_keeps_its_connection_and_then_replies(
    topology: Topology, proxy: TcpProxy
) -> None:
    # With a 1 s heartbeat RabbitMQ drops a silent connection after about 2 s; the handler runs 4 s
    # in the consuming thread, so only the connection keeper's servicing keeps the connection.
    direct = topology.broker()
    broker = topology.broker(proxy.url(RABBITMQ_URL), heartbeat=1)
    direct.publish("dispatch", {"id": 1})
    calls: list[int] = []

    def long_task(message: dict[str, Any]) -> dict[str, Any]:
        calls.append(message["id"])
        threading.Event().wait(4)
        return {"id": message["id"]}

    with answering(broker, long_task):
        wait_until(lambda: direct.message_count("results") == 1, 15, "the reply")
        threading.Event().wait(0.5)  # a redelivery would show by now
    assert calls == [1], "a dropped connection would have redelivered the request"
    assert proxy.accepted == 2, "the consumer's connection was never replaced (the other: the reply's)"
    assert _queue_state(topology.dispatch_queue) == (0, 0)
    direct.close()
    broker.close()


def test_rabbitmq_a_connection_cut_during_a_handler_loses_no_reply(
    topology: Topology, proxy: TcpProxy
) -> None:
    direct = topology.broker()
    through_proxy = topology.broker(proxy.url(RABBITMQ_URL))
    direct.publish("dispatch", {"id": 5})
    calls: list[int] = []

    def cut_then_answer(message: dict[str, Any]) -> dict[str, Any]:
        calls.append(message["id"])
        if len(calls) == 1:
            proxy.cut()  # the consumer's connection is gone before the request can be acknowledged
        return {"id": message["id"], "call": len(calls)}

    with answering(through_proxy, cut_then_answer):
        # The first reply goes out on a new publishing connection; the request, never acknowledged,
        # comes back to the reconnected consumer and is answered again (at least once).
        wait_until(lambda: len(calls) == 2, 15, "the redelivered request")
        wait_until(lambda: direct.message_count("results") == 2, what="both replies")
    assert sorted(reply["call"] for reply in drain(direct, "results", 2)) == [1, 2]
    assert _queue_state(topology.dispatch_queue) == (0, 0)
    direct.close()
    through_proxy.close()
