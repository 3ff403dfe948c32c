"""``librarian fixes``: the fixes the self-correcting loop verified, and the strategy policy's record.

The same views as ``GET /verified-fixes`` and ``GET /strategy-stats`` (``lib.workflows.fixes``).
"""

from __future__ import annotations

import shlex
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from librarian.cli.common import JsonOption, librarian, print_json, stdout
from librarian.workflows.fixes import MAX_PAGE

fixes_app = typer.Typer(
    help="Verified fixes the loop learned: list, show, retire; the strategy statistics.", no_args_is_help=True
)
FixId = Annotated[int, typer.Argument(min=1, help="The fix's id (from `librarian fixes list`).")]


@fixes_app.command("list")
def list_fixes(
    tool: Annotated[str | None, typer.Option(help="Only fixes of this tool or library.")] = None,
    retired: Annotated[bool, typer.Option("--retired", help="Include retired fixes.")] = False,
    before: Annotated[int | None, typer.Option(min=1, help="The cursor of the page to show.")] = None,
    limit: Annotated[int, typer.Option(min=1, max=MAX_PAGE, help="How many fixes.")] = 20,
    as_json: JsonOption = False,
) -> None:
    """Verified fixes, newest first: what failed, what fixed it, how often it worked since."""
    with librarian() as lib:
        page = lib.workflows.fixes.list(
            lib.default_principal, tool=tool, include_retired=retired, before=before, limit=limit
        )
    if as_json:
        print_json(page)
        return
    table = Table("id", "tool", "failed", "fixed", "ok", "failed runs", "strategy")
    for fix in page["fixes"]:
        retired_mark = " (retired)" if fix["retired"] else ""
        table.add_row(
            str(fix["id"]),
            escape(f"{fix['tool']} {fix['tool_version'] or ''}".strip() + retired_mark),
            escape(_command(fix["failed_template"])),
            escape(_command(fix["fixed_template"])),
            str(fix["successes"]),
            str(fix["failures"]),
            escape(fix["strategy"]),
        )
    stdout.print(table)
    if page["next_before"]:
        stdout.print(f"more: --before {page['next_before']}", highlight=False)


@fixes_app.command("show")
def show(fix_id: FixId, as_json: JsonOption = False) -> None:
    """One fix with its rationale and the research snippets it came from."""
    with librarian() as lib:
        fix = lib.workflows.fixes.get(lib.default_principal, fix_id)
    if as_json:
        print_json(fix)
        return
    stdout.print(f"[bold]fix {fix['id']}[/] {escape(fix['tool'])} {escape(fix['tool_version'] or '')}")
    stdout.print(f"error:  {escape(fix['normalized_error'])}", highlight=False)
    stdout.print(f"failed: {escape(_command(fix['failed_template']))}", highlight=False)
    stdout.print(f"fixed:  {escape(_command(fix['fixed_template']))}", highlight=False)
    stdout.print(f"record: {fix['successes']} succeeded, {fix['failures']} failed", highlight=False)
    stdout.print(f"why:    {escape(fix['rationale'])}", highlight=False)
    if fix["retired"]:
        retired = fix["retired"]
        stdout.print(
            f"retired {retired['at']} by {escape(str(retired['by']))}: {escape(str(retired['reason']))}"
        )
    for snippet in fix["snippets"]:
        stdout.print(f"- {escape(str(snippet.get('source_url') or snippet.get('entity_name') or snippet))}")


@fixes_app.command("retire")
def retire(
    fix_id: FixId,
    reason: Annotated[str, typer.Option("--reason", help="Why the fix is wrong (kept with it).")],
    as_json: JsonOption = False,
) -> None:
    """Take a fix that turned out wrong out of reuse; its record stays."""
    with librarian() as lib:
        fix = lib.workflows.fixes.retire(lib.default_principal, fix_id, reason)
    if as_json:
        print_json(fix)
    else:
        stdout.print(f"fix {fix['id']} retired: it will not be reused", highlight=False)


@fixes_app.command("strategies")
def strategies(
    category: Annotated[str | None, typer.Option(help="Only this error category.")] = None,
    as_json: JsonOption = False,
) -> None:
    """The strategy policy's record: trials and mean reward per error category and strategy."""
    with librarian() as lib:
        found = lib.workflows.fixes.strategy_stats(lib.default_principal, category=category)
    if as_json:
        print_json(found)
        return
    table = Table("error category", "strategy", "trials", "mean reward")
    for row in found["strategies"]:
        mean = "" if row["mean_reward"] is None else f"{row['mean_reward']:+.2f}"
        table.add_row(escape(row["error_category"]), escape(row["strategy"]), str(row["trials"]), mean)
    stdout.print(table)


def _command(template: list[Any]) -> str:
    return shlex.join(str(part) for part in template) if template else "(a code edit)"
