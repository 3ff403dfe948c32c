"""The tool registry's administration over MCP, through in-memory client sessions: an agent imports
the reference time server (``mcp-server-time``, from PyPI) as a tool source, lists, syncs and deletes
it, reads verbs and tools, counts them and reports a tool's use; a reader, a colleague who does not own
a source, an administrator who is not the server's operator and another organisation are refused or
see nothing of it."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from librarian.app import Librarian
from librarian.config import Settings
from librarian.embeddings.local import LocalMiniLMEmbedder
from librarian.knowledge.access import LOCAL_ORGANIZATION_ID, Principal
from librarian.mcp import create_mcp_server
from mcp import Client
from tests.mcp.test_mcp_tool_registry import SHORTEN, call, error_text

ADMIN_TOOLS = {
    "import_tool_source": "destructive",
    "list_tool_sources": "read",
    "sync_tool_source": "destructive",
    "delete_tool_source": "destructive",
    "list_verbs": "read",
    "get_verb": "read",
    "delete_verb": "destructive",
    "list_tools": "read",
    "get_tool": "read",
    "get_tool_stats": "read",
    "record_tool_use": "write",
}
TIME = [str(Path(sys.executable).parent / "mcp-server-time"), "--local-timezone", "UTC"]
TIME_TOOLS = {"time.get_current_time", "time.convert_time"}
# Importing a Python module lists its functions in-process: a fast source for the permission tests
# (two functions: a few texts to embed, which the light encoder does without loading PyTorch).
TEXTWRAP = {
    "kind": "python",
    "name": "textwrap",
    "spec": {"module": "textwrap", "functions": ["shorten", "indent"]},
}


@pytest.fixture(scope="module")
def lib(tmp_path_factory: pytest.TempPathFactory, embedder: LocalMiniLMEmbedder) -> Iterator[Librarian]:
    home: Path = tmp_path_factory.mktemp("mcp-tool-admin") / "home"
    with Librarian(Settings(home=home), embedder=embedder) as library:
        yield library


@pytest.fixture(scope="module")
def people(lib: Librarian) -> dict[str, Principal]:
    """The operator's organisation: alice (write), reader (read), root (an administrator's token);
    globex: eve (write)."""
    operator = lib.default_principal
    lib.identity.create_organization(operator, "globex")
    found: dict[str, Principal] = {}
    for organization, name, scopes in (
        (LOCAL_ORGANIZATION_ID, "alice", ["write"]),
        (LOCAL_ORGANIZATION_ID, "reader", ["read"]),
        (LOCAL_ORGANIZATION_ID, "root", ["admin"]),
        ("globex", "eve", ["write"]),
    ):
        lib.identity.create_user(operator, organization, name, admin=name == "root")
        token = lib.identity.create_token(operator, organization, name, scopes=scopes)["token"]
        found[name] = lib.identity.authenticate(token)
    return found


@asynccontextmanager
async def session(lib: Librarian, who: Principal | None = None) -> AsyncIterator[Client]:
    """A client session whose calls act for ``who`` (default: the server's operator), as over stdio
    `librarian --token ... mcp` acts for the token's user."""
    operator = lib.default_principal
    lib.default_principal = who or operator
    try:
        async with Client(create_mcp_server(lib)) as client:
            yield client
    finally:
        lib.default_principal = operator


@pytest.mark.anyio
async def test_each_tool_says_whether_it_changes_anything(lib: Librarian) -> None:
    async with session(lib) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}

    for name, effect in ADMIN_TOOLS.items():
        hints = tools[name].annotations
        assert hints is not None and tools[name].title, name
        assert hints.read_only_hint is (effect == "read"), name
        assert hints.destructive_hint is (effect == "destructive"), name
    assert tools["sync_tool_source"].annotations.open_world_hint is True  # type: ignore[union-attr]
    listing = tools["list_tools"].input_schema["properties"]
    assert listing["status"]["anyOf"][0]["enum"] == ["active", "quarantined", "inactive"]
    assert listing["limit"]["maximum"] == 200 and listing["after"]["description"]


