"""``lib.jobs``: stored background ingests, refreshes, rebuilds of the vector index and evaluations,
which agents and people start, follow, cancel and resume from any interface.

A job is a row (:class:`IngestJob`) and a daemon thread of the process that started it. The thread
records progress (stage, done, total) as the ingest reports it, at most every
:data:`PROGRESS_INTERVAL` seconds, and a heartbeat; a job whose heartbeat is older than
:data:`STALE_SECONDS` belongs to a process that died and reads as ``interrupted``. Cancelling sets a
flag the running ingest checks at its next progress report; everything written until then stays
(each document is its own transaction), so nothing is half-stored. Resuming runs the same request as
a new job, re-checked against the server's current policy; ingests are incremental, so it skips
what the interrupted run finished.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from librarian.catalog.models import IngestJob
from librarian.catalog.policy import SourcePolicy
from librarian.catalog.source_kinds import check_request, run_request
from librarian.errors import ConflictError, InvalidInputError, LibrarianError, NotFoundError
from librarian.ingest.pipeline import IngestStopped
from librarian.knowledge.access import (
    Principal,
    Scope,
    SourceOwner,
    can_change,
    owner_for,
    require_store_administrator,
)
from librarian.storage.models import as_utc, utcnow

if TYPE_CHECKING:
    from librarian.app import Librarian

logger = logging.getLogger(__name__)

PROGRESS_INTERVAL = 0.5
HEARTBEAT_SECONDS = 10.0
STALE_SECONDS = 60.0
FINISHED = frozenset({"succeeded", "failed", "cancelled", "interrupted"})
STATUSES = FINISHED | {"queued", "running"}
# What `librarian eval` measures: search over documentation, or discovery over registered tools.
EVAL_KINDS = ("retrieval", "tools")
MAX_PAGE = 200


class JobCancelled(IngestStopped):
    """Raised inside a running ingest when its job was cancelled (or the facade closes)."""


@dataclass(frozen=True)
class IngestRequest:
    """What an ingest job runs: the source and its labels, and who will read it."""

    uri: str
    sdk_name: str | None = None
    sdk_version: str | None = None
    ref: str | None = None
    document_type: str | None = None
    category: str | None = None
    tags: tuple[str, ...] = ()
    visibility: str | None = None
    allowed_teams: tuple[str, ...] = field(default=())
    # Which connector reads it (catalog/source_kinds.py): a git repository or folder by default.
    kind: str = "auto"
    # A ``cli`` source: the commands to walk (default: every command the help lists).
    scopes: tuple[str, ...] = ()
    # How far a walk goes: pages and link depth of a ``website`` (default: the server's crawl
    # settings, which also bound them), subcommand depth and count of a ``cli`` source.
    max_pages: int | None = None
    max_depth: int | None = None
    max_commands: int | None = None
    # A ``website``: the path prefix or URL the crawl stays under (default: the start URL's folder).
    scope: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, stored with the job."""
        return {
            "uri": self.uri,
            "sdk_name": self.sdk_name,
            "sdk_version": self.sdk_version,
            "ref": self.ref,
            "document_type": self.document_type,
            "category": self.category,
            "tags": list(self.tags),
            "visibility": self.visibility,
            "allowed_teams": list(self.allowed_teams),
            "kind": self.kind,
            "scopes": list(self.scopes),
            "max_pages": self.max_pages,
            "max_depth": self.max_depth,
            "max_commands": self.max_commands,
            "scope": self.scope,
        }

    @classmethod
    def from_dict(cls, stored: dict[str, Any]) -> IngestRequest:
        """The request :meth:`to_dict` stored."""
        return cls(
            uri=str(stored["uri"]),
            sdk_name=stored.get("sdk_name"),
            sdk_version=stored.get("sdk_version"),
            ref=stored.get("ref"),
            document_type=stored.get("document_type"),
            category=stored.get("category"),
            tags=tuple(stored.get("tags") or ()),
            visibility=stored.get("visibility"),
            allowed_teams=tuple(str(team) for team in stored.get("allowed_teams") or ()),
            kind=str(stored.get("kind") or "auto"),
            scopes=tuple(str(scope) for scope in stored.get("scopes") or ()),
            max_pages=_optional_int(stored.get("max_pages")),
            max_depth=_optional_int(stored.get("max_depth")),
            max_commands=_optional_int(stored.get("max_commands")),
            scope=stored.get("scope"),
        )


