"""The RabbitMQ broker: the design's topology over pika, with confirms, manual acks and reconnection.

Topology: a durable direct exchange (``agent_exchange``) routes key ``dispatch`` to the durable queue
``task_dispatch_queue`` and key ``results`` to ``task_results_queue``. Messages are persistent JSON,
published with confirms and ``mandatory`` set, so ``publish`` returns only once RabbitMQ has stored
the message. A consumer acknowledges a message only after its handler returned and nacks it (requeue)
when the handler raised; RabbitMQ redelivers whatever an unreachable consumer held. A lost or
duplicated message can therefore delay a task but never lose a result: the database stays the truth.

pika's ``BlockingConnection`` is not thread-safe, so every thread gets its own publishing connection
and every ``consume`` call opens its own connection. Handlers run in the consuming thread; while one
runs, a keeper thread services the connection every quarter of a heartbeat, so heartbeats flow and a
long task does not make RabbitMQ drop the connection.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pika
from pika import exceptions as amqp

from librarian.errors import BackendUnavailableError, InvalidInputError
from librarian.runtime.broker.base import Handler, QueueName
from librarian.runtime.broker.batches import BatchHandler
from librarian.runtime.broker.memory import QUEUE_NAMES, encode_message

logger = logging.getLogger(__name__)

# Every message survives a broker restart; consumers read JSON.
_PERSISTENT = pika.BasicProperties(
    content_type="application/json", delivery_mode=pika.DeliveryMode.Persistent
)

# Consumers check ``stop`` at least this often (the contract asks for a prompt return).
_POLL_SECONDS = 0.1
# How long a batch stays open for more messages once a burst is under way (see ``_gather``).
_BATCH_LINGER_SECONDS = 0.005
# Reconnection and publish-retry backoff: quick first retries, then at most this long between tries.
_FIRST_BACKOFF_SECONDS = 0.1
_MAX_BACKOFF_SECONDS = 5.0

# Everything pika raises for a broken connection or channel, plus raw socket errors it sometimes lets
# through; all of them mean "reconnect and try again".
_RECOVERABLE: tuple[type[BaseException], ...] = (amqp.AMQPError, OSError)


def redact_url(url: str) -> str:
    """``url`` with its password replaced by ``***``, fit for logs and error messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def decode_message(body: bytes) -> dict[str, Any] | None:
    """The JSON object in ``body``, or ``None`` when it is not one (the message is malformed)."""
    try:
        message = json.loads(body)
    except ValueError:  # JSONDecodeError and UnicodeDecodeError both derive from it
        return None
    return message if isinstance(message, dict) else None


