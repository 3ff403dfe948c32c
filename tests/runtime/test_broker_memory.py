"""The embedded broker keeps RabbitMQ's delivery contract: at least once, acks after handling, prefetch."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol

import pytest

from librarian.errors import BackendUnavailableError, InvalidInputError, MissingExtraError
from librarian.runtime.broker.base import Broker, Handler, QueueInspector, QueueName
from librarian.runtime.broker.factory import broker_from_url
from librarian.runtime.broker.memory import InMemoryBroker

STOP_PROMPTNESS_SECONDS = 1.0


def wait_until(condition: Callable[[], bool], timeout: float = 10.0, what: str = "condition") -> None:
    """Poll ``condition`` until it holds; fail the test with ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(0.01)


@contextmanager
def running_consumer(
    broker: Broker, queue: QueueName, handler: Handler, *, prefetch: int = 1
) -> Iterator[threading.Thread]:
    """Run ``broker.consume`` in a thread; on exit set ``stop`` and require a prompt return."""
    stop = threading.Event()
    errors: list[BaseException] = []

    def run() -> None:
        try:
            broker.consume(queue, handler, stop, prefetch=prefetch)
        except BaseException as exc:  # reported to the test below, not swallowed
            errors.append(exc)

    thread = threading.Thread(target=run, name=f"test-consumer-{queue}", daemon=True)
    thread.start()
    try:
        yield thread
    finally:
        stop.set()
        thread.join(STOP_PROMPTNESS_SECONDS + 2.0)
        assert not thread.is_alive(), "consume did not return after stop was set"
        assert not errors, f"consume raised {errors[0]!r}"


class Recorder:
    """A thread-safe handler that records every message it receives."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def __call__(self, message: dict[str, Any]) -> None:
        with self._lock:
            self.messages.append(message)

    def ids(self) -> list[Any]:
        with self._lock:
            return [message["id"] for message in self.messages]


class InspectableBroker(Broker, QueueInspector, Protocol):
    """A broker that can also count a queue's waiting messages (both built-in ones)."""


def check_prefetch_one_leaves_the_next_message_to_another_consumer(
    broker: InspectableBroker, *, settle_seconds: float
) -> None:
    """The contract shared by every broker; ``settle_seconds`` lets a real one push a second message."""
    release = threading.Event()
    held: list[Any] = []

    def slow(message: dict[str, Any]) -> None:
        held.append(message["id"])
        release.wait(20)

    quick = Recorder()
    broker.publish("dispatch", {"id": 1})
    broker.publish("dispatch", {"id": 2})
    with running_consumer(broker, "dispatch", slow, prefetch=1):
        wait_until(lambda: held == [1], what="the slow consumer to take message 1")
        time.sleep(settle_seconds)  # time to push a second message, were prefetch not applied
        assert broker.message_count("dispatch") == 1, "message 2 must still wait in the queue"
        with running_consumer(broker, "dispatch", quick, prefetch=1):
            wait_until(lambda: quick.ids() == [2], what="the second consumer to get message 2")
        release.set()
    assert held == [1]


def check_consume_returns_promptly_on_stop_and_on_close(broker: Broker, *, settle_seconds: float) -> None:
    """The contract shared by every broker; ``settle_seconds`` lets a consumer connect and wait."""
    stop = threading.Event()
    thread = threading.Thread(target=broker.consume, args=("results", Recorder(), stop))
    thread.start()
    time.sleep(settle_seconds)
    started = time.monotonic()
    stop.set()
    thread.join(STOP_PROMPTNESS_SECONDS)
    assert not thread.is_alive() and time.monotonic() - started < STOP_PROMPTNESS_SECONDS

    thread = threading.Thread(target=broker.consume, args=("results", Recorder(), threading.Event()))
    thread.start()
    time.sleep(settle_seconds)
    broker.close()
    broker.close()
    thread.join(STOP_PROMPTNESS_SECONDS)
    assert not thread.is_alive()
    with pytest.raises(BackendUnavailableError, match="closed"):
        broker.publish("results", {"id": 1})


@pytest.fixture
def broker() -> Iterator[InMemoryBroker]:
    memory = InMemoryBroker(redelivery_delay=0.05)
    yield memory
    memory.close()


def test_round_trip_keeps_the_two_queues_apart_and_in_order(broker: InMemoryBroker) -> None:
    for i in range(5):
        broker.publish("dispatch", {"id": i, "kind": "task", "payload": {"argv": ["echo", str(i)]}})
        broker.publish("results", {"id": 100 + i, "ok": True})
    dispatched, results = Recorder(), Recorder()
    with running_consumer(broker, "dispatch", dispatched), running_consumer(broker, "results", results):
        wait_until(lambda: len(dispatched.messages) == 5 and len(results.messages) == 5, what="10 messages")
    assert dispatched.ids() == [0, 1, 2, 3, 4]
    assert results.ids() == [100, 101, 102, 103, 104]
    assert dispatched.messages[2] == {"id": 2, "kind": "task", "payload": {"argv": ["echo", "2"]}}
    assert broker.message_count("dispatch") == broker.message_count("results") == 0


