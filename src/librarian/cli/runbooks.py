"""``librarian runbook``: store, validate, find, run and track runbooks (``lib.runbooks``).

Exit codes of the commands that move an execution (``run``, ``step``, ``answer``, ``approve``,
``resume``): 0 the execution completed (or, step by step, its next step is ready), 1 it failed or was
cancelled (or an error), 4 it waits for someone: the command to answer or approve it is printed.
``validate`` exits 1 when the file is not a valid runbook, ``import`` 3 when some files were refused.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from librarian.cli.common import (
    EXIT_FAILURE,
    EXIT_PARTIAL,
    JsonOption,
    handle_errors,
    librarian,
    print_json,
    stdout,
)
from librarian.cli.runbook_output import (
    history_table,
    print_dry_run,
    print_execution,
    print_import_report,
    print_matches,
    print_runbook,
    print_stats,
    print_validation,
    proposals_table,
    runbooks_table,
    versions_table,
)
from librarian.cli.workflow import EXIT_PAUSED
from librarian.errors import InvalidInputError

runbook_app = typer.Typer(
    help="Runbooks: add and version them, find the right one, run them step by step, track how they do.",
    no_args_is_help=True,
)

RunbookId = Annotated[int, typer.Argument(help="The runbook's id (see `librarian runbook list`).")]
ExecutionId = Annotated[str, typer.Argument(help="The execution's id (printed by `librarian runbook run`).")]
Visibility = Annotated[
    str | None,
    typer.Option("--visibility", help="private, teams, organization (default) or public (admins)."),
]
Variables = Annotated[
    list[str] | None,
    typer.Option("--var", help="A variable of the run as NAME=VALUE; repeat for several."),
]
Version = Annotated[int | None, typer.Option("--version", help="An earlier version (default: current).")]


def _pairs(values: list[str] | None, option: str) -> dict[str, str]:
    """``NAME=VALUE`` options as a dict.

    Raises:
        InvalidInputError: an item has no ``=`` or no name, naming the option and the item.
    """
    pairs: dict[str, str] = {}
    for item in values or ():
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise InvalidInputError(
                f"{option} {item!r}: give NAME=VALUE", hint=f"e.g. {option} host=db1 (repeat for several)"
            )
        pairs[name.strip()] = value
    return pairs


# -- the catalog ------------------------------------------------------------------------------------


@runbook_app.command("add")
def add(
    file: Annotated[Path, typer.Argument(help="The runbook file (YAML or JSON).")],
    visibility: Visibility = None,
    as_json: JsonOption = False,
) -> None:
    """Store a runbook; a runbook with the same name gets a new version (unchanged text makes none)."""
    with librarian() as lib:
        view = lib.runbooks.add_file(lib.default_principal, file, visibility=visibility)
    if as_json:
        print_json(view)
        return
    stdout.print(
        f"runbook {view['id']} [bold]{escape(view['name'])}[/]: {view['change'].replace('_', ' ')} "
        f"(version {view['version']}, {len(view['steps'])} steps)",
        highlight=False,
    )


@runbook_app.command("import")
def import_runbooks(
    path: Annotated[
        Path, typer.Argument(help="A folder of runbook files (.yaml, .yml, .json), or one file.")
    ],
    visibility: Visibility = None,
    as_json: JsonOption = False,
) -> None:
    """Add every runbook file of a folder; a bad file is reported with its problems, the rest go on."""
    with librarian() as lib:
        report = lib.runbooks.catalog.import_path(lib.default_principal, path, visibility=visibility)
    if as_json:
        print_json(report)
    else:
        print_import_report(report)
    if report["errors"]:
        raise typer.Exit(EXIT_PARTIAL)


@runbook_app.command("validate")
def validate(
    file: Annotated[Path, typer.Argument(help="The runbook file (YAML or JSON).")],
    as_json: JsonOption = False,
) -> None:
    """Check a runbook file without storing it; every problem names its step and field (exit 1 if any)."""
    with librarian() as lib:
        result = lib.runbooks.validate_file(file)
    if as_json:
        print_json(result)
    else:
        print_validation(file, result)
    if not result["valid"]:
        raise typer.Exit(EXIT_FAILURE)


@runbook_app.command("list")
def list_runbooks(
    category: Annotated[str | None, typer.Option("--category", help="Only this category.")] = None,
    tag: Annotated[str | None, typer.Option("--tag", help="Only runbooks with this tag.")] = None,
    include_inactive: Annotated[bool, typer.Option("--all", help="Include retired runbooks.")] = False,
    limit: Annotated[int, typer.Option("--limit", help="At most this many (1-1000).")] = 100,
    as_json: JsonOption = False,
) -> None:
    """Runbooks you may read, by name, with how often they ran and how well."""
    with librarian() as lib:
        rows = lib.runbooks.catalog.list_runbooks(
            lib.default_principal,
            category=category,
            tag=tag,
            include_inactive=include_inactive,
            limit=limit,
        )
    if as_json:
        print_json(rows)
        return
    if not rows:
        stdout.print("no runbooks yet: add one with `librarian runbook add FILE`", style="yellow")
        return
    stdout.print(runbooks_table(rows))


@runbook_app.command("show")
def show(runbook_id: RunbookId, version: Version = None, as_json: JsonOption = False) -> None:
    """A runbook: its variables, each step (what it does and where it leads) and its statistics."""
    with librarian() as lib:
        principal = lib.default_principal
        view = lib.runbooks.catalog.get(principal, runbook_id, version)
        if as_json:
            print_json(view)
            return
        # Nothing runs: the dry run only tells where each step's outcomes lead.
        outcomes = {
            step["step"]: step["outcomes"]
            for step in lib.runbooks.dry_run(principal, runbook_id, version=version)["steps"]
        }
        stats = lib.runbooks.stats(principal, runbook_id)
    print_runbook(view, outcomes)
    print_stats(stats)


@runbook_app.command("versions")
def versions(runbook_id: RunbookId, as_json: JsonOption = False) -> None:
    """Every version of a runbook, newest first."""
    with librarian() as lib:
        rows = lib.runbooks.catalog.versions(lib.default_principal, runbook_id)
    if as_json:
        print_json(rows)
        return
    stdout.print(versions_table(rows))


@runbook_app.command("find")
def find(
    problem: Annotated[str, typer.Argument(help="The problem in plain words.")] = "",
    topic: Annotated[str | None, typer.Option("--topic", help="What the runbook is about.")] = None,
    limit: Annotated[int, typer.Option("--limit", help="How many matches (1-50).")] = 5,
    as_json: JsonOption = False,
) -> None:
    """The runbooks that fit a problem, best first, each with its score and why it matched."""
    with handle_errors():
        if not problem.strip() and not (topic or "").strip():
            raise InvalidInputError(
                "give the problem to match, or --topic", hint='e.g. librarian runbook find "disk full on db1"'
            )
    with librarian() as lib:
        found = lib.runbooks.find(
            lib.default_principal, topic=topic, problem_description=problem or None, limit=limit
        )
    if as_json:
        print_json(found)
        return
    if not found["matches"]:
        stdout.print("no runbook matches", style="yellow")
        return
    print_matches(found)


# -- running ----------------------------------------------------------------------------------------


@runbook_app.command("dry-run")
def dry_run(
    runbook_id: RunbookId,
    var: Variables = None,
    assume: Annotated[
        list[str] | None,
        typer.Option(
            "--assume",
            help="A value an earlier step would extract, as NAME=VALUE, to follow conditions; repeatable.",
        ),
    ] = None,
    version: Version = None,
    as_json: JsonOption = False,
) -> None:
    """Every step rendered with these variables, and the path a run would take; nothing runs."""
    with handle_errors():
        variables, assumed = _pairs(var, "--var"), _pairs(assume, "--assume")
    with librarian() as lib:
        result = lib.runbooks.dry_run(
            lib.default_principal, runbook_id, variables=variables, assume=assumed, version=version
        )
    if as_json:
        print_json(result)
        return
    print_dry_run(result)


@runbook_app.command("run")
def run(
    runbook_id: RunbookId,
    var: Variables = None,
    problem: Annotated[str, typer.Option("--problem", help="The problem this run addresses.")] = "",
    step_by_step: Annotated[
        bool,
        typer.Option(
            "--step-by-step", help="Run nothing now: each `librarian runbook step ID` runs one step."
        ),
    ] = False,
    agent_driven: Annotated[
        bool,
        typer.Option("--agent-driven", help="Ask you, not the configured LLM, to answer agent_prompt steps."),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Run a runbook's current version until it ends or waits (exit 0 completed, 1 failed, 4 waiting)."""
    with handle_errors():
        variables = _pairs(var, "--var")
    with librarian() as lib:
        execution = lib.runbooks.start(
            lib.default_principal,
            runbook_id,
            variables=variables,
            problem=problem,
            mode="step" if step_by_step else "auto",
            agent_driven=agent_driven,
        )
    _finish(execution, as_json)