def _optional_int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def job_view(row: IngestJob, now: datetime | None = None) -> dict[str, Any]:
    """A job as every interface shows it."""
    return {
        "id": row.id,
        "kind": row.kind,
        "status": effective_status(row, now),
        "request": {key: value for key, value in (row.request or {}).items() if key != "policy"},
        "progress": dict(row.progress or {}),
        "result": row.result,
        "error": row.error,
        "cancel_requested": row.cancel_requested,
        "resumed_from": row.resumed_from,
        "created_at": _stamp(row.created_at),
        "started_at": _stamp(row.started_at),
        "finished_at": _stamp(row.finished_at),
    }


def effective_status(row: IngestJob, now: datetime | None = None) -> str:
    """The stored status, or ``interrupted`` for a job whose process stopped beating."""
    if row.status not in ("queued", "running"):
        return row.status
    beat = as_utc(row.heartbeat_at or row.created_at)
    if beat is not None and (now or utcnow()) - beat > timedelta(seconds=STALE_SECONDS):
        return "interrupted"
    return row.status


class IngestJobs:
    """Start, read, list, cancel and resume stored jobs."""

    def __init__(self, lib: Librarian) -> None:
        self._lib = lib
        self._closing = threading.Event()
        self._threads: dict[str, threading.Thread] = {}
        self._lock = threading.Lock()
        self._reindex_lock = threading.Lock()

    # -- starting -------------------------------------------------------------------------------

    def submit_ingest(
        self, principal: Principal, request: IngestRequest, policy: SourcePolicy
    ) -> dict[str, Any]:
        """Queue an ingest of ``request`` for ``principal`` under ``policy``; returns the job at once.

        Raises:
            ForbiddenError: the caller may not write.
            InvalidInputError: the policy refuses the URI (the message says what is allowed), or a
                label is invalid.
        """
        principal.require(Scope.WRITE, "adding a source")
        checked = check_request(principal, request, policy, self._lib.settings)
        self._owner(principal, checked)  # refuse a bad visibility now, not in the background
        return self._start(principal, "ingest", {**checked.to_dict(), "policy": policy.to_dict()})

    def submit_refresh(
        self, principal: Principal, selector: str | None, *, due_only: bool = False
    ) -> dict[str, Any]:
        """Queue a refresh of the sources ``selector`` names (as ``librarian refresh`` takes it), or of
        every source the caller may refresh when it is ``None``; ``due_only`` keeps only those whose
        refresh interval has passed (as ``librarian refresh --due`` and ``schedule`` do).

        Raises:
            NotFoundError: nothing the caller may refresh matches (checked now, not in the background).
        """
        from librarian.refresh import select_sources  # refresh imports the facade: import late

        principal.require(Scope.WRITE, "refreshing a source")
        select_sources(self._lib, selector, principal)
        return self._start(principal, "refresh", {"selector": selector, "due_only": due_only})

    def submit_reindex(self, principal: Principal) -> dict[str, Any]:
        """Queue a rebuild of the vector index from the store (``librarian reindex``).

        Searches keep using the current index until the new one is complete; an interrupted rebuild
        leaves it in place. Its progress is the count of chunks embedded.

        Raises:
            ForbiddenError: not the operator or an administrator of the server's own organisation.
            ConflictError: a rebuild is already queued or running.
        """
        require_store_administrator(principal, "rebuilding the vector index")
        # One rebuild at a time: two would build the same next generation of the index.
        with self._reindex_lock:
            with self._lib.sessions() as session:
                rows = session.scalars(
                    select(IngestJob).where(
                        IngestJob.kind == "reindex", IngestJob.status.in_(("queued", "running"))
                    )
                ).all()
                active = [row.id for row in rows if effective_status(row) in ("queued", "running")]
            if active:
                raise ConflictError(
                    f"the vector index is already being rebuilt (job {active[0]})", hint="follow that job"
                )
            return self._start(principal, "reindex", {})

    def submit_eval(
        self, principal: Principal, kind: str, dataset: str, policy: SourcePolicy
    ) -> dict[str, Any]:
        """Queue a measurement of retrieval or tool discovery on a BEIR-layout dataset folder on the
        server (``librarian eval retrieval|tools``), in a throwaway store: nothing stored changes.

        The folder must lie under the server's allowed roots, as a local source must.

        Raises:
            InvalidInputError: an unknown kind, or a dataset that is not such a folder under an
                allowed root (checked now, not in the background).
            ForbiddenError: the token lacks the ``write`` scope (an evaluation costs minutes of CPU).
        """
        principal.require(Scope.WRITE, "running an evaluation")
        if kind not in EVAL_KINDS:
            raise InvalidInputError(f"kind: {kind!r} is not one of {', '.join(EVAL_KINDS)}")
        checked = policy.check(dataset)
        folder = Path(checked)
        if not folder.is_absolute() or not folder.is_dir():
            raise InvalidInputError(
                f"dataset: {dataset!r} is not a folder on the server",
                hint="give a folder holding corpus.jsonl, queries.jsonl and qrels/test.tsv",
            )
        return self._start(
            principal, "eval", {"eval": kind, "dataset": str(folder), "policy": policy.to_dict()}
        )

    def resume(self, principal: Principal, job_id: str, policy: SourcePolicy | None = None) -> dict[str, Any]:
        """Run a finished-but-incomplete job (interrupted, failed or cancelled) again, as a new job.

        An ingest is checked again against ``policy`` (default: the one it was accepted under).

        Raises:
            NotFoundError: no such job the caller may see.
            ConflictError: the job is still queued or running, or it succeeded.
        """
        with self._lib.sessions() as session:
            row = self._visible(session, principal, job_id)
            status = effective_status(row)
            stored = dict(row.request or {})
            kind = row.kind
            successor = session.scalar(select(IngestJob.id).where(IngestJob.resumed_from == job_id))
        if not can_change(principal, row.organization_id, row.created_by):
            raise NotFoundError(f"no job {job_id!r} you may resume")
        if status in ("queued", "running", "succeeded"):
            raise ConflictError(
                f"job {job_id} is {status}: only an interrupted, failed or cancelled job resumes"
            )
        if successor is not None:
            raise ConflictError(f"job {job_id} was already resumed as job {successor}", hint="read that job")
        if kind == "refresh":
            selector = stored.get("selector")
            job = self.submit_refresh(
                principal,
                None if selector is None else str(selector),
                due_only=stored.get("due_only") is True,
            )
        elif kind == "reindex":
            job = self.submit_reindex(principal)
        elif kind == "eval":
            accepted = policy or SourcePolicy.from_dict(stored.get("policy"))
            job = self.submit_eval(principal, str(stored["eval"]), str(stored["dataset"]), accepted)
        else:
            accepted = policy or SourcePolicy.from_dict(stored.get("policy"))
            job = self.submit_ingest(principal, IngestRequest.from_dict(stored), accepted)
        with self._lib.sessions.begin() as session:
            new = session.scalar(select(IngestJob).where(IngestJob.id == job["id"]))
            if new is not None:
                new.resumed_from = job_id
            old = session.scalar(select(IngestJob).where(IngestJob.id == job_id))
            if old is not None and old.status in ("queued", "running"):  # its process died: say so
                old.status, old.finished_at = "interrupted", utcnow()
        return {**job, "resumed_from": job_id}

    # -- reading --------------------------------------------------------------------------------

    def get(self, principal: Principal, job_id: str) -> dict[str, Any]:
        """A job of the caller's organisation.

        Raises:
            NotFoundError: no such job, or one of another organisation (indistinguishable).
        """
        with self._lib.sessions() as session:
            return job_view(self._visible(session, principal, job_id))

    def list_jobs(
        self, principal: Principal, *, status: str | None = None, before: int | None = None, limit: int = 20
    ) -> dict[str, Any]:
        """The caller's organisation's jobs, newest first; ``next_before`` is the next page's cursor."""
        principal.require(Scope.READ, "listing jobs")
        if status is not None and status not in STATUSES:
            raise InvalidInputError(f"status: one of {', '.join(sorted(STATUSES))}, not {status!r}")
        if not 1 <= limit <= MAX_PAGE:
            raise InvalidInputError(f"limit: use 1 to {MAX_PAGE}, not {limit}")
        now = utcnow()
        found: list[dict[str, Any]] = []
        cursor = before
        with self._lib.sessions() as session:
            # A stale job's status is computed, so filter by status in pages until the page is full.
            while len(found) < limit:
                query = select(IngestJob).order_by(IngestJob.seq.desc()).limit(limit * 2)
                if not principal.sees_everything:
                    query = query.where(IngestJob.organization_id == principal.organization_id)
                if cursor is not None:
                    query = query.where(IngestJob.seq < cursor)
                rows = list(session.scalars(query))
                if not rows:
                    cursor = None
                    break
                for row in rows:
                    cursor = row.seq
                    if status is None or effective_status(row, now) == status:
                        found.append({**job_view(row, now), "cursor": row.seq})
                        if len(found) == limit:
                            break
        return {"jobs": found, "next_before": cursor if len(found) == limit else None}

    # -- cancelling and closing -----------------------------------------------------------------

    def cancel(self, principal: Principal, job_id: str) -> dict[str, Any]:
        """Ask a queued or running job to stop; it stops at its next progress report.

        Raises:
            NotFoundError: no such job the caller may change (its creator or an administrator).
            ConflictError: the job already finished.
        """
        principal.require(Scope.WRITE, "cancelling a job")
        with self._lib.sessions.begin() as session:
            row = self._visible(session, principal, job_id, for_update=True)
            if not can_change(principal, row.organization_id, row.created_by):
                raise NotFoundError(f"no job {job_id!r} you may cancel")
            status = effective_status(row)
            if status in FINISHED:
                raise ConflictError(f"job {job_id} already finished: {status}")
        # Two compare-and-set updates, not a read then a write: the job's thread may take it from
        # queued to running meanwhile, and must then see the flag instead of a lost "cancelled".
        with self._lib.sessions.begin() as session:
            session.execute(update(IngestJob).where(IngestJob.id == job_id).values(cancel_requested=True))
            session.execute(  # never started: nothing will check the flag
                update(IngestJob)
                .where(IngestJob.id == job_id, IngestJob.status == "queued")
                .values(status="cancelled", finished_at=utcnow())
            )
        return self.get(principal, job_id)

    def wait(self, principal: Principal, job_id: str, timeout: float) -> dict[str, Any]:
        """The job once it finished, or as it stands after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            job = self.get(principal, job_id)
            if job["status"] in FINISHED or time.monotonic() >= deadline:
                return job
            time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))

    def close(self, timeout: float = 5.0) -> None:
        """Stop this process's running jobs (they read ``interrupted`` and can be resumed)."""
        self._closing.set()
        with self._lock:
            threads = list(self._threads.values())
        for thread in threads:
            thread.join(timeout)

    # -- internals ------------------------------------------------------------------------------

    def _start(self, principal: Principal, kind: str, request: dict[str, Any]) -> dict[str, Any]:
        if self._closing.is_set():
            raise ConflictError("the server is stopping", hint="start the job again once it is back")
        with self._lib.sessions.begin() as session:
            row = IngestJob(
                id=uuid.uuid4().hex,
                kind=kind,
                status="queued",
                organization_id=principal.organization_id,
                created_by=principal.user_id,
                request=request,
                progress={},
                cancel_requested=False,
                heartbeat_at=utcnow(),
            )
            session.add(row)
            session.flush()
            view = job_view(row)
        thread = threading.Thread(
            target=self._run, args=(row.id, principal), name=f"ingest-job-{row.id}", daemon=True
        )
        with self._lock:
            self._threads[row.id] = thread
        thread.start()
        return view

    def _run(self, job_id: str, principal: Principal) -> None:
        reporter = _Reporter(self._lib, job_id, self._closing)
        try:
            if not reporter.begin():
                return
            with reporter.beating():
                result = self._work(principal, reporter)
        except JobCancelled:
            reporter.finish("interrupted" if self._closing.is_set() else "cancelled")
        except LibrarianError as exc:
            reporter.finish("failed", error=exc.to_dict())
        except Exception:  # the top-level handler of a background thread: log it, show no traceback
            logger.exception("ingest job %s crashed", job_id)
            reporter.finish(
                "failed",
                error={
                    "error": True,
                    "category": "internal",
                    "message": "the job crashed",
                    "hint": "see the server log",
                },
            )
        else:
            reporter.finish("succeeded", result=result)
        finally:
            with self._lock:
                self._threads.pop(job_id, None)

    def _work(self, principal: Principal, reporter: _Reporter) -> dict[str, Any]:
        stored = reporter.request
        if reporter.kind == "reindex":
            return self._lib.reindex(lambda done, total: reporter.progress("embedding", done, total))
        if reporter.kind == "eval":
            from librarian.evaluation.retrieval import (
                evaluate_retrieval,
            )  # the evaluation is heavy: import late
            from librarian.evaluation.tools import evaluate_tools

            dataset = Path(str(stored["dataset"]))
            if stored.get("eval") == "tools":
                return evaluate_tools(dataset, self._lib.settings, embedder=self._lib.cache.embedder)
            return evaluate_retrieval(dataset, self._lib.settings, progress=reporter.progress)
        if reporter.kind == "refresh":
            from librarian.refresh import refresh_targets, select_sources

            selector = stored.get("selector")
            targets = select_sources(self._lib, None if selector is None else str(selector), principal)
            if stored.get("due_only") is True:
                now = utcnow()
                targets = [target for target in targets if target.is_due(now)]
            outcomes = refresh_targets(self._lib, targets, progress=reporter.progress)
            return {"outcomes": [outcome.to_dict() for outcome in outcomes]}
        request = IngestRequest.from_dict(stored)
        policy = SourcePolicy.from_dict(stored.get("policy"))
        return run_request(self._lib, request, policy, self._owner(principal, request), reporter.progress)

    def _owner(self, principal: Principal, request: IngestRequest) -> SourceOwner:
        teams = self._lib.identity.team_ids_of(principal.organization_id, list(request.allowed_teams))
        return owner_for(principal, request.visibility, teams)

    @staticmethod
    def _visible(
        session: Session, principal: Principal, job_id: str, *, for_update: bool = False
    ) -> IngestJob:
        principal.require(Scope.READ, "reading a job")
        query = select(IngestJob).where(IngestJob.id == job_id)
        if for_update:
            query = query.with_for_update()
        row = session.scalar(query)
        if row is None or (
            not principal.sees_everything and row.organization_id != principal.organization_id
        ):
            raise NotFoundError(f"no job with id {job_id!r}", hint="list jobs to see their ids")
        return row