def test_messages_are_copied_as_json_like_on_the_wire(broker: InMemoryBroker) -> None:
    message: dict[str, Any] = {"id": 1, "pair": (1, 2), "nested": {"n": 1}}
    broker.publish("dispatch", message)
    message["nested"]["n"] = 2  # a publisher changing its dict afterwards must not change the message
    received = Recorder()
    with running_consumer(broker, "dispatch", received):
        wait_until(lambda: len(received.messages) == 1)
    assert received.messages == [{"id": 1, "pair": [1, 2], "nested": {"n": 1}}]


def test_bad_input_is_refused_with_a_message_naming_it(broker: InMemoryBroker) -> None:
    with pytest.raises(InvalidInputError, match="not JSON-serialisable"):
        broker.publish("dispatch", {"when": {1, 2}})
    with pytest.raises(InvalidInputError, match="unknown queue 'nowhere'"):
        broker.publish("nowhere", {})  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="prefetch"):
        broker.consume("dispatch", Recorder(), threading.Event(), prefetch=0)
    assert broker.message_count("dispatch") == 0


def test_a_failing_handler_gets_the_message_again_after_a_delay(broker: InMemoryBroker) -> None:
    deliveries: list[tuple[Any, float]] = []

    def flaky(message: dict[str, Any]) -> None:
        deliveries.append((message["id"], time.monotonic()))
        if message["id"] == "a" and sum(1 for i, _ in deliveries if i == "a") == 1:
            raise RuntimeError("first attempt fails")

    broker.publish("dispatch", {"id": "a"})
    broker.publish("dispatch", {"id": "b"})
    with running_consumer(broker, "dispatch", flaky):
        wait_until(lambda: len(deliveries) == 3, what="a, b, then a again")
    assert [i for i, _ in deliveries] == ["a", "b", "a"], "the consumer must move on while 'a' waits"
    assert deliveries[2][1] - deliveries[0][1] >= 0.05
    assert broker.message_count("dispatch") == 0, "the redelivered message was acknowledged"


def test_prefetch_one_leaves_the_next_message_to_another_consumer(broker: InMemoryBroker) -> None:
    check_prefetch_one_leaves_the_next_message_to_another_consumer(broker, settle_seconds=0.0)


def test_consume_returns_promptly_on_stop_and_on_close(broker: InMemoryBroker) -> None:
    check_consume_returns_promptly_on_stop_and_on_close(broker, settle_seconds=0.2)


def test_a_pool_of_consumers_handles_every_message_exactly_once(broker: InMemoryBroker) -> None:
    received = Recorder()
    count = 2000

    def publish_every_other(start: int) -> None:
        for i in range(start, count, 2):
            broker.publish("dispatch", {"id": i})

    with (
        running_consumer(broker, "dispatch", received),
        running_consumer(broker, "dispatch", received),
        running_consumer(broker, "dispatch", received),
    ):
        publishers = [threading.Thread(target=publish_every_other, args=(start,)) for start in (0, 1)]
        for publisher in publishers:
            publisher.start()
        for publisher in publishers:
            publisher.join()
        wait_until(lambda: len(received.messages) >= count, what=f"{count} messages")
    assert sorted(received.ids()) == list(range(count))


def test_overhead_per_message_is_well_under_a_millisecond(broker: InMemoryBroker) -> None:
    count = 5000
    received = Recorder()
    started = time.perf_counter()
    with running_consumer(broker, "dispatch", received):
        for i in range(count):
            broker.publish("dispatch", {"id": i, "payload": {"argv": ["true"]}, "attempt": 0})
        wait_until(lambda: len(received.messages) == count, what=f"{count} messages")
        elapsed = time.perf_counter() - started
    # Measured at about 20 µs a message; 0.5 ms leaves room for a loaded two-core machine.
    assert elapsed / count < 0.0005, f"{elapsed / count * 1e6:.0f} µs per message"


def test_factory_picks_the_embedded_broker_without_a_url() -> None:
    assert isinstance(broker_from_url(None), InMemoryBroker)
    assert isinstance(broker_from_url("memory://"), InMemoryBroker)
    with pytest.raises(InvalidInputError, match="unsupported broker URL scheme 'redis'"):
        broker_from_url("redis://localhost:6379/0")


def test_factory_names_the_extra_when_pika_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pika", None)  # makes ``import pika`` fail as if not installed
    monkeypatch.delitem(sys.modules, "librarian.runtime.broker.rabbitmq", raising=False)
    with pytest.raises(MissingExtraError, match="pika") as missing:
        broker_from_url("amqp://guest:guest@127.0.0.1:5672/")
    assert "librarian[rabbitmq]" in str(missing.value)
