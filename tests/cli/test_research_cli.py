"""``ingest-openapi``, ``ingest-package``, ``sdks`` and ``research`` as real subprocesses."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.test_cli import run

PETSTORE = """
openapi: 3.0.3
info: {title: Pets, version: 1.2.0}
servers: [{url: "https://api.example.com/v1"}]
paths:
  /pets:
    post:
      operationId: createPet
      summary: Create a pet
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              required: [name]
              properties: {name: {type: string}, tag: {type: string}}
      responses: {"201": {description: Created}}
    get:
      operationId: listPets
      summary: List all pets
      parameters: [{name: limit, in: query, schema: {type: integer}}]
      responses: {"200": {description: A page of pets}}
"""


def test_openapi_then_sdks_then_research(tmp_path: Path) -> None:
    spec = tmp_path / "petstore.yaml"
    spec.write_text(PETSTORE)
    home = tmp_path / "home"

    report = json.loads(run(home, "ingest-openapi", str(spec), "--sdk", "petstore", "--json").stdout)
    sdks = json.loads(run(home, "sdks", "--json").stdout)
    research = json.loads(
        run(home, "research", "register a new pet", "--sdk", "petstore-api", "--json").stdout
    )
    missing = json.loads(
        run(home, "research", "register a new pet", "--sdk", "petstore", "--version", "9", "--json").stdout
    )

    assert report["added"] == 2
    assert sdks == [{"sdk_name": "petstore", "versions": ["1.2.0"], "chunks": 2}]
    assert research["snippets"][0]["entity_name"] == "POST /v1/pets"
    assert (
        research["resolved_version"] == "1.2.0" and research["snippets"][0]["trust_level"] == "specification"
    )
    assert set(research) >= {"error", "summary", "confidence_score", "version_note", "fallback_suggestions"}
    assert "9 is not indexed" in missing["version_note"]


def test_ingest_package_documents_the_installed_version(tmp_path: Path) -> None:
    from importlib.metadata import version

    report = json.loads(run(tmp_path / "home", "ingest-package", "requests", "--json").stdout)
    research = json.loads(
        run(
            tmp_path / "home", "research", "send a GET request with a session", "--sdk", "requests", "--json"
        ).stdout
    )

    assert report["added"] > 50 and research["resolved_version"] == version("requests")
    assert any(s["entity_name"] == "requests.Session.get" for s in research["snippets"])
