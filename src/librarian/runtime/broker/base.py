"""The broker contract: two durable queues, at-least-once delivery, acknowledgement after handling.

The database is the truth; the broker only carries work. A handler must therefore be idempotent: a
message may be delivered twice (a worker died before acknowledging) or never (a lease expiring makes
the orchestrator dispatch the task again).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Literal, Protocol, runtime_checkable

QueueName = Literal["dispatch", "results"]
"""``dispatch`` carries TaskSpec dicts to executors; ``results`` carries execution results back."""

Handler = Callable[[dict[str, Any]], None]
"""Handles one decoded JSON message. Returning acknowledges it; raising makes it be redelivered."""


class Broker(Protocol):
    """A transport of JSON messages over the two queues."""

    def publish(self, queue: QueueName, message: dict[str, Any]) -> None:
        """Send ``message``; returns once the broker has confirmed it is stored (persistent)."""
        ...

    def consume(
        self, queue: QueueName, handler: Handler, stop: threading.Event, *, prefetch: int = 1
    ) -> None:
        """Deliver messages of ``queue`` to ``handler`` until ``stop`` is set (blocks the caller).

        At most ``prefetch`` unacknowledged messages are held. Reconnects after a lost connection.
        """
        ...

    def close(self) -> None:
        """Release connections; safe to call twice."""
        ...


@runtime_checkable
class QueueInspector(Protocol):
    """A broker that can tell how many messages wait in a queue (both built-in brokers can)."""

    def message_count(self, queue: QueueName) -> int:
        """Messages of ``queue`` waiting for a consumer (not those delivered and unacknowledged)."""
        ...