@runbook_app.command("step")
def step(
    execution_id: ExecutionId,
    answer: Annotated[
        str | None, typer.Option("--answer", help="Answer the waiting step first, then run the next one.")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Run the next step of an execution (exit 0 done or next step ready, 1 failed, 4 waiting)."""
    with librarian() as lib:
        execution = lib.runbooks.step(lib.default_principal, execution_id, answer=answer)
    _finish(execution, as_json)


@runbook_app.command("answer")
def answer(
    execution_id: ExecutionId,
    text: Annotated[str, typer.Argument(help="What you did or found (a manual step), or your analysis.")],
    as_json: JsonOption = False,
) -> None:
    """Answer the manual or agent_prompt step an execution waits for; the run goes on."""
    with librarian() as lib:
        execution = lib.runbooks.answer(lib.default_principal, execution_id, text)
    _finish(execution, as_json)


@runbook_app.command("approve")
def approve(
    execution_id: ExecutionId,
    reject: Annotated[
        bool, typer.Option("--reject", help="Reject instead: the step fails and its on_failure follows.")
    ] = False,
    comment: Annotated[str, typer.Option("--comment", help="Why, for the record.")] = "",
    as_json: JsonOption = False,
) -> None:
    """Approve (or --reject) the approval step an execution waits for; the run goes on."""
    with librarian() as lib:
        execution = lib.runbooks.approve(
            lib.default_principal, execution_id, approved=not reject, comment=comment
        )
    _finish(execution, as_json)


@runbook_app.command("resume")
def resume(execution_id: ExecutionId, as_json: JsonOption = False) -> None:
    """Go on with an execution whose process died, or time out a waiting step past its deadline."""
    with librarian() as lib:
        execution = lib.runbooks.resume(lib.default_principal, execution_id)
    _finish(execution, as_json)


@runbook_app.command("cancel")
def cancel(
    execution_id: ExecutionId,
    reason: Annotated[str, typer.Option("--reason", help="Why, kept with the execution.")] = (
        "cancelled by request"
    ),
    as_json: JsonOption = False,
) -> None:
    """Stop an execution; what it did stays recorded."""
    with librarian() as lib:
        execution = lib.runbooks.cancel(lib.default_principal, execution_id, reason)
    if as_json:
        print_json(execution)
    else:
        stdout.print(f"execution {execution['id']} is {execution['status']}", highlight=False)


@runbook_app.command("close")
def close(
    execution_id: ExecutionId,
    outcome: Annotated[
        str | None,
        typer.Option("--outcome", help="resolved, partially_resolved, escalated or failed."),
    ] = None,
    notes: Annotated[str | None, typer.Option("--notes", help="How the problem was resolved.")] = None,
    rating: Annotated[
        int | None, typer.Option("--rating", help="How well the runbook worked, 1 to 5 stars.")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Record how a finished execution ended for the problem; the rating moves the runbook's ranking."""
    with librarian() as lib:
        execution = lib.runbooks.close_execution(
            lib.default_principal, execution_id, outcome=outcome, notes=notes, rating=rating
        )
    if as_json:
        print_json(execution)
        return
    stdout.print(
        f"execution {execution['id']}: outcome {execution['outcome'] or '-'}, "
        f"rating {execution['effectiveness_rating'] or '-'}",
        highlight=False,
    )


# -- tracking ---------------------------------------------------------------------------------------


@runbook_app.command("execution")
def execution(execution_id: ExecutionId, as_json: JsonOption = False) -> None:
    """One execution: every step run with what it ran and printed, and what it waits for."""
    with librarian() as lib:
        view = lib.runbooks.execution(lib.default_principal, execution_id)
    print_json(view) if as_json else print_execution(view)


@runbook_app.command("history")
def history(
    runbook_id: Annotated[int | None, typer.Option("--runbook", help="Only this runbook's runs.")] = None,
    status: Annotated[
        str | None,
        typer.Option(
            "--status", help="Only runs in this status: running, waiting, completed, failed, cancelled."
        ),
    ] = None,
    limit: Annotated[int, typer.Option("--limit", help="At most this many (1-500).")] = 50,
    as_json: JsonOption = False,
) -> None:
    """Executions you may read, newest first."""
    with librarian() as lib:
        rows = lib.runbooks.executions(
            lib.default_principal, runbook_id=runbook_id, status=status, limit=limit
        )
    if as_json:
        print_json(rows)
        return
    if not rows:
        stdout.print("no executions", style="yellow")
        return
    stdout.print(history_table(rows))


@runbook_app.command("stats")
def stats(runbook_id: RunbookId, as_json: JsonOption = False) -> None:
    """A runbook's runs, success rate, average time and effectiveness, and per step how it fared."""
    with librarian() as lib:
        result = lib.runbooks.stats(lib.default_principal, runbook_id)
    if as_json:
        print_json(result)
        return
    stdout.print(f"[bold]{escape(result['name'])}[/] (id {result['id']})", highlight=False)
    print_stats(result)


@runbook_app.command("proposals")
def proposals(
    runbook_id: RunbookId,
    status: Annotated[
        str, typer.Option("--status", help="pending (default), accepted, rejected or all.")
    ] = "pending",
    as_json: JsonOption = False,
) -> None:
    """Commands the self-correcting loop fixed during runs, offered as new versions of the runbook."""
    with librarian() as lib:
        rows = lib.runbooks.proposals(
            lib.default_principal, runbook_id, status=None if status == "all" else status
        )
    if as_json:
        print_json(rows)
        return
    if not rows:
        stdout.print(f"no {'' if status == 'all' else status + ' '}proposals", style="yellow")
        return
    stdout.print(proposals_table(rows))
    if any(row["status"] == "pending" for row in rows):
        stdout.print("[dim]decide with: librarian runbook accept-proposal ID (or reject-proposal ID)[/]")


@runbook_app.command("accept-proposal")
def accept_proposal(
    proposal_id: Annotated[int, typer.Argument(help="The proposal's id.")], as_json: JsonOption = False
) -> None:
    """Accept a proposal: the runbook gets a new version with that step's corrected command."""
    _decide(proposal_id, accept=True, as_json=as_json)


@runbook_app.command("reject-proposal")
def reject_proposal(
    proposal_id: Annotated[int, typer.Argument(help="The proposal's id.")], as_json: JsonOption = False
) -> None:
    """Reject a proposal: the runbook stays as it is."""
    _decide(proposal_id, accept=False, as_json=as_json)


def _decide(proposal_id: int, *, accept: bool, as_json: bool) -> None:
    with librarian() as lib:
        proposal = lib.runbooks.decide_proposal(lib.default_principal, proposal_id, accept=accept)
    if as_json:
        print_json(proposal)
        return
    stdout.print(
        f"proposal {proposal['id']} {proposal['status']} (runbook {proposal['runbook_id']}, "
        f"step {proposal['step']})",
        highlight=False,
    )


# -- exiting ----------------------------------------------------------------------------------------


def _finish(view: dict[str, Any], as_json: bool) -> None:
    """Show an execution, then exit with the code its status calls for."""
    print_json(view) if as_json else print_execution(view)
    if view["status"] == "waiting":
        raise typer.Exit(EXIT_PAUSED)
    if view["status"] in ("failed", "cancelled"):
        raise typer.Exit(EXIT_FAILURE)
