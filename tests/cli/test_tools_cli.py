"""``librarian tools`` and ``librarian verbs``: register manifests from files, list with a cursor,
show, search, review, call, record uses, import and sync sources, and verbs, through Typer's CliRunner
in process (sharing the session's embedding model), and a real subprocess for errors and exit codes."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from librarian.app import Librarian
from librarian.cli import common
from librarian.cli.main import app
from librarian.config import Settings
from librarian.embeddings.local import LocalMiniLMEmbedder
from tests.cli.test_cli import run

EXIT_PARTIAL = 3
TOOLS = """\
- toolId: text:shorten/v1
  name: shorten_text
  type: python
  description: Shorten a text to a maximum width, cutting whole words and adding a placeholder
  actionVerbs: [SHORTEN_TEXT]
  inputSchema:
    type: object
    properties:
      text: {type: string}
      width: {type: integer}
    required: [text, width]
  binding: {module: textwrap, function: shorten}
- toolId: text:dedent
  name: dedent_text
  type: python
  description: Remove the common leading whitespace from every line of a text
  inputSchema:
    type: object
    properties:
      text: {type: string}
    required: [text]
  binding: {module: textwrap, function: dedent}
- name: broken
  type: soap
"""
VERBS = """\
- verb: shorten text
  description: Make a text fit a maximum length
- verb: SUMMARISE
  description: Summarise a document in a few lines
  decomposition: [SHORTEN_TEXT]
"""
SENTENCE = "The quick brown fox jumps over the lazy dog"


class Cli:
    """``librarian --home HOME ...`` in process."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.runner = CliRunner()

    def __call__(self, *args: str, code: int = 0) -> Result:
        # The CLI's consoles are module globals that read COLUMNS when first imported (by whichever
        # test came first in this process), so the width is set on them for the call.
        widths = common.stdout.width, common.stderr.width
        common.stdout.width = common.stderr.width = 200
        try:
            result = self.runner.invoke(app, ["--home", str(self.home), *args], env={"COLUMNS": "200"})
        finally:
            common.stdout.width, common.stderr.width = widths
        assert result.exit_code == code, (result.stdout, result.stderr, result.exception)
        return result

    def data(self, *args: str, code: int = 0) -> Any:
        return json.loads(self(*args, "--json", code=code).stdout)


@pytest.fixture
def cli(tmp_path: Path, embedder: LocalMiniLMEmbedder, monkeypatch: pytest.MonkeyPatch) -> Cli:
    """The CLI on a fresh data directory; every command shares the session's loaded model."""
    monkeypatch.setattr("librarian.app.create_embedder", lambda _settings: embedder)
    return Cli(tmp_path / "home")


@pytest.fixture
def tools_file(tmp_path: Path) -> Path:
    path = tmp_path / "tools.yaml"
    path.write_text(TOOLS)
    return path


def test_register_list_show_and_search(cli: Cli, tools_file: Path, tmp_path: Path) -> None:
    single = tmp_path / "single.json"
    single.write_text(json.dumps({"name": "lonely", "type": "python", "inputSchema": {"type": 7}}))

    partial = cli("tools", "register", str(tools_file), code=EXIT_PARTIAL)
    again = cli.data("tools", "register", str(tools_file), code=EXIT_PARTIAL)
    refused = cli("tools", "register", str(single), code=1)
    first = cli.data("tools", "list", "--limit", "1")
    second = cli.data("tools", "list", "--limit", "1", "--after", str(first["next"]))
    table = cli("tools", "list", "--limit", "1").stdout
    shown = cli.data("tools", "show", "text:shorten/v1")
    page = cli("tools", "show", "text:shorten/v1").stdout
    found = cli.data("tools", "search", "make a sentence fit in a few characters", "--top-k", "2")
    typed = cli.data("tools", "search", "make a sentence fit", "--type", "openapi")
    ranked = cli("tools", "search", "remove the indentation of lines").stdout
    stats = cli.data("tools", "stats")

    assert "tool text:shorten/v1: created" in partial.stdout and "tool text:dedent: created" in partial.stdout
    assert "refused" in partial.stderr and "type: 'soap' is not one of" in partial.stderr
    assert [view["change"] for view in again["registered"]] == ["unchanged", "unchanged"]
    assert again["errors"][0]["manifest"].endswith("#3 (broken)")
    assert "inputSchema: not a valid JSON Schema" in refused.stderr
    assert [tool["toolId"] for tool in first["tools"]] == ["text:shorten/v1"]
    assert [tool["toolId"] for tool in second["tools"]] == ["text:dedent"]
    assert "text:shorten/v1" in table and f"librarian tools list --after {first['next']}" in table
    assert shown["inputSchema"]["required"] == ["text", "width"] and shown["status"] == "active"
    assert "input schema:" in page and '"width"' in page and "SHORTEN_TEXT" in page
    best = found["results"][0]
    assert best["toolId"] == "text:shorten/v1" and best["score"] > 0 and best["why"]
    assert 0 <= best["confidence"] <= 1
    assert typed["results"] == []
    assert ranked.index("text:dedent") < ranked.index("text:shorten/v1") and "confidence" in ranked
    assert stats == {"tools_active": 2, "verbs": 0, "sources": 0}


