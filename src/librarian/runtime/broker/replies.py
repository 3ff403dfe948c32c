"""Request and reply: consume a queue, and send each handler's answer on before acknowledging.

An executor answers every dispatch message with a result message. Both built-in brokers offer
``consume_and_reply``, which publishes the answer (stored, confirmed) and then acknowledges the
request in the consuming thread, on the consumer's own connection: no hand-off between threads and no
second connection per message. :func:`consume_and_reply` falls back to ``consume`` plus ``publish`` for
a broker that has only the base contract. Either way the guarantee is the same: a request is
acknowledged only once its reply is stored, so a crash in between runs it again, never loses it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from librarian.runtime.broker.base import Broker, QueueName

ReplyHandler = Callable[[dict[str, Any]], dict[str, Any] | None]
"""Handles one decoded JSON message and returns the reply to send, or ``None`` to send none.

Returning acknowledges the message (after the reply is stored); raising makes it be redelivered.
"""


@runtime_checkable
class ReplyBroker(Protocol):
    """A broker that publishes a handler's reply and acknowledges its request in one place."""

    def consume_and_reply(
        self,
        queue: QueueName,
        handler: ReplyHandler,
        reply_to: QueueName,
        stop: threading.Event,
        *,
        prefetch: int = 1,
    ) -> None:
        """Like ``consume``; each reply goes to ``reply_to``, stored before the request is acknowledged."""
        ...


def consume_and_reply(
    broker: Broker,
    queue: QueueName,
    handler: ReplyHandler,
    reply_to: QueueName,
    stop: threading.Event,
    *,
    prefetch: int = 1,
) -> None:
    """Deliver ``queue``'s messages to ``handler`` and send its replies to ``reply_to`` until ``stop``.

    Uses the broker's own ``consume_and_reply`` when it has one, else ``consume`` with a handler that
    publishes (``publish`` returns once the reply is stored, and returning then acknowledges).
    """
    if isinstance(broker, ReplyBroker):
        broker.consume_and_reply(queue, handler, reply_to, stop, prefetch=prefetch)
        return

    def handle(message: dict[str, Any]) -> None:
        reply = handler(message)
        if reply is not None:
            broker.publish(reply_to, reply)

    broker.consume(queue, handle, stop, prefetch=prefetch)
