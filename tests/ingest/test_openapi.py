"""The OpenAPI connector: loading, one document per operation, and fetching with address checks."""

from __future__ import annotations

import json
import socket
import textwrap
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from librarian.errors import BackendUnavailableError, InvalidInputError, NotFoundError
from librarian.ingest.sources.base import SourceDocument
from librarian.ingest.sources.openapi import fetch_openapi, load_openapi, openapi_documents
from librarian.ingest.sources.remote import _check_peer

PETSTORE = textwrap.dedent(
    """\
    openapi: 3.0.3
    info:
      title: Swagger Petstore
      version: 1.2.0
    servers:
      - url: https://{region}.petstore.example.com/{basePath}
        variables:
          region: {default: eu}
          basePath: {default: v1}
    tags:
      - name: pets
    paths:
      /pets:
        get:
          tags: [pets]
          summary: List all pets
          operationId: listPets
          parameters:
            - $ref: '#/components/parameters/Limit'
            - name: status
              in: query
              description: Only pets in this state.
              schema: {$ref: '#/components/schemas/Status'}
          responses:
            200:
              description: A paged array of pets
              headers:
                x-next:
                  description: A link to the next page
                  schema: {type: string}
              content:
                application/json:
                  schema:
                    type: array
                    items: {$ref: '#/components/schemas/Pet'}
            default:
              $ref: '#/components/responses/Error'
        post:
          tags: [pets]
          summary: Create a pet
          description: Adds a pet to the store. The name must be unique.
          operationId: createPet
          requestBody:
            required: true
            description: The pet to add.
            content:
              application/json:
                schema: {$ref: '#/components/schemas/NewPet'}
              application/xml:
                schema: {$ref: '#/components/schemas/NewPet'}
          responses:
            '201':
              description: The created pet
              content:
                application/json:
                  schema: {$ref: '#/components/schemas/Pet'}
            '422':
              description: The pet is invalid
            default:
              $ref: '#/components/responses/Error'
      /pets/{petId}:
        parameters:
          - name: petId
            in: path
            required: true
            description: The id of the pet.
            schema: {type: integer, format: int64}
          - name: X-Trace
            in: header
            description: Path-level trace header.
            schema: {type: string}
        get:
          tags: [pets]
          summary: Info for a specific pet
          operationId: showPetById
          responses:
            '200':
              description: The pet
              content:
                application/json:
                  schema: {$ref: '#/components/schemas/Pet'}
            '404':
              description: No such pet
        delete:
          tags: [pets]
          summary: Delete a pet
          operationId: deletePet
          deprecated: true
          parameters:
            - name: X-Trace
              in: header
              required: true
              description: Operation-level trace header, required here.
              schema: {type: string}
          responses:
            '204': {description: Deleted}
      /categories/{categoryId}:
        get:
          summary: Show a category with its subcategories
          operationId: showCategory
          parameters:
            - {name: categoryId, in: path, required: true, schema: {type: string}}
          responses:
            '200':
              description: The category tree
              content:
                application/json:
                  schema: {$ref: '#/components/schemas/Category'}
            '500':
              description: Loop
              content:
                application/json:
                  schema: {$ref: '#/components/schemas/LoopA'}
      /health:
        servers:
          - url: https://status.petstore.example.com/
        get:
          summary: Health check
          responses:
            '200': {description: OK}
    components:
      parameters:
        Limit:
          name: limit
          in: query
          description: How many items to return at one time (max 100).
          schema: {type: integer, format: int32, maximum: 100, default: 20}
      schemas:
        Status:
          type: string
          enum: [available, pending, sold]
        NewPet:
          type: object
          required: [name]
          properties:
            name: {type: string, description: The pet's name.}
            tag: {type: string, nullable: true}
            status: {$ref: '#/components/schemas/Status'}
            category: {$ref: '#/components/schemas/Category'}
            owner: {$ref: 'https://schemas.example.com/owner.json#/Owner'}
        Pet:
          allOf:
            - $ref: '#/components/schemas/NewPet'
            - type: object
              required: [id]
              properties:
                id: {type: integer, format: int64, readOnly: true}
        Category:
          type: object
          properties:
            id: {type: integer}
            name: {type: string, description: Category name.}
            parent: {$ref: '#/components/schemas/Category'}
            children:
              type: array
              items: {$ref: '#/components/schemas/Category'}
        LoopA: {$ref: '#/components/schemas/LoopB'}
        LoopB: {$ref: '#/components/schemas/LoopA'}
        Error:
          type: object
          required: [code, message]
          properties:
            code: {type: integer, format: int32}
            message: {type: string}
      responses:
        Error:
          description: Unexpected error
          content:
            application/json:
              schema: {$ref: '#/components/schemas/Error'}
    """
)
BASE_URL = "https://docs.example.com/petstore.yaml"


