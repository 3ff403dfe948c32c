"""Request and reply: consume a queue, and store each handler's answer before acknowledging.

An executor answers every dispatch message with a result message. :func:`replying` turns its handler
into a consumer handler that publishes the answer (``publish`` returns once the broker stored it)
and only then returns, which acknowledges the request: a crash in between runs it again, never loses
it. On RabbitMQ the reply goes out on the consuming thread's own publishing connection, never on the
consumer's: RabbitMQ blocks publishing connections during a resource alarm, and a consumer blocked
that way could not acknowledge either.

:func:`replying_in_batches` does the same for a batch of requests (an executor holding several
dispatch messages at once): the replies of the whole batch go out as *one* message, a bundle, stored
before the batch is acknowledged. Per task, that saves a confirmed publish, a delivery and an
acknowledgement, which together cost more than a no-op task itself. Consumers of replies read either
form through :func:`unbundled`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from librarian.runtime.broker.base import Broker, Handler, QueueName
from librarian.runtime.broker.batches import BatchHandler

ReplyHandler = Callable[[dict[str, Any]], dict[str, Any] | None]
"""Handles one decoded JSON message and returns the reply to send, or ``None`` to send none.

Returning acknowledges the message (after the reply is stored); raising makes it be redelivered.
"""

# The key of a bundle: ``{"replies": [reply, ...]}``. A plain reply never has it.
BUNDLE_KEY = "replies"
# A bundle's JSON stays under this (RabbitMQ refuses messages over ``max_message_size``, 16 MiB by
# default since 4.0); one reply larger than this goes alone, as with one reply per message.
MAX_BUNDLE_BYTES = 4 * 1024 * 1024


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


def replying_in_batches(
    broker: Broker, handler: ReplyHandler, reply_to: QueueName, *, max_bundle_bytes: int = MAX_BUNDLE_BYTES
) -> BatchHandler:
    """``handler`` over a batch, one message after another; the batch's replies go out in one message.

    The bundle is published (and stored by the broker) before the batch is acknowledged; a bundle
    of one reply is sent plain. Replies whose JSON would take the bundle past ``max_bundle_bytes``
    go out in another one (a large output never makes a bundle RabbitMQ refuses).

    When ``handler`` raises on a message, the rest of the batch still runs and every reply is
    published; then the first error is raised, so the batch is redelivered. Its messages that were
    handled find their work done (their claims are refused), and only the failed one runs again: one
    bad message does not hold the others back, as it would if the batch stopped at it.
    """

    def handle(messages: list[dict[str, Any]]) -> None:
        bundle: list[dict[str, Any]] = []
        size = 0
        failure: Exception | None = None
        try:
            for message in messages:
                try:
                    reply = handler(message)
                except Exception as exc:
                    failure = failure or exc
                    continue
                if reply is None:
                    continue
                reply_bytes = len(json.dumps(reply))
                if bundle and size + reply_bytes > max_bundle_bytes:
                    _publish_bundle(broker, reply_to, bundle)
                    bundle, size = [], 0
                bundle.append(reply)
                size += reply_bytes
        finally:
            if bundle:  # also when interrupted: the work done is reported
                _publish_bundle(broker, reply_to, bundle)
        if failure is not None:
            raise failure

    return handle


def _publish_bundle(broker: Broker, reply_to: QueueName, replies: list[dict[str, Any]]) -> None:
    broker.publish(reply_to, replies[0] if len(replies) == 1 else {BUNDLE_KEY: replies})


def unbundled(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The replies a message carries: itself, or the members of a bundle.

    Raises:
        TypeError: a bundle whose replies are not a list of JSON objects.
    """
    if BUNDLE_KEY not in message:
        return [message]
    replies = message[BUNDLE_KEY]
    if not isinstance(replies, list) or not all(isinstance(reply, dict) for reply in replies):
        raise TypeError(f"a bundle of replies must hold a list of objects, not {type(replies).__name__}")
    return replies
