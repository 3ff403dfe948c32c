"""Request and reply (``replying``): the reply is stored before the request is acknowledged.

On the embedded broker, on a broker with only the base contract, and on the machine's real RabbitMQ,
where the handler runs in the consuming thread: a long handler keeps its connection through its
heartbeats, and a connection cut while a handler runs loses nothing. ``replying_in_batches`` sends a
batch's replies as one bundle, and still reports the work finished when a handler fails part-way.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import pytest

from librarian.runtime.broker.base import Broker, QueueName
from librarian.runtime.broker.batches import BatchBroker
from librarian.runtime.broker.memory import InMemoryBroker
from librarian.runtime.broker.replies import (
    BUNDLE_KEY,
    ReplyHandler,
    replying,
    replying_in_batches,
    unbundled,
)
from tests.runtime.test_broker_batches import OnlyTheContract
from tests.runtime.test_broker_memory import STOP_PROMPTNESS_SECONDS, Recorder, wait_until

pytestmark = pytest.mark.timeout(120)


@contextmanager
def consuming_in_a_thread(consume: Callable[[threading.Event], None]) -> Iterator[None]:
    """Run ``consume(stop)`` in a thread; on exit set ``stop`` and require a prompt, clean return."""
    stop = threading.Event()
    errors: list[BaseException] = []

    def run() -> None:
        try:
            consume(stop)
        except BaseException as exc:  # reported to the test below, not swallowed
            errors.append(exc)

    thread = threading.Thread(target=run, name="test-consuming", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(STOP_PROMPTNESS_SECONDS + 2.0)
        assert not thread.is_alive(), "the consumer did not return after stop was set"
        assert not errors, f"the consumer raised {errors[0]!r}"


def answering(
    broker: Broker, handler: ReplyHandler, reply_to: Any = "results"
) -> AbstractContextManager[None]:
    """Consume ``dispatch`` with ``replying(handler)`` in a thread."""
    return consuming_in_a_thread(
        lambda stop: broker.consume("dispatch", replying(broker, handler, reply_to), stop)
    )


def answering_batches(broker: Broker, handler: ReplyHandler, max_batch: int) -> AbstractContextManager[None]:
    """Consume ``dispatch`` in batches with ``replying_in_batches(handler)`` in a thread."""
    assert isinstance(broker, BatchBroker)
    batches = replying_in_batches(broker, handler, "results")
    return consuming_in_a_thread(
        lambda stop: broker.consume_batches("dispatch", batches, stop, max_batch=max_batch)
    )


def double_odd_ids(message: dict[str, Any]) -> dict[str, Any] | None:
    """Replies to odd ids only, so both a reply and no reply are exercised."""
    return {"id": message["id"], "double": message["id"] * 2} if message["id"] % 2 else None


def counted(handler: ReplyHandler, seen: list[int]) -> ReplyHandler:
    """``handler``, adding each request's id to ``seen`` once it has been answered."""

    def handle(message: dict[str, Any]) -> dict[str, Any] | None:
        reply = handler(message)
        seen.append(message["id"])
        return reply

    return handle


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


def test_a_batch_sends_its_replies_as_one_bundle_in_order() -> None:
    broker = InMemoryBroker()
    for i in range(1, 8):
        broker.publish("dispatch", {"id": i})
    with answering_batches(broker, double_odd_ids, max_batch=5):
        wait_until(lambda: broker.message_count("dispatch") == 0, what="every request")
    first, second = drain(broker, "results", 2)
    # Requests 1-5 are one batch (odd ids answer: a bundle); 6-7 the next (one reply: sent plain).
    assert first == {BUNDLE_KEY: [{"id": 1, "double": 2}, {"id": 3, "double": 6}, {"id": 5, "double": 10}]}
    assert second == {"id": 7, "double": 14}
    assert broker.message_count("results") == 0


def test_a_batch_without_replies_publishes_nothing() -> None:
    broker = InMemoryBroker()
    broker.publish("dispatch", {"id": 2})
    broker.publish("dispatch", {"id": 4})
    with answering_batches(broker, double_odd_ids, max_batch=5):
        wait_until(lambda: broker.message_count("dispatch") == 0, what="every request")
    assert broker.message_count("results") == 0


