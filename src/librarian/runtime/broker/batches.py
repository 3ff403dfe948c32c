"""Batches over a broker: publish many messages with one wait, consume what is waiting in one call.

Both built-in brokers offer ``publish_many`` and ``consume_batches`` next to the
:class:`~librarian.runtime.broker.base.Broker` contract; :func:`publish_all` and
:func:`supports_batches` let the runtime use them when a broker has them and fall back to one message
at a time when it does not (a third-party broker needs only the base contract).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from librarian.runtime.broker.base import Broker, QueueName

BatchHandler = Callable[[list[dict[str, Any]]], None]
"""Handles decoded JSON messages together. Returning acknowledges all; raising redelivers all."""


@runtime_checkable
class BatchBroker(Protocol):
    """A broker that also moves messages in batches."""

    def publish_many(self, queue: QueueName, messages: Sequence[dict[str, Any]]) -> None:
        """Send ``messages``; returns once the broker has stored every one of them."""
        ...

    def consume_batches(
        self, queue: QueueName, handler: BatchHandler, stop: threading.Event, *, max_batch: int = 50
    ) -> None:
        """Deliver what is waiting in ``queue``, up to ``max_batch`` messages a call, until ``stop``."""
        ...


def supports_batches(broker: Broker) -> bool:
    """Whether ``broker`` has ``publish_many`` and ``consume_batches``."""
    return isinstance(broker, BatchBroker)


def publish_all(broker: Broker, queue: QueueName, messages: Sequence[dict[str, Any]]) -> None:
    """Send ``messages`` with one wait when the broker can, else one by one."""
    if isinstance(broker, BatchBroker):
        broker.publish_many(queue, messages)
        return
    for message in messages:
        broker.publish(queue, message)
