"""How ``librarian search`` and ``librarian research`` print their answers, from plain dicts.

Kept free of the facade (it imports only rich), so the fast path (:mod:`librarian.cli.fast`) prints
answers from a running server exactly as the in-process commands do.
"""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.markup import escape


def print_search(console: Console, results: list[dict[str, Any]]) -> None:
    """Search results, best first, each with its entity, SDK version, score, source and snippet."""
    if not results:
        console.print("no results", style="yellow")
    for rank, result in enumerate(results, start=1):
        label = " ".join(filter(None, [result.get("sdk_name"), result.get("sdk_version")]))
        title = result.get("entity_name") or result.get("section_path") or "(untitled)"
        console.print(
            f"[bold cyan]{rank}. {escape(title)}[/]  [dim]{escape(label)}  score {result['score']:.3f}[/]",
            highlight=False,
        )
        console.print(f"   [dim]{escape(result['source_url'])}[/]", highlight=False)
        snippet = str(result["content"]).strip()
        console.print(
            "   " + escape(snippet[:400] + ("…" if len(snippet) > 400 else "")).replace("\n", "\n   ")
        )
        console.print()


def print_research(console: Console, result: dict[str, Any]) -> None:
    """A research answer: summary, confidence and version, snippets, fallbacks."""
    console.print(f"[bold]{escape(result['summary'])}[/]", highlight=False)
    console.print(
        f"confidence {result['confidence_score']:.2f}; version {result['resolved_version']} "
        f"([dim]{escape(result['version_note'])}[/])",
        highlight=False,
    )
    for rank, snippet in enumerate(result["snippets"], start=1):
        flags = f" [red]flags: {', '.join(snippet['flags'])}[/]" if snippet.get("flags") else ""
        console.print(
            f"\n[cyan]{rank}. {escape(snippet.get('entity_name') or '')}[/] [dim]{snippet['score']:.3f} "
            f"{escape(snippet['source_url'])} ({snippet['trust_level']})[/]{flags}",
            highlight=False,
        )
        console.print("   " + escape(snippet["content"][:500]).replace("\n", "\n   "), highlight=False)
    for suggestion in result["fallback_suggestions"]:
        console.print(f"[yellow]suggestion:[/] {escape(suggestion)}", highlight=False)


def json_text(data: Any) -> str:
    """The JSON every ``--json`` prints."""
    return json.dumps(data, indent=2, default=str)
