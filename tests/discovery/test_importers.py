"""Importing tools from OpenAPI documents, Python modules and indexed CLIs, and calling them for real.

A real HTTP server answers the OpenAPI operations, Python plugins run in a sandboxed child
interpreter, and the CLI is the real ``git``, indexed with the project's own help walker.
"""

from __future__ import annotations

import json
import sys
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from librarian.app import Librarian
from librarian.config import Settings
from librarian.discovery.calling import ToolCallError
from librarian.embeddings.local import LocalMiniLMEmbedder
from librarian.errors import InvalidInputError, NotFoundError
from librarian.runtime.isolation import probe_isolation
from tests.skipping import unavailable
from tests.venvs import add_distribution, site_packages

ISOLATION = "namespaces" if probe_isolation() is None else "none"


def _library(home: Path, embedder: LocalMiniLMEmbedder, **settings: Any) -> Librarian:
    values: dict[str, Any] = {"tools_call_timeout_seconds": 20, "runtime_sandbox_isolation": ISOLATION}
    return Librarian(Settings(home=home, **{**values, **settings}), embedder=embedder)


@pytest.fixture
def lib(tmp_path: Path, embedder: LocalMiniLMEmbedder) -> Iterator[Librarian]:
    """A library that may call the loopback address (where the test's API server listens)."""
    library = _library(tmp_path / "home", embedder, allowed_private_hosts=["127.0.0.1"])
    yield library
    library.close()


# -- OpenAPI ----------------------------------------------------------------------------------------


class _PetHandler(BaseHTTPRequestHandler):
    pets: dict[int, dict[str, Any]]

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        path, _, query = self.path.partition("?")
        if path == "/v1/pets":
            limit = int(query.split("limit=", 1)[1]) if "limit=" in query else 100
            self._send(200, list(self.pets.values())[:limit])
        elif path.startswith("/v1/pets/") and path[9:] in {str(key) for key in self.pets}:
            pet = self.pets[int(path[9:])]
            self._send(200, {**pet, "request_id": self.headers.get("X-Request-Id")})
        else:
            self._send(404, {"error": f"no pet at {path}"})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        pet = {"id": len(self.pets) + 1, **body}
        self.pets[pet["id"]] = pet
        self._send(201, pet)