@pytest.mark.anyio
async def test_the_time_server_is_imported_quarantined_synced_and_deleted(lib: Librarian) -> None:
    spec = {"command": TIME}
    async with session(lib) as client:
        imported = await call(client, "import_tool_source", kind="mcp", name="time", spec=spec)
        sources = await call(client, "list_tool_sources")
        waiting = await call(client, "list_tools", status="quarantined", type="mcp")
        tool = await call(client, "get_tool", tool_id="time.get_current_time")
        refused_call = await error_text(
            client, "call_tool", tool_id="time.get_current_time", arguments={"timezone": "UTC"}
        )
        synced = await call(client, "sync_tool_source", source="time")
        deleted = await call(client, "delete_tool_source", source="time")
        after = await call(client, "list_tool_sources")
        gone = await error_text(client, "sync_tool_source", source="time")
        tool_gone = await error_text(client, "get_tool", tool_id="time.get_current_time")

    assert imported["status"] == "quarantined" and set(imported["added"]) == TIME_TOOLS
    assert imported["counts"]["added"] == 2 and imported["truncated"] is False
    time_source = next(row for row in sources["sources"] if row["name"] == "time")
    assert time_source["kind"] == "mcp" and time_source["last_changes"]["added"] == 2
    assert {row["toolId"] for row in waiting["tools"]} >= TIME_TOOLS
    assert tool["status"] == "quarantined" and tool["source_id"] == time_source["id"]
    assert tool["binding"]["command"] == TIME and "timezone" in tool["inputSchema"]["properties"]
    assert "quarantined" in refused_call
    assert set(synced["unchanged"]) == TIME_TOOLS and synced["added"] == synced["removed"] == []
    assert deleted == {"source": "time", "removed_tools": 2}
    assert "time" not in [row["name"] for row in after["sources"]]
    assert "no tool source 'time'" in gone and "no tool 'time.get_current_time'" in tool_gone


@pytest.mark.anyio
async def test_who_may_not_change_a_source_is_refused(lib: Librarian, people: dict[str, Principal]) -> None:
    async with session(lib) as client:
        imported = await call(client, "import_tool_source", **TEXTWRAP)
    async with session(lib, people["reader"]) as client:
        reader_import = await error_text(client, "import_tool_source", **{**TEXTWRAP, "name": "tw2"})
    async with session(lib, people["root"]) as client:
        # An organisation's administrator is not the server's operator: a module runs on the server.
        not_operator = await error_text(client, "import_tool_source", **{**TEXTWRAP, "name": "tw3"})
        command = await error_text(
            client, "import_tool_source", kind="mcp", name="clock", spec={"command": TIME}
        )
    async with session(lib, people["alice"]) as client:
        seen = await call(client, "list_tool_sources")
        not_hers = await error_text(client, "sync_tool_source", source="textwrap")
        not_hers_to_delete = await error_text(client, "delete_tool_source", source="textwrap")
        bad_kind = await error_text(client, "import_tool_source", kind="soap", name="x", spec={})
    async with session(lib, people["eve"]) as client:
        other = await call(client, "list_tool_sources")
        unknown = await error_text(client, "delete_tool_source", source="textwrap")
    async with session(lib) as client:
        removed = await call(client, "delete_tool_source", source="textwrap")

    assert imported["status"] == "quarantined" and imported["added"] == [
        "textwrap.indent",
        "textwrap.shorten",
    ]
    assert "write" in reader_import
    assert "operator" in not_operator and "operator" in command
    listed = {row["name"]: row for row in seen["sources"]}
    assert "textwrap" in listed and listed["textwrap"]["spec"] is None  # not hers to see how it runs
    assert "belongs to someone else" in not_hers and "belongs to someone else" in not_hers_to_delete
    assert "kind" in bad_kind
    assert other == {"sources": []} and "no tool source 'textwrap'" in unknown
    assert removed["removed_tools"] == imported["counts"]["added"]


