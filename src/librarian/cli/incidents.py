"""``librarian incidents`` and ``librarian solutions``: record, import and match incidents; find and
rate solutions; save an investigation as knowledge."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from librarian.cli.common import EXIT_PARTIAL, JsonOption, librarian, print_json, stderr, stdout
from librarian.incidents.learning import Learning
from librarian.incidents.service import IncidentDraft
from librarian.incidents.signature import ProblemSignature

incidents_app = typer.Typer(help="Past incidents: record, import, find similar ones.", no_args_is_help=True)
solutions_app = typer.Typer(help="Solutions ranked by what worked.", no_args_is_help=True)

Symptoms = Annotated[list[str] | None, typer.Option("--symptom", help="A symptom; repeat for several.")]
Errors = Annotated[list[str] | None, typer.Option("--error", help="An error message; repeat for several.")]
Services = Annotated[list[str] | None, typer.Option("--service", help="An affected service; repeatable.")]
Infra = Annotated[str | None, typer.Option("--infrastructure", help="e.g. kubernetes, vm, lambda.")]


def _signature(
    symptom: list[str] | None, error: list[str] | None, service: list[str] | None, infra: str | None
) -> ProblemSignature:
    return ProblemSignature(tuple(symptom or ()), tuple(error or ()), tuple(service or ()), infra)


@incidents_app.command("add")
def add(
    title: Annotated[str, typer.Option("--title", help="What happened, in a line.")],
    description: Annotated[str, typer.Option("--description", help="The problem in a paragraph.")] = "",
    severity: Annotated[str | None, typer.Option("--severity", help="critical, high, medium or low.")] = None,
    incident_type: Annotated[
        str | None, typer.Option("--type", help="outage, degradation, error, ...")
    ] = None,
    symptom: Symptoms = None,
    error: Errors = None,
    service: Services = None,
    infrastructure: Infra = None,
    root_cause: Annotated[str | None, typer.Option("--root-cause")] = None,
    solution: Annotated[str | None, typer.Option("--solution", help="What was done to fix it.")] = None,
    minutes: Annotated[int | None, typer.Option("--minutes", help="Time to resolve.")] = None,
    worked: Annotated[
        bool | None, typer.Option("--worked/--did-not-work", help="Whether the fix worked.")
    ] = None,
    recurred: Annotated[bool, typer.Option("--recurred", help="The problem came back.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Record an incident (and its incident-report document)."""
    draft = IncidentDraft(
        title=title,
        description=description,
        incident_type=incident_type,
        severity=severity,
        signature=_signature(symptom, error, service, infrastructure),
        root_cause=root_cause,
        solution_applied=solution,
        resolution_time_minutes=minutes,
        was_successful=worked,
        recurred=recurred,
        origin={"via": "cli"},
    )
    with librarian() as lib:
        incident = lib.incidents.create(lib.default_principal, draft)
    print_json(incident) if as_json else stdout.print(
        f"incident {incident['id']}: {escape(incident['title'])}"
    )


@incidents_app.command("import")
def import_incidents(
    path: Annotated[
        Path, typer.Argument(help="A post-mortem, a JSON/JSONL/CSV export, or a folder of them.")
    ],
    as_json: JsonOption = False,
) -> None:
    """Import incident history; malformed entries are reported by file and line, the rest imported."""
    with librarian() as lib:
        report = lib.incidents.import_path(lib.default_principal, path)
    if as_json:
        print_json(report)
    else:
        stdout.print(f"imported {report['imported']} incidents")
        for problem in report["problems"]:
            where = problem.get("file", "")
            where += (
                f":{problem['line']}"
                if "line" in problem
                else f" entry {problem['entry']}"
                if "entry" in problem
                else ""
            )
            stderr.print(f"[yellow]skipped[/] {escape(where)}: {escape(problem['reason'])}", highlight=False)
    if report["problems"]:
        raise typer.Exit(EXIT_PARTIAL)


