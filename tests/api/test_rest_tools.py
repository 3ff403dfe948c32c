"""/verbs, /tools and /tool-sources over REST: register verbs and tools, find them by meaning with a
score, a confidence and the reasons, review quarantined tools, call them, import sources, each as a
user of one of two organisations that never see each other's tools."""

from __future__ import annotations

import dataclasses
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from fastapi.testclient import TestClient

from librarian.api import create_app
from librarian.app import Librarian
from librarian.config import Settings
from librarian.embeddings.local import LocalMiniLMEmbedder
from librarian.knowledge.access import Principal

# A toolId with every character the routes must take in a path: dots, a colon, slashes.
WEATHER_ID = "weather.api:v1/current/get"
WEATHER = {
    "toolId": WEATHER_ID,
    "name": "get_current_weather",
    "type": "python",
    "description": "The current weather (temperature, wind, rain) for a city",
    "actionVerbs": ["GET_WEATHER"],
    "capabilities": ["weather"],
    "category": "weather",
    "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    "binding": {"module": "json", "function": "dumps"},
}
SHORTEN = {
    "toolId": "text:shorten",
    "name": "shorten_text",
    "type": "python",
    "description": "Shorten a text to a maximum width, cutting whole words and adding a placeholder",
    "inputSchema": {
        "type": "object",
        "properties": {"text": {"type": "string"}, "width": {"type": "integer"}},
        "required": ["text", "width"],
    },
    "binding": {"module": "textwrap", "function": "shorten"},
}


@dataclass
class Api:
    """The REST app, the facade behind it and a bearer-token header per user.

    ``acme``: alice (write), reader (read only) and root (administrator); ``globex``: eve (write).
    """

    client: TestClient
    lib: Librarian
    headers: dict[str, dict[str, str]]

    def post(self, user: str, path: str, body: dict[str, Any] | None = None) -> Any:
        return self.client.post(path, json=body, headers=self.headers[user])

    def get(self, user: str, path: str, **params: Any) -> Any:
        return self.client.get(path, params=params, headers=self.headers[user])

    def delete(self, user: str, path: str) -> Any:
        return self.client.delete(path, headers=self.headers[user])

    def principal(self, user: str) -> Principal:
        """The user as the facade takes it (the token the REST calls send)."""
        token = self.headers[user]["Authorization"].removeprefix("Bearer ")
        return self.lib.identity.authenticate(token)

    def search(self, user: str, query: str, **filters: Any) -> list[str]:
        response = self.post(user, "/tools/search", {"query": query, **filters})
        assert response.status_code == 200, response.text
        return [hit["toolId"] for hit in response.json()["results"]]


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory, embedder: LocalMiniLMEmbedder) -> Iterator[Api]:
    home = tmp_path_factory.mktemp("rest-tools") / "home"
    with Librarian(Settings(home=home), embedder=embedder) as lib:
        operator = lib.default_principal
        headers = {}
        for organization, users in (("acme", ("alice", "reader", "root")), ("globex", ("eve",))):
            lib.identity.create_organization(operator, organization)
            for name in users:
                lib.identity.create_user(operator, organization, name, admin=name == "root")
                scopes = {"root": ["admin"], "reader": ["read"]}.get(name, ["write"])
                token = lib.identity.create_token(operator, organization, name, scopes=scopes)["token"]
                headers[name] = {"Authorization": f"Bearer {token}"}
        with TestClient(create_app(lib)) as client:
            yield Api(client, lib, headers)


def register_approved(api: Api, user: str, manifest: dict[str, Any]) -> dict[str, Any]:
    """Register a tool as ``user`` and have the server's operator approve it: a Python tool runs code
    on the server, so it starts quarantined and no token (not even an administrator's) lifts that."""
    created = api.post(user, "/tools", manifest)
    assert created.status_code == 201, created.text
    assert created.json()["status"] == "quarantined"
    refused = api.post("root", f"/tools/{manifest['toolId']}/approve")
    assert refused.status_code == 403 and "operator" in refused.json()["message"]
    operator = dataclasses.replace(api.principal("root"), is_operator=True)
    approved = api.lib.discovery.set_status(manifest["toolId"], "active", principal=operator)
    return {**approved, "change": created.json()["change"]}