@pytest.mark.anyio
async def test_a_long_sync_report_stays_agent_sized(lib: Librarian) -> None:
    # One function found and 60 missing: a report of 60 problems, cut to 50 and counted.
    missing = [f"no_such_function_{number}" for number in range(60)]
    spec = {"module": "textwrap", "functions": ["dedent", *missing]}
    async with session(lib) as client:
        report = await call(client, "import_tool_source", kind="python", name="long", spec=spec)
        await call(client, "delete_tool_source", source="long")

    assert report["added"] == ["textwrap.dedent"] and report["counts"]["added"] == 1
    assert report["counts"]["errors"] == 60 and len(report["errors"]) == 50
    assert report["truncated"] is True and "no_such_function_0" in report["errors"][0]


@pytest.mark.anyio
async def test_verbs_are_listed_read_and_deleted(lib: Librarian, people: dict[str, Principal]) -> None:
    async with session(lib) as client:
        await call(client, "register_verb", manifest={"verb": "trim text", "description": "Cut a text"})
        await call(
            client,
            "register_verb",
            manifest={"verb": "tidy text", "description": "Clean a text", "decomposition": ["TRIM_TEXT"]},
        )
        first = await call(client, "list_verbs", limit=1)
        rest = await call(client, "list_verbs", after=first["next"], limit=200)
        novel = await call(client, "list_verbs", status="novel")
        read = await call(client, "get_verb", verb="tidy text")
        unknown = await error_text(client, "get_verb", verb="fly to the moon")
        still_used = await error_text(client, "delete_verb", verb="TRIM_TEXT")
    async with session(lib, people["alice"]) as client:
        not_hers = await error_text(client, "delete_verb", verb="TIDY_TEXT")
    async with session(lib, people["eve"]) as client:
        hidden = await error_text(client, "get_verb", verb="TIDY_TEXT")
        eve_verbs = await call(client, "list_verbs")
    async with session(lib) as client:
        deleted = await call(client, "delete_verb", verb="TIDY_TEXT")
        freed = await call(client, "delete_verb", verb="trim text")
        missing = await error_text(client, "delete_verb", verb="TIDY_TEXT")

    names = [verb["verb"] for verb in first["verbs"] + rest["verbs"]]
    assert len(first["verbs"]) == 1 and first["next"] == first["verbs"][0]["id"]
    assert {"TRIM_TEXT", "TIDY_TEXT"} <= set(names) and rest["next"] is None
    assert novel == {"verbs": [], "next": None}
    assert read["verb"] == "TIDY_TEXT" and read["decomposition"] == ["TRIM_TEXT"]
    assert "no verb 'FLY_TO_THE_MOON'" in unknown
    assert "still part of the decomposition of TIDY_TEXT" in still_used
    assert "belongs to someone else" in not_hers
    assert "no verb 'TIDY_TEXT'" in hidden and eve_verbs["verbs"] == []
    assert deleted["verb"] == "TIDY_TEXT" and freed["verb"] == "TRIM_TEXT"
    assert "no verb 'TIDY_TEXT'" in missing