def _documents(text: str = PETSTORE) -> tuple[str | None, dict[str, SourceDocument]]:
    version, docs = openapi_documents(load_openapi(text.encode(), "petstore.yaml"), base_url=BASE_URL)
    return version, {doc.parsed.title or "": doc for doc in docs}


def _invalid(data: bytes | str, name: str = "spec.yaml", **kwargs: Any) -> str:
    raw = data.encode() if isinstance(data, str) else data
    with pytest.raises(InvalidInputError) as caught:
        load_openapi(raw, name, **kwargs)
    return str(caught.value)


# --- documents ----------------------------------------------------------------------------------------


def test_one_document_per_operation_named_by_method_and_served_path() -> None:
    version, docs = _documents()

    assert version == "1.2.0"
    assert list(docs) == [
        "GET /v1/pets",
        "POST /v1/pets",
        "GET /v1/pets/{petId}",
        "DELETE /v1/pets/{petId}",
        "GET /v1/categories/{categoryId}",
        "GET /health",  # its own servers entry has no path prefix
    ]
    create = docs["POST /v1/pets"]
    assert create.path == "operations/post /pets"
    assert create.url == f"{BASE_URL}#/paths/~1pets/post"
    assert docs["DELETE /v1/pets/{petId}"].url == f"{BASE_URL}#/paths/~1pets~1%7BpetId%7D/delete"
    section = create.parsed.sections[0]
    assert section.path == ("pets", "POST /v1/pets")
    assert section.entity_type == "operation"
    assert docs["GET /health"].parsed.sections[0].path == ("Swagger Petstore", "GET /health")
    assert len({doc.path for doc in docs.values()}) == len(docs)


def test_operation_text_has_summary_body_schema_and_responses() -> None:
    _, docs = _documents()
    create = docs["POST /v1/pets"]
    text = create.parsed.sections[0].text

    assert text.startswith("`POST /v1/pets` — Create a pet")
    assert "Operation ID: `createPet`." in text
    assert "Adds a pet to the store." in text
    assert (
        "**Request body** (required, `application/json`, `application/xml`, NewPet): The pet to add." in text
    )
    # $refs resolved into the properties a caller must send.
    assert "- `name` (string, required): The pet's name." in text
    assert "- `tag` (string, nullable)" in text
    assert "- `status` (Status): One of: `available`, `pending`, `sold`." in text
    assert "- `owner` (https://schemas.example.com/owner.json#/Owner)" in text  # external: left as written
    assert "- `201` (`application/json`, Pet): The created pet" in text
    assert "  - `id` (integer, int64, required, read-only)" in text  # Pet's allOf part merged
    assert "- `422`: The pet is invalid" in text
    assert "  - `message` (string, required)" in text  # the shared Error response
    assert create.text.endswith(text) and create.text.startswith("# pets / POST /v1/pets")
    assert create.metadata == {
        "operation_id": "createPet",
        "method": "POST",
        "path": "/v1/pets",
        "parameters": [],
        "deprecated": False,
        "tags": ["pets"],
    }


def test_parameters_listed_with_location_requirement_type_and_description() -> None:
    _, docs = _documents()
    listing = docs["GET /v1/pets"]
    text = listing.parsed.sections[0].text

    assert listing.metadata["parameters"] == ["limit", "status"]
    assert (
        "- `limit` (query, integer, int32, optional): How many items to return at one time (max 100). "
        "Default: `20`. Maximum: `100`." in text
    )
    assert "- `status` (query, Status, optional): Only pets in this state. One of: `available`" in text
    assert "- `200` (`application/json`, array of Pet): A paged array of pets. Headers: `x-next`." in text


def test_path_level_parameters_are_merged_and_overridden_by_the_operation() -> None:
    _, docs = _documents()
    show, delete = docs["GET /v1/pets/{petId}"], docs["DELETE /v1/pets/{petId}"]

    assert show.metadata["parameters"] == ["petId", "X-Trace"]
    assert delete.metadata["parameters"] == ["petId", "X-Trace"]
    delete_text = delete.parsed.sections[0].text
    assert "- `petId` (path, integer, int64, required): The id of the pet." in delete_text
    assert "- `X-Trace` (header, string, required): Operation-level trace header" in delete_text
    assert "Path-level trace header" not in delete_text
    assert "Path-level trace header" in show.parsed.sections[0].text


def test_deprecated_operation_is_flagged() -> None:
    _, docs = _documents()
    delete = docs["DELETE /v1/pets/{petId}"]

    assert delete.metadata["deprecated"] is True
    assert "**Deprecated**" in delete.parsed.sections[0].text
    assert docs["GET /v1/pets/{petId}"].metadata["deprecated"] is False