@pytest.fixture
def api() -> Iterator[str]:
    """A real pet store API on a loopback port; its base URL."""
    handler = type("Handler", (_PetHandler,), {"pets": {}})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def _petstore(directory: Path, server_url: str | None) -> Path:
    document: dict[str, Any] = {
        "openapi": "3.0.3",
        "info": {"title": "Petstore", "version": "1.0.7"},
        "servers": [{"url": server_url}],
        "paths": {
            "/pets": {
                "get": {
                    "operationId": "listPets",
                    "summary": "List pets",
                    "description": "Returns the pets in the order they were added.",
                    "parameters": [
                        {
                            "name": "limit",
                            "in": "query",
                            "description": "How many pets to return",
                            "schema": {"type": "integer", "minimum": 1, "maximum": 100},
                        }
                    ],
                    "responses": {"200": {"description": "The pets"}},
                },
                "post": {
                    "operationId": "createPet",
                    "summary": "Add a pet",
                    "requestBody": {
                        "required": True,
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/NewPet"}}},
                    },
                    "responses": {"201": {"description": "The pet"}},
                },
            },
            "/pets/{petId}": {
                "parameters": [{"$ref": "#/components/parameters/PetId"}],
                "get": {
                    "operationId": "getPet",
                    "summary": "Show one pet",
                    "parameters": [{"name": "X-Request-Id", "in": "header", "schema": {"type": "string"}}],
                    "responses": {"200": {"description": "The pet"}},
                },
            },
        },
        "components": {
            "parameters": {
                "PetId": {
                    "name": "petId",
                    "in": "path",
                    "required": True,
                    "description": "The pet's id",
                    "schema": {"type": "integer"},
                }
            },
            "schemas": {
                "NewPet": {
                    "type": "object",
                    "required": ["name"],
                    "properties": {
                        "name": {"type": "string"},
                        "tag": {"type": "string", "nullable": True},
                        "friends": {"type": "array", "items": {"$ref": "#/components/schemas/NewPet"}},
                    },
                }
            },
        },
    }
    if server_url is None:
        del document["servers"]
    path = directory / "petstore.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def test_openapi_operations_become_tools_that_call_the_api(lib: Librarian, api: str, tmp_path: Path) -> None:
    document = _petstore(tmp_path, api)
    report = lib.discovery.import_source("openapi", "petstore", {"location": str(document)})
    assert report["added"] == ["petstore.createPet", "petstore.getPet", "petstore.listPets"]
    assert report["errors"] == [] and report["status"] == "quarantined"

    get_pet = lib.discovery.tool("petstore.getPet")
    assert get_pet["version"] == "1.0.7"
    schema = get_pet["inputSchema"]
    assert schema["required"] == ["petId"]
    assert schema["properties"]["petId"] == {"type": "integer", "description": "The pet's id"}
    assert set(schema["properties"]) == {"petId", "X-Request-Id"}
    assert get_pet["binding"]["parameters"] == {"petId": "path", "X-Request-Id": "header"}
    list_pets = lib.discovery.tool("petstore.listPets")
    assert "Returns the pets in the order they were added." in list_pets["description"]

    for key in ("petstore.createPet", "petstore.getPet", "petstore.listPets"):
        lib.discovery.set_status(key, "active")
    created = lib.discovery.call(
        "petstore.createPet", {"body": {"name": "Rex", "tag": None, "friends": [{"name": "Fido"}]}}
    )
    assert created.content == {"id": 1, "name": "Rex", "tag": None, "friends": [{"name": "Fido"}]}
    lib.discovery.call("petstore.createPet", {"body": {"name": "Tom", "tag": "cat"}})
    fetched = lib.discovery.call("petstore.getPet", {"petId": 2, "X-Request-Id": "req-7"})
    assert fetched.content == {"id": 2, "name": "Tom", "tag": "cat", "request_id": "req-7"}
    listed = lib.discovery.call("petstore.listPets", {"limit": 1})
    assert [pet["name"] for pet in listed.content] == ["Rex"]

    with pytest.raises(ToolCallError) as missing:
        lib.discovery.call("petstore.getPet", {"petId": 99})
    assert "getPet answered HTTP 404" in missing.value.message
    # A 404 refuses the request; it says nothing about the API's health.
    shown = lib.discovery.tool("petstore.getPet")
    assert shown["calls"]["failed"] == 1 and shown["calls"]["consecutive_failures"] == 0
    assert shown["health"] == "healthy"


def test_openapi_arguments_that_break_the_schema_are_refused_by_name(
    lib: Librarian, api: str, tmp_path: Path
) -> None:
    lib.discovery.import_source("openapi", "petstore", {"location": str(_petstore(tmp_path, api))})
    lib.discovery.set_status("petstore.listPets", "active")
    lib.discovery.set_status("petstore.createPet", "active")
    with pytest.raises(InvalidInputError, match="argument limit: 'many' is not of type 'integer'"):
        lib.discovery.call("petstore.listPets", {"limit": "many"})
    with pytest.raises(InvalidInputError, match="argument body/friends/0: 'name' is a required property"):
        lib.discovery.call("petstore.createPet", {"body": {"name": "Rex", "friends": [{}]}})
    with pytest.raises(InvalidInputError, match="'body' is a required property"):
        lib.discovery.call("petstore.createPet", {})


def test_an_api_on_a_private_address_is_refused_unless_allowed(
    tmp_path: Path, api: str, embedder: LocalMiniLMEmbedder
) -> None:
    document = _petstore(tmp_path, api)
    with _library(tmp_path / "strict", embedder) as strict:
        with pytest.raises(InvalidInputError) as refused:
            strict.discovery.import_source("openapi", "petstore", {"location": str(document)})
        assert str(document) in refused.value.message
        assert "127.0.0.1 is a loopback address" in refused.value.message
        assert "allowed_private_hosts" in (refused.value.hint or "")
        assert strict.discovery.tools() == []
        assert "127.0.0.1" in (strict.discovery.sources()[0]["last_error"] or "")