@pytest.mark.anyio
async def test_tools_are_listed_page_by_page_read_and_counted(
    lib: Librarian, people: dict[str, Principal]
) -> None:
    async with session(lib) as client:
        for number in range(3):
            manifest = {**SHORTEN, "toolId": f"page:{number}", "name": f"page_{number}", "type": "openapi"}
            await call(client, "register_tool", manifest=manifest)
        await call(client, "set_tool_status", tool_id="page:2", status="inactive")
        first = await call(client, "list_tools", type="openapi", limit=2)
        second = await call(client, "list_tools", type="openapi", limit=2, after=first["next"])
        inactive = await call(client, "list_tools", status="inactive")
        tool = await call(client, "get_tool", tool_id="page:0")
        stats = await call(client, "get_tool_stats")
        unknown = await error_text(client, "get_tool", tool_id="page:404")
        too_many = await error_text(client, "list_tools", limit=1000)
        bad_status = await error_text(client, "list_tools", status="gone")
    async with session(lib, people["alice"]) as client:
        colleague = await call(client, "get_tool", tool_id="page:0")
    async with session(lib, people["eve"]) as client:
        hidden = await error_text(client, "get_tool", tool_id="page:0")
        eve_tools = await call(client, "list_tools")
        eve_stats = await call(client, "get_tool_stats")

    assert [row["toolId"] for row in first["tools"]] == ["page:0", "page:1"]
    assert first["next"] == first["tools"][-1]["id"]
    assert [row["toolId"] for row in second["tools"]] == ["page:2"] and second["next"] is None
    assert [row["toolId"] for row in inactive["tools"]] == ["page:2"]
    assert tool["inputSchema"] == SHORTEN["inputSchema"] and tool["binding"]["module"] == "textwrap"
    assert tool["calls"]["succeeded"] == 0 and tool["health"] == "healthy"
    assert stats["tools_active"] >= 2 and stats["tools_inactive"] >= 1
    assert "no tool 'page:404'" in unknown
    assert "limit" in too_many and "less than or equal to 200" in too_many
    assert "status" in bad_status
    assert colleague["toolId"] == "page:0" and colleague["binding"] is None  # not hers to change
    assert "no tool 'page:0'" in hidden and eve_tools == {"tools": [], "next": None}
    assert eve_stats == {"verbs": 0, "sources": 0}


@pytest.mark.anyio
async def test_a_reported_use_teaches_discovery(lib: Librarian, people: dict[str, Principal]) -> None:
    manifest = {**SHORTEN, "toolId": "learn:abridge", "name": "abridge_prose"}
    request = "fit a headline into a tweet"
    async with session(lib) as client:
        await call(client, "register_tool", manifest=manifest)
        recorded = await call(client, "record_tool_use", tool_id="learn:abridge", request=request)
        found = await call(client, "discover_tools", query=request, top_k=10)
        empty = await error_text(client, "record_tool_use", tool_id="learn:abridge", request=" ")
        unknown = await error_text(client, "record_tool_use", tool_id="learn:nothing", request=request)
    async with session(lib, people["reader"]) as client:
        reader = await error_text(client, "record_tool_use", tool_id="learn:abridge", request=request)
    async with session(lib, people["eve"]) as client:
        other = await error_text(client, "record_tool_use", tool_id="learn:abridge", request=request)

    assert recorded == {"tool": "learn:abridge", "request": request, "succeeded": True}
    hit = next(tool for tool in found["tools"] if tool["toolId"] == "learn:abridge")
    assert any("similar request" in reason for reason in hit["why"])
    assert "request: is empty" in empty and "no tool 'learn:nothing'" in unknown
    assert "write" in reader and "no tool 'learn:abridge'" in other


@pytest.mark.anyio
async def test_an_administrator_searches_the_tools_waiting_for_review(
    lib: Librarian, people: dict[str, Principal]
) -> None:
    manifest = {
        "name": "shrink-images",
        "type": "mcp",
        "description": "Shrink PNG and JPEG images losslessly",
        "binding": {"url": "https://mcp.example.org/mcp", "tool": "shrink"},
    }
    async with session(lib, people["root"]) as client:
        tool = await call(client, "register_tool", manifest=manifest)
        await call(client, "set_tool_status", tool_id=tool["toolId"], status="quarantined")
        active = await call(client, "discover_tools", query="shrink images")
        waiting = await call(client, "discover_tools", query="shrink images", status="quarantined")
    assert tool["toolId"] not in [t["toolId"] for t in active["tools"]]
    assert waiting["tools"][0]["toolId"] == tool["toolId"]
    async with session(lib, people["alice"]) as client:  # not an administrator
        refused = await error_text(client, "discover_tools", query="shrink images", status="quarantined")
    assert "only an administrator" in refused