def test_recursive_schemas_are_named_not_expanded_forever() -> None:
    _, docs = _documents()
    text = docs["GET /v1/categories/{categoryId}"].parsed.sections[0].text

    assert "- `parent` (Category (recursive))" in text
    assert "- `children` (array of Category (recursive))" in text
    assert text.count("`children`") == 1
    assert "- `500` (`application/json`, LoopA): Loop" in text  # a pure $ref cycle ends too
    assert len(text) < 2000


def test_schema_rendering_is_bounded_for_wide_deep_schemas() -> None:
    # Ten properties per level, six levels: a million leaves if expanded naively.
    level: dict[str, Any] = {"type": "string"}
    for _ in range(6):
        level = {"type": "object", "properties": {f"p{i}": level for i in range(10)}}
    spec = {
        "openapi": "3.1.0",
        "info": {"title": "Wide", "version": "1"},
        "paths": {"/wide": {"post": {"requestBody": {"content": {"application/json": {"schema": level}}}}}},
    }
    _, docs = openapi_documents(spec, base_url="file:///wide.json")
    text = docs[0].parsed.sections[0].text

    assert "more fields not shown" in text
    assert text.count("\n") < 100


def test_json_and_yaml_give_the_same_documents() -> None:
    as_json = json.dumps(yaml.safe_load(PETSTORE), default=str, indent=2)

    assert _documents(as_json) == _documents()


def test_changed_operation_changes_its_text() -> None:
    _, before = _documents()
    _, after = _documents(PETSTORE.replace("The id of the pet.", "The pet's numeric id."))

    assert before["GET /v1/pets/{petId}"].text != after["GET /v1/pets/{petId}"].text
    assert before["POST /v1/pets"].text == after["POST /v1/pets"].text


# --- loading ------------------------------------------------------------------------------------------


def test_yaml_syntax_error_names_the_file_and_line() -> None:
    broken = "openapi: 3.0.0\ninfo:\n  title: x\n   version: [1\npaths: {}\n"

    message = _invalid(broken, "broken.yaml")

    assert "broken.yaml" in message and "invalid YAML at line 4" in message


def test_json_syntax_error_names_the_line() -> None:
    message = _invalid('{\n  "openapi": "3.0.0",\n  "info": {,}\n}', "broken.json")

    assert "broken.json: invalid JSON at line 3" in message


def test_swagger_2_is_refused_with_what_was_found() -> None:
    message = _invalid('{"swagger": "2.0", "info": {"title": "old", "version": "1"}, "paths": {}}')

    assert "Swagger 2.0" in message and "not supported" in message and "swagger2openapi" in message


@pytest.mark.parametrize(
    ("document", "found"),
    [
        ("openapi: 4.0.0\npaths: {}\n", "openapi 4.0.0"),
        ("info: {title: x}\n", "no 'openapi' field"),
        ("- just\n- a list\n", "top level is a list"),
    ],
)
def test_other_documents_are_refused(document: str, found: str) -> None:
    assert found in _invalid(document)


def test_documents_over_the_size_limit_are_refused() -> None:
    message = _invalid(PETSTORE, "big.yaml", max_bytes=1000)

    assert "big.yaml" in message and "1,000-byte limit" in message


