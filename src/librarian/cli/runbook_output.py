"""Human-readable output of ``librarian runbook`` (``cli.runbooks``): tables, executions, hints.

Every helper prints on the shared consoles of ``cli.common`` (or returns a rich ``Table`` to print);
the ``--json`` output of the commands does not go through here.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.table import Table

from librarian.cli.common import stderr, stdout

# Longest output of a step run shown in a table cell (--json shows it whole).
SHOWN_CHARS = 300

STATUS_STYLE = {
    "completed": "green",
    "succeeded": "green",
    "failed": "red",
    "timed_out": "red",
    "cancelled": "red",
    "waiting": "yellow",
    "running": "cyan",
}


# -- the catalog ------------------------------------------------------------------------------------


def print_import_report(report: dict[str, Any]) -> None:
    """The counts of an import, then each refused file's problems on stderr."""
    stdout.print(
        f"{len(report['created'])} created, {len(report['new_version'])} new versions, "
        f"{len(report['unchanged'])} unchanged, {len(report['errors'])} refused",
        highlight=False,
    )
    for error in report["errors"]:
        for problem in error["problems"]:
            stderr.print(f"[yellow]refused[/] {escape(error['file'])}: {escape(problem)}", highlight=False)


def print_validation(file: Path, result: dict[str, Any]) -> None:
    """A validation's verdict: the runbook's summary when valid, else its problems on stderr."""
    if result["valid"]:
        needed = ", ".join(result["required_variables"]) or "none"
        stdout.print(
            f"{escape(str(file))}: valid runbook [bold]{escape(result['name'])}[/], {result['steps']} steps; "
            f"required variables: {escape(needed)}",
            highlight=False,
        )
    else:
        stderr.print(f"[bold red]error:[/] {escape(str(file))} is not a valid runbook:", highlight=False)
        for problem in result["problems"]:
            stderr.print(f"  - {escape(problem)}", highlight=False)
        stderr.print("[dim]hint: see docs/runbooks.md for the runbook format[/]", highlight=False)


def runbooks_table(rows: list[dict[str, Any]]) -> Table:
    """The runbooks of ``runbook list``, one row each with its runs and how well they went."""
    table = Table("id", "name", "version", "category", "runs", "success", "effectiveness")
    for row in rows:
        table.add_row(
            str(row["id"]),
            escape(row["name"]) + ("" if row["is_active"] else " [dim](retired)[/]"),
            str(row["version"]),
            escape(row["category"] or ""),
            str(row["execution_count"]),
            percent(row["success_rate"]),
            number(row["effectiveness_score"]),
        )
    return table


def print_runbook(view: dict[str, Any], outcomes: dict[int, dict[str, Any]]) -> None:
    """A runbook's header, description, variables and steps, each with where its outcomes lead."""
    stdout.print(
        f"[bold]{escape(view['name'])}[/] (id {view['id']}, version {view['version']} of "
        f"{view['current_version']}{', ' + escape(view['category']) if view['category'] else ''})",
        highlight=False,
    )
    if view["description"]:
        stdout.print(escape(view["description"]), highlight=False)
    if view["variables"]:
        shown = ", ".join(
            f"{name}={'(required)' if value is None else value}" for name, value in view["variables"].items()
        )
        stdout.print(f"variables: {escape(shown)}", highlight=False)
    table = Table("step", "title", "type", "does", "leads to")
    for step in view["steps"]:
        leads = ", ".join(f"{key}: {target}" for key, target in outcomes.get(step["step_number"], {}).items())
        table.add_row(
            str(step["step_number"]) + (" (final)" if step.get("final_step") else ""),
            escape(step["title"]),
            step["action_type"],
            escape((step.get("action") or step.get("description") or "").strip()),
            escape(leads),
        )
    stdout.print(table)


def versions_table(rows: list[dict[str, Any]]) -> Table:
    """The versions of a runbook, as ``runbook versions`` lists them."""
    table = Table("version", "label", "by user", "saved", "note")
    for row in rows:
        table.add_row(
            str(row["version"]),
            escape(row["version_label"] or ""),
            str(row["created_by"] or ""),
            row["created_at"],
            escape(row["note"] or ""),
        )
    return table


