"""The one task runtime a :class:`~librarian.app.Librarian` process runs workflows on.

REST and MCP workflows and runbook ``bash`` steps share it: two embedded runtimes in one process would
each start workers on the same database and dispatch the same tasks. It is created on first use with
the self-correcting loop over this facade's own documentation (so research uses the warm embedder),
and closed with the facade.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from librarian.app import Librarian
    from librarian.runtime.engine import Runtime


class RuntimeHost:
    """Creates the runtime lazily (opening it starts embedded workers) and closes it with its correctors."""

    def __init__(self, lib: Librarian) -> None:
        self._lib = lib
        self._runtime: Runtime | None = None
        self._correctors: list[Any] = []
        self._lock = threading.Lock()
        self._executor_types: tuple[str, ...] | None = None

    def executor_types(self) -> tuple[str, ...]:
        """The executor types a task may name (without starting the runtime)."""
        if self._executor_types is None:
            from librarian.runtime.executors.registry import build_registry

            self._executor_types = build_registry(self._lib.settings).executor_types()
        return self._executor_types

    @property
    def started(self) -> bool:
        """Whether the runtime was created (``close`` has something to stop)."""
        return self._runtime is not None

    def get(self) -> Runtime:
        """The runtime, created on first use with the loop's correctors."""
        with self._lock:
            if self._runtime is None:
                from librarian.correction.loop import loop_correctors
                from librarian.runtime.engine import Runtime

                settings = self._lib.settings
                self._correctors = loop_correctors(settings, library=self._lib)
                self._runtime = Runtime(settings, correctors=self._correctors)
            return self._runtime

    def close(self) -> None:
        """Stop the embedded workers and the correctors (idempotent)."""
        with self._lock:
            runtime, self._runtime = self._runtime, None
            correctors, self._correctors = self._correctors, []
        if runtime is None:
            return
        for corrector in correctors:
            close = getattr(corrector, "close", None)
            if callable(close):
                close()
        runtime.close()
