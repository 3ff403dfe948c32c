"""The running server's address, left in its data directory so the CLI can use it.

``librarian serve`` writes ``<home>/server.json`` (its URL and process id, readable by its user only)
when it starts listening and removes it when it stops. A one-shot ``librarian search`` or
``research`` on the same data directory then asks that server, which has the model loaded, instead of
loading it again (:mod:`librarian.cli.fast`). A file whose process is gone is ignored. Standard
library only: the fast path must not pay for the facade's imports.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

FILE_NAME = "server.json"


def write_server_file(home: Path, url: str) -> Path:
    """Record that this process serves ``home`` at ``url``."""
    path = home / FILE_NAME
    temporary = path.with_suffix(".tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        json.dump({"url": url, "pid": os.getpid()}, handle)
    temporary.replace(path)
    return path


def remove_server_file(home: Path) -> None:
    """Forget the record, if it is this process's."""
    path = home / FILE_NAME
    if running_server(home, pid_of=True) == str(os.getpid()):
        path.unlink(missing_ok=True)


def running_server(home: Path, *, pid_of: bool = False) -> str | None:
    """The URL of the live server of ``home`` (its pid with ``pid_of``), or ``None``."""
    try:
        record = json.loads((home / FILE_NAME).read_text(encoding="utf-8"))
        pid, url = int(record["pid"]), str(record["url"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:  # alive, another user's: not ours to use
        return None
    if not url.startswith(("http://127.", "http://[::1]", "http://localhost")):
        return None  # only a loopback server: the CLI never sends a token elsewhere on its own
    return str(pid) if pid_of else url