class RabbitMQBroker:
    """A :class:`~librarian.runtime.broker.base.Broker` over RabbitMQ (needs the ``rabbitmq`` extra).

    Args:
        url: an AMQP URL, e.g. ``amqp://guest:guest@127.0.0.1:5672/%2F``.
        exchange: the direct exchange both queues are bound to.
        dispatch_queue: the durable queue behind routing key ``dispatch``.
        results_queue: the durable queue behind routing key ``results``.
        heartbeat: AMQP heartbeat in seconds; a dead peer is noticed after about twice this.
        publish_timeout: how long ``publish`` keeps retrying (reconnecting) before giving up.
        redelivery_delay: seconds a consumer waits before nacking a message whose handler raised, so
            a message that always fails cannot spin the queue.

    Example:
        >>> broker = RabbitMQBroker("amqp://guest:guest@127.0.0.1:5672/")
        >>> broker.publish("dispatch", {"task_id": "t1"})  # doctest: +SKIP
    """

    def __init__(
        self,
        url: str,
        *,
        exchange: str = "agent_exchange",
        dispatch_queue: str = "task_dispatch_queue",
        results_queue: str = "task_results_queue",
        heartbeat: int = 30,
        publish_timeout: float = 30.0,
        redelivery_delay: float = 0.1,
    ) -> None:
        if urlsplit(url).scheme not in {"amqp", "amqps"}:
            raise InvalidInputError(f"not an AMQP URL: {redact_url(url)!r} (expected amqp:// or amqps://)")
        self._url = url
        self._exchange = exchange
        self._queue_names: dict[str, str] = {"dispatch": dispatch_queue, "results": results_queue}
        self._heartbeat = heartbeat
        self._publish_timeout = publish_timeout
        self._redelivery_delay = redelivery_delay
        self._closed = threading.Event()
        self._local = threading.local()
        # Every thread's publishing connection, so that ``close`` can release all of them.
        self._publishers: set[Any] = set()
        self._publishers_lock = threading.Lock()

    # -- publishing --------------------------------------------------------------------------------

    def publish(self, queue: QueueName, message: dict[str, Any]) -> None:
        """Send ``message`` to ``queue``; returns once RabbitMQ confirmed it stored the message.

        A lost connection, a nack or an unroutable return is retried with backoff on a new connection
        for up to ``publish_timeout`` seconds. A retry after a confirm that got lost in transit can
        duplicate the message, which the at-least-once contract allows.

        Raises:
            InvalidInputError: unknown queue, or a message JSON cannot carry.
            BackendUnavailableError: RabbitMQ did not confirm within ``publish_timeout``, or the broker
                was closed.
        """
        self._queue_name(queue)
        body = encode_message(queue, message).encode()

        def send() -> None:
            channel = self._publisher_channel()
            channel.basic_publish(self._exchange, queue, body, properties=_PERSISTENT, mandatory=True)

        self._retrying(queue, send, "confirm a message")

    def publish_many(self, queue: QueueName, messages: Sequence[dict[str, Any]]) -> None:
        """Send several messages to ``queue`` with one round trip to RabbitMQ.

        They are published in an AMQP transaction: ``tx.commit`` returns once RabbitMQ routed and
        stored every one of them, which is the guarantee of :meth:`publish` at the cost of one wait
        instead of one per message. A failure retries the whole batch on a new connection, so some
        messages may be sent twice (the at-least-once contract).

        Raises:
            InvalidInputError: unknown queue, or a message JSON cannot carry.
            BackendUnavailableError: RabbitMQ did not commit within ``publish_timeout``.
        """
        if len(messages) <= 1:
            for message in messages:
                self.publish(queue, message)
            return
        self._queue_name(queue)
        bodies = [encode_message(queue, message).encode() for message in messages]

        def send() -> None:
            channel = self._transaction_channel()
            for body in bodies:
                channel.basic_publish(self._exchange, queue, body, properties=_PERSISTENT)
            channel.tx_commit()

        self._retrying(queue, send, f"commit {len(bodies)} messages")

    def _retrying(self, queue: QueueName, send: Callable[[], None], what: str) -> None:
        """Run ``send`` until it succeeds, on a new connection after each failure, for up to
        ``publish_timeout`` seconds. The first retry is immediate: most failures are an idle
        connection RabbitMQ closed.
        """
        deadline = time.monotonic() + self._publish_timeout
        backoff = 0.0
        while True:
            if self._closed.is_set():
                raise BackendUnavailableError(f"cannot publish to {queue!r}: the RabbitMQ broker is closed")
            try:
                send()
                return
            except amqp.NackError as exc:
                failure: BaseException = exc  # RabbitMQ could not store it; the channel is still fine
            except _RECOVERABLE as exc:
                # Includes UnroutableError (a queue deleted behind our back): the new connection
                # declares the topology again before the retry.
                failure = exc
                self._drop_publisher()
            if time.monotonic() + backoff > deadline:
                raise BackendUnavailableError(
                    f"RabbitMQ at {redact_url(self._url)} did not {what} for queue "
                    f"{self._queue_name(queue)!r} within {self._publish_timeout:g}s: {failure!r}",
                    hint="check that RabbitMQ is running and reachable",
                ) from failure
            logger.warning("publishing to %s failed (%r); retrying in %.1fs", queue, failure, backoff)
            time.sleep(backoff)
            backoff = min(max(backoff * 2, _FIRST_BACKOFF_SECONDS), _MAX_BACKOFF_SECONDS)

    def _transaction_channel(self) -> Any:
        """This thread's transactional channel, on the same connection as its confirming one."""
        self._publisher_channel()  # (re)connects when needed
        channel = getattr(self._local, "tx_channel", None)
        if channel is None or not channel.is_open:
            channel = self._local.connection.channel()
            channel.tx_select()
            self._local.tx_channel = channel
        return channel

    def _publisher_channel(self) -> Any:
        channel = getattr(self._local, "channel", None)
        if channel is not None and channel.is_open:
            # Reads what arrived while the connection sat idle: heartbeats are answered, and a
            # connection RabbitMQ dropped for silence fails here, before the message is written.
            self._local.connection.process_data_events(time_limit=0)
            return channel
        self._drop_publisher()
        connection = self._connect("publisher")
        with self._publishers_lock:
            self._publishers.add(connection)
        channel = connection.channel()
        self._declare_topology(channel)
        channel.confirm_delivery()
        self._local.connection, self._local.channel = connection, channel
        return channel

    def _drop_publisher(self) -> None:
        connection = getattr(self._local, "connection", None)
        self._local.connection = self._local.channel = self._local.tx_channel = None
        if connection is not None:
            with self._publishers_lock:
                self._publishers.discard(connection)
            _close_quietly(connection)

    # -- consuming ---------------------------------------------------------------------------------

    def consume(
        self, queue: QueueName, handler: Handler, stop: threading.Event, *, prefetch: int = 1
    ) -> None:
        """Deliver messages of ``queue`` to ``handler`` until ``stop`` is set or the broker is closed.

        Holds at most ``prefetch`` unacknowledged messages. A message is acknowledged after
        ``handler`` returns and nacked for redelivery (after ``redelivery_delay``) when it raises; a
        message that is not a JSON object is rejected without requeue and logged. A lost connection is
        re-opened with backoff until ``stop`` is set. Handlers run one at a time in the calling thread
        (a keeper thread services the connection meanwhile); ``stop`` is checked at least every 0.1 s
        between messages, and this call returns once the running handler (if any) finished.

        Raises:
            InvalidInputError: unknown queue or ``prefetch`` below 1.
        """
        if prefetch < 1:
            raise InvalidInputError(f"prefetch must be at least 1, got {prefetch}")
        self._consume(queue, lambda batch: handler(batch[0]), stop, prefetch=prefetch, max_batch=1)

    def consume_batches(
        self, queue: QueueName, handler: BatchHandler, stop: threading.Event, *, max_batch: int = 50
    ) -> None:
        """Like :meth:`consume`, but hand ``handler`` every message already waiting, up to ``max_batch``.

        A lone message is handed over at once (no waiting for a batch to fill), so latency stays that
        of :meth:`consume`; under load one handler call, and one acknowledgement, covers many
        messages. The whole batch is acknowledged when ``handler`` returns and redelivered when it
        raises, so ``handler`` must be idempotent for each message. Holds at most ``max_batch``
        unacknowledged messages.

        Raises:
            InvalidInputError: unknown queue or ``max_batch`` below 1.
        """
        if max_batch < 1:
            raise InvalidInputError(f"max_batch must be at least 1, got {max_batch}")
        self._consume(queue, handler, stop, prefetch=max_batch, max_batch=max_batch)

    def _consume(
        self,
        queue: QueueName,
        handler: BatchHandler,
        stop: threading.Event,
        *,
        prefetch: int,
        max_batch: int,
    ) -> None:
        queue_name = self._queue_name(queue)
        backoff = _FIRST_BACKOFF_SECONDS
        # Services the connection while a handler runs in this thread (every quarter of a heartbeat).
        with _ConnectionKeeper(self._heartbeat / 4 if self._heartbeat else 5.0) as keeper:
            while not self._stopping(stop):
                connection = None
                try:
                    connection = self._connect(f"consumer:{queue}")
                    channel = connection.channel()
                    self._declare_topology(channel)
                    channel.basic_qos(prefetch_count=prefetch)
                    backoff = _FIRST_BACKOFF_SECONDS
                    self._consume_on(connection, channel, queue_name, handler, stop, keeper, max_batch)
                except _RECOVERABLE as exc:
                    if self._stopping(stop):
                        break
                    logger.warning(
                        "consumer of %s lost RabbitMQ at %s (%r); reconnecting in %.1fs",
                        queue_name,
                        redact_url(self._url),
                        exc,
                        backoff,
                    )
                    stop.wait(backoff)
                    backoff = min(backoff * 2, _MAX_BACKOFF_SECONDS)
                finally:
                    if connection is not None:
                        _close_quietly(connection)

    def _consume_on(
        self,
        connection: Any,
        channel: Any,
        queue_name: str,
        handler: BatchHandler,
        stop: threading.Event,
        keeper: _ConnectionKeeper,
        max_batch: int,
    ) -> None:
        deliveries = channel.consume(queue_name, inactivity_timeout=_POLL_SECONDS)
        for method, _properties, body in deliveries:
            if method is not None:
                batch = [(method.delivery_tag, body)]
                if max_batch > 1:
                    self._gather(connection, channel, deliveries, batch, max_batch)
                self._deliver(connection, channel, queue_name, batch, handler, keeper)
            if self._stopping(stop):
                break
        # Hands back (requeues) any prefetched messages no handler has seen.
        channel.cancel()

    @staticmethod
    def _gather(
        connection: Any, channel: Any, deliveries: Any, batch: list[tuple[int, bytes]], max_batch: int
    ) -> None:
        """Add to ``batch`` what has already arrived; under load, also what arrives in the next moment.

        A lone message is handed over at once, so latency stays that of one message. When others were
        already waiting (a burst), the batch stays open up to ``_BATCH_LINGER_SECONDS`` more: results
        arriving a few at a time would otherwise cost a transaction (and an orchestrator pass) each.
        """
        deadline = time.monotonic() + _BATCH_LINGER_SECONDS
        wait = 0.0  # the first look takes only what is there
        while len(batch) < max_batch:
            connection.process_data_events(time_limit=wait)
            waiting = channel.get_waiting_message_count()
            while len(batch) < max_batch and waiting > 0:
                more, _properties, body = next(deliveries)
                batch.append((more.delivery_tag, body))
                waiting -= 1
            wait = deadline - time.monotonic()
            if len(batch) == 1 or wait <= 0:
                return

    def _deliver(
        self,
        connection: Any,
        channel: Any,
        queue_name: str,
        batch: list[tuple[int, bytes]],
        handler: BatchHandler,
        keeper: _ConnectionKeeper,
    ) -> None:
        messages: list[dict[str, Any]] = []
        tags: list[int] = []
        for tag, body in batch:
            message = decode_message(body)
            if message is None:
                # Requeueing could never help, and would redeliver the message forever.
                logger.error(
                    "dropping a malformed message on %s (not a JSON object): %.200r", queue_name, body
                )
                channel.basic_reject(tag, requeue=False)
                continue
            messages.append(message)
            tags.append(tag)
        if not messages:
            return
        try:
            with keeper.lending(connection):
                handler(messages)
        except Exception:
            logger.warning(
                "handler failed on %d %s message(s); redelivering them", len(tags), queue_name, exc_info=True
            )
            connection.sleep(self._redelivery_delay)
            for tag in tags:
                channel.basic_nack(tag, requeue=True)
            return
        # Delivery tags grow on a channel and this consumer holds no other unacknowledged message (one
        # batch at a time; malformed ones were rejected above): one frame acknowledges them all.
        channel.basic_ack(tags[-1], multiple=len(tags) > 1)

    # -- shared ------------------------------------------------------------------------------------

    def message_count(self, queue: QueueName) -> int:
        """Messages ready in ``queue`` (not counting those delivered and not yet acknowledged).

        Raises:
            BackendUnavailableError: RabbitMQ cannot be reached.
        """
        name = self._queue_name(queue)
        try:
            connection = self._connect("inspector")
        except _RECOVERABLE as exc:
            raise BackendUnavailableError(
                f"RabbitMQ at {redact_url(self._url)} unreachable: {exc!r}"
            ) from exc
        try:
            channel = connection.channel()
            self._declare_topology(channel)
            return int(channel.queue_declare(name, passive=True).method.message_count)
        except _RECOVERABLE as exc:
            raise BackendUnavailableError(f"could not inspect RabbitMQ queue {name!r}: {exc!r}") from exc
        finally:
            _close_quietly(connection)

    def close(self) -> None:
        """Close the publishing connections and make every ``consume`` return; safe to call twice.

        Call it once the threads that published have stopped using the broker: a pika connection must
        not be used by two threads at once.
        """
        self._closed.set()
        with self._publishers_lock:
            publishers, self._publishers = self._publishers, set()
        for connection in publishers:
            _close_quietly(connection)

    def _stopping(self, stop: threading.Event) -> bool:
        return stop.is_set() or self._closed.is_set()

    def _queue_name(self, queue: str) -> str:
        try:
            return self._queue_names[queue]
        except KeyError:
            raise InvalidInputError(
                f"unknown queue {queue!r}; expected one of {', '.join(QUEUE_NAMES)}"
            ) from None

    def _connect(self, role: str) -> Any:
        parameters = pika.URLParameters(self._url)
        parameters.heartbeat = self._heartbeat
        # A publisher blocked by a RabbitMQ resource alarm fails (and retries) instead of hanging.
        parameters.blocked_connection_timeout = self._publish_timeout
        parameters.connection_attempts = 1  # our own loops retry, with backoff and ``stop`` checks
        parameters.client_properties = {"connection_name": f"librarian {role} pid={os.getpid()}"}
        return pika.BlockingConnection(parameters)

    def _declare_topology(self, channel: Any) -> None:
        # Idempotent, so every new connection declares it: RabbitMQ may have been reset meanwhile.
        channel.exchange_declare(self._exchange, exchange_type="direct", durable=True)
        for routing_key, name in self._queue_names.items():
            channel.queue_declare(name, durable=True)
            channel.queue_bind(name, self._exchange, routing_key=routing_key)


