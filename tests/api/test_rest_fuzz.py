"""Schemathesis against the REST API's own OpenAPI document: no server error, every answer as documented.

Hypothesis generates requests for every operation from the schema (valid and invalid), sends them to
the real app in process (ASGI), and checks each answer: never a 5xx, a status code and content type
the document lists, a body matching its schema (errors included: the ``ErrorResponse`` shape), and
invalid input refused.
Bounded per operation so it runs in CI in a minute or two.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import positive_data_acceptance

from librarian.api import create_app
from librarian.app import Librarian
from librarian.config import Settings
from librarian.embeddings.local import LocalMiniLMEmbedder

# CI runs a fixed, bounded exploration; LIBRARIAN_FUZZ_EXAMPLES=500 LIBRARIAN_FUZZ_RANDOM=1 explores more.
MAX_EXAMPLES = int(os.environ.get("LIBRARIAN_FUZZ_EXAMPLES", "30"))
DERANDOMIZE = os.environ.get("LIBRARIAN_FUZZ_RANDOM") != "1"


@pytest.fixture(scope="module")
def fuzz_lib(tmp_path_factory: pytest.TempPathFactory, embedder: LocalMiniLMEmbedder) -> Iterator[Librarian]:
    root = tmp_path_factory.mktemp("fuzz")
    docs = root / "docs"
    docs.mkdir()
    (docs / "cp.md").write_text("# acme cp\n\nUse `acme cp SRC DST --tag K=V` to copy a file.\n")
    with Librarian(Settings(home=root / "home"), embedder=embedder) as lib:
        lib.ingest(str(docs), sdk_name="acme", sdk_version="1.0")
        yield lib


@pytest.fixture(scope="module")
def api_schema(fuzz_lib: Librarian) -> Any:
    allowed = Path(fuzz_lib.settings.home).parent / "allowed"
    app = create_app(fuzz_lib, allowed_roots=[allowed])
    return schemathesis.openapi.from_asgi("/openapi.json", app)


def test_no_server_error_and_every_answer_as_documented(api_schema: Any) -> None:
    # Driven by hand rather than by schemathesis's pytest plugin, which does not run under this pytest.
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) >= 8, "the document lists the API's operations"
    failures: list[str] = []
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(
            max_examples=MAX_EXAMPLES,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            database=None,
            derandomize=DERANDOMIZE,
        )
        def check(case: Any) -> None:
            # A schema-valid body may still be refused (422) by rules JSON Schema cannot say (a
            # version without its SDK, a path outside the allowed roots): that refusal is correct.
            case.call_and_validate(excluded_checks=[positive_data_acceptance])

        try:
            check()
        except BaseException as exc:
            found = getattr(exc, "exceptions", [exc])
            failures += [f"{operation.label}: {type(one).__name__}: {str(one)[:800]}" for one in found]
    assert not failures, "\n\n".join(failures)


def test_framework_errors_have_the_documented_shape(
    api_schema: Any, fuzz_lib: Librarian, monkeypatch: pytest.MonkeyPatch
) -> None:
    """FastAPI's own 422s, unknown routes and crashes answer ErrorResponse too, never a traceback."""
    from fastapi.testclient import TestClient

    from librarian.api import app as api_module

    # Fuzzing POST /admin/tokens may have created a token, after which every request needs one.
    token = fuzz_lib.identity.create_token(fuzz_lib.default_principal, 1, 1, scopes=["admin"])["token"]
    client = TestClient(
        api_schema.app, raise_server_exceptions=False, headers={"Authorization": f"Bearer {token}"}
    )
    invalid = client.post("/research", json={"sdk_name": "acme"})
    assert invalid.status_code == 422
    assert (
        invalid.json()["category"] == "invalid_input"
        and "body.query: Field required" in invalid.json()["message"]
    )
    missing = client.get("/no/such/route")
    assert missing.status_code == 404 and missing.json() == {
        "error": True, "category": "not_found", "message": "Not Found", "hint": None
    }  # fmt: skip

    def crash(*args: object, **kwargs: object) -> None:
        raise RuntimeError("boom /secret/path")

    monkeypatch.setattr(api_module, "indexed_sdks", crash)
    crashed = client.get("/sdks")
    assert crashed.status_code == 500 and crashed.json()["category"] == "internal"
    assert "boom" not in crashed.text and "Traceback" not in crashed.text
