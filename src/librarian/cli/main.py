"""``librarian``: ingest documentation, search it, and keep the indexes healthy.

Exit codes: 0 success, 1 failure (message on stderr), 2 usage error, 3 finished but some inputs
failed (their paths and reasons are printed and kept for ``librarian sources``).
"""

from __future__ import annotations

import os
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from librarian.app import Librarian
from librarian.budget import MAX_CHARS, MAX_TOP_K, MIN_CHARS, fit
from librarian.catalog.policy import SourcePolicy
from librarian.cli import common
from librarian.cli.admin import admin_app
from librarian.cli.answers import print_search
from librarian.cli.catalog import delete_source, libraries, page
from librarian.cli.common import (
    EXIT_PARTIAL,
    OPTIONS,
    JsonOption,
    handle_errors,
    librarian,
    print_json,
    progress_bar,
    stderr,
    stdout,
)
from librarian.cli.connectors import crawl, ingest_cli, ingest_openapi, ingest_package
from librarian.cli.demo import demo
from librarian.cli.fixes import fixes_app
from librarian.cli.incidents import incidents_app, solutions_app
from librarian.cli.jobs import jobs_app
from librarian.cli.knowledge import knowledge_app
from librarian.cli.refresh import refresh, refresh_interval, schedule
from librarian.cli.research import feedback, research, sdks
from librarian.cli.runbooks import runbook_app
from librarian.cli.tools import tools_app
from librarian.cli.tour import tour
from librarian.cli.verbs import verbs_app
from librarian.cli.workflow import worker, workflow_app
from librarian.errors import InvalidInputError
from librarian.evaluation.retrieval import evaluate_retrieval
from librarian.evaluation.tools import evaluate_tools
from librarian.ingest.pipeline import IngestReport
from librarian.ingest.sources.git import version_from_ref
from librarian.server_file import remove_server_file, write_server_file

if TYPE_CHECKING:
    from fastapi import FastAPI

