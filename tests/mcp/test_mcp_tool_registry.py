"""The tool registry's MCP tools through an in-memory client session: an agent that sees only
discover_tools and call_tool finds a registered tool by what it does, reads its input schema and calls
it; quarantined tools and other organisations' tools stay out of its reach."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp_types
import pytest

from librarian.app import Librarian
from librarian.config import Settings
from librarian.embeddings.local import LocalMiniLMEmbedder
from librarian.mcp import create_mcp_server
from mcp import Client
from tests.mcp.test_mcp import structured

REGISTRY_TOOLS = {
    "discover_tools",
    "call_tool",
    "discover_verbs",
    "register_tool",
    "register_verb",
    "set_tool_status",
    "delete_tool",
}
SHORTEN = {
    "toolId": "text:shorten/v1",
    "name": "shorten_text",
    "type": "python",
    "description": "Shorten a text to a maximum width, cutting whole words and adding a placeholder",
    "actionVerbs": ["SHORTEN_TEXT"],
    "inputSchema": {
        "type": "object",
        "properties": {
            "text": {"type": "string", "description": "The text to shorten."},
            "width": {"type": "integer", "description": "The maximum width."},
        },
        "required": ["text", "width"],
    },
    "binding": {"module": "textwrap", "function": "shorten"},
}
SENTENCE = "The quick brown fox jumps over the lazy dog"


@pytest.fixture(scope="module")
def lib(tmp_path_factory: pytest.TempPathFactory, embedder: LocalMiniLMEmbedder) -> Iterator[Librarian]:
    home: Path = tmp_path_factory.mktemp("mcp-tools") / "home"
    with Librarian(Settings(home=home), embedder=embedder) as library:
        yield library


async def call(client: Client, tool: str, **arguments: Any) -> Any:
    return structured(await client.call_tool(tool, arguments))


async def error_text(client: Client, tool: str, **arguments: Any) -> str:
    result = await client.call_tool(tool, arguments)
    assert result.is_error, result.content
    block = result.content[0]
    assert isinstance(block, mcp_types.TextContent)
    return block.text


@pytest.mark.anyio
async def test_the_tools_an_agent_sees(lib: Librarian) -> None:
    async with Client(create_mcp_server(lib)) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        instructions = client.instructions or ""

    assert set(tools) >= REGISTRY_TOOLS
    discover = tools["discover_tools"]
    assert discover.input_schema["required"] == ["query"]
    assert {"top_k", "type", "category", "capability"} <= set(discover.input_schema["properties"])
    assert "ctx" not in discover.input_schema["properties"]
    assert "call_tool" in (discover.description or "") and "inputSchema" in (discover.description or "")
    assert discover.annotations is not None and discover.annotations.read_only_hint is True
    assert tools["discover_verbs"].annotations is not None
    assert tools["discover_verbs"].annotations.read_only_hint is True
    proxy = tools["call_tool"]
    assert proxy.input_schema["required"] == ["tool_id"]
    assert "discover_tools" in (proxy.description or "")
    assert proxy.annotations is not None and proxy.annotations.read_only_hint is False
    assert "discover_tools" in instructions and "call_tool" in instructions


@pytest.mark.anyio
async def test_an_agent_registers_finds_and_calls_a_tool(lib: Librarian) -> None:
    async with Client(create_mcp_server(lib)) as client:
        registered = await call(client, "register_tool", manifest=SHORTEN)
        found = await call(client, "discover_tools", query="make a long sentence fit in a few characters")
        typed = await call(client, "discover_tools", query="shorten a text", type="openapi")
        best = found["tools"][0]
        answer = await call(
            client,
            "call_tool",
            tool_id=best["toolId"],
            arguments={"text": SENTENCE, "width": 20},
            request="make a long sentence fit in a few characters",
        )

    assert registered["change"] == "created" and registered["toolId"] == "text:shorten/v1"
    assert set(best) == {
        "toolId", "name", "type", "description", "inputSchema", "score", "confidence", "why"
    }  # fmt: skip
    assert best["toolId"] == "text:shorten/v1" and best["inputSchema"] == SHORTEN["inputSchema"]
    assert best["score"] > 0 and 0 <= best["confidence"] <= 1 and best["why"]
    assert typed["tools"] == []
    assert answer["content"] == textwrap.shorten(SENTENCE, 20) and answer["is_error"] is False


@pytest.mark.anyio
async def test_a_failed_call_tells_the_agent_what_went_wrong(lib: Librarian) -> None:
    manifest = {**SHORTEN, "toolId": "text:shorten/failing", "name": "clip_text"}
    async with Client(create_mcp_server(lib)) as client:
        await call(client, "register_tool", manifest=manifest)
        missing = await error_text(
            client, "call_tool", tool_id="text:shorten/failing", arguments={"text": "x"}
        )
        failed = await error_text(
            client, "call_tool", tool_id="text:shorten/failing", arguments={"text": SENTENCE, "width": -1}
        )
        unknown = await error_text(client, "call_tool", tool_id="no.such/tool", arguments={})

    assert "width" in missing and "required" in missing
    assert "ValueError" in failed and "width" in failed and "Traceback" not in failed
    assert "no tool 'no.such/tool'" in unknown


@pytest.mark.anyio
async def test_a_bad_manifest_is_refused_naming_its_fields(lib: Librarian) -> None:
    async with Client(create_mcp_server(lib)) as client:
        tool = await error_text(client, "register_tool", manifest={"type": "soap"})
        verb = await error_text(client, "register_verb", manifest={"verb": "GREET"})

    assert "name: is required" in tool and "type: 'soap'" in tool
    assert "description: is required" in verb


@pytest.mark.anyio
async def test_verbs_are_registered_and_discovered(lib: Librarian) -> None:
    verb = {"verb": "shorten text", "description": "Make a text fit a maximum length"}
    async with Client(create_mcp_server(lib)) as client:
        registered = await call(client, "register_verb", manifest=verb)
        found = await call(client, "discover_verbs", description="SHORTEN_TEXT")
        described = await call(client, "discover_verbs", description="truncate a long text", top_k=2)

    assert registered["verb"] == "SHORTEN_TEXT" and registered["change"] == "created"
    assert found["best"]["kind"] == "verb" and found["best"]["verb"] == "SHORTEN_TEXT"
    assert described["verbs"][0]["verb"] == "SHORTEN_TEXT" and described["verbs"][0]["why"]
    assert "text:shorten/v1" in [tool["toolId"] for tool in described["tools"]]


@pytest.mark.anyio
async def test_a_quarantined_tool_is_neither_discovered_nor_called(lib: Librarian) -> None:
    manifest = {**SHORTEN, "toolId": "review:squeeze", "name": "squeeze_words"}
    query = "squeeze the words of a text into a width"
    async with Client(create_mcp_server(lib)) as client:
        await call(client, "register_tool", manifest=manifest)
        before = await call(client, "discover_tools", query=query)
        lib.discovery.set_status("review:squeeze", "quarantined")
        after = await call(client, "discover_tools", query=query)
        refused = await error_text(
            client, "call_tool", tool_id="review:squeeze", arguments={"text": SENTENCE, "width": 20}
        )

    assert before["tools"][0]["toolId"] == "review:squeeze"
    assert "review:squeeze" not in [tool["toolId"] for tool in after["tools"]]
    assert "quarantined" in refused and "approve" in refused


@pytest.mark.anyio
async def test_another_organisation_never_reaches_the_tool(lib: Librarian) -> None:
    operator = lib.default_principal
    lib.identity.create_organization(operator, "globex")
    lib.identity.create_user(operator, "globex", "eve")
    token = lib.identity.create_token(operator, "globex", "eve", scopes=["write"])["token"]
    manifest = {**SHORTEN, "toolId": "local:only", "name": "trim_prose"}
    async with Client(create_mcp_server(lib)) as client:
        await call(client, "register_tool", manifest=manifest)
    # Over stdio the server acts for the facade's principal: eve's, as `librarian --token ... mcp` does.
    lib.default_principal = lib.identity.authenticate(token)
    try:
        async with Client(create_mcp_server(lib)) as client:
            found = await call(client, "discover_tools", query="trim prose to a width")
            refused = await error_text(
                client, "call_tool", tool_id="local:only", arguments={"text": SENTENCE, "width": 20}
            )
    finally:
        lib.default_principal = operator

    assert "local:only" not in [tool["toolId"] for tool in found["tools"]]
    assert "no tool 'local:only'" in refused


@pytest.mark.anyio
async def test_an_agent_deactivates_reactivates_and_deletes_a_tool(lib: Librarian) -> None:
    manifest = {**SHORTEN, "toolId": "lifecycle:clip", "name": "clip_prose"}
    query = "clip prose to a width"
    async with Client(create_mcp_server(lib)) as client:
        await call(client, "register_tool", manifest=manifest)
        off = await call(client, "set_tool_status", tool_id="lifecycle:clip", status="inactive")
        hidden = await call(client, "discover_tools", query=query)
        on = await call(client, "set_tool_status", tool_id="lifecycle:clip", status="active")
        shown = await call(client, "discover_tools", query=query)
        bad = await error_text(client, "set_tool_status", tool_id="lifecycle:clip", status="gone")
        deleted = await call(client, "delete_tool", tool_id="lifecycle:clip")
        missing = await error_text(client, "delete_tool", tool_id="lifecycle:clip")

    assert off["status"] == "inactive" and "lifecycle:clip" not in [t["toolId"] for t in hidden["tools"]]
    assert on["status"] == "active" and shown["tools"][0]["toolId"] == "lifecycle:clip"
    assert "status: 'gone' is not one of" in bad
    assert deleted["toolId"] == "lifecycle:clip" and "no tool 'lifecycle:clip'" in missing
