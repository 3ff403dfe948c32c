"""Request and reply: consume a queue, and store each handler's answer before acknowledging.

An executor answers every dispatch message with a result message. :func:`replying` turns its handler
into a consumer handler that publishes the answer (``publish`` returns once the broker stored it)
and only then returns, which acknowledges the request: a crash in between runs it again, never loses
it. On RabbitMQ the reply goes out on the consuming thread's own publishing connection, never on the
consumer's: RabbitMQ blocks publishing connections during a resource alarm, and a consumer blocked
that way could not acknowledge either.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from librarian.runtime.broker.base import Broker, Handler, QueueName

ReplyHandler = Callable[[dict[str, Any]], dict[str, Any] | None]
"""Handles one decoded JSON message and returns the reply to send, or ``None`` to send none.

Returning acknowledges the message (after the reply is stored); raising makes it be redelivered.
"""


def replying(broker: Broker, handler: ReplyHandler, reply_to: QueueName) -> Handler:
    """``handler`` as a plain consumer handler: its reply is published to ``reply_to`` before it returns.

    ``publish`` returns once the broker stored the reply; if it raises, the request stays
    unacknowledged and is delivered again.
    """

    def handle(message: dict[str, Any]) -> None:
        reply = handler(message)
        if reply is not None:
            broker.publish(reply_to, reply)

    return handle
