"""A facade with runbook helpers for the runbook tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from librarian.app import Librarian
from librarian.config import Settings
from librarian.embeddings.local import LocalMiniLMEmbedder
from librarian.runbooks.catalog import RunbookInput
from tests.runtime.conftest import cluster

__all__ = ["cluster"]  # PostgreSQL + RabbitMQ worker processes, shared with the runtime tests

AddRunbook = Callable[[str], dict[str, Any]]


@pytest.fixture
def lib(settings: Settings, embedder: LocalMiniLMEmbedder) -> Iterator[Librarian]:
    """The embedded default (SQLite, Chroma, the in-process task runtime) in a fresh home."""
    with Librarian(settings, embedder=embedder) as library:
        yield library


@pytest.fixture
def add_runbook(lib: Librarian) -> AddRunbook:
    """Store runbook YAML as the local user; returns the runbook's view."""

    def add(text: str) -> dict[str, Any]:
        return lib.runbooks.add(lib.default_principal, RunbookInput(text))

    return add
