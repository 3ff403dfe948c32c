"""``librarian knowledge``, ``librarian incidents`` and ``librarian solutions`` as real subprocesses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.cli.test_cli import run


def data(home: Path, *args: str, check: int | None = 0) -> Any:
    return json.loads(run(home, *args, "--json", check=check).stdout)


def test_documents_from_the_command_line(tmp_path: Path) -> None:
    home = tmp_path / "home"
    body = tmp_path / "disk.md"
    body.write_text("# Disk full on db hosts\n\nArchive the WAL, then grow the volume.\n")
    added = data(
        home,
        "knowledge",
        "add",
        "--title",
        "Disk full",
        "--file",
        str(body),
        "--type",
        "runbook",
        "--tag",
        "db",
    )
    edited = data(home, "knowledge", "edit", str(added["id"]), "--content", "Grow the volume first.")
    stale = run(
        home, "knowledge", "edit", str(added["id"]), "--base-version", "1", "--title", "Stale", check=1
    )
    old = data(home, "knowledge", "show", str(added["id"]), "--version", "1")
    found = data(home, "knowledge", "search", "grow the volume", "--type", "runbook")["results"]
    rated = data(home, "knowledge", "feedback", str(added["id"]), "helpful", "--rating", "5")
    versions = data(home, "knowledge", "history", str(added["id"]))
    deleted = data(home, "knowledge", "delete", str(added["id"]))

    assert edited["version"] == 2 and "version 2, not 1" in stale.stderr
    assert "Archive the WAL" in old["content"] and old["version"] == 1
    assert found[0]["id"] == added["id"] and found[0]["highlights"]
    assert rated["usefulness_score"] > 2.5 and [v["version"] for v in versions] == [2, 1]
    assert deleted["deleted"] is True
    assert data(home, "knowledge", "list") == []


def test_incidents_and_solutions_from_the_command_line(tmp_path: Path) -> None:
    home = tmp_path / "home"
    history = tmp_path / "history"
    history.mkdir()
    (history / "export.csv").write_text(
        "title,severity,symptoms,error_messages,affected_services,solution_applied,was_successful\n"
        "Orders disk full,critical,disk full,No space left on device,orders,Grew the volume,true\n"
        "Broken row,apocalyptic,,,,,\n"
    )
    imported = run(home, "incidents", "import", str(history), check=3)  # 3: some entries failed
    similar = data(
        home, "incidents", "similar", "orders writes failing", "--error", "No space left on device"
    )
    saved = data(
        home, "incidents", "save-learning", "--title", "Orders disk again", "--content", "Same as before.",
        "--error", "No space left on device", "--service", "orders",
        "--solution", "Grew the volume", "--worked",
    )  # fmt: skip
    solutions = data(home, "solutions", "get", "--error", "No space left on device", "--service", "orders")
    outcome = data(home, "solutions", "outcome", str(solutions["solutions"][0]["id"]), "--did-not-work")
    marked = data(
        home,
        "incidents",
        "mark",
        str(saved["incident"]["id"]),
        str(similar["similar_incidents"][0]["id"]),
        "--similar",
    )
    shown = data(home, "incidents", "show", str(similar["similar_incidents"][0]["id"]))

    assert "imported 1 incidents" in imported.stdout and "export.csv:3" in imported.stderr
    assert similar["similar_incidents"][0]["title"] == "Orders disk full"
    assert solutions["solutions"][0]["solution"] == "Grew the volume"
    assert (outcome["successes"], outcome["failures"]) == (1, 1)
    assert marked["similar"] is True and saved["incident"]["id"] in shown["related_incidents"]
