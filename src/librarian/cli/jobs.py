"""``librarian jobs``: the background ingests and refreshes started over REST or MCP (``lib.jobs``)."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from librarian.catalog.jobs import MAX_PAGE
from librarian.cli.common import JsonOption, librarian, print_json, stdout

jobs_app = typer.Typer(help="Background ingest jobs: list, show, cancel, resume.", no_args_is_help=True)
JobId = Annotated[str, typer.Argument(help="The job's id (from `librarian jobs list`).")]


@jobs_app.command("list")
def list_jobs(
    status: Annotated[str | None, typer.Option(help="Only jobs in this status.")] = None,
    before: Annotated[int | None, typer.Option(min=1, help="The cursor of the page to show.")] = None,
    limit: Annotated[int, typer.Option(min=1, max=MAX_PAGE, help="How many jobs.")] = 20,
    as_json: JsonOption = False,
) -> None:
    """The organisation's jobs, newest first."""
    with librarian() as lib:
        page = lib.jobs.list_jobs(lib.default_principal, status=status, before=before, limit=limit)
    if as_json:
        print_json(page)
        return
    table = Table("id", "kind", "status", "source", "progress", "created")
    for job in page["jobs"]:
        table.add_row(
            job["id"],
            job["kind"],
            job["status"],
            escape(str(job["request"].get("uri") or job["request"].get("selector") or "")),
            _progress(job["progress"]),
            job["created_at"] or "",
        )
    stdout.print(table)
    if page["next_before"] is not None:
        stdout.print(f"next page: librarian jobs list --before {page['next_before']}")


@jobs_app.command("show")
def show(job_id: JobId, as_json: JsonOption = False) -> None:
    """One job: its request, progress, and report or error."""
    with librarian() as lib:
        _print(lib.jobs.get(lib.default_principal, job_id), as_json)


@jobs_app.command("cancel")
def cancel(job_id: JobId, as_json: JsonOption = False) -> None:
    """Stop a queued or running job; what it already indexed stays."""
    with librarian() as lib:
        _print(lib.jobs.cancel(lib.default_principal, job_id), as_json)


@jobs_app.command("resume")
def resume(job_id: JobId, as_json: JsonOption = False) -> None:
    """Run an interrupted, failed or cancelled job again (it skips what was done) and wait for it."""
    with librarian() as lib:
        job = lib.jobs.resume(lib.default_principal, job_id)
        # The job runs in this process: wait, or it would be interrupted when the command exits.
        _print(lib.jobs.wait(lib.default_principal, job["id"], timeout=24 * 3600), as_json)


def _print(job: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print_json(job)
        return
    stdout.print(f"[bold]{job['id']}[/] {job['kind']} [cyan]{job['status']}[/] {_progress(job['progress'])}")
    request = job["request"]
    stdout.print(f"  {escape(str(request.get('uri') or request.get('selector') or ''))}")
    if job["error"]:
        stdout.print(f"  [red]{escape(str(job['error'].get('message')))}[/]")
    if job["result"]:
        stdout.print(f"  {escape(str({k: v for k, v in job['result'].items() if not isinstance(v, list)}))}")


def _progress(progress: dict[str, Any]) -> str:
    if not progress:
        return ""
    return f"{progress.get('stage', '')} {progress.get('done', 0)}/{progress.get('total', 0)}"
