"""Human-readable output of ``librarian tools`` and ``librarian verbs`` (``cli.tools``).

Every helper prints on the shared consoles of ``cli.common`` (or returns a rich ``Table`` to print);
the ``--json`` output of the commands does not go through here.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from rich.markup import escape
from rich.table import Table

from librarian.cli.common import print_json, stderr, stdout

STATUS_STYLE = {"active": "green", "quarantined": "yellow", "inactive": "dim"}
HEALTH_STYLE = {"healthy": "green", "failing": "yellow", "open": "red"}


def styled(value: str | None, styles: dict[str, str]) -> str:
    """A status or health as rich markup in its colour."""
    text = value or "-"
    return f"[{styles.get(text, 'white')}]{escape(text)}[/]"


def joined(values: list[str] | None) -> str:
    """A list as comma-separated text, ``-`` when empty."""
    return escape(", ".join(values or [])) or "-"


# -- tools ------------------------------------------------------------------------------------------


def tools_table(rows: list[dict[str, Any]]) -> Table:
    """Tools one row each: id, toolId, type, status, health, verbs and description."""
    table = Table("id", "toolId", "type", "status", "health", "verbs", "description")
    for row in rows:
        table.add_row(
            str(row["id"]),
            escape(row["toolId"]),
            row["type"],
            styled(row["status"], STATUS_STYLE),
            styled(row["health"], HEALTH_STYLE),
            joined(row["actionVerbs"]),
            escape(row["description"] or ""),
        )
    return table


def print_tool(view: dict[str, Any]) -> None:
    """A tool whole: what it does, how it is called, its review status and how its calls went."""
    stdout.print(
        f"[bold]{escape(view['name'])}[/] ({escape(view['toolId'])}, id {view['id']}, {view['type']}"
        f"{', version ' + escape(view['version']) if view['version'] else ''}): "
        f"{styled(view['status'], STATUS_STYLE)}, {styled(view['health'], HEALTH_STYLE)}",
        highlight=False,
    )
    if view["description"]:
        stdout.print(escape(view["description"]), highlight=False)
    stdout.print(f"verbs: {joined(view['actionVerbs'])}", highlight=False)
    stdout.print(f"capabilities: {joined(view['capabilities'])}", highlight=False)
    stdout.print(f"category: {escape(view['category'] or '-')}", highlight=False)
    for example in view.get("examples") or []:
        stdout.print(f"example: {escape(example)}", highlight=False)
    stdout.print("input schema:", highlight=False)
    stdout.print(escape(json.dumps(view.get("inputSchema") or {}, indent=2)), highlight=False)
    stdout.print(f"binding: {escape(json.dumps(view.get('binding') or {}))}", highlight=False)
    calls = view.get("calls") or {}
    stdout.print(
        f"calls: {calls.get('succeeded', 0)} succeeded, {calls.get('failed', 0)} failed"
        f" ({calls.get('consecutive_failures', 0)} in a row), last {calls.get('last_called_at') or 'never'}",
        highlight=False,
    )
    if calls.get("last_error"):
        stdout.print(f"[red]last error: {escape(calls['last_error'])}[/]", highlight=False)
    if view["status"] == "quarantined":
        stdout.print(
            f"[dim]review it, then approve with: librarian tools approve {escape(view['toolId'])}[/]",
            highlight=False,
        )


def print_search(found: dict[str, Any]) -> None:
    """Search results ranked, each with its score, confidence and why it matched."""
    for rank, hit in enumerate(found["results"], start=1):
        stdout.print(
            f"[bold cyan]{rank}. {escape(hit['toolId'])}[/] ({hit['type']}, score {hit['score']:.3f}, "
            f"confidence {hit['confidence']:.2f})",
            highlight=False,
        )
        if hit["description"]:
            stdout.print(f"   {escape(hit['description'])}", highlight=False)
        stdout.print(f"   [dim]{escape('; '.join(hit['why']))}[/]", highlight=False)
    best = found["results"][0]["toolId"]
    stdout.print(f"[dim]call the best with: librarian tools call {escape(best)} --args '{{...}}'[/]")


def print_call(result: dict[str, Any]) -> None:
    """What a tool answered: its structured content as JSON, else its text."""
    content = result["content"]
    if isinstance(content, dict | list):
        stdout.print(escape(json.dumps(content, indent=2, default=str)), highlight=False)
    else:
        stdout.print(escape(result["text"] or str(content or "")), highlight=False)


def print_stats(stats: dict[str, int]) -> None:
    """The registry's counts on one line."""
    stdout.print(
        f"tools: {stats.get('tools_active', 0)} active, {stats.get('tools_quarantined', 0)} quarantined, "
        f"{stats.get('tools_inactive', 0)} inactive; verbs: {stats.get('verbs', 0)}; "
        f"sources: {stats.get('sources', 0)}",
        highlight=False,
    )


# -- registering and importing ----------------------------------------------------------------------


def print_registered(kind: str, report: dict[str, Any]) -> None:
    """What a register command stored, then each refused manifest's problems on stderr."""
    for view in report["registered"]:
        name = view.get("toolId") or view.get("verb")
        stdout.print(f"{kind} [bold]{escape(str(name))}[/]: {view['change']}", highlight=False)
    for error in report["errors"]:
        stderr.print(f"[yellow]refused[/] {escape(error['manifest'])}:", highlight=False)
        for problem in error["problems"]:
            stderr.print(f"  - {escape(problem)}", highlight=False)