@pytest.fixture(scope="module")
def weather(api: Api) -> dict[str, Any]:
    return register_approved(api, "alice", WEATHER)


def test_a_registered_tool_is_found_by_meaning_with_score_confidence_and_why(
    api: Api, weather: dict[str, Any]
) -> None:
    again = api.post("alice", "/tools", WEATHER)
    found = api.post("alice", "/tools/search", {"query": "is it raining in Paris right now?", "top_k": 3})
    filtered_out = api.search("alice", "is it raining in Paris right now?", type="openapi")
    read = api.get("alice", f"/tools/{WEATHER_ID}")
    encoded = api.get("alice", "/tools/weather.api%3Av1%2Fcurrent%2Fget")
    by_id = api.get("alice", f"/tools/{weather['id']}")

    assert weather["change"] == "created" and weather["status"] == "active"
    assert again.status_code == 201 and again.json()["change"] == "unchanged"
    best = found.json()["results"][0]
    assert best["toolId"] == WEATHER_ID and best["name"] == "get_current_weather"
    assert best["score"] > 0 and 0 <= best["confidence"] <= 1
    assert any("meaning" in reason for reason in best["why"])
    assert filtered_out == []
    assert read.status_code == 200 and read.json()["inputSchema"]["required"] == ["city"]
    assert encoded.json()["toolId"] == WEATHER_ID and by_id.json()["toolId"] == WEATHER_ID


def test_fixed_paths_are_not_read_as_tool_ids(api: Api, weather: dict[str, Any]) -> None:
    stats = api.get("alice", "/tools/stats")
    missing = api.get("alice", "/tools/no.such:tool/at/all")
    missing_call = api.post("alice", "/tools/no.such:tool/call", {"arguments": {}})

    assert stats.status_code == 200 and stats.json()["tools_active"] >= 1
    assert missing.status_code == 404 and "no.such:tool/at/all" in missing.json()["message"]
    assert missing_call.status_code == 404


def test_verbs_are_registered_discovered_read_and_deleted(api: Api, weather: dict[str, Any]) -> None:
    verb = {
        "verb": "get weather",
        "description": "Find out the current weather conditions at a place",
        "inputDefinitions": [{"name": "city", "type": "string"}],
    }
    registered = api.post("alice", "/verbs/register", verb)
    forecast = api.post(
        "alice",
        "/verbs/register",
        {"verb": "FORECAST", "description": "Forecast tomorrow's weather", "decomposition": ["GET_WEATHER"]},
    )
    unknown_part = api.post(
        "alice",
        "/verbs/register",
        {"verb": "PLAN_TRIP", "description": "x", "decomposition": ["BOOK_FLIGHT"]},
    )
    discovered = api.post("alice", "/verbs/discover", {"description": "get weather", "top_k": 3})
    listed = api.get("alice", "/verbs")
    read = api.get("alice", "/verbs/GET_WEATHER")
    still_used = api.delete("alice", "/verbs/GET_WEATHER")
    deleted = api.delete("alice", "/verbs/FORECAST")
    gone = api.get("alice", "/verbs/FORECAST")

    assert registered.status_code == 201 and registered.json()["verb"] == "GET_WEATHER"
    assert forecast.status_code == 201, forecast.text
    assert unknown_part.status_code == 422 and "BOOK_FLIGHT" in unknown_part.json()["message"]
    found = discovered.json()
    assert found["best"]["kind"] == "verb" and found["best"]["verb"] == "GET_WEATHER"
    assert found["verbs"][0]["confidence"] == 1.0 and found["verbs"][0]["why"]
    assert WEATHER_ID in [tool["toolId"] for tool in found["tools"]]
    assert {row["verb"] for row in listed.json()["verbs"]} == {"GET_WEATHER", "FORECAST"}
    assert read.json()["inputDefinitions"] == [{"name": "city", "type": "string"}]
    assert still_used.status_code == 422 and "FORECAST" in still_used.json()["message"]
    assert deleted.status_code == 200 and gone.status_code == 404


