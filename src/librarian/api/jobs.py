"""An in-process registry of background jobs (ingests started over the REST API).

Jobs live in memory: they are lost when the server stops, which is acceptable because every ingest
is idempotent and the outcome of the last run of each source is also stored with the source.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Literal

from librarian.errors import LibrarianError, NotFoundError

JobStatus = Literal["queued", "running", "succeeded", "failed"]


def _now() -> str:
    return datetime.now(UTC).isoformat()


@dataclass(frozen=True)
class Job:
    """A snapshot of one job: what it is, where it stands, and its result or error."""

    id: str
    kind: str
    status: JobStatus = "queued"
    created_at: str = field(default_factory=_now)
    started_at: str | None = None
    finished_at: str | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    # The organisation that submitted it: only its members may read the job.
    organization_id: int = 1

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready copy."""
        return {
            "id": self.id,
            "kind": self.kind,
            "status": self.status,
            "created_at": self.created_at,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "result": self.result,
            "error": self.error,
        }


class JobRegistry:
    """Runs callables in daemon threads and records their outcome; safe to use from any thread.

    Example:
        >>> jobs = JobRegistry()
        >>> job = jobs.submit("echo", lambda: {"ok": True})
        >>> jobs.wait(job.id, timeout=5).status
        'succeeded'
    """

    def __init__(self, max_finished: int = 1000) -> None:
        """Keep at most ``max_finished`` finished jobs (the oldest are forgotten first)."""
        self._jobs: dict[str, Job] = {}
        self._done: dict[str, threading.Event] = {}
        self._lock = threading.Lock()
        self._max_finished = max_finished

    def submit(self, kind: str, work: Callable[[], dict[str, Any]], *, organization_id: int = 1) -> Job:
        """Start ``work`` in a background thread; return the queued job at once."""
        job = Job(id=uuid.uuid4().hex, kind=kind, organization_id=organization_id)
        with self._lock:
            self._forget_old()
            self._jobs[job.id] = job
            self._done[job.id] = threading.Event()
        thread = threading.Thread(target=self._run, args=(job.id, work), name=f"job-{job.id}", daemon=True)
        thread.start()
        return job

    def get(self, job_id: str, organization_id: int | None = None) -> Job:
        """The current state of a job (of ``organization_id`` only, when given).

        Raises:
            NotFoundError: no job has this id (or it finished long ago and was forgotten, or it
                belongs to another organisation).
        """
        with self._lock:
            job = self._jobs.get(job_id)
        if job is None or (organization_id is not None and job.organization_id != organization_id):
            raise NotFoundError(
                f"no job with id {job_id!r}",
                hint="job ids come from POST /sources; jobs are kept in memory until the server stops",
            )
        return job

    def wait(self, job_id: str, timeout: float | None = None) -> Job:
        """Block until the job finishes (or ``timeout`` seconds pass); return its state."""
        with self._lock:
            done = self._done.get(job_id)
        if done is not None:
            done.wait(timeout)
        return self.get(job_id)

    def _update(self, job_id: str, **changes: Any) -> None:
        with self._lock:
            self._jobs[job_id] = replace(self._jobs[job_id], **changes)

    def _run(self, job_id: str, work: Callable[[], dict[str, Any]]) -> None:
        self._update(job_id, status="running", started_at=_now())
        try:
            result = work()
        except LibrarianError as exc:
            self._update(job_id, status="failed", finished_at=_now(), error=exc.to_dict())
        except Exception as exc:  # the top-level handler of a background thread
            error = {"error": True, "category": "internal", "message": repr(exc), "hint": None}
            self._update(job_id, status="failed", finished_at=_now(), error=error)
        else:
            self._update(job_id, status="succeeded", finished_at=_now(), result=result)
        finally:
            with self._lock:
                done = self._done.get(job_id)
            if done is not None:
                done.set()

    def _forget_old(self) -> None:
        finished = [j for j in self._jobs.values() if j.status in ("succeeded", "failed")]
        for job in finished[: max(0, len(finished) - self._max_finished + 1)]:
            del self._jobs[job.id]
            self._done.pop(job.id, None)
