"""Fixtures of the runtime tests: settings in a fresh home and runtimes closed after each test."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from librarian.config import Settings
from librarian.runtime.correctors import Corrector
from librarian.runtime.engine import Runtime
from tests.runtime.cluster import RABBIT_URL, Cluster
from tests.skipping import unavailable

RuntimeFactory = Callable[..., Runtime]


@pytest.fixture
def runtime_settings(tmp_path: Path) -> Settings:
    """Embedded settings with small limits so failures and leases resolve quickly."""
    return Settings(
        home=tmp_path / "home",
        runtime_workers=2,
        runtime_lease_seconds=10.0,
        runtime_task_timeout_seconds=30.0,
        runtime_task_memory_mb=1024,
    )


@pytest.fixture
def open_runtime(runtime_settings: Settings) -> Iterator[RuntimeFactory]:
    """``open_runtime(correctors=..., corrector_timeout_seconds=..., **setting_overrides)``: closed after."""
    opened: list[Runtime] = []

    def factory(
        correctors: Iterable[Corrector] | None = None,
        *,
        corrector_timeout_seconds: float = 300.0,
        **overrides: Any,
    ) -> Runtime:
        settings = runtime_settings.model_copy(update=overrides) if overrides else runtime_settings
        runtime = Runtime(
            settings, correctors=correctors, corrector_timeout_seconds=corrector_timeout_seconds
        )
        opened.append(runtime)
        return runtime

    yield factory
    for runtime in opened:
        runtime.close()


@pytest.fixture
def cluster(tmp_path: Path, postgres_url: str) -> Iterator[Cluster]:
    """Worker processes on a fresh PostgreSQL database and queues of their own (killed afterwards)."""
    try:
        import pika

        pika.BlockingConnection(pika.URLParameters(RABBIT_URL)).close()
    except Exception as exc:  # any failure to connect means the service is missing here
        unavailable(f"RabbitMQ at {RABBIT_URL} unreachable: {exc!r}")
    running = Cluster(tmp_path / "home", postgres_url)
    yield running
    running.close()