def test_an_invalid_manifest_is_a_422_naming_every_field(api: Api) -> None:
    tool = api.post("alice", "/tools", {"toolId": "bad id!", "type": "soap", "inputSchema": {"type": 12}})
    verb = api.post("alice", "/verbs/register", {"verb": "!!!"})

    assert tool.status_code == 422
    body = tool.json()
    assert body["category"] == "invalid_input"
    problems = body["problems"]
    assert "name: is required" in problems
    assert any(problem.startswith("toolId:") for problem in problems)
    assert any(problem.startswith("type: 'soap'") for problem in problems)
    assert any(problem.startswith("inputSchema:") for problem in problems)
    assert verb.status_code == 422
    assert {problem.split(":")[0] for problem in verb.json()["problems"]} == {"verb", "description"}


def test_a_quarantined_tool_leaves_search_and_refuses_calls_until_an_administrator_approves(
    api: Api,
) -> None:
    # A network tool (an API operation): an administrator's review is what lets it out.
    binding = {"base_url": "https://api.example.org", "method": "POST", "path": "/shorten"}
    manifest = {**SHORTEN, "toolId": "quarantine:shorten", "name": "squeeze_words", "type": "openapi"}
    assert api.post("alice", "/tools", {**manifest, "binding": binding}).status_code == 201
    api.lib.discovery.set_status("quarantine:shorten", "quarantined", principal=api.principal("root"))
    query = "squeeze words of a text to a width"

    hidden = api.search("alice", query)
    call = api.post("alice", "/tools/quarantine:shorten/call", {"arguments": {"text": "a b", "width": 9}})
    alice_review = api.post("alice", "/tools/search", {"query": query, "status": "quarantined"})
    root_review = api.search("root", query, status="quarantined")
    refused = api.post("alice", "/tools/quarantine:shorten/approve")
    approved = api.post("root", "/tools/quarantine:shorten/approve")
    back = api.search("alice", query)

    assert "quarantine:shorten" not in hidden
    assert call.status_code == 409 and "quarantined" in call.json()["message"]
    assert alice_review.status_code == 422
    assert root_review == ["quarantine:shorten"]
    assert refused.status_code == 403 and "admin" in refused.json()["message"]
    assert approved.status_code == 200 and approved.json()["status"] == "active"
    assert back[0] == "quarantine:shorten"


def test_deactivate_and_activate(api: Api) -> None:
    manifest = {**SHORTEN, "toolId": "toggle:shorten", "name": "clip_words"}
    register_approved(api, "alice", manifest)

    off = api.post("alice", "/tools/toggle:shorten/deactivate")
    hidden = api.search("alice", "clip words")
    refused = api.post("alice", "/tools/toggle:shorten/call", {"arguments": {"text": "a", "width": 5}})
    on = api.post("alice", "/tools/toggle:shorten/activate")
    deleted = api.delete("alice", "/tools/toggle:shorten")
    gone = api.get("alice", "/tools/toggle:shorten")

    assert off.json()["status"] == "inactive" and "toggle:shorten" not in hidden
    assert refused.status_code == 409 and "inactive" in refused.json()["message"]
    assert on.json()["status"] == "active"
    assert deleted.status_code == 200 and gone.status_code == 404


