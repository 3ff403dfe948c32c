"""MCP tools with which an agent adds documentation itself and follows it (``lib.jobs``): ``add_source``,
``refresh_source``, ``set_refresh_interval``, ``start_reindex``, ``start_evaluation``, ``list_jobs``,
``get_job``, ``cancel_job`` and ``resume_job``.

Sources are accepted under the same policy as ``POST /sources``: the server's allowed roots for local
paths, public addresses only unless the operator allows private ones, ssh only when allowed.
"""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ToolAnnotations

from librarian.app import Librarian
from librarian.catalog.jobs import IngestRequest
from librarian.catalog.policy import SourcePolicy
from librarian.mcp.caller import tool_caller
from librarian.mcp.errors import tool_errors
from librarian.mcp.metadata import READ_ONLY, WRITES_IDEMPOTENT
from librarian.refresh_schedule import set_refresh_interval as set_interval

# Adding a source fetches from the outside world and writes to the store; it never deletes.
FETCHES = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=True
)
MAX_WAIT_SECONDS = 120.0


def register_job_tools(server: MCPServer[Any], lib: Librarian, policy: SourcePolicy) -> None:
    """Add the source and job tools to ``server``, accepting sources under ``policy``."""
    jobs = lib.jobs

    @server.tool(title="Add documentation", annotations=FETCHES)
    def add_source(
        uri: str,
        sdk_name: str | None = None,
        sdk_version: str | None = None,
        ref: str | None = None,
        document_type: str | None = None,
        tags: list[str] | None = None,
        visibility: str | None = None,
        kind: str = "auto",
        scopes: list[str] | None = None,
        wait_seconds: float = 0,
        category: str | None = None,
        max_pages: int | None = None,
        max_depth: int | None = None,
        max_commands: int | None = None,
        scope: str | None = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Index documentation so research_api_usage and search_documentation can answer from it.

        Runs in the background: read its progress with get_job, or wait for it here.

        Args:
            uri: a git repository (https:// URL) or a folder the server allows; for the other kinds,
                the site's URL, the OpenAPI document's URL, or the program or distribution name.
            sdk_name: the SDK or tool the documentation is for, e.g. "requests"; leave it out for
                the organisation's own documents.
            sdk_version: the version it documents, e.g. "2.32.3" (needs sdk_name).
            ref: a git branch, tag or commit.
            document_type: e.g. "sdk_reference", "runbook" or "wiki".
            tags: labels to filter on later.
            visibility: private, teams, organization (default) or public (administrators only).
            kind: auto (git or folder), website (a crawl; needs sdk_name and sdk_version), openapi,
                cli (a program's --help on the server) or package (an installed Python
                distribution); cli and package are for administrators.
            scopes: kind cli only: the commands to walk, e.g. ["s3 cp", "s3api put-object"].
            wait_seconds: wait up to this long (0-120) for the job to finish before answering.
            category: a category to filter on later, e.g. "storage".
            max_pages: kind website: pages to fetch at most (within the server's limit).
            max_depth: kind website: links followed from the start URL; kind cli: subcommand depth.
            max_commands: kind cli: help pages to fetch at most.
            scope: kind website: the path prefix or URL the crawl stays under.

        Returns:
            The job: id, status (queued, running, succeeded, failed, cancelled, interrupted),
            progress (stage, done, total), and the ingest report (result) or error once finished.
        """
        with tool_errors():
            principal = tool_caller(lib, ctx)
            request = IngestRequest(
                uri=uri,
                sdk_name=sdk_name,
                sdk_version=sdk_version,
                ref=ref,
                document_type=document_type,
                category=category,
                tags=tuple(tags or ()),
                visibility=visibility,
                kind=kind,
                scopes=tuple(scopes or ()),
                max_pages=max_pages,
                max_depth=max_depth,
                max_commands=max_commands,
                scope=scope,
            )
            job = jobs.submit_ingest(principal, request, policy)
            if wait_seconds > 0:
                return jobs.wait(principal, job["id"], min(wait_seconds, MAX_WAIT_SECONDS))
            return job

    @server.tool(title="Refresh documentation", annotations=FETCHES)
    def refresh_source(
        source: str | None = None, due_only: bool = False, ctx: Context | None = None
    ) -> dict[str, Any]:
        """Ingest sources again in the background, incrementally: only what changed is re-indexed.

        Args:
            source: a source id, key prefix or URI (as list_sources gives them), or an SDK name, which
                selects every version of that SDK; leave it out for every source you may refresh.
            due_only: only the sources whose refresh interval has passed.

        Returns:
            The job (follow it with get_job): its result lists each source's outcome.
        """
        with tool_errors():
            return jobs.submit_refresh(tool_caller(lib, ctx), source, due_only=due_only)

    @server.tool(title="Set a refresh interval", annotations=WRITES_IDEMPOTENT)
    def set_refresh_interval(
        source: str, seconds: int | None = None, ctx: Context | None = None
    ) -> dict[str, Any]:
        """Set how often the server's scheduler refreshes sources (`librarian schedule`).

        Args:
            source: a source id, key prefix, URI or SDK name, as refresh_source takes it.
            seconds: seconds between refreshes (at least 60); omit it to use the server's default.

        Returns:
            The sources updated: {"sources": [{id, uri, refresh_interval_seconds, own_interval, ...}]}.
        """
        with tool_errors():
            updated = set_interval(lib, source, seconds, tool_caller(lib, ctx))
            return {"sources": [target.to_dict() for target in updated]}

    @server.tool(title="Rebuild the vector index", annotations=WRITES_IDEMPOTENT)
    def start_reindex(ctx: Context | None = None) -> dict[str, Any]:
        """Rebuild the vector index from the store in the background, e.g. after an embedding model change.

        Searches keep using the current index until the new one is complete. Only the server's own
        organisation's administrators may do it; one rebuild runs at a time.

        Returns:
            The job (follow it with get_job); its result names the new collection and its chunk count.
        """
        with tool_errors():
            return jobs.submit_reindex(tool_caller(lib, ctx))

    @server.tool(title="Measure retrieval quality", annotations=WRITES_IDEMPOTENT)
    def start_evaluation(kind: str, dataset: str, ctx: Context | None = None) -> dict[str, Any]:
        """Measure documentation search or tool discovery on a dataset folder on the server, in the
        background and in a throwaway store (nothing stored changes).

        Args:
            kind: "retrieval" (documentation search) or "tools" (tool discovery).
            dataset: a BEIR-layout folder (corpus.jsonl, queries.jsonl, qrels/test.tsv) under the
                server's allowed roots.

        Returns:
            The job (follow it with get_job); its result holds Hit@k, NDCG@10 and the latencies.
        """
        with tool_errors():
            return jobs.submit_eval(tool_caller(lib, ctx), kind, dataset, policy)

    @server.tool(title="Read a job", annotations=READ_ONLY)
    def get_job(job_id: str, wait_seconds: float = 0, ctx: Context | None = None) -> dict[str, Any]:
        """Read a background job (add_source) with its progress, and its report once finished.

        Args:
            job_id: the job's id, as add_source or list_jobs returned it.
            wait_seconds: wait up to this long (0-120) for it to finish before answering.

        Returns:
            id, kind, status, request, progress (stage, done, total), result, error, timestamps.
        """
        with tool_errors():
            principal = tool_caller(lib, ctx)
            if wait_seconds > 0:
                return jobs.wait(principal, job_id, min(wait_seconds, MAX_WAIT_SECONDS))
            return jobs.get(principal, job_id)

    @server.tool(title="List jobs", annotations=READ_ONLY)
    def list_jobs(
        status: str | None = None, before: int | None = None, limit: int = 20, ctx: Context | None = None
    ) -> dict[str, Any]:
        """List your organisation's background jobs, newest first.

        Args:
            status: only jobs in this status: queued, running, succeeded, failed, cancelled or interrupted.
            before: the cursor of the page to read (the previous answer's next_before).
            limit: how many jobs (1-200, default 20).

        Returns:
            `jobs` and `next_before` (null on the last page).
        """
        with tool_errors():
            return jobs.list_jobs(tool_caller(lib, ctx), status=status, before=before, limit=limit)

    @server.tool(title="Cancel a job", annotations=WRITES_IDEMPOTENT)
    def cancel_job(job_id: str, ctx: Context | None = None) -> dict[str, Any]:
        """Stop a queued or running job; what it already indexed stays searchable.

        Args:
            job_id: the job's id.

        Returns:
            The job, with cancel_requested set (status turns cancelled when it stops).
        """
        with tool_errors():
            return jobs.cancel(tool_caller(lib, ctx), job_id)

    @server.tool(title="Resume a job", annotations=FETCHES)
    def resume_job(job_id: str, ctx: Context | None = None) -> dict[str, Any]:
        """Run an interrupted, failed or cancelled job again; it skips what the first run finished.

        Args:
            job_id: the job's id.

        Returns:
            The new job, with resumed_from naming the old one.
        """
        with tool_errors():
            return jobs.resume(tool_caller(lib, ctx), job_id, policy)