def test_a_document_without_servers_is_called_at_the_given_base_url(
    lib: Librarian, api: str, tmp_path: Path
) -> None:
    document = _petstore(tmp_path, None)
    with pytest.raises(InvalidInputError, match="no absolute server URL to call GET /pets, POST /pets"):
        lib.discovery.import_source("openapi", "petstore", {"location": str(document)})
    spec = {"location": str(document), "base_url": api, "slug": "pets"}
    report = lib.discovery.import_source("openapi", "petstore", spec, approve=True)
    assert report["added"] == ["pets.createPet", "pets.getPet", "pets.listPets"]
    assert lib.discovery.call("pets.listPets", {}).content == []


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("swagger: '2.0'\npaths: {}\n", "is Swagger 2.0, which is not supported"),
        ('{"openapi": "3.0.0", "paths": [', "line 1"),
        ("title: not an API\n", "has no 'openapi' field"),
    ],
)
def test_an_invalid_openapi_document_is_refused_naming_the_file(
    lib: Librarian, tmp_path: Path, content: str, problem: str
) -> None:
    document = tmp_path / "broken-api.yaml"
    document.write_text(content, encoding="utf-8")
    with pytest.raises(InvalidInputError) as refused:
        lib.discovery.import_source("openapi", "broken", {"location": str(document)})
    assert str(document) in refused.value.message
    assert problem in refused.value.message
    assert lib.discovery.tools() == []


# -- Python -----------------------------------------------------------------------------------------

