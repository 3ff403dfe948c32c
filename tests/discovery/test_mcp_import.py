"""Importing and calling MCP tools from real servers: the reference time and git servers (Python),
``@modelcontextprotocol/server-everything`` (Node, over stdio and streamable HTTP), Librarian's own
MCP server, and servers built on the official SDK that page, hang or crash while listing."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp.client.session import ClientSession

from librarian.app import Librarian
from librarian.config import Settings
from librarian.discovery.calling import ToolCallError
from librarian.discovery.mcp_client import McpServer, McpServerError, Progress, with_session
from librarian.embeddings.local import LocalMiniLMEmbedder
from librarian.errors import ForbiddenError, InvalidInputError, LibrarianError
from librarian.knowledge.access import Scope
from tests.processes import process_gone, wait_for
from tests.skipping import unavailable

BIN = Path(sys.executable).parent
TIME = [str(BIN / "mcp-server-time"), "--local-timezone", "UTC"]
GIT = [str(BIN / "mcp-server-git")]
TIME_TOOLS = {"time.get_current_time", "time.convert_time"}
GIT_NAMES = ("git_status", "git_log", "git_diff", "git_commit")


def git_tools(source: str) -> set[str]:
    """The git server's tools as imported under ``source`` (toolIds start with the source's name)."""
    return {f"{source}.{name}" for name in GIT_NAMES}


# A real MCP server on the official SDK's low-level Server: it lists its tools over several pages,
# or (by its argument) exits or hangs when asked for them.
PAGED_SERVER = """
import os
import sys

import anyio
import mcp_types as types
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server

MODE = sys.argv[1]
PAGES = [["alpha", "beta"], ["gamma"], ["delta"]]


async def list_tools(ctx, params):
    if MODE == "exit-on-list":
        os._exit(5)
    if MODE == "hang-on-list":
        await anyio.sleep(3600)
    page = int(params.cursor) if params is not None and params.cursor else 0
    tools = [
        types.Tool(name=name, description=f"The {name} tool.", input_schema={"type": "object"})
        for name in PAGES[page]
    ]
    return types.ListToolsResult(tools=tools, next_cursor=str(page + 1) if page + 1 < len(PAGES) else None)


async def main():
    server = Server("paged", version="1.2.3", on_list_tools=list_tools)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


