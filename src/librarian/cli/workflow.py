"""CLI of the task runtime: ``librarian workflow plan|run|status|list|cancel|answer``, ``librarian worker``.

Exit codes: 0 success, 1 the workflow failed or was cancelled (or an error), 4 the workflow is paused
with a question for you (answer it with ``librarian workflow answer ID "..."``).
"""

from __future__ import annotations

import importlib
import json
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Annotated, Any

import typer
import yaml
from rich.markup import escape
from rich.table import Table

from librarian.cli.common import EXIT_FAILURE, JsonOption, handle_errors, load_settings, print_json, stdout
from librarian.config import Settings
from librarian.errors import InvalidInputError
from librarian.llm import create_llm
from librarian.runtime.correctors import Corrector
from librarian.runtime.engine import Runtime, remote_broker
from librarian.runtime.executors.registry import build_registry
from librarian.runtime.planner import plan_workflow
from librarian.runtime.report import WorkflowReport
from librarian.runtime.worker import ROLES, Role, Services, WorkerGroup

workflow_app = typer.Typer(help="Run workflows of tasks (DAGs) with self-correction.", no_args_is_help=True)

CorrectorsOption = Annotated[
    str | None,
    typer.Option(
        "--correctors",
        help=(
            "module:attribute of a callable returning the correction strategies "
            "(default: the self-correcting loop, then the built-in missing-path strategy)."
        ),
    ),
]
WaitOption = Annotated[
    bool,
    typer.Option("--wait/--no-wait", help="Wait for the workflow to end (embedded mode always waits)."),
]
TimeoutOption = Annotated[float | None, typer.Option("--timeout", help="Give up waiting after SECONDS.")]
EXIT_PAUSED = 4


@contextmanager
def runtime(correctors: str | None = None, *, correcting: bool = False) -> Iterator[Runtime]:
    """Open the runtime for one command; LibrarianErrors become a message on stderr and exit 1.

    Commands that run tasks (``correcting``) get the correction strategies: ``correctors`` when
    given, else the self-correcting loop over the documentation in the same home, which learns
    verified fixes when each workflow ends (``CorrectorRegistry.workflow_finished``).
    """
    with handle_errors():
        settings = load_settings()
        strategies = _correctors(correctors, settings) if correcting else None
        engine = Runtime(settings, correctors=strategies)
        try:
            yield engine
        finally:
            engine.close()
            for strategy in strategies or []:
                close = getattr(strategy, "close", None)
                if callable(close):
                    close()


def _correctors(reference: str | None, settings: Settings) -> list[Corrector]:
    if reference:
        return _load_correctors(reference)
    from librarian.correction.loop import loop_correctors

    return loop_correctors(settings)