def test_another_organisation_never_sees_the_tool(api: Api, weather: dict[str, Any]) -> None:
    query = "is it raining in Paris right now?"
    path = f"/tools/{WEATHER_ID}"

    assert WEATHER_ID in api.search("alice", query)
    assert WEATHER_ID not in api.search("eve", query)
    assert WEATHER_ID not in [tool["toolId"] for tool in api.get("eve", "/tools").json()["tools"]]
    assert api.get("eve", path).status_code == 404
    assert api.get("eve", f"/tools/{weather['id']}").status_code == 404
    assert api.post("eve", f"{path}/call", {"arguments": {"city": "Paris"}}).status_code == 404
    assert api.post("eve", f"{path}/uses", {"request": "weather"}).status_code == 404
    assert api.post("eve", f"{path}/deactivate").status_code == 404
    assert api.delete("eve", path).status_code == 404
    eve_tools = api.get("eve", "/tools", status="active").json()["tools"]
    assert api.get("eve", "/tools/stats").json().get("tools_active", 0) == len(eve_tools)
    discovered = api.post("eve", "/verbs/discover", {"description": query}).json()
    assert WEATHER_ID not in [tool["toolId"] for tool in discovered["tools"]]
    # The same toolId in globex is globex's own tool, not acme's.
    own = api.post("eve", "/tools", {**WEATHER, "description": "Globex's own weather"})
    assert own.status_code == 201 and own.json()["change"] == "created"
    assert api.get("eve", path).json()["description"] == "Globex's own weather"
    assert api.get("alice", path).json()["description"] == WEATHER["description"]
    assert api.delete("eve", path).status_code == 200
    assert api.get("alice", path).status_code == 200


def test_writes_need_the_write_scope(api: Api, weather: dict[str, Any]) -> None:
    path = f"/tools/{WEATHER_ID}"

    register = api.post("reader", "/tools", {**WEATHER, "toolId": "reader:tool"})
    verb = api.post("reader", "/verbs/register", {"verb": "READ_ONLY", "description": "x"})
    call = api.post("reader", f"{path}/call", {"arguments": {"city": "Paris"}})
    use = api.post("reader", f"{path}/uses", {"request": "weather in Paris"})
    deactivate = api.post("reader", f"{path}/deactivate")
    imported = api.post(
        "reader", "/tool-sources", {"kind": "python", "name": "tw", "spec": {"module": "textwrap"}}
    )

    for refused in (register, verb, call, use, deactivate, imported):
        assert refused.status_code == 403, refused.text
        assert refused.json()["category"] == "forbidden"
    assert "write" in register.json()["message"]
    assert api.get("reader", path).status_code == 200
    assert WEATHER_ID in api.search("reader", "is it raining in Paris right now?")


def test_the_list_pages_with_a_cursor(api: Api) -> None:
    for number in range(3):
        manifest = {**SHORTEN, "toolId": f"page:{number}", "name": f"page_{number}", "type": "openapi"}
        assert api.post("eve", "/tools", manifest).status_code == 201

    first = api.get("eve", "/tools", limit=2).json()
    second = api.get("eve", "/tools", limit=2, after=first["next"]).json()
    python = api.get("eve", "/tools", type="openapi", status="active").json()
    quarantined = api.get("eve", "/tools", status="quarantined").json()

    assert [tool["toolId"] for tool in first["tools"]] == ["page:0", "page:1"]
    assert first["next"] == first["tools"][-1]["id"]
    assert [tool["toolId"] for tool in second["tools"]] == ["page:2"] and second["next"] is None
    assert len(python["tools"]) == 3 and quarantined == {"tools": [], "next": None}
    assert api.get("eve", "/tools", limit=0).status_code == 422