@incidents_app.command("similar")
def similar(
    description: Annotated[str, typer.Argument(help="The current problem in plain words.")] = "",
    symptom: Symptoms = None,
    error: Errors = None,
    service: Services = None,
    infrastructure: Infra = None,
    limit: Annotated[int, typer.Option("--limit", help="How many (1-50).")] = 5,
    incident: Annotated[
        int | None, typer.Option("--incident", help="The incident being investigated.")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """find_similar_incidents: past incidents like this one, with what fixed them."""
    with librarian() as lib:
        found = lib.incidents.find_similar(
            lib.default_principal,
            description,
            signature=_signature(symptom, error, service, infrastructure),
            limit=limit,
            incident_id=incident,
        )
    if as_json:
        print_json({"similar_incidents": found})
        return
    for item in found:
        stdout.print(
            f"[bold]{escape(item['title'])}[/] (incident {item['id']}, {item['severity'] or '-'}, "
            f"similarity {item['similarity_score']:.2f})",
            highlight=False,
        )
        matched = item["matched"]
        stdout.print(
            f"   matched: errors {matched['error_messages']}, symptoms {matched['symptoms']}, "
            f"services {matched['affected_services']}",
            highlight=False,
        )
        if item["solution"]:
            stdout.print(f"   solution: {escape(item['solution'])}", highlight=False)


@incidents_app.command("show")
def show(
    incident_id: Annotated[int, typer.Argument(help="The incident's id.")], as_json: JsonOption = False
) -> None:
    """One incident with every field."""
    with librarian() as lib:
        incident = lib.incidents.get(lib.default_principal, incident_id)
    if as_json:
        print_json(incident)
        return
    stdout.print(f"[bold]{escape(incident['title'])}[/] ({incident['severity'] or '-'})", highlight=False)
    for field in ("description", "root_cause", "solution"):
        if incident[field]:
            stdout.print(f"{field}: {escape(str(incident[field]))}", highlight=False)


@incidents_app.command("list")
def list_incidents(
    limit: Annotated[int, typer.Option("--limit", help="At most this many (1-500).")] = 50,
    after: Annotated[int, typer.Option("--after", help="Start after this incident id (paging).")] = 0,
    as_json: JsonOption = False,
) -> None:
    """Incidents you may read, by id."""
    with librarian() as lib:
        found = lib.incidents.list_incidents(lib.default_principal, limit=limit, after_id=after)
    if as_json:
        print_json(found)
        return
    for item in found:
        stdout.print(
            f"{item['id']:>6}  {item['severity'] or '-':<8} {escape(item['title'])}", highlight=False
        )


@incidents_app.command("mark")
def mark(
    incident_id: Annotated[int, typer.Argument(help="Your incident.")],
    other_id: Annotated[int, typer.Argument(help="The incident that was returned as similar.")],
    similar: Annotated[bool, typer.Option("--similar/--not-similar", help="Your verdict.")],
    as_json: JsonOption = False,
) -> None:
    """Say whether a returned incident was similar (it becomes related) or not (it is hidden)."""
    with librarian() as lib:
        verdict = lib.incidents.mark(lib.default_principal, incident_id, other_id, similar=similar)
    print_json(verdict) if as_json else stdout.print(f"recorded: {'similar' if similar else 'not similar'}")


@incidents_app.command("save-learning")
def save_learning(
    title: Annotated[str, typer.Option("--title")],
    content: Annotated[str, typer.Option("--content", help="The write-up (Markdown).")],
    document_type: Annotated[
        str, typer.Option("--type", help="incident_report, solution or runbook.")
    ] = "incident_report",
    symptom: Symptoms = None,
    error: Errors = None,
    service: Services = None,
    infrastructure: Infra = None,
    solution: Annotated[str | None, typer.Option("--solution", help="What fixed it.")] = None,
    worked: Annotated[bool | None, typer.Option("--worked/--did-not-work")] = None,
    as_json: JsonOption = False,
) -> None:
    """save_learning: the document, the incident and the solution link, in one transaction."""
    learning = Learning(
        title=title,
        content=content,
        document_type=document_type,
        problem_signature=_signature(symptom, error, service, infrastructure),
        solution=solution,
        worked=worked,
    )
    with librarian() as lib:
        saved = lib.learning.save(lib.default_principal, learning)
    print_json(saved) if as_json else stdout.print(f"saved document {saved['document_id']}")


@solutions_app.command("get")
def get_solution(
    symptom: Symptoms = None,
    error: Errors = None,
    service: Services = None,
    infrastructure: Infra = None,
    limit: Annotated[int, typer.Option("--limit", help="How many (1-50).")] = 5,
    as_json: JsonOption = False,
) -> None:
    """get_solution: what fixed this problem before, the best-proven first."""
    with librarian() as lib:
        found = lib.solutions.get_solution(
            lib.default_principal, _signature(symptom, error, service, infrastructure), limit
        )
    if as_json:
        print_json({"solutions": found})
        return
    for item in found:
        trials = item["successes"] + item["failures"]
        stdout.print(
            f"[bold]{escape(item['title'])}[/] worked {item['successes']} of {trials} "
            f"(lower bound {item['confidence_lower_bound']:.2f})",
            highlight=False,
        )
        stdout.print(f"   {escape(item['solution'])}", highlight=False)


@solutions_app.command("outcome")
def outcome(
    solution_id: Annotated[int, typer.Argument(help="The solution's id.")],
    worked: Annotated[bool, typer.Option("--worked/--did-not-work", help="Whether it fixed the problem.")],
    incident: Annotated[
        int | None, typer.Option("--incident", help="The incident it was applied to.")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Record whether a solution worked; it moves the solution's ranking."""
    with librarian() as lib:
        record = lib.solutions.record_outcome(
            lib.default_principal, solution_id, worked=worked, incident_id=incident
        )
    print_json(record) if as_json else stdout.print(
        f"solution {solution_id}: {record['successes']} worked, {record['failures']} did not"
    )
