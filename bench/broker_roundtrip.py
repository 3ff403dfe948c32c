"""Broker overhead: publish latency, one-message round trip and bulk throughput, per broker.

For each broker (the in-memory queue, and RabbitMQ when ``--rabbitmq-url`` is given) it measures

* ``publish``: one confirmed ``publish`` call (for RabbitMQ: persistent, with publisher confirms);
* ``round_trip``: publish one message and wait until a consumer's handler has it, one at a time,
  which is the transport's share of a no-op task's overhead;
* ``throughput``: publish N messages from one thread while one consumer (prefetch as given) drains
  them; messages per second from the first publish to the last handled message.

Queues are uniquely named per run and deleted afterwards, so it never touches a real deployment's.

    .venv/bin/python bench/broker_roundtrip.py --messages 2000 \\
        --rabbitmq-url amqp://guest:guest@127.0.0.1:5672/
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
import uuid
from typing import Any

from librarian.runtime.broker.base import Broker
from librarian.runtime.broker.memory import InMemoryBroker


def _percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50_ms": round(statistics.median(ordered) * 1000, 3),
        "p95_ms": round(ordered[int(len(ordered) * 0.95) - 1] * 1000, 3),
        "mean_ms": round(statistics.fmean(ordered) * 1000, 3),
    }


def measure_publish(broker: Broker, count: int) -> dict[str, float]:
    """Latency of single ``publish`` calls (the messages are drained afterwards by the caller)."""
    samples = []
    for i in range(count):
        started = time.perf_counter()
        broker.publish("results", {"id": i})
        samples.append(time.perf_counter() - started)
    return _percentiles(samples)


def measure_round_trip(broker: Broker, count: int) -> dict[str, float]:
    """Publish-to-handler latency, one message in flight at a time."""
    arrived = threading.Event()
    stop = threading.Event()
    consumer = threading.Thread(target=broker.consume, args=("dispatch", lambda _m: arrived.set(), stop))
    consumer.start()
    samples = []
    try:
        for i in range(count + 20):
            arrived.clear()
            started = time.perf_counter()
            broker.publish("dispatch", {"id": i})
            if not arrived.wait(10):
                raise RuntimeError("a message did not arrive within 10 s")
            if i >= 20:  # the first messages include connecting and declaring
                samples.append(time.perf_counter() - started)
    finally:
        stop.set()
        consumer.join()
    return _percentiles(samples)


def measure_throughput(broker: Broker, count: int, prefetch: int) -> dict[str, float]:
    """Messages per second through one publisher and one consumer."""
    handled = 0
    done = threading.Event()
    stop = threading.Event()

    def handle(_message: dict[str, Any]) -> None:
        nonlocal handled
        handled += 1
        if handled == count:
            done.set()

    consumer = threading.Thread(
        target=broker.consume, args=("dispatch", handle, stop), kwargs={"prefetch": prefetch}
    )
    consumer.start()
    started = time.perf_counter()
    for i in range(count):
        broker.publish("dispatch", {"id": i, "payload": {"argv": ["true"]}})
    finished = done.wait(300)
    elapsed = time.perf_counter() - started
    stop.set()
    consumer.join()
    if not finished:
        raise RuntimeError(f"only {handled} of {count} messages arrived within 300 s")
    return {"messages_per_second": round(count / elapsed, 1)}


def drain(broker: Broker, count: int) -> None:
    """Consume ``count`` messages of ``results`` (left by :func:`measure_publish`)."""
    seen = 0
    stop = threading.Event()

    def handle(_message: dict[str, Any]) -> None:
        nonlocal seen
        seen += 1
        if seen >= count:
            stop.set()

    broker.consume("results", handle, stop, prefetch=50)


def run(name: str, broker: Broker, messages: int, prefetch: int) -> dict[str, Any]:
    """Every measurement on ``broker``."""
    publish = measure_publish(broker, messages)
    drain(broker, messages)
    return {
        "broker": name,
        "messages": messages,
        "publish": publish,
        "round_trip": measure_round_trip(broker, min(messages, 1000)),
        "throughput": measure_throughput(broker, messages, prefetch) | {"prefetch": prefetch},
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--prefetch", type=int, default=10)
    parser.add_argument("--rabbitmq-url", default=None, help="also measure RabbitMQ at this AMQP URL")
    args = parser.parse_args()

    memory = InMemoryBroker()
    print(json.dumps(run("memory", memory, args.messages, args.prefetch)), flush=True)
    memory.close()

    if args.rabbitmq_url:
        import pika

        from librarian.runtime.broker.rabbitmq import RabbitMQBroker

        suffix = uuid.uuid4().hex[:10]
        exchange, dispatch, results = (
            f"bench_{kind}_{suffix}" for kind in ("exchange", "dispatch", "results")
        )
        rabbit = RabbitMQBroker(
            args.rabbitmq_url, exchange=exchange, dispatch_queue=dispatch, results_queue=results
        )
        try:
            print(json.dumps(run("rabbitmq", rabbit, args.messages, args.prefetch)), flush=True)
        finally:
            rabbit.close()
            connection = pika.BlockingConnection(pika.URLParameters(args.rabbitmq_url))
            channel = connection.channel()
            channel.queue_delete(dispatch)
            channel.queue_delete(results)
            channel.exchange_delete(exchange)
            connection.close()


if __name__ == "__main__":
    main()
