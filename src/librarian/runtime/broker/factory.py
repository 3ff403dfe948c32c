"""Pick the broker from a URL: none (or ``memory://``) for the embedded queue, ``amqp://`` for RabbitMQ."""

from __future__ import annotations

from urllib.parse import urlsplit

from librarian.errors import InvalidInputError, MissingExtraError
from librarian.runtime.broker.base import Broker
from librarian.runtime.broker.memory import InMemoryBroker


def broker_from_url(url: str | None) -> Broker:
    """The broker ``url`` names.

    Args:
        url: ``None``, ``""`` or ``memory://`` for an :class:`InMemoryBroker`; ``amqp://...`` or
            ``amqps://...`` for a :class:`~librarian.runtime.broker.rabbitmq.RabbitMQBroker` with the
            design's default exchange and queue names.

    Raises:
        InvalidInputError: an unsupported URL scheme.
        MissingExtraError: an AMQP URL without the ``rabbitmq`` extra (pika) installed.

    Example:
        >>> type(broker_from_url(None)).__name__
        'InMemoryBroker'
    """
    if not url or url == "memory://":
        return InMemoryBroker()
    scheme = urlsplit(url).scheme
    if scheme in {"amqp", "amqps"}:
        try:
            from librarian.runtime.broker.rabbitmq import RabbitMQBroker
        except ModuleNotFoundError as exc:
            if exc.name != "pika":
                raise
            raise MissingExtraError("pika", "rabbitmq") from exc
        return RabbitMQBroker(url)
    raise InvalidInputError(
        f"unsupported broker URL scheme {scheme!r} in the broker URL",
        hint="leave it empty for the embedded queue or use amqp://user:password@host:5672/",
    )
