"""Calling a registered tool: validate the arguments, dispatch by type, record the outcome.

Every call's outcome is recorded per tool. ``tools_failure_threshold`` consecutive failures open the
tool's circuit breaker: the tool leaves search and calls are refused. After
``tools_probe_after_seconds`` the next call is let through as a probe; its success closes the circuit
(the tool is back), its failure keeps it open for another period.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Protocol

import jsonschema
from sqlalchemy import select

from librarian.config import Settings
from librarian.discovery.models import ToolRow, ToolUse
from librarian.embeddings.cache import content_hash
from librarian.errors import ConflictError, InvalidInputError, LibrarianError
from librarian.knowledge.access import Principal
from librarian.storage.models import as_utc, utcnow

if TYPE_CHECKING:
    from librarian.app import Librarian

logger = logging.getLogger(__name__)
MAX_ERROR_CHARS = 2000


class ToolCallError(LibrarianError):
    """The tool was reached but its call failed (an error result, a timeout, a refused address).

    ``tool_fault`` says whose fault it was: the tool's (it timed out, crashed, is unreachable,
    answered HTTP 5xx) or the request's (HTTP 4xx, a function raising on its arguments, an MCP error
    result). Only the tool's own faults count towards its circuit breaker: three bad requests must
    not take a working tool away from everyone.
    """

    status_code = 502
    category = "tool_failed"

    def __init__(self, message: str, *, hint: str | None = None, tool_fault: bool = True) -> None:
        super().__init__(message, hint=hint)
        self.tool_fault = tool_fault


@dataclass(frozen=True)
class CallResult:
    """What a tool answered: structured content when it gives some, else text."""

    content: Any
    is_error: bool = False
    text: str = ""


class ToolCaller(Protocol):
    """Runs tools of one type from their binding."""

    def __call__(
        self, binding: Mapping[str, Any], arguments: dict[str, Any], settings: Settings
    ) -> CallResult:
        """Call the tool; raise :class:`ToolCallError` (or return ``is_error``) when it fails."""
        ...


def _callers() -> dict[str, Callable[[], ToolCaller]]:
    # Imported on first use: the MCP client and HTTP stacks are not needed to search.
    def mcp() -> ToolCaller:
        from librarian.discovery.callers.mcp import call_mcp_tool

        return call_mcp_tool

    def openapi() -> ToolCaller:
        from librarian.discovery.callers.openapi import call_openapi_operation

        return call_openapi_operation

    def python() -> ToolCaller:
        from librarian.discovery.callers.python import call_python_function

        return call_python_function

    def cli() -> ToolCaller:
        from librarian.discovery.callers.cli import call_cli_command

        return call_cli_command

    return {"mcp": mcp, "openapi": openapi, "python": python, "cli": cli}


def check_arguments(row: ToolRow, arguments: dict[str, Any]) -> None:
    """Refuse arguments that break the tool's input schema, naming the field."""
    schema = row.input_schema or {}
    if not schema:
        return
    validator = jsonschema.validators.validator_for(schema)(schema)
    errors = sorted(validator.iter_errors(arguments), key=lambda error: list(error.path))
    if errors:
        first = errors[0]
        where = "/".join(str(part) for part in first.path) or "(arguments)"
        raise InvalidInputError(
            f"tool {row.tool_key}: argument {where}: {first.message}",
            hint=f"the tool's input schema is shown by `librarian tools show {row.tool_key}`",
        )


