"""The ``librarian`` entry point: one-shot ``search`` and ``research`` answered by a running server.

Loading the embedding model costs a one-shot command most of its time and memory. When a
``librarian serve`` runs for the same data directory on this machine (:mod:`librarian.server_file`),
``search`` and ``research`` send their question to it and print its answer exactly as the
in-process command would, without importing the facade. Anything else (another command, an option
the fast path does not know, no server, a server that refuses or fails) runs the normal CLI, so the
answer and its errors are always the in-process ones. ``LIBRARIAN_NO_SERVER=1`` turns it off.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from librarian.server_file import running_server

# Options the fast path understands: flag -> (request field, kind). Any other option falls back.
_SEARCH = {
    "--sdk": ("sdk_name", str),
    "--version": ("sdk_version", str),
    "--type": ("document_type", str),
    "--category": ("category", str),
    "--tag": ("tags", list),
    "--top-k": ("top_k", int),
    "--max-chars": ("max_chars", int),
}
_RESEARCH = {
    "--sdk": ("sdk_name", str),
    "--version": ("version", str),
    "--error": ("error_text", str),
    "--max-chars": ("max_chars", int),
}
_ROUTES: dict[str, tuple[str, dict[str, tuple[str, type]], dict[str, Any]]] = {
    "search": ("/knowledge/query", _SEARCH, {"top_k": 5}),  # the CLI's default top_k
    "research": ("/research", _RESEARCH, {}),
}
TIMEOUT_SECONDS = 60.0
# Variables that say which data directory and who, not how it is configured: any other LIBRARIAN_*
# setting in the environment makes the in-process command answer, with exactly those settings.
_SAME_AS_SERVER = frozenset({"LIBRARIAN_HOME", "LIBRARIAN_TOKEN", "LIBRARIAN_NO_SERVER"})


def main() -> None:
    """Run one command: through a running server when that is the same answer, else in process."""
    if os.environ.get("LIBRARIAN_NO_SERVER") != "1":
        code = answer_from_server(sys.argv[1:])
        if code is not None:
            raise SystemExit(code)
    from librarian.cli.main import app

    try:
        app()
    except Exception as exc:  # a bug: say so in one line, never as a raw traceback
        if os.environ.get("LIBRARIAN_TRACEBACK") == "1":
            raise
        sys.stderr.write(
            f"error: unexpected failure ({type(exc).__name__}: {exc})\n"
            "hint: this is a bug in Librarian; run again with LIBRARIAN_TRACEBACK=1 to see where, "
            "and report it\n"
        )
        raise SystemExit(1) from None


def answer_from_server(argv: list[str]) -> int | None:
    """Answer ``argv`` through the data directory's server; ``None`` when the CLI must run itself."""
    parsed = _parse(argv)
    if parsed is None:
        return None
    command, home, token, body, as_json = parsed
    url = running_server(home)
    if url is None:
        return None
    reply = _ask(url + _ROUTES[command][0], body, token)
    if reply is None:
        return None
    from rich.console import Console

    from librarian.cli.answers import json_text, print_research, print_search

    out, err = Console(), Console(stderr=True)
    if command == "search":
        results = [
            {k: v for k, v in hit.items() if not (k == "truncated" and v is False)}
            for hit in reply["results"]
        ]
        trimmed = reply.get("trimmed")
        if trimmed:
            err.print(
                f"[dim]budget of {body['max_chars']} characters: {trimmed['dropped']} results left out[/]"
            )
        if as_json:
            sys.stdout.write(json_text(results) + "\n")
        else:
            print_search(out, results)
    elif as_json:
        sys.stdout.write(json_text(reply) + "\n")
    else:
        print_research(out, reply)
    err.print(f"[dim](answered by librarian serve at {url})[/]", highlight=False)
    return 0


def _parse(argv: list[str]) -> tuple[str, Path, str | None, dict[str, Any], bool] | None:
    """The command, home, token, request body and ``--json`` of ``argv``, if the fast path knows them all."""
    home = os.environ.get("LIBRARIAN_HOME") or ".librarian"
    token = os.environ.get("LIBRARIAN_TOKEN")
    if any(name.startswith("LIBRARIAN_") and name not in _SAME_AS_SERVER for name in os.environ):
        return None  # a setting of this shell (a database, a config file, an LLM) may not be the server's
    args = list(argv)
    while args and args[0].startswith("--"):
        flag, value, args = _take(args)
        if flag == "--home" and value is not None:
            home = value
        elif flag == "--token" and value is not None:
            token = value
        else:
            return None
    if not args or args[0] not in _ROUTES:
        return None
    command, args = args[0], args[1:]
    _, known, defaults = _ROUTES[command]
    body: dict[str, Any] = dict(defaults)
    as_json = False
    query: str | None = None
    while args:
        if args[0] == "--json":
            as_json, args = True, args[1:]
            continue
        if not args[0].startswith("-"):
            if query is not None:
                return None
            query, args = args[0], args[1:]
            continue
        flag, value, args = _take(args)
        if flag not in known or value is None:
            return None
        field, kind = known[flag]
        if kind is list:
            body.setdefault(field, []).append(value)
        elif kind is int:
            if not value.isdecimal():
                return None
            body[field] = int(value)
        else:
            body[field] = value
    if not query or (command == "research" and "sdk_name" not in body):
        return None
    body["query"] = query
    return command, Path(home).expanduser(), token, body, as_json


def _take(args: list[str]) -> tuple[str, str | None, list[str]]:
    """The first option of ``args`` with its value (``--x v`` or ``--x=v``), and the rest."""
    flag, _, inline = args[0].partition("=")
    if inline:
        return flag, inline, args[1:]
    if len(args) > 1 and not args[1].startswith("--"):
        return flag, args[1], args[2:]
    return flag, None, args[1:]


def _ask(url: str, body: dict[str, Any], token: str | None) -> dict[str, Any] | None:
    """The server's JSON answer, or ``None`` on any failure (the in-process command then answers)."""
    import httpx

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        response = httpx.post(url, json=body, headers=headers, timeout=TIMEOUT_SECONDS)
    except httpx.HTTPError:
        return None
    if response.status_code != 200:
        return None
    try:
        answer = response.json()
    except ValueError:
        return None
    return answer if isinstance(answer, dict) else None


if __name__ == "__main__":
    main()