app = typer.Typer(
    name="librarian",
    help="A self-hosted knowledge service and self-correcting task runtime for AI agents.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
eval_app = typer.Typer(help="Measure retrieval quality.", no_args_is_help=True)
app.add_typer(eval_app, name="eval")
app.add_typer(workflow_app, name="workflow")
app.add_typer(admin_app, name="admin")
app.add_typer(knowledge_app, name="knowledge")
app.add_typer(incidents_app, name="incidents")
app.add_typer(solutions_app, name="solutions")
app.add_typer(runbook_app, name="runbook")
app.add_typer(tools_app, name="tools")
app.add_typer(verbs_app, name="verbs")
app.add_typer(jobs_app, name="jobs")
app.add_typer(fixes_app, name="fixes")
app.command("worker")(worker)


@app.callback()
def main(
    home: Annotated[
        Path | None, typer.Option("--home", help="Data directory (default ./.librarian or LIBRARIAN_HOME).")
    ] = None,
    config: Annotated[
        Path | None, typer.Option("--config", help="TOML config file (default LIBRARIAN_CONFIG).")
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            envvar="LIBRARIAN_TOKEN",
            help="Act as this API token's user (default: the operator of this data directory).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Global options, read before any command."""
    OPTIONS.home = home
    OPTIONS.config = config
    OPTIONS.token = token


@app.command()
def ingest(
    target: Annotated[str, typer.Argument(help="A file, a folder, or a git repository (URL or path).")],
    sdk: Annotated[str | None, typer.Option("--sdk", help="SDK name (SDK documentation only).")] = None,
    version: Annotated[str | None, typer.Option("--version", help="SDK version the docs describe.")] = None,
    ref: Annotated[
        list[str] | None,
        typer.Option(
            "--ref",
            help="git tag, branch or commit; repeat it to ingest several tags as versions of one SDK.",
        ),
    ] = None,
    doc_type: Annotated[str | None, typer.Option("--type", help="Document type, e.g. runbook.")] = None,
    category: Annotated[str | None, typer.Option("--category", help="Category label.")] = None,
    tag: Annotated[list[str] | None, typer.Option("--tag", help="Tag (repeatable).")] = None,
    as_json: JsonOption = False,
) -> None:
    """Ingest documentation; unchanged files are skipped, changed ones re-chunked, deleted ones removed.

    With several ``--ref`` each ref becomes a version of the SDK named after it (``v2.1.0`` -> 2.1.0).
    """
    refs: list[str | None] = list(ref) if ref else [None]
    with handle_errors():
        if len(refs) > 1 and (version is not None or sdk is None):
            raise InvalidInputError(
                "several --ref need --sdk and no --version: each ref names its own version",
                hint="e.g. librarian ingest REPO --sdk mytool --ref v1.0.0 --ref v2.0.0",
            )
    reports = []
    with librarian() as lib, progress_bar("ingesting", enabled=not as_json) as progress:
        for one_ref in refs:
            reports.append(
                lib.ingest(
                    target,
                    sdk_name=sdk,
                    sdk_version=version_from_ref(one_ref) if len(refs) > 1 and one_ref else version,
                    ref=one_ref,
                    document_type=doc_type,
                    category=category,
                    tags=tuple(tag or ()),
                    progress=progress,
                )
            )
    if as_json:
        print_json(reports[0].to_dict() if len(reports) == 1 else [r.to_dict() for r in reports])
    for report in reports:
        _print_ingest(report, as_json)
    if any(report.problems for report in reports):
        raise typer.Exit(EXIT_PARTIAL)


def _print_ingest(report: IngestReport, as_json: bool) -> None:
    if not as_json:
        stdout.print(
            f"[bold]{escape(report.uri)}[/]: {report.status} — {report.files_seen} files, "
            f"{report.added} added, {report.updated} updated, {report.unchanged} unchanged, "
            f"{report.deleted} deleted, {report.failed} failed; {report.chunks_written} chunks "
            f"in {report.seconds:.1f} s",
            highlight=False,
        )
        for problem in report.problems:
            stderr.print(
                f"[yellow]skipped[/] {escape(problem['path'])}: {escape(problem['reason'])}", highlight=False
            )


@app.command()
def search(
    query: Annotated[str, typer.Argument(help="What you are looking for, in natural language.")],
    sdk: Annotated[str | None, typer.Option("--sdk", help="Only this SDK.")] = None,
    version: Annotated[str | None, typer.Option("--version", help="Only this SDK version.")] = None,
    doc_type: Annotated[str | None, typer.Option("--type", help="Only this document type.")] = None,
    category: Annotated[str | None, typer.Option("--category", help="Only this category.")] = None,
    tag: Annotated[
        list[str] | None, typer.Option("--tag", help="Only chunks with this tag (repeatable).")
    ] = None,
    since: Annotated[
        datetime | None, typer.Option("--since", help="Only chunks fetched at or after this date.")
    ] = None,
    top_k: Annotated[int, typer.Option("--top-k", min=1, max=MAX_TOP_K, help="How many results.")] = 5,
    max_chars: Annotated[
        int | None,
        typer.Option(
            "--max-chars", min=MIN_CHARS, max=MAX_CHARS, help="Budget: the most characters of results."
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Hybrid search; each result names its SDK, version, entity and source."""
    with librarian() as lib:
        results = lib.search(
            query,
            sdk_name=sdk,
            sdk_version=version,
            document_type=doc_type,
            category=category,
            tags=tuple(tag or ()),
            fetched_after=since,
            top_k=top_k,
        )
    shown, trimmed = fit([result.to_dict() for result in results], max_chars)
    if trimmed:
        stderr.print(f"[dim]budget of {max_chars} characters: {trimmed['dropped']} results left out[/]")
    if as_json:
        print_json(shown)
        return
    print_search(stdout, shown)


@app.command()
def sources(as_json: JsonOption = False) -> None:
    """List sources with the outcome and errors of their last ingest."""
    with librarian() as lib:
        rows = lib.sources()
    if as_json:
        print_json(rows)
        return
    table = Table("id", "source", "sdk", "status", "files", "last ingest")
    for row in rows:
        stats = row["last_stats"]
        table.add_row(
            str(row["id"]),
            escape(row["uri"] + (f" @ {row['ref']}" if row["ref"] else "")),
            escape(" ".join(filter(None, [row["sdk_name"], row["sdk_version"]]))),
            row["last_status"] or "",
            str(stats.get("files_seen", "")),
            row["last_ingested_at"] or "",
        )
    stdout.print(table)
    for row in rows:
        for error in row["last_errors"]:
            stdout.print(f"[yellow]source {row['id']}[/] {escape(error['path'])}: {escape(error['reason'])}")


@app.command()
def stats(as_json: JsonOption = False) -> None:
    """Counts of sources, documents, chunks, and the vector index state."""
    with librarian() as lib:
        data = lib.stats()
    if as_json:
        print_json(data)
        return
    for key in ("sources", "documents", "document_versions", "chunks", "pending_index_updates"):
        stdout.print(f"{key:>22}: {data[key]}")
    index = data["vector_index"]
    described = f"{index['collection']} ({index['model_version']})" if index else "none yet"
    stdout.print(f"{'vector index':>22}: {described}")
    stdout.print(f"{'database':>22}: {data['database_url']}")
    stdout.print(f"{'vectors':>22}: {data['vector_url']}")
    for row in data["chunks_per_sdk"]:
        stdout.print(
            f"{'':>22}  {row['sdk_name'] or '(no sdk)'} {row['sdk_version'] or ''}: {row['chunks']} chunks"
        )


@app.command()
def reindex(as_json: JsonOption = False) -> None:
    """Rebuild the vector index from the store (also how a new embedding model is rolled out)."""
    with librarian() as lib, progress_bar("reindexing", enabled=not as_json) as progress:
        result = lib.reindex(lambda done, total: progress("chunks", done, total))
    if as_json:
        print_json(result)
    else:
        stdout.print(f"rebuilt {result['collection']}: {result['chunks']} chunks in {result['seconds']} s")


@eval_app.command("retrieval")
def eval_retrieval(
    dataset: Annotated[
        Path, typer.Argument(help="BEIR folder: corpus.jsonl, queries.jsonl, qrels/test.tsv.")
    ],
    no_learning: Annotated[
        bool,
        typer.Option("--no-learning", help="Only the cold figures: record no feedback from the learn half."),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Index a BEIR dataset in a throwaway store and report Hit@k, Recall@k, NDCG@10, MRR@10, latency.

    The first table is every query, cold. Then the queries are split by a hash of their id: the
    learn half is recorded as helpful feedback, and the second table shows the other half before
    and after (learning from use, measured on queries it never saw).
    """
    with common.handle_errors(), progress_bar("evaluating", enabled=not as_json) as progress:
        metrics = evaluate_retrieval(
            dataset, common.load_settings(), learn=not no_learning, progress=progress
        )
    if as_json:
        print_json(metrics)
        return
    learned = metrics.pop("learned", None)
    table = Table("metric", "value")
    for key, value in metrics.items():
        table.add_row(key, str(value))
    stdout.print(table)
    if learned is not None:
        halves = Table("held-apart queries", "cold", "after learning")
        for key in learned["cold"]:
            halves.add_row(key, str(learned["cold"][key]), str(learned["learned"][key]))
        stdout.print(halves)
        stdout.print(
            f"{learned['queries_test']} test queries, {learned['queries_learned']} learned "
            f"({learned['feedback_recorded']} helpful verdicts); split: {learned['split']}"
        )


@eval_app.command("tools")
def eval_tools(
    dataset: Annotated[
        Path,
        typer.Argument(
            help="BEIR folder of tools: corpus.jsonl (one tool each), queries.jsonl, qrels/test.tsv."
        ),
    ],
    no_learning: Annotated[
        bool, typer.Option("--no-learning", help="Only the cold figures: record nothing from the learn half.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Register a BEIR tool set in a throwaway store and report tool discovery on held-apart queries.

    Queries are split by a hash of their id: the learn half is recorded as use (as agents report
    their choices), every figure is measured on the other half, before (cold) and after learning:
    Hit@1/3/5/10, Recall@5, COMP@5, NDCG@10, MRR@10, latency, and how confidence tracks precision.
    """
    with common.handle_errors():
        result = evaluate_tools(dataset, common.load_settings(), learn=not no_learning)
    if as_json:
        print_json(result)
        return
    phases = [phase for phase in ("cold", "learned") if phase in result]
    table = Table("metric", *phases)
    for key in result["cold"]:
        if key != "calibration":
            table.add_row(key, *(str(result[phase].get(key, "-")) for phase in phases))
    stdout.print(table)
    stdout.print(
        f"{result['tools']} tools, {result['queries_test']} test queries, {result['queries_learned']} "
        f"learned; coverage@5 {result['coverage@5']} %; split: {result['split']}"
    )


# What remote callers (POST /sources, MCP's add_source) may ask the server to ingest.
AllowPaths = Annotated[
    list[Path] | None,
    typer.Option("--allow-path", help="Local folder POST /sources and add_source may ingest (repeatable)."),
]
AllowPrivateUrls = Annotated[
    bool,
    typer.Option(
        "--allow-private-urls", help="Let remote callers' sources clone from loopback/private hosts."
    ),
]
AllowSshSources = Annotated[
    bool,
    typer.Option(
        "--allow-ssh-sources", help="Let remote callers' sources clone over ssh (never with your keys)."
    ),
]


def _source_policy(lib: Librarian, paths: list[Path] | None, private: bool, ssh: bool) -> SourcePolicy:
    return SourcePolicy.of(
        paths or (),
        allow_private=private,
        allow_ssh=ssh,
        allowed_private_hosts=lib.settings.allowed_private_hosts,
    )


@app.command()
def serve(
    host: Annotated[str, typer.Option("--host", help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="Port to listen on.")] = 8000,
    allow_path: AllowPaths = None,
    mcp: Annotated[
        bool, typer.Option("--mcp/--no-mcp", help="Also serve MCP over streamable HTTP at /mcp.")
    ] = True,
    allow_private_urls: AllowPrivateUrls = False,
    allow_ssh_sources: AllowSshSources = False,
) -> None:
    """Serve the REST API (OpenAPI at /docs) and, by default, MCP over streamable HTTP at /mcp."""
    import uvicorn

    from librarian.api import create_app
    from librarian.api.auth import serve_warning
    from librarian.mcp import create_mcp_server, mount_streamable_http

    with librarian() as lib:
        warning = serve_warning(host, lib.settings, has_tokens=lib.identity.has_tokens())
        if warning:
            stderr.print(f"[bold yellow]warning:[/] {escape(warning)}", highlight=False)
        api = create_app(
            lib,
            allowed_roots=allow_path or (),
            allow_private=allow_private_urls,
            allow_ssh=allow_ssh_sources,
        )
        if mcp:
            policy = _source_policy(lib, allow_path, allow_private_urls, allow_ssh_sources)
            mount_streamable_http(api, create_mcp_server(lib, policy), host=host)
        # Runbook runs whose process died go on here; waits past their deadline time out.
        lib.runbooks.start_sweeper()
        if lib.settings.embedding_server_warm_up:
            lib.cache.warm_up_in_background()  # queries go on with NumPy until PyTorch is ready
        # Workflows a previous server left running go on (their tasks in flight are dispatched again).
        lib.workflows.resume_running()
        # Bound here, not by uvicorn, so a port in use is one clear error instead of a log line.
        listener = _listen(host, port)
        _advertise(api, lib.settings.home, _local_url(host, listener.getsockname()[1]))
        uvicorn.Server(uvicorn.Config(api, host=host, port=port)).run(sockets=[listener])


def _advertise(api: FastAPI, home: Path, url: str) -> None:
    """Leave the server's address in ``home`` while it serves, for one-shot CLI commands (cli/fast.py).

    Written and removed by the app's lifespan: uvicorn re-raises SIGTERM once it has shut down, so
    code after ``Server.run`` would never run.
    """
    previous = api.router.lifespan_context

    @asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[Any]:
        async with previous(app) as state:
            write_server_file(home, url)
            try:
                yield state
            finally:
                remove_server_file(home)

    api.router.lifespan_context = lifespan


def _local_url(host: str, port: int) -> str:
    """How a client on this machine reaches a server bound to ``host``."""
    if host in ("0.0.0.0", ""):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _listen(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port``.

    Raises:
        InvalidInputError: the address is in use, not this machine's, or not allowed.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host, port), family=family, backlog=2048)
    except (OSError, OverflowError) as exc:
        why = os.strerror(exc.errno) if isinstance(exc, OSError) and exc.errno else str(exc)
        raise InvalidInputError(
            f"cannot listen on {host}:{port}: {why}", hint="choose another --host or --port"
        ) from exc


@app.command(name="mcp")
def mcp_stdio(
    allow_path: AllowPaths = None,
    allow_private_urls: AllowPrivateUrls = False,
    allow_ssh_sources: AllowSshSources = False,
) -> None:
    """Serve MCP over stdio, for agents that launch Librarian as a subprocess.

    The agent's add_source tool takes public git URLs, and local folders only under --allow-path.
    """
    from librarian.mcp import run_stdio

    with librarian() as lib:
        run_stdio(lib, _source_policy(lib, allow_path, allow_private_urls, allow_ssh_sources))


app.command()(tour)
app.command()(demo)
app.command()(research)
app.command()(sdks)
app.command()(feedback)
app.command()(refresh)
app.command()(schedule)
app.command("refresh-interval")(refresh_interval)
app.command("ingest-cli")(ingest_cli)
app.command("ingest-package")(ingest_package)
app.command("ingest-openapi")(ingest_openapi)
app.command("crawl")(crawl)
app.command("delete-source")(delete_source)
app.command()(page)
app.command()(libraries)

if __name__ == "__main__":  # pragma: no cover
    app()
