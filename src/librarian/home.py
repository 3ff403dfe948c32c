"""The data directory: created on first use, or refused with a one-line reason."""

from __future__ import annotations

import os
from pathlib import Path

from librarian.errors import InvalidInputError


def prepare_home(home: Path) -> None:
    """Create the data directory, or say in one line why it cannot be used (never a traceback)."""
    try:
        home.mkdir(parents=True, exist_ok=True)
        if not os.access(home, os.W_OK | os.X_OK):
            raise PermissionError(13, "it is not writable")
    except OSError as exc:
        why = "it is a file" if isinstance(exc, FileExistsError) else exc.strerror or str(exc)
        raise InvalidInputError(
            f"the data directory {home} cannot be used: {why}",
            hint="choose another with --home or LIBRARIAN_HOME",
        ) from exc
