"""Documentation on demand: index the failing tool or package at the detected version before research.

A correction is only as good as the docs of the version the task runs. When the store has nothing for
that tool at that version, the loop indexes it itself, in the task's own environment:

- a command-line tool: the sandboxed help walk (:func:`~librarian.ingest.sources.cli_help.walk_cli_help`)
  of the program the task runs, found on the task's ``PATH``;
- a Python distribution: the package connector, introspecting it in the task's own interpreter --
  only the modules the failure is about (and, for a name that cannot be imported, one level of
  their submodules), since a whole scientific distribution has thousands of objects.

Both are the connectors a person would run (``librarian ingest-cli --path``, ``librarian
ingest-package --python``), so the source can be refreshed later like any other. A walk or an
introspection that fails is reported and research goes on with what there is.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from librarian.app import Librarian
from librarian.correction.tool_docs import documents, indexed_tool
from librarian.errors import LibrarianError

__all__ = ["DocsOnDemand", "OnDemand"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class OnDemand:
    """What on-demand indexing did for one correction.

    Attributes:
        sdk_name: the SDK name research should use (the stored one when the tool was already indexed).
        version: the version indexed (or found indexed).
        indexed: whether this call indexed anything.
        seconds: how long indexing took.
        summary: one line for the timeline.
        error: indexing was needed but failed (the message).
    """

    sdk_name: str
    version: str | None
    indexed: bool
    seconds: float = 0.0
    summary: str = ""
    error: str = ""


class DocsOnDemand:
    """Indexes what is missing (see the module docs).

    Args:
        librarian: the documentation store (``None``: never indexes).
        enabled: whether to index at all.
        max_depth, max_commands: bounds of an on-demand help walk.
    """

    def __init__(
        self,
        librarian: Librarian | None,
        *,
        enabled: bool = True,
        max_depth: int = 2,
        max_commands: int = 300,
    ) -> None:
        self.librarian = librarian
        self.enabled = enabled and librarian is not None
        self.max_depth = max_depth
        self.max_commands = max_commands
        self._locks: dict[tuple[str, str | None], threading.Lock] = {}
        self._guard = threading.Lock()

    def command(self, tool: str, program: Sequence[str], version: str | None, path: str) -> OnDemand:
        """Make sure the help of ``program`` at ``version`` is indexed; walk it on ``path`` when not."""
        found = self._found(tool, version)
        if found is not None:
            return found
        if not self.enabled or len(program) != 1:
            # A module run by an interpreter (``python -m tool``) has no help walk of its own.
            return OnDemand(
                tool, version, False, summary=f"no documentation of {tool} {version or ''} indexed"
            )
        assert self.librarian is not None
        with self._lock(tool, version):
            found = self._found(tool, version)
            if found is not None:
                return found
            started = time.perf_counter()
            try:
                report = self.librarian.ingest_cli(
                    program[0],
                    sdk_name=tool,
                    sdk_version=version,
                    max_depth=self.max_depth,
                    max_commands=self.max_commands,
                    path=path,
                )
            except LibrarianError as exc:
                logger.warning("on-demand help walk of %s failed: %s", program[0], exc.message)
                return OnDemand(tool, version, False, time.perf_counter() - started, error=exc.message)
            seconds = time.perf_counter() - started
        indexed = indexed_tool(self.librarian, tool, version)
        return OnDemand(
            indexed.sdk_name if indexed else tool,
            indexed.version if indexed else version,
            True,
            seconds,
            summary=(
                f"indexed the help of `{program[0]}` ({report.files_seen} commands, "
                f"{report.chunks_written} chunks) in {seconds:.1f} s"
            ),
        )

    def package(
        self,
        distribution: str,
        version: str | None,
        python: str,
        modules: Sequence[str] = (),
        levels: int = 0,
    ) -> OnDemand:
        """Make sure ``modules`` of ``distribution`` at ``version`` are indexed; introspect them with
        ``python`` (``levels`` of submodules below each) when they are not."""
        found = self._found(distribution, version, modules)
        if found is not None:
            return found
        if not self.enabled:
            return OnDemand(
                distribution, version, False, summary=f"{distribution} {version or ''} is not indexed"
            )
        assert self.librarian is not None
        with self._lock(distribution, version):
            found = self._found(distribution, version, modules)
            if found is not None:
                return found
            started = time.perf_counter()
            try:
                report = self.librarian.ingest_package(
                    distribution, sdk_name=distribution, python=python, modules=tuple(modules), levels=levels
                )
            except LibrarianError as exc:
                logger.warning("on-demand introspection of %s failed: %s", distribution, exc.message)
                return OnDemand(
                    distribution, version, False, time.perf_counter() - started, error=exc.message
                )
            seconds = time.perf_counter() - started
        indexed = indexed_tool(self.librarian, distribution, version)
        return OnDemand(
            indexed.sdk_name if indexed else distribution,
            indexed.version if indexed else version,
            True,
            seconds,
            summary=(
                f"indexed the installed API of {distribution}"
                + (f" ({', '.join(modules)})" if modules else "")
                + f": {report.files_seen} objects, {report.chunks_written} chunks in {seconds:.1f} s"
            ),
        )

    def _found(self, tool: str, version: str | None, entities: Sequence[str] = ()) -> OnDemand | None:
        """The indexed docs when they cover ``version`` (any version when it is unknown) and document
        each of ``entities``."""
        if self.librarian is None:
            return OnDemand(tool, version, False, summary="no documentation store is configured")
        indexed = indexed_tool(self.librarian, tool, version)
        if indexed is None or (version is not None and not indexed.exact):
            return None
        if entities and not documents(self.librarian, indexed.sdk_name, indexed.version, entities):
            return None
        return OnDemand(
            indexed.sdk_name,
            indexed.version,
            False,
            summary=f"{indexed.sdk_name} {indexed.version} is indexed",
        )

    def _lock(self, tool: str, version: str | None) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault((tool, version), threading.Lock())