class ToolCalls:
    """Calls tools on behalf of principals and keeps each tool's health."""

    def __init__(
        self,
        lib: Librarian,
        callers: Mapping[str, Callable[[], ToolCaller]] | None = None,
        changed: Callable[..., None] = lambda **_: None,
    ) -> None:
        self._lib = lib
        # changed(tools=...): after a call, only new uses to read, or the tool's health changed too.
        self._changed = changed
        self._callers = dict(callers or _callers())

    def call(
        self,
        principal: Principal,
        row: ToolRow,
        arguments: dict[str, Any],
        *,
        request: str | None = None,
    ) -> CallResult:
        """Call the tool of ``row`` (already checked readable) with ``arguments``.

        Raises:
            ConflictError: the tool is not active (quarantined, deactivated) or its circuit is open
                and not yet due for a probe.
            InvalidInputError: the arguments break the tool's input schema.
            ToolCallError: the call failed (recorded against the tool's health).
        """
        settings = self._lib.settings
        if row.status != "active":
            raise ConflictError(
                f"tool {row.tool_key} is {row.status}",
                hint="an administrator approves quarantined tools with `librarian tools approve`"
                if row.status == "quarantined"
                else "activate it with `librarian tools activate`",
            )
        probe = False
        if row.health == "open":
            opened = as_utc(row.circuit_opened_at) if row.circuit_opened_at else utcnow()
            due = opened + timedelta(seconds=settings.tools_probe_after_seconds)
            if utcnow() < due:
                raise ConflictError(
                    f"tool {row.tool_key} is out of use after {row.consecutive_failures} failed calls "
                    f"(last: {row.last_error or 'unknown'})",
                    hint=f"it is probed again after {due.isoformat()}",
                )
            probe = True
        check_arguments(row, arguments)
        factory = self._callers.get(row.tool_type)
        if factory is None:
            raise InvalidInputError(f"tool {row.tool_key}: no caller for type {row.tool_type!r}")
        started = time.monotonic()

        def failed(error: str, *, tool_fault: bool) -> None:
            self.record(
                principal,
                row.id,
                succeeded=False,
                started=started,
                error=error,
                request=request,
                probe=probe,
                tool_fault=tool_fault,
            )

        try:
            result = factory()(row.binding or {}, arguments, settings)
        except ToolCallError as exc:
            failed(exc.message, tool_fault=exc.tool_fault)
            raise
        except InvalidInputError as exc:  # the arguments, refused before anything ran
            failed(exc.message, tool_fault=False)
            raise
        except LibrarianError as exc:
            failed(exc.message, tool_fault=True)
            raise ToolCallError(f"tool {row.tool_key}: {exc.message}", hint=exc.hint) from exc
        if result.is_error:
            failed(result.text, tool_fault=False)
            raise ToolCallError(
                f"tool {row.tool_key} answered with an error: {result.text[:500]}", tool_fault=False
            )
        self.record(principal, row.id, succeeded=True, started=started, request=request, probe=probe)
        return result

    def record(
        self,
        principal: Principal,
        tool_id: int,
        *,
        succeeded: bool,
        started: float | None = None,
        error: str | None = None,
        request: str | None = None,
        probe: bool = False,
        kind: str = "call",
        tool_fault: bool = True,
    ) -> dict[str, Any]:
        """Record one use of a tool and update its health (the circuit breaker).

        A failure that was not the tool's fault (``tool_fault`` false) is counted and its error
        kept, but leaves the tool's health alone; a failed probe is always the tool's.
        """
        settings = self._lib.settings
        request_hash = None
        if request and succeeded:
            self._lib.cache.embed_documents([request])
            request_hash = content_hash(request)
        with self._lib.sessions.begin() as session:
            row = session.scalar(select(ToolRow).where(ToolRow.id == tool_id).with_for_update())
            if row is None:
                return {}
            now = utcnow()
            session.add(
                ToolUse(
                    tool_id=tool_id,
                    organization_id=principal.organization_id,
                    user_id=principal.user_id,
                    kind="probe" if probe else kind,
                    request=request,
                    request_hash=request_hash,
                    succeeded=succeeded,
                    duration_ms=None if started is None else int((time.monotonic() - started) * 1000),
                    error=None if error is None else error[:MAX_ERROR_CHARS],
                    created_at=now,
                )
            )
            health_before = row.health
            if kind != "selection":
                row.last_called_at = now
                if succeeded:
                    row.success_count += 1
                    row.consecutive_failures = 0
                    row.health = "healthy"
                    row.circuit_opened_at = None
                else:
                    row.failure_count += 1
                    row.last_error = None if error is None else error[:MAX_ERROR_CHARS]
                    if tool_fault or probe:
                        row.consecutive_failures += 1
                        if probe or row.consecutive_failures >= settings.tools_failure_threshold:
                            row.health = "open"
                            row.circuit_opened_at = now
                        else:
                            row.health = "failing"
            if row.health != health_before:
                row.updated_at = now  # the index reloads: the tool leaves or rejoins search
                if row.health == "open":
                    logger.warning(
                        "tool %s taken out of use after %d consecutive failed calls: %s",
                        row.tool_key,
                        row.consecutive_failures,
                        row.last_error,
                    )
            outcome = {
                "tool": row.tool_key,
                "health": row.health,
                "consecutive_failures": row.consecutive_failures,
            }
            health_changed = row.health != health_before
        self._changed(tools=health_changed)
        return outcome