anyio.run(main)
"""


@pytest.fixture
def make_lib(tmp_path: Path, embedder: LocalMiniLMEmbedder) -> Iterator[Callable[..., Librarian]]:
    """Facades on fresh homes with the given settings, closed after the test."""
    opened: list[Librarian] = []

    def make(**settings: Any) -> Librarian:
        lib = Librarian(Settings(home=tmp_path / f"home{len(opened)}", **settings), embedder=embedder)
        opened.append(lib)
        return lib

    yield make
    for lib in opened:
        lib.close()


@pytest.fixture
def lib(make_lib: Callable[..., Librarian]) -> Librarian:
    return make_lib()


@pytest.fixture(scope="session")
def everything_server(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``@modelcontextprotocol/server-everything`` installed from npm once per session: its entry point."""
    npm, node = shutil.which("npm"), shutil.which("node")
    if npm is None or node is None:
        unavailable("npm and node are needed to install @modelcontextprotocol/server-everything")
    prefix = tmp_path_factory.mktemp("server-everything")
    installed = subprocess.run(
        [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund", "--loglevel=error",
         "@modelcontextprotocol/server-everything"],
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    entry = prefix / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
    if installed.returncode != 0 or not entry.is_file():
        unavailable(f"npm install @modelcontextprotocol/server-everything failed: {installed.stderr[-500:]}")
    return entry


def tool_ids(lib: Librarian) -> set[str]:
    return {tool["toolId"] for tool in lib.discovery.tools()}


def found(lib: Librarian, query: str) -> list[str]:
    return [tool["toolId"] for tool in lib.discovery.search_tools(query, top_k=10)["results"]]


def test_time_tools_start_quarantined_and_answer_once_approved(lib: Librarian) -> None:
    result = lib.discovery.import_source("mcp", "time", {"command": TIME})

    assert set(result["added"]) == TIME_TOOLS
    assert result["status"] == "quarantined" and result["errors"] == []
    tool = lib.discovery.tool("time.get_current_time")
    assert tool["status"] == "quarantined"
    assert tool["type"] == "mcp" and tool["version"]
    assert "read_only" in tool["capabilities"]  # from the server's readOnlyHint
    assert tool["inputSchema"]["properties"]["timezone"]["type"] == "string"
    assert tool["binding"]["command"] == TIME and tool["binding"]["tool"] == "get_current_time"
    assert "time.get_current_time" not in found(lib, "what time is it now in a timezone")

    lib.discovery.set_status("time.get_current_time", "active")
    assert "time.get_current_time" in found(lib, "what time is it now in a timezone")
    before = datetime.now(UTC).date().isoformat()
    answer = lib.discovery.call("time.get_current_time", {"timezone": "UTC"})
    after = datetime.now(UTC).date().isoformat()

    assert not answer.is_error
    assert answer.content["timezone"] == "UTC"
    assert answer.content["datetime"][:10] in {before, after}
    assert before in answer.text or after in answer.text

    async def from_an_event_loop() -> Any:  # an async adapter calling the synchronous facade
        return lib.discovery.call("time.get_current_time", {"timezone": "Asia/Tokyo"})

    assert asyncio.run(from_an_event_loop()).content["timezone"] == "Asia/Tokyo"


def test_git_status_of_a_real_repository(lib: Librarian, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "notes.txt").write_text("untracked\n")

    result = lib.discovery.import_source("mcp", "git", {"command": GIT})
    assert set(result["added"]) >= git_tools("git")
    lib.discovery.set_status("git.git_status", "active")
    answer = lib.discovery.call("git.git_status", {"repo_path": str(repo)})

    assert not answer.is_error
    assert "No commits yet" in answer.text and "notes.txt" in answer.text
    with pytest.raises(InvalidInputError, match="repo_path"):
        lib.discovery.call("git.git_status", {})  # checked against the imported input schema


def test_everything_server_over_stdio(
    lib: Librarian, everything_server: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LIBRARIAN_TEST_SECRET", "do-not-leak")
    spec = {
        "command": ["node", str(everything_server), "stdio"],
        "env": {"GREETING": "hi"},
        "name": "everything",
    }
    result = lib.discovery.import_source("mcp", "everything", spec)

    assert {"everything.echo", "everything.get-sum", "everything.get-env"} <= set(result["added"])
    for key in ("everything.echo", "everything.get-env", "everything.trigger-long-running-operation"):
        lib.discovery.set_status(key, "active")
    assert lib.discovery.tool("everything.echo")["capabilities"] == ["read_only", "idempotent"]
    assert lib.discovery.tool("everything.echo")["binding"]["env"] == {"GREETING": "***"}  # may be secret
    echoed = lib.discovery.call("everything.echo", {"message": "hello from librarian"})
    assert echoed.text == "Echo: hello from librarian"
    assert echoed.content == [{"type": "text", "text": "Echo: hello from librarian"}]

    environment = json.loads(lib.discovery.call("everything.get-env").text)
    assert environment["GREETING"] == "hi"
    assert "LIBRARIAN_TEST_SECRET" not in environment
    assert environment["HOME"] != os.environ.get("HOME")

    lib.settings.tools_call_timeout_seconds = 3
    with pytest.raises(
        ToolCallError, match="did not answer tools/call trigger-long-running-operation within 3 s"
    ):
        lib.discovery.call("everything.trigger-long-running-operation", {"duration": 30, "steps": 2})
    assert lib.discovery.tool("everything.trigger-long-running-operation")["health"] == "failing"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


@pytest.fixture
def everything_over_http(everything_server: Path, tmp_path: Path) -> Iterator[str]:
    """server-everything in its streamable HTTP mode on a free loopback port: its MCP URL."""
    port = free_port()
    log_path = tmp_path / "everything-http.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            ["node", str(everything_server), "streamableHttp"],
            env={**os.environ, "PORT": str(port)},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            if not wait_for(lambda: accepts(port) or process.poll() is not None, 30) or not accepts(port):
                pytest.fail(f"server-everything did not listen on {port}: {log_path.read_text()}")
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            process.terminate()
            process.wait(timeout=10)


async def list_nothing(
    session: ClientSession, initialized: types.InitializeResult, progress: Progress
) -> None:
    raise AssertionError("the session should not have opened")


def test_everything_server_over_streamable_http(
    make_lib: Callable[..., Librarian], everything_over_http: str
) -> None:
    refusing = make_lib()
    with pytest.raises(InvalidInputError, match=r"url: refused .*127\.0\.0\.1 is a loopback address"):
        refusing.discovery.import_source("mcp", "everything", {"url": everything_over_http})
    assert tool_ids(refusing) == set()
    # A host name that passed the check but connects to a loopback address (DNS rebinding) is
    # refused at the connection: the address reached is checked again.
    with pytest.raises(InvalidInputError, match=r"the connection reached 127\.0\.0\.1, a non-public address"):
        with_session(McpServer(url=everything_over_http), refusing.settings, list_nothing)

    lib = make_lib(allowed_private_hosts=["127.0.0.1"])
    result = lib.discovery.import_source(
        "mcp", "everything", {"url": everything_over_http, "headers": {"X-Trace": "librarian-test"}}
    )
    echo = "everything.echo"  # the source's name, not the server's (mcp-servers/everything)
    assert echo in result["added"]
    binding = lib.discovery.tool(echo)["binding"]
    assert binding["transport"] == "http" and binding["headers"] == {"X-Trace": "***"}
    lib.discovery.set_status(echo, "active")
    assert lib.discovery.call(echo, {"message": "over http"}).text == "Echo: over http"


def test_librarians_own_mcp_server(lib: Librarian, tmp_path: Path) -> None:
    lib.settings.tools_call_timeout_seconds = 90  # the first start of a Python server with its imports
    command = [sys.executable, "-m", "librarian.cli.main", "--home", str(tmp_path / "served"), "mcp"]
    result = lib.discovery.import_source(
        "mcp", "librarian", {"command": command, "env": {"HF_HUB_OFFLINE": "1"}}
    )

    assert {"librarian.search_knowledge", "librarian.research_api_usage", "librarian.get_runbook"} <= set(
        result["added"]
    )
    assert result["errors"] == []


def test_sync_reports_unchanged_changed_added_and_removed(lib: Librarian) -> None:
    first = lib.discovery.import_source("mcp", "time", {"command": TIME})
    assert set(first["added"]) == TIME_TOOLS
    lib.discovery.set_status("time.convert_time", "active")

    again = lib.discovery.import_source("mcp", "time", {"command": TIME})
    assert set(again["unchanged"]) == TIME_TOOLS
    assert again["added"] == again["changed"] == again["removed"] == []

    # The same tools from another command line: their bindings change, their review does not.
    paris = [*TIME[:-1], "Europe/Paris"]
    moved = lib.discovery.import_source("mcp", "time", {"command": paris})
    assert set(moved["changed"]) == TIME_TOOLS and moved["added"] == moved["removed"] == []
    assert lib.discovery.tool("time.convert_time")["binding"]["command"] == paris
    assert lib.discovery.tool("time.convert_time")["status"] == "active"

    swapped = lib.discovery.import_source("mcp", "time", {"command": GIT})
    assert set(swapped["removed"]) == TIME_TOOLS
    assert set(swapped["added"]) >= git_tools("time") and swapped["unchanged"] == []
    assert tool_ids(lib) == set(swapped["added"])


def test_paged_tools_list_is_read_to_the_end(lib: Librarian, tmp_path: Path) -> None:
    script = tmp_path / "paged_server.py"
    script.write_text(PAGED_SERVER)
    result = lib.discovery.import_source("mcp", "paged", {"command": [sys.executable, str(script), "paged"]})

    assert set(result["added"]) == {"paged.alpha", "paged.beta", "paged.gamma", "paged.delta"}
    assert lib.discovery.tool("paged.delta")["version"] == "1.2.3"


def running(marker: str) -> list[str]:
    """Command lines of this user's live processes that mention ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and not process_gone(int(entry.name)):
            try:
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if marker in command:
                found.append(command)
    return found


def test_a_failing_server_changes_nothing(lib: Librarian, tmp_path: Path) -> None:
    script = tmp_path / "paged_server.py"
    script.write_text(PAGED_SERVER)
    lib.discovery.import_source("mcp", "time", {"command": TIME})
    cases: list[tuple[list[str], float, type[LibrarianError], str]] = [
        (
            ["no-such-mcp-server"],
            30,
            InvalidInputError,
            "`no-such-mcp-server`: cannot start it: .* was not found",
        ),
        (
            [sys.executable, "-c", "import sys; print('dying', file=sys.stderr); sys.exit(3)"],
            30,
            McpServerError,
            "closed the connection during initialize .*its stderr ends: dying",
        ),
        (
            [sys.executable, "-c", "import time; time.sleep(60)", str(tmp_path)],
            3,
            McpServerError,
            "did not answer initialize within 3 s",
        ),
        (
            [sys.executable, str(script), "exit-on-list"],
            30,
            McpServerError,
            "closed the connection during tools/list",
        ),
        (
            [sys.executable, str(script), "hang-on-list"],
            8,
            McpServerError,
            "did not answer tools/list within 8 s",
        ),
    ]
    for command, timeout, error, message in cases:
        lib.settings.tools_call_timeout_seconds = timeout
        with pytest.raises(error, match=message) as caught:
            lib.discovery.import_source("mcp", "time", {"command": command})
        assert "MCP server `" in caught.value.message, command
        assert tool_ids(lib) == TIME_TOOLS, command  # the registry keeps what it had
        assert lib.discovery.sources()[0]["last_error"] == caught.value.message
    # The servers that hung were stopped, not left behind.
    assert wait_for(lambda: not running(str(tmp_path)), 10), running(str(tmp_path))


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"command": []}, "command: must be a non-empty list of strings"),
        ({"command": TIME, "url": "https://example.com/mcp"}, "give either 'command' .* or 'url'"),
        ({"comand": TIME}, "unknown field 'comand'"),
        (
            {"command": TIME, "env": {"NOT A NAME": "x"}},
            "env: 'NOT A NAME' is not a valid environment variable",
        ),
        ({"command": TIME, "env": {"TOKEN": 3}}, "env.TOKEN: must be a string"),
        ({"command": TIME, "cwd": "/no/such/directory"}, "cwd: /no/such/directory is not a directory"),
        ({"command": TIME, "headers": {"A": "b"}}, "headers: only a server reached by 'url'"),
        ({"url": "ftp://example.com/mcp"}, "url: .*only http\\(s\\) URLs"),
        ({"url": "http://127.0.0.1:9/mcp"}, "url: refused .*loopback"),
        (
            {"url": "https://example.com/mcp", "headers": {"X": "a\r\nInjected: 1"}},
            "headers.X: must be a string on one line",
        ),
        ({"command": TIME, "name": 7}, "name: must be a non-empty string"),
    ],
)
def test_a_bad_spec_is_refused_by_field(lib: Librarian, spec: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        lib.discovery.import_source("mcp", "bad", spec)
    assert tool_ids(lib) == set()


def test_only_the_servers_operator_imports_a_command(lib: Librarian) -> None:
    writer = dataclasses.replace(
        lib.default_principal, scopes=frozenset({Scope.READ, Scope.WRITE}), is_operator=False
    )
    admin = dataclasses.replace(lib.default_principal, is_operator=False)
    for who in (writer, admin):  # an organisation's administrator does not get the server's rights
        with pytest.raises(
            ForbiddenError, match="runs a program on the server, which only the server's operator"
        ):
            lib.discovery.import_source("mcp", "time", {"command": TIME}, principal=who)
    assert tool_ids(lib) == set()


def test_a_call_the_server_refuses_names_the_tool_and_server(lib: Librarian) -> None:
    lib.discovery.register_tool(
        {
            "toolId": "time.missing",
            "name": "missing",
            "type": "mcp",
            "binding": {"command": TIME, "tool": "nope"},
        }
    )
    with pytest.raises(
        ToolCallError, match=r"MCP server `mcp-server-time .*`: answered tools/call nope with an error"
    ):
        lib.discovery.call("time.missing", {})
    assert lib.discovery.tool("time.missing")["calls"]["failed"] == 1