def test_review_call_and_record_uses(cli: Cli, tools_file: Path, embedder: LocalMiniLMEmbedder) -> None:
    cli("tools", "register", str(tools_file), code=EXIT_PARTIAL)
    with Librarian(Settings(home=cli.home), embedder=embedder) as lib:
        lib.discovery.set_status("text:shorten/v1", "quarantined")
    query = "make a sentence fit in a few characters"
    arguments = json.dumps({"text": SENTENCE, "width": 20})

    hidden = cli.data("tools", "search", query)
    review = cli.data("tools", "list", "--status", "quarantined")
    refused = cli("tools", "call", "text:shorten/v1", "--args", arguments, code=1)
    approved = cli.data("tools", "approve", "text:shorten/v1")
    called = cli("tools", "call", "text:shorten/v1", "--args", arguments, "--request", query)
    as_json = cli.data("tools", "call", "text:shorten/v1", "--args", arguments)
    bad_json = cli("tools", "call", "text:shorten/v1", "--args", "{not json", code=1)
    bad_args = cli("tools", "call", "text:shorten/v1", "--args", '{"text": "x"}', code=1)
    failed = cli("tools", "call", "text:shorten/v1", "--args", '{"text": "x", "width": -1}', code=1)
    used = cli.data("tools", "use", "text:dedent", "strip the indentation", "--failed")
    off = cli("tools", "deactivate", "text:dedent")
    off_search = cli.data("tools", "search", "remove the indentation of lines")
    on = cli.data("tools", "activate", "text:dedent")
    deleted = cli("tools", "delete", "text:dedent")
    gone = cli("tools", "show", "text:dedent", code=1)

    assert "text:shorten/v1" not in [hit["toolId"] for hit in hidden["results"]]
    assert [tool["toolId"] for tool in review["tools"]] == ["text:shorten/v1"]
    assert "is quarantined" in refused.stderr and "approve" in refused.stderr
    assert approved["status"] == "active"
    assert called.stdout.strip() == textwrap.shorten(SENTENCE, 20)
    assert as_json["content"] == textwrap.shorten(SENTENCE, 20) and as_json["is_error"] is False
    assert "--args: invalid JSON" in bad_json.stderr
    assert "'width' is a required property" in bad_args.stderr
    assert "ValueError" in failed.stderr and "Traceback" not in failed.stderr
    assert used == {"tool": "text:dedent", "request": "strip the indentation", "succeeded": False}
    assert "text:dedent is inactive" in off.stdout
    assert "text:dedent" not in [hit["toolId"] for hit in off_search["results"]]
    assert on["status"] == "active"
    assert "text:dedent deleted" in deleted.stdout and "no tool 'text:dedent'" in gone.stderr


