"""The REST API adapter over the :class:`~librarian.app.Librarian` facade."""

from librarian.api.app import create_app
from librarian.api.jobs import Job, JobRegistry

__all__ = ["Job", "JobRegistry", "create_app"]
