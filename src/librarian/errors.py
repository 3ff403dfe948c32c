"""One error tree for the whole package.

Every error carries the HTTP status an adapter should answer with, so the CLI, REST API and MCP
server map errors in one place each instead of guessing. Driver errors are wrapped at the boundary
with ``raise SomeLibrarianError(...) from exc``.
"""

from __future__ import annotations


class LibrarianError(Exception):
    """Base of every error Librarian raises on purpose."""

    status_code: int = 500
    category: str = "internal"

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready description, used by adapters that print or return errors."""
        return {"error": True, "category": self.category, "message": self.message, "hint": self.hint}


class NotFoundError(LibrarianError):
    """The named thing (source, document, chunk, dataset file) does not exist."""

    status_code = 404
    category = "not_found"


class ConflictError(LibrarianError):
    """The request contradicts stored state (for example a source registered twice differently)."""

    status_code = 409
    category = "conflict"


class InvalidInputError(LibrarianError):
    """Input that cannot be accepted: a bad setting, a malformed file, an unsupported URL."""

    status_code = 422
    category = "invalid_input"


class BackendUnavailableError(LibrarianError):
    """A database, vector index, embedding endpoint or git remote could not be reached."""

    status_code = 503
    category = "backend_unavailable"


class MissingExtraError(LibrarianError):
    """An optional dependency is not installed; the message names the extra that provides it."""

    status_code = 501
    category = "missing_extra"

    def __init__(self, package: str, extra: str) -> None:
        super().__init__(
            f"the optional package {package!r} is not installed",
            hint=f"install it with: pip install 'librarian[{extra}]'",
        )


class TaskFailedError(LibrarianError):
    """A long-running job (ingest, reindex) failed as a whole."""

    status_code = 500
    category = "task_failed"


class UnauthorizedError(LibrarianError):
    """No credentials, or credentials that are unknown, revoked or expired."""

    status_code = 401
    category = "unauthorized"


class ForbiddenError(LibrarianError):
    """The caller is known but may not do this (a missing scope, someone else's document)."""

    status_code = 403
    category = "forbidden"
