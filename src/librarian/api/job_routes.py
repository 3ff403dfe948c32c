"""REST routes that start, follow, cancel and resume background ingests (``lib.jobs``).

Jobs are stored, so a restarted server still answers ``GET /jobs/{job_id}``; a job whose server died
reads ``interrupted`` and ``POST /jobs/{job_id}/resume`` runs it again.
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Query, Request, status
from pydantic import BaseModel, Field

from librarian.api.knowledge_routes import MAX_ID, caller
from librarian.app import Librarian
from librarian.catalog.jobs import STATUSES, IngestRequest
from librarian.catalog.policy import SourcePolicy
from librarian.catalog.source_kinds import SOURCE_KINDS
from librarian.refresh import MIN_INTERVAL_SECONDS
from librarian.refresh_schedule import set_refresh_interval

_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": dict[str, Any]} for code in (401, 403, 404, 409, 422)
}


class SourceRequest(BaseModel):
    """A source to ingest: a git URL (http, https, ssh) or an allowed local path, or (``kind``) a
    website, an OpenAPI document, a program's CLI help or an installed Python package."""

    uri: str = Field(
        min_length=1,
        max_length=4000,
        description="The git URL or folder; the site's or OpenAPI document's URL; the program or "
        "distribution name (kinds cli and package).",
    )
    kind: str = Field(
        default="auto",
        description=f"One of {', '.join(SOURCE_KINDS)}. cli and package run programs on the server: "
        "administrators only.",
    )
    scopes: list[str] = Field(
        default_factory=list, max_length=200, description="kind cli: only these commands (e.g. 's3 cp')."
    )
    sdk_name: str | None = Field(default=None, max_length=255)
    sdk_version: str | None = Field(default=None, max_length=255)
    ref: str | None = Field(default=None, max_length=255, description="Git branch, tag or commit.")
    document_type: str | None = Field(default=None, max_length=64)
    category: str | None = Field(default=None, max_length=255)
    tags: list[str] = Field(default_factory=list, max_length=50)
    visibility: str | None = Field(
        default=None,
        description="Who may read it: private, teams, organization (default) or public (administrators; "
        "their SDK documentation is public by default).",
    )
    allowed_teams: list[int | str] = Field(default_factory=list, description="Teams (with visibility teams).")
    max_pages: int | None = Field(default=None, description="kind website: pages to fetch at most.")
    max_depth: int | None = Field(
        default=None, description="kind website: links followed from the start; kind cli: subcommand depth."
    )
    max_commands: int | None = Field(default=None, description="kind cli: help pages to fetch at most.")
    scope: str | None = Field(
        default=None,
        max_length=2000,
        description="kind website: the path prefix or URL the crawl stays under.",
    )

    def request(self) -> IngestRequest:
        """The source as the job service takes it."""
        return IngestRequest(
            uri=self.uri,
            sdk_name=self.sdk_name,
            sdk_version=self.sdk_version,
            ref=self.ref,
            document_type=self.document_type,
            category=self.category,
            tags=tuple(self.tags),
            visibility=self.visibility,
            allowed_teams=tuple(str(team) for team in self.allowed_teams),
            kind=self.kind,
            scopes=tuple(self.scopes),
            max_pages=self.max_pages,
            max_depth=self.max_depth,
            max_commands=self.max_commands,
            scope=self.scope,
        )


class RefreshInterval(BaseModel):
    """How often a source is refreshed."""

    seconds: int | None = Field(
        ge=MIN_INTERVAL_SECONDS,
        le=10 * 365 * 24 * 3600,
        description="Seconds between refreshes; null for the setting's default.",
    )


class Evaluation(BaseModel):
    """A measurement to run on a dataset folder on the server."""

    kind: Literal["retrieval", "tools"] = Field(
        description="retrieval (documentation search) or tools (discovery)."
    )
    dataset: str = Field(
        min_length=1,
        max_length=4096,
        description="A BEIR folder (corpus.jsonl, queries.jsonl, qrels/test.tsv) under an allowed root.",
    )


class JobAccepted(BaseModel):
    """A background job was queued; poll ``GET /jobs/{job_id}``."""

    job_id: str


class JobState(BaseModel):
    """A background job: what it runs, where it stands, and its result or error once finished."""

    id: str
    kind: str
    status: str = Field(description=f"One of {', '.join(sorted(STATUSES))}.")
    request: dict[str, Any]
    progress: dict[str, Any] = Field(description="The last reported stage, done and total.")
    created_at: str | None
    started_at: str | None
    finished_at: str | None
    result: dict[str, Any] | None
    error: dict[str, Any] | None
    cancel_requested: bool
    resumed_from: str | None