class _Reporter:
    """Writes one running job's progress and heartbeat, and tells it when to stop."""

    def __init__(self, lib: Librarian, job_id: str, closing: threading.Event) -> None:
        self._lib = lib
        self._job_id = job_id
        self._closing = closing
        self._last = 0.0
        self.kind = ""
        self.request: dict[str, Any] = {}

    def begin(self) -> bool:
        """Mark the job running; False when it was cancelled before it started."""
        now = utcnow()
        with self._lib.sessions.begin() as session:
            taken = session.execute(  # compare-and-set: a cancel of the queued job wins or loses whole
                update(IngestJob)
                .where(IngestJob.id == self._job_id, IngestJob.status == "queued")
                .values(status="running", started_at=now, heartbeat_at=now)
            )
            if taken.rowcount != 1:  # type: ignore[attr-defined]
                return False
            row = self._row(session)
            self.kind, self.request = row.kind, dict(row.request or {})
        if row.cancel_requested:  # cancelled between the two updates of cancel(): stop as cancelled
            raise JobCancelled
        return True

    def progress(self, stage: str, done: int, total: int) -> None:
        """The ingest's progress callback: record it now and then, and stop when asked to."""
        if self._closing.is_set():
            raise JobCancelled
        now = time.monotonic()
        if now - self._last < PROGRESS_INTERVAL and done < total:
            return
        self._last = now
        with self._lib.sessions.begin() as session:
            row = self._row(session)
            row.progress = {"stage": stage, "done": done, "total": total}
            row.heartbeat_at = utcnow()
            if row.cancel_requested:
                raise JobCancelled

    def beating(self) -> _Heartbeat:
        """A context that beats the heartbeat while the job runs, even between progress reports."""
        return _Heartbeat(self)

    def beat(self) -> None:
        with self._lib.sessions.begin() as session:
            self._row(session).heartbeat_at = utcnow()

    def finish(
        self, status: str, *, result: dict[str, Any] | None = None, error: dict[str, Any] | None = None
    ) -> None:
        with self._lib.sessions.begin() as session:
            row = self._row(session)
            row.status, row.finished_at = status, utcnow()
            row.result, row.error = result, error

    def _row(self, session: Session) -> IngestJob:
        row = session.scalar(select(IngestJob).where(IngestJob.id == self._job_id))
        assert row is not None, "jobs are never deleted while they run"
        return row


class _Heartbeat:
    def __init__(self, reporter: _Reporter) -> None:
        self._reporter = reporter
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="ingest-job-heartbeat", daemon=True)

    def __enter__(self) -> None:
        self._thread.start()

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(2)

    def _loop(self) -> None:
        while not self._stop.wait(HEARTBEAT_SECONDS):
            try:
                self._reporter.beat()
            except Exception:  # a busy database must not kill the job; the next beat retries
                logger.warning("could not record the heartbeat of an ingest job", exc_info=True)


def _stamp(moment: datetime | None) -> str | None:
    value = as_utc(moment)
    return value.isoformat() if value is not None else None
