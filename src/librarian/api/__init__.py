"""The REST API adapter over the :class:`~librarian.app.Librarian` facade."""

from librarian.api.app import create_app

__all__ = ["create_app"]
