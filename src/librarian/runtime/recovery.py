"""Workflows whose process died: found by their leases, and handed back to the orchestrator at once.

An embedded ``librarian workflow run`` killed with ``kill -9`` leaves its workflow ``running`` with
tasks in flight, leased to the dead process. A lease expires on its own (``runtime_lease_seconds``,
two minutes by default), but only a runtime whose orchestrator runs would notice, and an embedded
runtime runs only while a command does. So:

- :func:`release_orphans` expires, at once, the leases held by a process of this machine that no
  longer exists (the owner is named ``role@host:pid:random``); the orchestrator then dispatches those
  tasks again as new attempts, exactly as after a lease expiry, so no result is applied twice;
- an embedded runtime does that for every running workflow when it starts, and ``librarian workflow
  resume ID`` for one workflow, which it then runs to its end.

Leases held by a live process, or by a process on another machine (``librarian worker`` at scale),
are left alone: their expiry is the only safe signal there.
"""

from __future__ import annotations

import os
import re
import socket
import uuid

from sqlalchemy import select
from sqlalchemy.orm import Session

from librarian.runtime.contracts import WorkflowStatus
from librarian.runtime.models import Task, Workflow
from librarian.runtime.store import IN_FLIGHT, record_event
from librarian.storage.models import utcnow

__all__ = ["owner_is_gone", "release_orphans"]

_OWNER = re.compile(r"@(?P<host>[^:@]+):(?P<pid>\d+):")


def owner_is_gone(owner: str | None) -> bool:
    """Whether ``owner`` (a lease owner's name) was a process of this machine that has exited.

    Example:
        >>> owner_is_gone(f"runtime@{socket.gethostname()}:999999999:abc123")
        True
    """
    match = _OWNER.search(owner or "")
    if match is None or match["host"] != socket.gethostname():
        return False
    pid = int(match["pid"])
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # alive, another user's
    except OverflowError:
        return True  # no such pid can exist
    return False


def release_orphans(session: Session, *, actor: str, workflow_id: uuid.UUID | None = None) -> int:
    """Expire the leases of in-flight tasks whose owner process is gone; how many were released.

    Args:
        session: a session in a transaction (the caller commits).
        actor: who releases them, for the event log.
        workflow_id: only this workflow's tasks; default: every running workflow's.
    """
    query = (
        select(Task)
        .join(Workflow, Workflow.workflow_id == Task.workflow_id)
        .where(Task.status.in_(IN_FLIGHT), Workflow.final_status == WorkflowStatus.RUNNING.value)
    )
    if workflow_id is not None:
        query = query.where(Task.workflow_id == workflow_id)
    released = 0
    now = utcnow()
    for task in session.scalars(query):
        if not owner_is_gone(task.lease_owner):
            continue
        task.lease_expires_at = now
        record_event(
            session,
            workflow_id=task.workflow_id,
            task_id=task.task_id,
            kind="lease_released",
            actor=actor,
            reason=f"the process holding its lease ({task.lease_owner}) is gone; dispatched again",
        )
        released += 1
    return released