def print_sync(report: dict[str, Any]) -> None:
    """An import or sync: the counts, the tools added, and each problem on stderr."""
    stdout.print(
        f"source [bold]{escape(report['source'])}[/] ({report['kind']}): {len(report['added'])} added, "
        f"{len(report['changed'])} changed, {len(report['removed'])} removed, "
        f"{len(report['unchanged'])} unchanged, {len(report['errors'])} skipped",
        highlight=False,
    )
    for key in report["added"]:
        stdout.print(f"  + {escape(key)}", highlight=False)
    for key in report["removed"]:
        stdout.print(f"  - {escape(key)}", highlight=False)
    for error in report["errors"]:
        stderr.print(f"[yellow]skipped[/] {escape(error)}", highlight=False)
    if report.get("status") == "quarantined" and (report["added"] or report["changed"]):
        stdout.print(
            "[dim]new tools are quarantined: review them with `librarian tools list --status quarantined`, "
            "approve with `librarian tools approve ID`[/]",
            highlight=False,
        )


def sources_table(rows: list[dict[str, Any]]) -> Table:
    """Tool sources one row each, with their last sync and its changes or error."""
    table = Table("id", "name", "kind", "spec", "last synced", "last changes", "last error")
    for row in rows:
        changes = ", ".join(f"{key} {value}" for key, value in (row["last_changes"] or {}).items())
        table.add_row(
            str(row["id"]),
            escape(row["name"]),
            row["kind"],
            escape(json.dumps(row["spec"])),
            row["last_synced_at"] or "never",
            escape(changes),
            f"[red]{escape(row['last_error'])}[/]" if row["last_error"] else "",
        )
    return table


# -- verbs ------------------------------------------------------------------------------------------


def verbs_table(rows: list[dict[str, Any]]) -> Table:
    """Verbs one row each: verb, category, description and decomposition."""
    table = Table("id", "verb", "status", "category", "description", "decomposes into")
    for row in rows:
        table.add_row(
            str(row["id"]),
            escape(row["verb"]),
            row["status"],
            escape(row["category"] or ""),
            escape(row["description"] or ""),
            joined(row["decomposition"]),
        )
    return table


def print_verb(view: dict[str, Any]) -> None:
    """A verb whole: description, capabilities, examples, inputs, outputs and decomposition."""
    stdout.print(
        f"[bold]{escape(view['verb'])}[/] (id {view['id']}, {view['status']}"
        f"{', ' + escape(view['category']) if view['category'] else ''})",
        highlight=False,
    )
    stdout.print(escape(view["description"] or ""), highlight=False)
    stdout.print(f"capabilities: {joined(view['capabilities'])}", highlight=False)
    for example in view["examples"]:
        stdout.print(f"example: {escape(example)}", highlight=False)
    for label, key in (("input", "inputDefinitions"), ("output", "outputDefinitions")):
        for item in view[key]:
            detail = escape(str(item.get("description") or item.get("type") or ""))
            stdout.print(f"{label}: {escape(str(item['name']))} {detail}".rstrip(), highlight=False)
    if view["decomposition"]:
        stdout.print(f"decomposes into: {escape(' -> '.join(view['decomposition']))}", highlight=False)


def print_discovery(found: dict[str, Any]) -> None:
    """Verbs and tools for a capability, each ranked with score, confidence and why, then the best."""
    for title, key, name in (("verbs", "verbs", "verb"), ("tools", "tools", "toolId")):
        stdout.print(f"[bold]{title}[/]", highlight=False)
        if not found[key]:
            stdout.print("   none", style="dim")
        for hit in found[key]:
            stdout.print(
                f"   {escape(hit[name])} (score {hit['score']:.3f}, confidence {hit['confidence']:.2f}): "
                f"{escape(hit['description'] or '')}",
                highlight=False,
            )
            stdout.print(f"   [dim]{escape('; '.join(hit['why']))}[/]", highlight=False)
    best = found["best"]
    if best is None:
        stdout.print("no verb or tool is registered for this", style="yellow")
        return
    label = best["verb"] if best["kind"] == "verb" else best["toolId"]
    stdout.print(
        f"best: {best['kind']} [bold]{escape(label)}[/] (confidence {best['confidence']:.2f})",
        highlight=False,
    )


def print_page(
    kind: str,
    rows: list[dict[str, Any]],
    limit: int,
    table: Callable[[list[dict[str, Any]]], Table],
    as_json: bool,
) -> None:
    """One page of ``librarian tools list`` or ``librarian verbs list`` (``kind``: tools or verbs),
    with the cursor of the next page when this one is full."""
    cursor = rows[-1]["id"] if len(rows) == limit else None
    if as_json:
        print_json({kind: rows, "next": cursor})
        return
    if not rows:
        stdout.print(f"no {kind}: register one with `librarian {kind} register FILE`", style="yellow")
        return
    stdout.print(table(rows))
    if cursor is not None:
        stdout.print(f"[dim]next page: librarian {kind} list --after {cursor}[/]", highlight=False)
