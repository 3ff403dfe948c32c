"""Helpers for tests that check a process really died: read ``/proc`` and poll with a deadline."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path


def process_gone(pid: int) -> bool:
    """Whether ``pid`` no longer runs. A zombie waiting for its reaper counts as gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        # Reaped between the lookup and the read: /proc answers ENOENT or ESRCH.
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def wait_for(condition: Callable[[], object], seconds: float) -> bool:
    """Poll ``condition`` every 20 ms until it holds or ``seconds`` pass; one last check at the deadline."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return bool(condition())