def test_a_python_tool_is_called_and_its_use_recorded(api: Api) -> None:
    register_approved(api, "alice", SHORTEN)
    text = "The quick brown fox jumps over the lazy dog"

    called = api.post(
        "alice",
        "/tools/text:shorten/call",
        {"arguments": {"text": text, "width": 20}, "request": "make this sentence fit in 20 characters"},
    )
    bad_arguments = api.post("alice", "/tools/text:shorten/call", {"arguments": {"text": text}})
    failed = api.post("alice", "/tools/text:shorten/call", {"arguments": {"text": text, "width": -1}})
    used = api.post("alice", "/tools/text:shorten/uses", {"request": "trim a title", "succeeded": True})
    read = api.get("alice", "/tools/text:shorten").json()

    assert called.status_code == 200, called.text
    assert called.json()["content"] == textwrap.shorten(text, 20) and called.json()["is_error"] is False
    assert bad_arguments.status_code == 422 and "width" in bad_arguments.json()["message"]
    assert failed.status_code == 502
    assert failed.json()["category"] == "tool_failed" and "width" in failed.json()["message"]
    assert "Traceback" not in failed.text
    assert used.status_code == 201 and used.json() == {
        "tool": "text:shorten", "request": "trim a title", "succeeded": True
    }  # fmt: skip
    assert read["calls"]["succeeded"] == 1 and read["calls"]["failed"] == 1
    # The function refused its arguments: counted, but not held against the tool's health.
    assert read["health"] == "healthy" and "width" in read["calls"]["last_error"]


def test_a_source_is_imported_quarantined_synced_and_removed(api: Api) -> None:
    source = {"kind": "python", "name": "textwrap", "spec": {"module": "textwrap"}}

    # Importing a module runs its code in the server: its operator only, never over a token.
    not_admin = api.post("alice", "/tool-sources", source)
    not_operator = api.post("root", "/tool-sources", source)
    operator = dataclasses.replace(api.principal("root"), is_operator=True)
    report = api.lib.discovery.import_source("python", "textwrap", {"module": "textwrap"}, principal=operator)
    listed = api.get("alice", "/tool-sources")
    hidden = api.search("alice", "indent every line of a text")
    synced = api.post("root", "/tool-sources/textwrap/sync")
    unknown = api.post("root", "/tool-sources/nope/sync")
    bad_kind = api.post("root", "/tool-sources", {**source, "kind": "soap"})
    removed = api.delete("root", "/tool-sources/textwrap")
    other = api.get("eve", "/tool-sources")
    server_file = api.post(
        "root", "/tool-sources", {"kind": "openapi", "name": "f", "spec": {"location": "/etc/hosts"}}
    )

    assert not_admin.status_code == 403 and not_operator.status_code == 403
    assert "operator" in not_operator.json()["message"]
    assert report["status"] == "quarantined" and "textwrap.indent" in report["added"]
    assert [row["name"] for row in listed.json()["sources"]] == ["textwrap"]
    assert not any(tool.startswith("textwrap.") for tool in hidden)
    assert synced.status_code == 403  # a sync imports the module again
    assert unknown.status_code == 404 and bad_kind.status_code == 422
    assert removed.json()["removed_tools"] == len(report["added"])
    assert other.json() == {"sources": []}
    assert server_file.status_code == 422 and "http(s) URL" in server_file.json()["message"]
    assert "f" not in [row["name"] for row in api.get("root", "/tool-sources").json()["sources"]]


def test_the_openapi_document_describes_every_route(api: Api) -> None:
    document = api.client.get("/openapi.json").json()
    paths = {path: item for path, item in document["paths"].items() if path.startswith(("/tool", "/verbs"))}

    assert set(paths) == {
        "/verbs/discover",
        "/verbs/register",
        "/verbs",
        "/verbs/{verb}",
        "/tools/stats",
        "/tools/search",
        "/tools",
        "/tools/{tool_id}",
        "/tools/{tool_id}/approve",
        "/tools/{tool_id}/deactivate",
        "/tools/{tool_id}/activate",
        "/tools/{tool_id}/call",
        "/tools/{tool_id}/uses",
        "/tool-sources",
        "/tool-sources/{name}/sync",
        "/tool-sources/{name}",
    }
    for path, item in paths.items():
        for method, operation in item.items():
            assert operation["summary"] and operation["description"], f"{method} {path}"
    search = document["components"]["schemas"]["ToolSearchRequest"]["properties"]
    assert {"query", "top_k", "type", "category", "capability", "health", "status"} <= set(search)
    assert all(field.get("description") for field in search.values())
    assert "502" in paths["/tools/{tool_id}/call"]["post"]["responses"]