def print_matches(found: dict[str, Any]) -> None:
    """The runbooks ``runbook find`` matched, ranked with score and reasons, then how to run the best."""
    for rank, match in enumerate(found["matches"], start=1):
        stdout.print(
            f"[bold cyan]{rank}. {escape(match['name'])}[/] "
            f"(runbook {match['id']}, score {match['score']:.3f})",
            highlight=False,
        )
        stdout.print(f"   [dim]{escape('; '.join(match['reasons']))}[/]", highlight=False)
    stdout.print(f"[dim]run the best with: librarian runbook run {found['matches'][0]['id']} --var ...[/]")


# -- running ----------------------------------------------------------------------------------------


def print_dry_run(result: dict[str, Any]) -> None:
    """A dry run: each rendered step, the path a run would take, and the variables it still needs."""
    table = Table("step", "title", "type", "would run", "leads to")
    for step in result["steps"]:
        does = step.get("command") or step.get("prompt") or step.get("condition") or ""
        if step.get("error"):
            does = f"{does}\n[red]{escape(step['error'])}[/]" if does else f"[red]{escape(step['error'])}[/]"
            table.add_row(str(step["step"]), escape(step["title"]), step["action_type"], does, "")
            continue
        leads = ", ".join(f"{key}: {target}" for key, target in step["outcomes"].items())
        table.add_row(
            str(step["step"]), escape(step["title"]), step["action_type"], escape(does), escape(leads)
        )
    stdout.print(table)
    path = []
    for visit in result["path"]:
        if "note" in visit:
            path.append(f"step {visit['step']} {visit['note']}")
            continue
        branch = ""
        if "branch" in visit:
            branch = f" ({visit['branch']}{', undetermined' if 'undetermined' in visit else ''})"
        path.append(f"{visit['step']} {visit['title']}{branch}")
    ending = result["path"][-1].get("next") if result["path"] else None
    stdout.print("path: " + escape(" -> ".join(path) + (f" -> {ending}" if ending else "")), highlight=False)
    for visit in result["path"]:
        if "undetermined" in visit:
            stdout.print(
                f"[dim]step {visit['step']}: {escape(visit['undetermined'])} (give it with --assume)[/]",
                highlight=False,
            )
    if result["missing_variables"]:
        stderr.print(
            f"[yellow]a run needs:[/] {escape(', '.join(result['missing_variables']))} "
            "(pass them with --var NAME=VALUE)",
            highlight=False,
        )


def styled(status: str) -> str:
    """A status as rich markup in its colour (green done, red failed, yellow waiting, cyan running)."""
    return f"[{STATUS_STYLE.get(status, 'white')}]{status}[/]"


def print_execution(view: dict[str, Any]) -> None:
    """An execution: its status, every step run with what it ran and printed, and what comes next."""
    stdout.print(
        f"execution {view['id']}: {styled(view['status'])} — runbook "
        f"[bold]{escape(view['runbook_name'] or str(view['runbook_id']))}[/] "
        f"(id {view['runbook_id']}, version {view['runbook_version']}, {view['mode']} mode)",
        highlight=False,
    )
    runs = view.get("steps") or []
    if runs:
        table = Table("#", "step", "title", "type", "status", "ran", "result")
        for run in runs:
            output, error = clipped(run["output"] or ""), clipped(run["error"] or "")
            result = escape(output)
            if error and error != output:  # a rejection's note is both its output and its error
                result += ("\n" if result else "") + f"[red]{escape(error)}[/]"
            if run["corrected_command"]:
                result += f"\n[dim]corrected to: {escape(run['corrected_command'])}[/]"
            table.add_row(
                str(run["sequence"]),
                str(run["step"]) + (f" (attempt {run['attempt']})" if run["attempt"] > 1 else ""),
                escape(run["title"]),
                run["action_type"],
                styled(run["status"]),
                escape(clipped(run["rendered"] or "")),
                result,
            )
        stdout.print(table)
    if view["status"] in ("failed", "cancelled") and view["resolution_notes"]:
        stdout.print(f"[red]{escape(view['resolution_notes'])}[/]", highlight=False)
    waiting = view.get("waiting_for")
    if view["status"] == "waiting" and waiting:
        print_waiting(view["id"], waiting)
    elif view["status"] == "running" and view["mode"] == "step":
        stdout.print(
            f"next: step {view['current_step_number']}\n"
            f"[dim]run it with: librarian runbook step {view['id']}[/]",
            highlight=False,
        )
    elif view["status"] in ("completed", "failed", "cancelled") and view["outcome"] in (None, "failed"):
        stdout.print(
            f"[dim]record how it went: librarian runbook close {view['id']} "
            "--outcome resolved|partially_resolved|escalated|failed --rating 1-5 --notes TEXT[/]",
            highlight=False,
        )