def test_yaml_alias_bomb_is_refused() -> None:
    lines = ["openapi: 3.0.0", 'a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]

    message = _invalid("\n".join(lines), "bomb.yaml")

    assert "bomb.yaml is refused" in message and "expand to more than" in message


def test_recursive_yaml_alias_is_refused() -> None:
    assert "recursive YAML" in _invalid("openapi: 3.0.0\nloop: &loop [*loop]\n")


# --- fetching -----------------------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    release = threading.Event()

    def do_GET(self) -> None:
        if self.path.startswith("/hop/"):
            remaining = int(self.path.rsplit("/", 1)[1])
            target = f"/hop/{remaining - 1}" if remaining else "/petstore.yaml"
            self.send_response(302)
            self.send_header("Location", target)
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif self.path == "/petstore.yaml":
            self._reply(200, PETSTORE.encode())
        elif self.path == "/big":
            self._reply(200, b"x" * 200_000)
        elif self.path == "/big-unsized":
            # No Content-Length: the limit must be enforced while streaming.
            self.send_response(200)
            self.send_header("Connection", "close")
            self.end_headers()
            for _ in range(50):
                self.wfile.write(b"y" * 4096)
            self.close_connection = True
        elif self.path == "/error":
            self._reply(500, b"boom")
        elif self.path == "/slow":
            self.release.wait(10)
            self._reply(200, b"late")
        else:
            self._reply(404, b"no")

    def _reply(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    """A real HTTP server on 127.0.0.1; yields its base URL."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.daemon_threads = True
    _Handler.release.clear()
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        _Handler.release.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)


def test_loopback_url_is_refused_without_allow_private(server: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        fetch_openapi(f"{server}/petstore.yaml")

    message = str(caught.value)
    assert f"{server}/petstore.yaml" in message and "127.0.0.1" in message and "loopback" in message
    assert "allow private addresses explicitly" in message


@pytest.mark.parametrize(
    ("url", "kind"),
    [
        ("http://localhost:9/openapi.json", "loopback"),
        ("http://169.254.169.254/latest/meta-data", "link-local"),
        ("http://10.1.2.3/openapi.json", "private"),
        ("http://[::ffff:127.0.0.1]/openapi.json", "loopback"),
        ("http://0.0.0.0/openapi.json", "unspecified"),
        ("http://100.64.0.1/openapi.json", "non-public"),
    ],
)
def test_non_public_addresses_are_refused_before_connecting(url: str, kind: str) -> None:
    with pytest.raises(InvalidInputError, match=f"is a {kind} address"):
        fetch_openapi(url, timeout=1)


def test_the_connected_address_is_checked_as_well(server: str) -> None:
    # Against DNS rebinding: a name that resolved to a public address may still connect elsewhere, so
    # the socket's peer is checked before the body is read. Only reachable here through the helper.
    with (
        httpx.Client() as client,
        client.stream("GET", f"{server}/petstore.yaml") as response,
        pytest.raises(InvalidInputError, match=r"127\.0\.0\.1 is a loopback address"),
    ):
        _check_peer(response, response.url, f"{server}/petstore.yaml")


def test_allow_private_fetches_and_returns_the_url(server: str) -> None:
    data, url = fetch_openapi(f"{server}/petstore.yaml#ignored", allow_private=True)

    assert data == PETSTORE.encode()
    assert url == f"{server}/petstore.yaml"
    version, docs = openapi_documents(load_openapi(data, url), base_url=url)
    assert version == "1.2.0" and docs[0].url == f"{server}/petstore.yaml#/paths/~1pets/get"


def test_five_redirects_are_followed_and_a_sixth_is_refused(server: str) -> None:
    data, url = fetch_openapi(f"{server}/hop/4", allow_private=True)  # 5 redirects
    assert data == PETSTORE.encode() and url == f"{server}/petstore.yaml"

    with pytest.raises(InvalidInputError, match="redirects more than 5 times"):
        fetch_openapi(f"{server}/hop/5", allow_private=True)


@pytest.mark.parametrize("path", ["/big", "/big-unsized"])
def test_responses_over_the_size_limit_are_refused(server: str, path: str) -> None:
    with pytest.raises(InvalidInputError, match="100,000-byte limit"):
        fetch_openapi(f"{server}{path}", allow_private=True, max_bytes=100_000)


def test_http_errors_map_to_error_categories(server: str) -> None:
    with pytest.raises(NotFoundError, match="answered HTTP 404"):
        fetch_openapi(f"{server}/missing.yaml", allow_private=True)
    with pytest.raises(BackendUnavailableError, match="answered HTTP 500"):
        fetch_openapi(f"{server}/error", allow_private=True)
    with pytest.raises(BackendUnavailableError, match="timed out"):
        fetch_openapi(f"{server}/slow", allow_private=True, timeout=0.3)


def test_connection_failure_is_backend_unavailable() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed when the block ends: nothing listens there

    with pytest.raises(BackendUnavailableError, match=f"cannot fetch http://127.0.0.1:{port}/x"):
        fetch_openapi(f"http://127.0.0.1:{port}/x", allow_private=True, timeout=2)


@pytest.mark.parametrize(
    ("location", "expected"),
    [
        ("ftp://example.com/openapi.yaml", r"only http\(s\) URLs"),
        ("https://user:secret@example.com/openapi.yaml", "credentials are refused"),
    ],
)
def test_unsupported_urls_are_refused(location: str, expected: str) -> None:
    with pytest.raises(InvalidInputError, match=expected):
        fetch_openapi(location)


def test_local_files_are_read_with_a_file_uri(tmp_path: Path) -> None:
    spec = tmp_path / "petstore.yaml"
    spec.write_text(PETSTORE, encoding="utf-8")

    assert fetch_openapi(str(spec)) == (PETSTORE.encode(), spec.resolve().as_uri())
    with pytest.raises(NotFoundError, match=r"missing\.yaml does not exist"):
        fetch_openapi(str(tmp_path / "missing.yaml"))
    with pytest.raises(InvalidInputError, match="not a regular file"):
        fetch_openapi(str(tmp_path))
    with pytest.raises(InvalidInputError, match="limit"):
        fetch_openapi(str(spec), max_bytes=100)
