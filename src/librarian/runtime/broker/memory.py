"""The embedded broker: two in-process queues with RabbitMQ's at-least-once semantics, no service needed.

Messages are stored as JSON text, exactly as they would cross RabbitMQ, so a message that could not be
sent over the real broker (a set, a datetime, a mutable object the publisher keeps changing) fails or
behaves here the same way. A handler that raises gets its message back after ``redelivery_delay``,
while the consumer moves on to other messages, as after a ``basic_nack(requeue=True)``.
"""

from __future__ import annotations

import heapq
import itertools
import json
import logging
import threading
import time
from collections import deque
from collections.abc import Sequence
from typing import Any

from librarian.errors import BackendUnavailableError, InvalidInputError
from librarian.runtime.broker.base import Handler, QueueName
from librarian.runtime.broker.batches import BatchHandler

logger = logging.getLogger(__name__)

QUEUE_NAMES: tuple[QueueName, ...] = ("dispatch", "results")

# Consumers wake at least this often to notice ``stop``; the contract promises a prompt return.
_POLL_SECONDS = 0.05


def encode_message(queue: str, message: dict[str, Any]) -> str:
    """Serialise ``message`` to JSON text, the one wire format of every broker.

    Raises:
        InvalidInputError: ``message`` is not a dict or holds values JSON cannot carry.
    """
    if not isinstance(message, dict):
        raise InvalidInputError(f"a message for queue {queue!r} must be a dict, got {type(message).__name__}")
    try:
        return json.dumps(message, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"a message for queue {queue!r} is not JSON-serialisable: {exc}") from exc


class _MessageQueue:
    """One queue: ready messages in FIFO order plus messages waiting out their redelivery delay."""

    def __init__(self) -> None:
        self._ready: deque[str] = deque()
        self._delayed: list[tuple[float, int, str]] = []  # heap of (due, sequence, body)
        self._sequence = itertools.count()
        self._condition = threading.Condition()

    def put(self, body: str) -> None:
        with self._condition:
            self._ready.append(body)
            self._condition.notify()

    def put_later(self, body: str, delay: float) -> None:
        with self._condition:
            heapq.heappush(self._delayed, (time.monotonic() + delay, next(self._sequence), body))
            # A waiting consumer must shorten its wait to the new due time.
            self._condition.notify()

    def get(self, timeout: float) -> str | None:
        """The next message, or ``None`` when none is ready within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        with self._condition:
            while True:
                now = time.monotonic()
                while self._delayed and self._delayed[0][0] <= now:
                    self._ready.append(heapq.heappop(self._delayed)[2])
                if self._ready:
                    return self._ready.popleft()
                wait = deadline - now
                if self._delayed:
                    wait = min(wait, self._delayed[0][0] - now)
                if wait <= 0:
                    return None
                self._condition.wait(wait)

    def __len__(self) -> int:
        with self._condition:
            return len(self._ready) + len(self._delayed)


class InMemoryBroker:
    """A thread-safe, in-process :class:`~librarian.runtime.broker.base.Broker`.

    Each ``consume`` call is one consumer; run several in threads for a worker pool. A consumer takes
    one message at a time and acknowledges it when the handler returns, so it never holds more than
    ``prefetch`` (at least 1) unacknowledged messages and an idle consumer can take the next one.
    Nothing survives the process: the database, not the broker, is the truth.

    Args:
        redelivery_delay: seconds before a message whose handler raised is delivered again.

    Example:
        >>> broker = InMemoryBroker()
        >>> broker.publish("dispatch", {"task_id": "t1"})
    """

    def __init__(self, *, redelivery_delay: float = 0.1) -> None:
        self._queues: dict[str, _MessageQueue] = {name: _MessageQueue() for name in QUEUE_NAMES}
        self._redelivery_delay = redelivery_delay
        self._closed = threading.Event()

    def publish(self, queue: QueueName, message: dict[str, Any]) -> None:
        """Enqueue ``message`` (stored at once; there is nothing further to confirm).

        Raises:
            InvalidInputError: unknown queue, or a message JSON cannot carry.
            BackendUnavailableError: the broker was closed.
        """
        target = self._queue(queue)
        body = encode_message(queue, message)
        if self._closed.is_set():
            raise BackendUnavailableError(f"cannot publish to {queue!r}: the in-memory broker is closed")
        target.put(body)

    def publish_many(self, queue: QueueName, messages: Sequence[dict[str, Any]]) -> None:
        """Enqueue several messages (all of them checked before any is stored).

        Raises:
            InvalidInputError: unknown queue, or a message JSON cannot carry.
            BackendUnavailableError: the broker was closed.
        """
        target = self._queue(queue)
        bodies = [encode_message(queue, message) for message in messages]
        if self._closed.is_set():
            raise BackendUnavailableError(f"cannot publish to {queue!r}: the in-memory broker is closed")
        for body in bodies:
            target.put(body)

    def consume(
        self, queue: QueueName, handler: Handler, stop: threading.Event, *, prefetch: int = 1
    ) -> None:
        """Run ``handler`` on each message of ``queue`` in the calling thread until ``stop`` is set.

        A handler that raises is logged and its message comes back after the redelivery delay. Returns
        within about 50 ms of ``stop`` being set (or the broker closing) once the current handler ends.

        Raises:
            InvalidInputError: unknown queue or ``prefetch`` below 1.
        """
        if prefetch < 1:
            raise InvalidInputError(f"prefetch must be at least 1, got {prefetch}")
        self._consume(queue, lambda batch: handler(batch[0]), stop, max_batch=1)

    def consume_batches(
        self, queue: QueueName, handler: BatchHandler, stop: threading.Event, *, max_batch: int = 50
    ) -> None:
        """Like :meth:`consume`, but hand ``handler`` every message already waiting, up to ``max_batch``.

        A lone message is handed over at once; a batch whose handler raises comes back whole after the
        redelivery delay.

        Raises:
            InvalidInputError: unknown queue or ``max_batch`` below 1.
        """
        if max_batch < 1:
            raise InvalidInputError(f"max_batch must be at least 1, got {max_batch}")
        self._consume(queue, handler, stop, max_batch=max_batch)

    def _consume(
        self, queue: QueueName, handler: BatchHandler, stop: threading.Event, *, max_batch: int
    ) -> None:
        source = self._queue(queue)
        while not stop.is_set() and not self._closed.is_set():
            body = source.get(_POLL_SECONDS)
            if body is None:
                continue
            bodies = [body]
            while len(bodies) < max_batch and (more := source.get(0.0)) is not None:
                bodies.append(more)
            try:
                handler([json.loads(item) for item in bodies])
            except Exception:
                # At-least-once: the failure is the handler's to report; the messages must not be lost.
                logger.warning(
                    "handler failed on %d %s message(s); redelivering", len(bodies), queue, exc_info=True
                )
                for item in bodies:
                    source.put_later(item, self._redelivery_delay)
            except BaseException:
                for item in bodies:
                    source.put(item)  # KeyboardInterrupt, SystemExit: give them back, then unwind
                raise

    def message_count(self, queue: QueueName) -> int:
        """Messages of ``queue`` not yet taken by a consumer (including those awaiting redelivery)."""
        return len(self._queue(queue))

    def close(self) -> None:
        """Stop every consumer and refuse further publishing; safe to call twice."""
        self._closed.set()

    def _queue(self, queue: str) -> _MessageQueue:
        try:
            return self._queues[queue]
        except KeyError:
            raise InvalidInputError(
                f"unknown queue {queue!r}; expected one of {', '.join(QUEUE_NAMES)}"
            ) from None