def print_waiting(execution_id: str, waiting: dict[str, Any]) -> None:
    """What a waiting execution waits for (prompt, approvers, deadline) and the command to answer it."""
    kind = waiting.get("kind", "")
    stdout.print(
        f"[yellow]waiting for {'an approval' if kind == 'approval' else 'an answer'}[/] at step "
        f"{waiting.get('step')} ({escape(str(waiting.get('title', '')))}, {kind}):",
        highlight=False,
    )
    stdout.print("   " + escape(str(waiting.get("prompt", ""))).replace("\n", "\n   "), highlight=False)
    if waiting.get("approvers"):
        stdout.print(f"   approvers: {escape(', '.join(waiting['approvers']))}", highlight=False)
    if isinstance(waiting.get("deadline"), int | float):
        moment = datetime.fromtimestamp(waiting["deadline"], tz=UTC).isoformat(timespec="seconds")
        stdout.print(f"   answer before {moment}", highlight=False)
    if kind == "approval":
        stdout.print(
            f"[dim]approve with: librarian runbook approve {execution_id} [--comment TEXT]\n"
            f"reject with: librarian runbook approve {execution_id} --reject [--comment TEXT][/]",
            highlight=False,
        )
    else:
        stdout.print(f'[dim]answer with: librarian runbook answer {execution_id} "..."[/]', highlight=False)


# -- tracking ---------------------------------------------------------------------------------------


def history_table(rows: list[dict[str, Any]]) -> Table:
    """The executions of ``runbook history``, one row each with status, duration, outcome and rating."""
    table = Table("execution", "runbook", "status", "started", "duration", "outcome", "rating")
    for row in rows:
        table.add_row(
            row["id"],
            escape(f"{row['runbook_name'] or row['runbook_id']} v{row['runbook_version']}"),
            row["status"],
            row["started_at"] or "",
            duration(row["duration_ms"]),
            row["outcome"] or "",
            str(row["effectiveness_rating"] or ""),
        )
    return table


def print_stats(stats: dict[str, Any]) -> None:
    """A runbook's statistics on one line, then per step how its runs fared (when any ran)."""
    stdout.print(
        f"runs {stats['execution_count']}, completed {stats['success_count']} "
        f"({percent(stats['success_rate'])}), average {duration(stats['avg_execution_time_ms'])}, "
        f"last run {stats['last_executed_at'] or 'never'}; effectiveness "
        f"{number(stats['effectiveness_score'])}, rating {number(stats['average_rating'])}; "
        f"pending proposals {stats['pending_proposals']}",
        highlight=False,
    )
    if not stats["steps"]:
        return
    table = Table("step", "title", "runs", "succeeded", "failed", "timed out", "corrected", "average")
    for step in stats["steps"]:
        table.add_row(
            str(step["step"]),
            escape(step["title"] or ""),
            str(step["runs"]),
            str(step["succeeded"]),
            str(step["failed"]),
            str(step["timed_out"]),
            str(step["corrected"]),
            duration(step["avg_duration_ms"]),
        )
    stdout.print(table)


def proposals_table(rows: list[dict[str, Any]]) -> Table:
    """The correction proposals of a runbook: each step's command now and the command proposed."""
    table = Table("proposal", "step", "status", "command now", "proposed command", "from execution")
    for row in rows:
        table.add_row(
            str(row["id"]),
            str(row["step"]),
            row["status"],
            escape(row["old_command"]),
            escape(row["new_command"]),
            row["execution_id"] or "",
        )
    return table


# -- formatting -------------------------------------------------------------------------------------


def clipped(text: str) -> str:
    """``text`` stripped, cut to ``SHOWN_CHARS`` characters with an ellipsis when longer."""
    text = text.strip()
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "…"


def percent(rate: float | None) -> str:
    """A rate (0 to 1) as a whole percentage, ``-`` when unknown."""
    return "-" if rate is None else f"{rate:.0%}"


def number(value: float | None) -> str:
    """A score with two decimals, ``-`` when unknown."""
    return "-" if value is None else f"{value:.2f}"


def duration(milliseconds: float | None) -> str:
    """A duration in ms below a second, else in seconds with one decimal; ``-`` when unknown."""
    if milliseconds is None:
        return "-"
    return f"{milliseconds:.0f} ms" if milliseconds < 1000 else f"{milliseconds / 1000:.1f} s"