class _ConnectionKeeper:
    """Services a consumer's connection from a helper thread while the consuming thread runs a handler.

    pika's ``BlockingConnection`` sends heartbeats only while a thread calls into it, and two threads
    must never use it at once: the lock hands it over. Taking the lock costs nothing while the helper
    sleeps, so a short handler pays no thread hand-off; a long one keeps its connection, which RabbitMQ
    closes after two heartbeat intervals of silence.
    """

    def __init__(self, interval: float) -> None:
        self._interval = interval
        self._lock = threading.Lock()
        self._lent: Any = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="broker-heartbeats", daemon=True)

    def __enter__(self) -> _ConnectionKeeper:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._done.set()
        self._thread.join()

    @contextlib.contextmanager
    def lending(self, connection: Any) -> Iterator[None]:
        """Let the helper service ``connection`` until the block ends (the caller does not use it)."""
        with self._lock:
            self._lent = connection
        try:
            yield
        finally:
            with self._lock:  # waits for a servicing under way: the connection is the caller's again
                self._lent = None

    def _run(self) -> None:
        while not self._done.wait(self._interval):
            with self._lock:
                if self._lent is None:
                    continue
                try:
                    self._lent.process_data_events(time_limit=0)
                except _RECOVERABLE:
                    pass  # a lost connection shows again when the consuming thread acknowledges
                except Exception:
                    # Dying here would stop the heartbeats of every later handler of this consumer.
                    logger.exception("servicing a consumer's connection during its handler failed")


def _close_quietly(connection: Any) -> None:
    # A connection that was lost raises on close; there is nothing left to release then.
    with contextlib.suppress(*_RECOVERABLE):
        if connection.is_open:
            connection.close()