_TOOLS_MODULE = '''\
"""Small tools for tests."""

import os
from typing import Optional

from os.path import join


def add(a: int, b: int = 2) -> int:
    """Add two numbers.

    Longer explanation that is not part of the description.

    Args:
        a: the first number.
        b (int): the second number,
            two by default.
    """
    return a + b


def greet(name: str, greeting: Optional[str] = None) -> str:
    """Greet someone by name."""
    return f"{greeting or 'Hello'}, {name}!"


def join_words(words: list[str], sep: str = " ") -> dict:
    """Join words with a separator."""
    print("chatter on stdout must not spoil the answer")
    return {"joined": sep.join(words), "count": len(words)}


def fail(reason: str) -> None:
    """Always fails."""
    raise ValueError(f"cannot do it: {reason}")


def can_see(path: str) -> bool:
    """Whether a path exists where the function runs."""
    return os.path.exists(path)


def wait(seconds: float) -> float:
    """Sleep, then say how long."""
    import time

    time.sleep(seconds)
    return seconds


def undocumented(x: int) -> int:
    return x


def _private(x: int) -> int:
    """Not a tool."""
    return x
'''


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A module of typed functions written to a directory on ``sys.path``; its (unique) name."""
    name = f"calc_tools_{uuid.uuid4().hex[:8]}"
    directory = tmp_path / "plugins"
    directory.mkdir()
    (directory / f"{name}.py").write_text(_TOOLS_MODULE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(directory))
    yield name
    sys.modules.pop(name, None)


def test_python_functions_become_tools_typed_by_their_hints(lib: Librarian, plugin: str) -> None:
    report = lib.discovery.import_source("python", "calc", {"module": plugin})
    names = ["add", "can_see", "fail", "greet", "join_words", "wait"]
    assert report["added"] == [f"{plugin}.{name}" for name in names]
    add = lib.discovery.tool(f"{plugin}.add")
    assert add["description"] == "Add two numbers."
    assert add["binding"]["module"] == plugin and add["binding"]["function"] == "add"
    assert add["inputSchema"] == {
        "type": "object",
        "properties": {
            "a": {"type": "integer", "description": "the first number."},
            "b": {"type": "integer", "default": 2, "description": "the second number, two by default."},
        },
        "required": ["a"],
        "additionalProperties": False,
    }
    greet = lib.discovery.tool(f"{plugin}.greet")["inputSchema"]
    assert greet["required"] == ["name"]
    assert greet["properties"]["greeting"]["anyOf"] == [{"type": "string"}, {"type": "null"}]
    words = lib.discovery.tool(f"{plugin}.join_words")["inputSchema"]
    assert words["properties"]["words"] == {"type": "array", "items": {"type": "string"}}

    for name in names:
        lib.discovery.set_status(f"{plugin}.{name}", "active")
    assert lib.discovery.call(f"{plugin}.add", {"a": 40}).content == 42
    assert lib.discovery.call(f"{plugin}.greet", {"name": "Ada", "greeting": None}).content == "Hello, Ada!"
    joined = lib.discovery.call(f"{plugin}.join_words", {"words": ["a", "b", "c"], "sep": "-"})
    assert joined.content == {"joined": "a-b-c", "count": 3}

    with pytest.raises(ToolCallError) as raised:
        lib.discovery.call(f"{plugin}.fail", {"reason": "no fuel"})
    assert raised.value.message == f"{plugin}.fail raised ValueError: cannot do it: no fuel"
    assert "Traceback" not in str(raised.value)
    with pytest.raises(InvalidInputError, match="argument a: 'forty' is not of type 'integer'"):
        lib.discovery.call(f"{plugin}.add", {"a": "forty"})


def test_a_python_plugin_runs_in_the_sandbox_without_the_data_directory(lib: Librarian, plugin: str) -> None:
    if ISOLATION != "namespaces":
        unavailable(f"tasks cannot be isolated here: {probe_isolation()}")
    lib.discovery.import_source("python", "calc", {"module": plugin, "functions": ["can_see"]})
    lib.discovery.set_status(f"{plugin}.can_see", "active")
    database = lib.settings.home / "librarian.db"
    assert database.is_file()
    # The data directory is there only as the parent of the call's own working directory.
    assert lib.discovery.call(f"{plugin}.can_see", {"path": str(database)}).content is False
    assert lib.discovery.call(f"{plugin}.can_see", {"path": "/usr/bin"}).content is True


def test_a_python_call_that_runs_too_long_is_stopped(
    plugin: str, tmp_path: Path, embedder: LocalMiniLMEmbedder
) -> None:
    with _library(tmp_path / "impatient", embedder, tools_call_timeout_seconds=1.5) as impatient:
        impatient.discovery.import_source(
            "python", "calc", {"module": plugin, "functions": ["wait"]}, approve=True
        )
        assert impatient.discovery.call(f"{plugin}.wait", {"seconds": 0.1}).content == 0.1
        with pytest.raises(ToolCallError, match=f"{plugin}.wait did not return within 1.5s and was stopped"):
            impatient.discovery.call(f"{plugin}.wait", {"seconds": 30})


def test_python_tools_from_an_entry_point_group(
    lib: Librarian, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    environment = tmp_path / "env"
    group = f"librarian.tools.test{uuid.uuid4().hex[:8]}"
    package = f"weather_{uuid.uuid4().hex[:8]}"
    add_distribution(
        environment,
        "weather-plugin",
        "1.2.0",
        {
            f"{package}/__init__.py": '''
                def forecast(city: str, days: int = 1) -> list[str]:
                    """Forecast the weather of a city.

                    Args:
                        city: where.
                        days: how many days ahead.
                    """
                    return [f"{city}: sunny"] * days
            ''',
            f"{package}/units.py": '''
                def to_fahrenheit(celsius: float) -> float:
                    """Convert a temperature to Fahrenheit."""
                    return celsius * 9 / 5 + 32
            ''',
        },
    )
    site = site_packages(environment)
    info = next(site.glob("weather_plugin-1.2.0.dist-info"))
    (info / "entry_points.txt").write_text(
        f"[{group}]\nforecast = {package}:forecast\nunits = {package}.units\nbroken = {package}.nowhere\n",
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(site))
    try:
        report = lib.discovery.import_source("python", "weather", {"entry_point_group": group})
    finally:
        for name in (package, f"{package}.units"):
            sys.modules.pop(name, None)
    assert report["added"] == [f"{package}.forecast", f"{package}.units.to_fahrenheit"]
    assert len(report["errors"]) == 1 and f"entry point broken = {package}.nowhere" in report["errors"][0]
    forecast = lib.discovery.tool(f"{package}.forecast")
    assert forecast["version"] == "1.2.0"
    assert forecast["inputSchema"]["properties"]["city"] == {"type": "string", "description": "where."}

    lib.discovery.set_status(f"{package}.forecast", "active")
    lib.discovery.set_status(f"{package}.units.to_fahrenheit", "active")
    result = lib.discovery.call(f"{package}.forecast", {"city": "Oslo", "days": 2})
    assert result.content == ["Oslo: sunny", "Oslo: sunny"]
    assert lib.discovery.call(f"{package}.units.to_fahrenheit", {"celsius": 100}).content == 212


def test_a_missing_python_module_is_named_and_earlier_tools_are_kept(lib: Librarian, plugin: str) -> None:
    lib.discovery.import_source("python", "calc", {"module": plugin, "functions": ["add", "greet"]})
    with pytest.raises(InvalidInputError, match="no module named 'no_such_tools_module'"):
        lib.discovery.import_source("python", "calc", {"module": "no_such_tools_module"})
    assert sorted(tool["toolId"] for tool in lib.discovery.tools(status="quarantined")) == [
        f"{plugin}.add",
        f"{plugin}.greet",
    ]
    source = lib.discovery.sources()[0]
    assert "no_such_tools_module" in (source["last_error"] or "")


def test_a_named_function_the_module_lacks_is_reported(lib: Librarian, plugin: str) -> None:
    report = lib.discovery.import_source(
        "python", "calc", {"module": plugin, "functions": ["add", "subtract"]}
    )
    assert report["added"] == [f"{plugin}.add"]
    assert report["errors"] == [f"python source {plugin}: no function 'subtract' in the module"]


# -- CLI --------------------------------------------------------------------------------------------


def test_indexed_git_commands_become_tools_that_run_git(lib: Librarian, tmp_path: Path) -> None:
    lib.ingest_cli("git", sdk_name="git", scopes=("init",), max_depth=1)
    report = lib.discovery.import_source("cli", "git", {"sdk_name": "git"})
    assert "git.init" in report["added"]
    tool = lib.discovery.tool("git.init")
    assert tool["binding"]["argv"] == ["git", "init"]
    assert tool["description"].startswith("This command creates an empty Git repository")
    properties = tool["inputSchema"]["properties"]
    assert properties["args"]["type"] == "array"
    assert properties["--quiet"]["type"] == "boolean"
    assert properties["--initial-branch"]["type"] == "string"

    lib.discovery.set_status("git.init", "active")
    repository = tmp_path / "made-by-a-tool"
    result = lib.discovery.call("git.init", {"args": [str(repository)], "--initial-branch": "trunk"})
    assert "Initialized empty Git repository" in result.text
    assert (repository / ".git" / "HEAD").read_text(encoding="utf-8").strip() == "ref: refs/heads/trunk"

    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    with pytest.raises(ToolCallError) as failed:
        lib.discovery.call("git.init", {"args": [str(blocker / "repo")]})
    assert failed.value.message.startswith("git init exited 128") and not failed.value.tool_fault
    # Only documented options, by name: an argument that reads as an option is refused, so a caller
    # cannot slip `--upload-pack=...`-style options past the tool's declaration.
    with pytest.raises(InvalidInputError, match=r"args\[0\]: '--no-such-option' starts with '-'"):
        lib.discovery.call("git.init", {"args": ["--no-such-option"]})


def test_a_cli_that_is_not_indexed_is_named(lib: Librarian) -> None:
    with pytest.raises(NotFoundError, match="no CLI is indexed as 'not-indexed-cli'"):
        lib.discovery.import_source("cli", "nothing", {"sdk_name": "not-indexed-cli"})