def test_import_sync_list_and_remove_a_source(cli: Cli) -> None:
    imported = cli.data("tools", "import", "python", "tw", "--module", "textwrap", "--function", "indent")
    sources = cli.data("tools", "sources")
    table = cli("tools", "sources").stdout
    synced = cli("tools", "sync", "tw")
    quarantined = cli.data("tools", "list", "--status", "quarantined")
    removed = cli.data("tools", "remove-source", "tw")
    no_origin = cli("tools", "import", "mcp", "time", code=1)
    stray = cli("tools", "import", "python", "tw", "--url", "https://example.com", code=1)
    unknown_kind = cli("tools", "import", "soap", "tw", "--module", "textwrap", code=1)
    bad_env = cli(
        "tools", "import", "mcp", "time", "--command", "mcp-server-time", "--env", "NOVALUE", code=1
    )

    assert imported["status"] == "quarantined" and imported["added"] == ["textwrap.indent"]
    assert sources[0]["name"] == "tw" and sources[0]["spec"] == {
        "module": "textwrap",
        "functions": ["indent"],
    }
    assert "tw" in table and "python" in table
    assert "1 unchanged" in synced.stdout
    assert [tool["toolId"] for tool in quarantined["tools"]] == ["textwrap.indent"]
    assert removed == {"source": "tw", "removed_tools": 1}
    assert "an mcp source needs one of --command or --url" in no_origin.stderr
    assert "--url: not used by a python source" in stray.stderr
    assert "'soap' is not one of mcp, openapi, python, cli" in unknown_kind.stderr
    assert "--env 'NOVALUE': give NAME=VALUE" in bad_env.stderr


def test_verbs_register_list_show_discover_and_delete(cli: Cli, tools_file: Path, tmp_path: Path) -> None:
    verbs = tmp_path / "verbs.yaml"
    verbs.write_text(VERBS)
    cli("tools", "register", str(tools_file), code=EXIT_PARTIAL)

    registered = cli.data("verbs", "register", str(verbs))
    listed = cli.data("verbs", "list")
    table = cli("verbs", "list").stdout
    shown = cli("verbs", "show", "summarise").stdout
    exact = cli.data("verbs", "discover", "shorten text")
    described = cli("verbs", "discover", "cut a long text down to size").stdout
    still_used = cli("verbs", "delete", "SHORTEN_TEXT", code=1)
    deleted = cli.data("verbs", "delete", "SUMMARISE")

    assert [(view["verb"], view["change"]) for view in registered["registered"]] == [
        ("SHORTEN_TEXT", "created"),
        ("SUMMARISE", "created"),
    ]
    assert [row["verb"] for row in listed["verbs"]] == ["SHORTEN_TEXT", "SUMMARISE"] and listed[
        "next"
    ] is None
    assert "SUMMARISE" in table and "SHORTEN_TEXT" in table
    assert "decomposes into: SHORTEN_TEXT" in shown
    assert exact["best"]["kind"] == "verb" and exact["best"]["verb"] == "SHORTEN_TEXT"
    assert exact["verbs"][0]["confidence"] == 1.0
    assert "text:shorten/v1" in [tool["toolId"] for tool in exact["tools"]]
    assert "best:" in described and "SHORTEN_TEXT" in described
    assert "SUMMARISE" in still_used.stderr
    assert deleted["verb"] == "SUMMARISE"


def test_errors_go_to_stderr_with_their_exit_code(tmp_path: Path) -> None:
    """A real process: a refused manifest file, an unknown verb, a file that is not there."""
    home = tmp_path / "home"
    bad = tmp_path / "bad.json"
    bad.write_text('[{"toolId": "x y", "type": "python"}]')

    refused = run(home, "tools", "register", str(bad), check=1)
    unknown = run(home, "verbs", "show", "NO_SUCH_VERB", check=1)
    missing = run(home, "tools", "register", str(tmp_path / "missing.yaml"), check=1)

    assert refused.stdout == "" and "name: is required" in refused.stderr and "toolId:" in refused.stderr
    assert "error: no verb 'NO_SUCH_VERB'" in unknown.stderr and "librarian verbs list" in unknown.stderr
    assert "cannot read" in missing.stderr and "missing.yaml" in missing.stderr