def job_router(lib: Librarian, policy: SourcePolicy) -> APIRouter:
    """``POST /sources``, ``POST /sources/{selector}/refresh``, ``PUT /sources/{selector}/refresh-interval``,
    ``POST /eval`` and the ``/jobs`` routes."""
    router = APIRouter(tags=["sources"], responses=_ERRORS)
    jobs = lib.jobs

    @router.post("/sources", status_code=status.HTTP_202_ACCEPTED, response_model=JobAccepted)
    def add_source(body: SourceRequest, request: Request) -> dict[str, str]:
        """Ingest a source in the background; poll ``GET /jobs/{job_id}`` for progress and the report.

        Because the API may be reachable from other machines, a local filesystem path is accepted
        only inside one of the server's allowed roots (none by default), so clients cannot make
        the server read arbitrary files. Git URLs over ``http://`` and ``https://`` are accepted
        when their host is public; ssh (``ssh://``, ``user@host:path``) only when the server allows
        it (``--allow-ssh-sources``); ``file://`` counts as a local path and ``git://`` is refused.
        git follows no redirect itself: each is checked, and it never reaches a non-public address
        through one. It runs without the server's credentials, keys or ssh agent. Refusals answer
        422 with a message saying what is allowed.
        """
        job = jobs.submit_ingest(caller(request), body.request(), policy)
        return {"job_id": job["id"]}

    @router.post("/sources/refresh", status_code=status.HTTP_202_ACCEPTED, response_model=JobAccepted)
    def refresh_all(
        request: Request,
        due: bool = Query(default=False, description="Only the sources whose refresh interval has passed."),
    ) -> dict[str, str]:
        """Refresh every source the caller may refresh, in the background (``librarian refresh``, or
        with ``due=true`` ``librarian refresh --due``); poll ``GET /jobs/{job_id}``."""
        return {"job_id": jobs.submit_refresh(caller(request), None, due_only=due)["id"]}

    @router.post(
        "/sources/{selector:path}/refresh", status_code=status.HTTP_202_ACCEPTED, response_model=JobAccepted
    )
    def refresh_source(selector: str, request: Request) -> dict[str, str]:
        """Refresh sources in the background, incrementally; poll ``GET /jobs/{job_id}``.

        ``selector`` is a source id, a key prefix, a URI (percent-encoded) or an SDK name, which
        selects every version of that SDK. An unknown selector answers 404 at once. The job's result
        is ``{"outcomes": [...]}``, one per source: its status (``ok``, ``unchanged``, ``partial``,
        ``failed`` or ``skipped``), the ingest report or the error, and, when a CLI, package or
        OpenAPI document now reports a new version, the source that version was ingested as (the
        old version is kept).
        """
        return {"job_id": jobs.submit_refresh(caller(request), selector)["id"]}

    @router.put("/sources/{selector:path}/refresh-interval")
    def set_interval(selector: str, body: RefreshInterval, request: Request) -> dict[str, Any]:
        """Set how often ``librarian schedule`` refreshes the sources ``selector`` names (as for
        refresh); ``seconds: null`` gives them back the ``refresh_interval_seconds`` setting.

        The answer lists each updated source with its interval and whether it is its own.
        """
        updated = set_refresh_interval(lib, selector, body.seconds, caller(request))
        return {"sources": [target.to_dict() for target in updated]}

    @router.post("/eval", status_code=status.HTTP_202_ACCEPTED, response_model=JobAccepted)
    def evaluate(body: Evaluation, request: Request) -> dict[str, str]:
        """Measure retrieval or tool discovery on a dataset folder on the server, in the background
        (`librarian eval`), in a throwaway store; poll ``GET /jobs/{job_id}``: its result holds the
        metrics and latencies. The folder must be under the server's allowed roots (422 otherwise)."""
        return {"job_id": jobs.submit_eval(caller(request), body.kind, body.dataset, policy)["id"]}

    @router.get("/jobs")
    def list_jobs(
        request: Request,
        job_status: str | None = Query(default=None, alias="status", description="Only jobs in this status."),
        before: int | None = Query(
            default=None, ge=1, le=MAX_ID, description="Cursor: a previous next_before."
        ),
        limit: int = Query(default=20, ge=1, le=200),
    ) -> dict[str, Any]:
        """The organisation's jobs, newest first; ``next_before`` is the cursor of the next page."""
        return jobs.list_jobs(caller(request), status=job_status, before=before, limit=limit)

    @router.get("/jobs/{job_id}", response_model=JobState)
    def job(job_id: str, request: Request) -> dict[str, Any]:
        """A job of the caller's organisation: its request, progress, and result or error; 404 otherwise."""
        return jobs.get(caller(request), job_id)

    @router.post("/jobs/{job_id}/cancel", response_model=JobState)
    def cancel_job(job_id: str, request: Request) -> dict[str, Any]:
        """Stop a queued or running job (its creator or an administrator); what it wrote stays. 409 when
        it already finished."""
        return jobs.cancel(caller(request), job_id)

    @router.post("/jobs/{job_id}/resume", status_code=status.HTTP_202_ACCEPTED, response_model=JobAccepted)
    def resume_job(job_id: str, request: Request) -> dict[str, str]:
        """Run an interrupted, failed or cancelled job again as a new job, under this server's policy;
        it skips what the first run finished. 409 for a job that is running or succeeded."""
        return {"job_id": jobs.resume(caller(request), job_id, policy)["id"]}

    return router