def test_a_batch_failing_on_one_message_runs_the_rest_reports_all_and_comes_back_whole() -> None:
    broker = InMemoryBroker(redelivery_delay=0.05)
    calls: list[int] = []

    def fail_once_on_two(message: dict[str, Any]) -> dict[str, Any]:
        calls.append(message["id"])
        if message["id"] == 2 and calls.count(2) == 1:
            raise RuntimeError("the second request fails the first time")
        return {"id": message["id"]}

    for i in (1, 2, 3):
        broker.publish("dispatch", {"id": i})
    with answering_batches(broker, fail_once_on_two, max_batch=3):
        wait_until(lambda: len(calls) == 6, what="the failed batch and its redelivery")
        wait_until(lambda: broker.message_count("results") == 2, what="both reply messages")
    # Request 3 still ran after 2 failed, and both replies went out before the batch came back.
    assert calls == [1, 2, 3, 1, 2, 3]
    assert drain(broker, "results", 2) == [
        {BUNDLE_KEY: [{"id": 1}, {"id": 3}]},
        {BUNDLE_KEY: [{"id": 1}, {"id": 2}, {"id": 3}]},
    ]


def test_a_bundle_stays_under_its_size_limit() -> None:
    broker = InMemoryBroker()
    for i in range(1, 6):
        broker.publish("dispatch", {"id": i})

    def large(message: dict[str, Any]) -> dict[str, Any]:
        return {"id": message["id"], "output": "x" * 400}

    batches = replying_in_batches(broker, large, "results", max_bundle_bytes=1000)
    with consuming_in_a_thread(lambda stop: broker.consume_batches("dispatch", batches, stop, max_batch=5)):
        wait_until(lambda: broker.message_count("results") == 3, what="three reply messages")
    # About 420 bytes a reply: two fit in 1,000 bytes, the fifth goes alone (and plain).
    messages = drain(broker, "results", 3)
    assert [[reply["id"] for reply in unbundled(message)] for message in messages] == [[1, 2], [3, 4], [5]]
    assert BUNDLE_KEY not in messages[2]


def test_unbundled_reads_plain_replies_and_bundles_and_refuses_a_malformed_bundle() -> None:
    assert unbundled({"id": 1}) == [{"id": 1}]
    assert unbundled({BUNDLE_KEY: [{"id": 1}, {"id": 2}]}) == [{"id": 1}, {"id": 2}]
    with pytest.raises(TypeError, match="list of objects"):
        unbundled({BUNDLE_KEY: "not a list"})
    with pytest.raises(TypeError, match="list of objects"):
        unbundled({BUNDLE_KEY: [{"id": 1}, 2]})


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
    seen: list[int] = []
    with answering(through_proxy, counted(double_odd_ids, seen)):
        # Every request handled (6 has no reply), and so acknowledged before the consumer stops.
        wait_until(lambda: len(seen) == 6 and direct.message_count("results") == 3, what="three replies")
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


def test_rabbitmq_a_batch_sends_bundled_replies_and_is_acknowledged(
    topology: Topology, proxy: TcpProxy
) -> None:
    direct = topology.broker()
    through_proxy = topology.broker(proxy.url(RABBITMQ_URL))
    for i in range(1, 13):
        direct.publish("dispatch", {"id": i})
    received = Recorder()
    seen: list[int] = []

    def replies() -> list[dict[str, Any]]:
        return [reply for message in list(received.messages) for reply in unbundled(message)]

    with (
        consuming_in_a_thread(lambda stop: direct.consume("results", received, stop)),
        answering_batches(through_proxy, counted(double_odd_ids, seen), max_batch=6),
    ):
        wait_until(lambda: len(seen) == 12 and len(replies()) == 6, what="six replies")
    assert sorted(reply["double"] for reply in replies()) == [2, 6, 10, 14, 18, 22]
    # Twelve requests waiting, up to six per batch: fewer reply messages than replies.
    assert any(BUNDLE_KEY in message for message in received.messages)
    assert len(received.messages) < 6
    assert _queue_state(topology.dispatch_queue) == (0, 0), "every request acknowledged"
    direct.close()
    through_proxy.close()