@workflow_app.command("run")
def run(
    file: Annotated[Path, typer.Argument(help="Workflow file (YAML or JSON).")],
    wait: WaitOption = False,
    timeout: TimeoutOption = None,
    correctors: CorrectorsOption = None,
    idempotency_key: Annotated[
        str | None,
        typer.Option(
            "--idempotency-key",
            help="Submitting again with this key returns the first workflow instead of a second one.",
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Submit a workflow; exit code 1 when it ends failed or cancelled, 4 when it asks a question."""
    with runtime(correctors, correcting=True) as engine:
        spec = engine.load(file)
        # Embedded workers live in this process: returning early would abandon the workflow.
        must_wait = wait or engine.embedded
        report = engine.run(spec, wait=must_wait, timeout=timeout, idempotency_key=idempotency_key)
    _finish(report, as_json)


@workflow_app.command("resume")
def resume(
    workflow_id: Annotated[str, typer.Argument(help="Id of the running workflow whose process died.")],
    wait: WaitOption = False,
    timeout: TimeoutOption = None,
    correctors: CorrectorsOption = None,
    as_json: JsonOption = False,
) -> None:
    """Go on with a workflow whose process died (e.g. killed): its unfinished tasks run again."""
    with runtime(correctors, correcting=True) as engine:
        report = _followed(engine, engine.resume(workflow_id), wait, timeout)
    _finish(report, as_json)


@workflow_app.command("plan")
def plan(
    goal: Annotated[str, typer.Argument(help="What the workflow must achieve, in words.")],
    context: Annotated[
        str | None,
        typer.Option("--context", help="Facts the planner should know: tools and versions, names, hosts."),
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output", "-o", help="Save the workflow to FILE (.json, else YAML) to review and run."
        ),
    ] = None,
    run_now: Annotated[bool, typer.Option("--run", help="Run the planned workflow at once.")] = False,
    wait: WaitOption = False,
    timeout: TimeoutOption = None,
    correctors: CorrectorsOption = None,
    as_json: JsonOption = False,
) -> None:
    """Plan a workflow for GOAL with the configured LLM (LIBRARIAN_LLM_*); print it, save it or --run it.

    Without an LLM the workflow is written as a file (docs/runtime.md) and run with `workflow run`.
    """
    with handle_errors():
        settings = load_settings()
        llm = create_llm(settings)
        if llm is None:
            raise InvalidInputError(
                "planning from a goal needs an LLM, and llm_provider is 'none'",
                hint="set LIBRARIAN_LLM_PROVIDER, LIBRARIAN_LLM_URL and LIBRARIAN_LLM_MODEL, or write "
                "the workflow as a YAML file and run it with `librarian workflow run FILE`",
            )
        try:
            spec = plan_workflow(
                llm, goal, known_executor_types=build_registry(settings).executor_types(), context=context
            )
        finally:
            llm.close()
        document = spec.to_dict()
        if output is not None:
            text = json.dumps(document, indent=2) if output.suffix.lower() == ".json" else _yaml(document)
            try:
                output.write_text(text + ("" if text.endswith("\n") else "\n"), encoding="utf-8")
            except OSError as exc:
                raise InvalidInputError(f"cannot write the workflow to {output}: {exc.strerror}") from exc
    if not run_now:
        if as_json:
            print_json(document)
        elif output is None:
            typer.echo(_yaml(document), nl=False)  # plain: rich would wrap long lines and break the YAML
        else:
            stdout.print(f"planned {len(spec.tasks)} tasks; saved to {escape(str(output))}")
        return
    with runtime(correctors, correcting=True) as engine:
        report = engine.run(spec, wait=wait or engine.embedded, timeout=timeout)
    _finish(report, as_json)


def _yaml(document: dict[str, Any]) -> str:
    return yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=100)


@workflow_app.command("answer")
def answer(
    workflow_id: Annotated[str, typer.Argument(help="Id of the paused workflow.")],
    text: Annotated[str, typer.Argument(help="Your answer to its question.")],
    wait: WaitOption = False,
    timeout: TimeoutOption = None,
    correctors: CorrectorsOption = None,
    as_json: JsonOption = False,
) -> None:
    """Answer the question a paused workflow asked; it resumes with the answer given to its correctors."""
    with runtime(correctors, correcting=True) as engine:
        report = _followed(engine, engine.answer(workflow_id, text), wait, timeout)
    _finish(report, as_json)


@workflow_app.command("status")
def status(
    workflow_id: Annotated[str, typer.Argument(help="Workflow id (from `workflow run` or `workflow list`).")],
    as_json: JsonOption = False,
) -> None:
    """The workflow's DAG as a tree: statuses, retries, rewards and inserted corrective tasks."""
    with runtime() as engine:
        report = engine.status(workflow_id)
    _show(report, as_json)


@workflow_app.command("list")
def list_workflows(
    limit: Annotated[int, typer.Option("--limit", min=1, help="Show at most N workflows.")] = 50,
    as_json: JsonOption = False,
) -> None:
    """Workflows, newest first."""
    with runtime() as engine:
        rows = engine.list(limit)
    if as_json:
        print_json(rows)
        return
    table = Table("workflow id", "name", "status", "reward", "created")
    for row in rows:
        table.add_row(
            row["workflow_id"],
            escape(row["name"]),
            row["status"],
            f"{row['total_reward']:+.2f}",
            row["created_at"],
        )
    stdout.print(table)


@workflow_app.command("cancel")
def cancel(
    workflow_id: Annotated[str, typer.Argument(help="Workflow id.")],
    as_json: JsonOption = False,
) -> None:
    """Cancel a running workflow: nothing new is dispatched; running attempts finish."""
    with runtime() as engine:
        report = engine.cancel(workflow_id)
    if as_json:
        print_json({"workflow_id": report.workflow_id, "status": report.status})
    else:
        stdout.print(f"workflow {report.workflow_id} is {report.status}", highlight=False)


def worker(
    role: Annotated[str, typer.Option("--role", help=f"One of {', '.join(ROLES)}.")] = "all",
    threads: Annotated[
        int | None, typer.Option("--threads", min=1, help="Executor threads (default runtime_workers).")
    ] = None,
    evaluators: Annotated[
        int,
        typer.Option(
            "--evaluators",
            min=1,
            help="Evaluator threads; one applies what is waiting in batches, more help a slow database.",
        ),
    ] = 1,
    prefetch: Annotated[
        int | None,
        typer.Option(
            "--prefetch",
            min=1,
            max=100,
            help=(
                "Dispatch messages each executor thread holds; above 1, their results go out together "
                "(default runtime_executor_prefetch: 1; raise it for short tasks only)."
            ),
        ),
    ] = None,
    correctors: CorrectorsOption = None,
) -> None:
    """Run runtime roles against LIBRARIAN_DATABASE_URL and LIBRARIAN_BROKER_URL until interrupted."""
    with handle_errors():
        if role not in ROLES:
            raise InvalidInputError(f"unknown worker role {role!r}", hint=f"use one of {', '.join(ROLES)}")
        settings = load_settings()
        if not settings.broker_url:
            raise InvalidInputError(
                "librarian worker needs a broker shared with the submitters",
                hint="set LIBRARIAN_BROKER_URL=amqp://user:pass@host:5672/ (embedded mode needs no worker)",
            )
        engine = Runtime(settings, correctors=_correctors(correctors, settings))
        broker = remote_broker(settings)
        group = WorkerGroup(
            Services(settings, engine.sessions, broker, engine.correctors, engine.corrector_timeout_seconds)
        )
        _stop_on_signals(group)
        held = prefetch or settings.runtime_executor_prefetch
        typed_role: Role = role
        group.start(
            typed_role,
            executor_threads=threads or settings.runtime_workers,
            evaluator_threads=evaluators,
            executor_prefetch=held,
        )
        runs_tasks = role in ("executor", "all")
        launcher = f"; tasks start through {group.services.environment.launcher}" if runs_tasks else ""
        batches = f"; each executor holds up to {held} tasks" if runs_tasks and held > 1 else ""
        stdout.print(f"worker running ({role}{launcher}{batches}); Ctrl-C to stop", highlight=False)
        try:
            group.wait()
        finally:
            group.stop()
            broker.close()
            engine.close()


def _load_correctors(reference: str) -> list[Corrector]:
    module_name, _, attribute = reference.partition(":")
    if not module_name or not attribute:
        raise InvalidInputError(f"--correctors {reference!r} must be module:attribute")
    try:
        factory: Any = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise InvalidInputError(f"cannot load correctors from {reference!r}: {exc}") from exc
    return list(factory())


def _stop_on_signals(group: WorkerGroup) -> None:
    def stop(_signum: int, _frame: FrameType | None) -> None:
        group.stop_event.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)


def _followed(engine: Runtime, report: WorkflowReport, wait: bool, timeout: float | None) -> WorkflowReport:
    """``report``, or the workflow's end when asked to wait (embedded workers live in this process)."""
    if wait or engine.embedded:
        return engine.wait(report.workflow_id, timeout=timeout)
    return report


def _finish(report: WorkflowReport, as_json: bool) -> None:
    """Show the report, then exit with the code its status calls for."""
    _show(report, as_json)
    if report.status == "paused":
        raise typer.Exit(EXIT_PAUSED)
    if report.finished and report.status != "success":
        raise typer.Exit(EXIT_FAILURE)


def _show(report: WorkflowReport, as_json: bool) -> None:
    if as_json:
        print_json(report.to_dict())
        return
    stdout.print(report.tree())
