"""``librarian libraries``, ``librarian page`` and ``librarian delete-source`` as real subprocesses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.catalog.test_catalog import write_docs
from tests.cli.test_cli import run


def data(home: Path, *args: str, check: int | None = 0) -> Any:
    return json.loads(run(home, *args, "--json", check=check).stdout)


def test_the_catalog_from_the_command_line(tmp_path: Path) -> None:
    home = tmp_path / "home"
    docs = write_docs(tmp_path / "docs", "1.0")
    run(home, "ingest", str(docs), "--sdk", "aws-cli", "--version", "1.0")

    [library] = data(home, "libraries", "aws")
    assert library["library_id"] == "aws-cli" and library["versions"][0]["version"] == "1.0"
    page_url = (docs / "queues.md").resolve().as_uri()
    page = data(home, "page", page_url)
    assert page["content"].startswith("# create-queue") and page["sdk_version"] == "1.0"
    printed = run(home, "page", str(page["document_id"])).stdout
    assert "create-queue" in printed and "FIFO" in printed
    missing = run(home, "page", "cli://nothing", check=1)
    assert "no page at cli://nothing is indexed" in missing.stderr

    [deleted] = data(home, "delete-source", "aws-cli")["deleted"]
    assert deleted["documents"] == 2 and deleted["chunks"] >= 2
    assert data(home, "libraries") == []
