"""Batches on both brokers: one wait for many publishes, one handler call for what is waiting."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from librarian.runtime.broker.base import Broker, Handler, QueueName
from librarian.runtime.broker.batches import BatchBroker, publish_all, supports_batches
from librarian.runtime.broker.memory import InMemoryBroker
from tests.runtime.test_broker_memory import wait_until
from tests.runtime.test_broker_rabbitmq import Topology, topology  # noqa: F401  (fixture)


@pytest.fixture(params=["memory", "rabbitmq"])
def batch_broker(request: pytest.FixtureRequest) -> Iterator[Any]:
    if request.param == "memory":
        broker: Any = InMemoryBroker(redelivery_delay=0.05)
    else:
        names: Topology = request.getfixturevalue("topology")
        broker = names.broker(redelivery_delay=0.05)
    yield broker
    broker.close()


class BatchRecorder:
    """Records each batch; fails the first ``failures`` calls."""

    def __init__(self, failures: int = 0) -> None:
        self.batches: list[list[int]] = []
        self.failures = failures
        self._lock = threading.Lock()

    def __call__(self, messages: list[dict[str, Any]]) -> None:
        with self._lock:
            self.batches.append([message["id"] for message in messages])
            if self.failures:
                self.failures -= 1
                raise RuntimeError("a handler failure: the whole batch must come back")

    def ids(self) -> list[int]:
        with self._lock:
            return [item for batch in self.batches for item in batch]


def consume_in_thread(
    broker: Any, handler: BatchRecorder, stop: threading.Event, max_batch: int
) -> threading.Thread:
    thread = threading.Thread(
        target=broker.consume_batches,
        args=("results", handler, stop),
        kwargs={"max_batch": max_batch},
        daemon=True,
    )
    thread.start()
    return thread


def test_what_is_waiting_arrives_in_batches_in_order_and_is_acknowledged(batch_broker: Any) -> None:
    assert supports_batches(batch_broker)
    batch_broker.publish_many("results", [{"id": index} for index in range(30)])
    recorder, stop = BatchRecorder(), threading.Event()
    thread = consume_in_thread(batch_broker, recorder, stop, max_batch=8)
    wait_until(lambda: len(recorder.ids()) >= 30, what="30 messages")
    stop.set()
    thread.join(5)
    assert recorder.ids() == list(range(30))
    assert all(len(batch) <= 8 for batch in recorder.batches)
    assert len(recorder.batches) < 30, "messages already waiting must share handler calls"
    assert batch_broker.message_count("results") == 0


def test_a_lone_message_is_not_held_back_to_fill_a_batch(batch_broker: Any) -> None:
    recorder, stop = BatchRecorder(), threading.Event()
    thread = consume_in_thread(batch_broker, recorder, stop, max_batch=50)
    time.sleep(1.0)  # the consumer is connected, idle and waiting
    started = time.monotonic()
    batch_broker.publish("results", {"id": 1})
    wait_until(lambda: recorder.ids() == [1], what="the lone message")
    assert time.monotonic() - started < 1.0
    stop.set()
    thread.join(5)


def test_a_failed_batch_comes_back_whole(batch_broker: Any) -> None:
    batch_broker.publish_many("results", [{"id": index} for index in range(5)])
    recorder, stop = BatchRecorder(failures=1), threading.Event()
    thread = consume_in_thread(batch_broker, recorder, stop, max_batch=10)

    def failed_batch_back_and_all_handled() -> bool:
        ids = recorder.ids()
        # The first batch is what had arrived when the consumer looked: usually all five, not always.
        failed = recorder.batches[0] if recorder.batches else []
        return set(ids) == set(range(5)) and bool(failed) and all(ids.count(i) >= 2 for i in failed)

    wait_until(failed_batch_back_and_all_handled, what="the failed batch delivered again")
    stop.set()
    thread.join(5)
    assert len(recorder.ids()) == 5 + len(recorder.batches[0]), "only the failed batch came back"
    assert batch_broker.message_count("results") == 0


class OnlyTheContract:
    """A broker offering only the base contract (publish, consume, close), as a third-party one might."""

    def __init__(self, inner: InMemoryBroker) -> None:
        self.inner = inner

    def publish(self, queue: QueueName, message: dict[str, Any]) -> None:
        self.inner.publish(queue, message)

    def consume(
        self, queue: QueueName, handler: Handler, stop: threading.Event, *, prefetch: int = 1
    ) -> None:
        self.inner.consume(queue, handler, stop, prefetch=prefetch)

    def close(self) -> None:
        self.inner.close()


def test_publish_all_falls_back_to_one_by_one_for_a_broker_without_batches() -> None:
    inner = InMemoryBroker()
    plain: Broker = OnlyTheContract(inner)
    assert not supports_batches(plain) and not isinstance(plain, BatchBroker)
    publish_all(plain, "dispatch", [{"id": 1}, {"id": 2}])
    assert inner.message_count("dispatch") == 2
