"""Access control tested as an attacker would: a randomised multi-tenant store, every read path, and a
count of everything returned to a caller who may not see it. The count must be 0.

The seed is random per run (printed, and fixed with LIBRARIAN_ACL_SEED to reproduce a failure).
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from fastapi.testclient import TestClient
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from librarian.api import create_app
from librarian.app import Librarian
from librarian.catalog.pages import PageRequest
from librarian.config import Settings
from librarian.embeddings.local import LocalMiniLMEmbedder
from librarian.errors import NotFoundError
from librarian.incidents.signature import ProblemSignature
from librarian.knowledge.search import KnowledgeFilters
from librarian.research.sdks import find_sdk, indexed_sdks, readable_sdk_names, resolve_sdk
from librarian.research.service import research_api_usage
from tests.knowledge.world import TOPICS, Doc, World, build_world
from tests.mcp.test_mcp import serve_with_mcp, structured

SEED = int(os.environ.get("LIBRARIAN_ACL_SEED") or random.SystemRandom().randrange(1_000_000))


def document_id_of(source_url: str) -> int | None:
    """The knowledge document a chunk or result belongs to (hand-written documents only)."""
    return int(source_url.rsplit("/", 1)[1]) if source_url.startswith("/knowledge/") else None


class Ledger:
    """Counts what each caller got that it may not see, and what it could see at all."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.leaks: list[str] = []
        self.visible_returned = 0

    def documents(self, who: str, ids: list[int], where: str) -> None:
        person = self.world.people[who]
        for document_id in ids:
            doc = self.world.documents.get(document_id)
            if doc is None:  # an ingested SDK page: checked by its URL with `urls`
                continue
            if self.world.may_see(person, doc):
                self.visible_returned += 1
            else:
                self.leaks.append(
                    f"{where}: {who} got document {document_id} ({doc.visibility} of {doc.author})"
                )

    def records(self, who: str, ids: list[int], table: dict[int, Doc], where: str) -> None:
        """Incidents or solutions returned to ``who``."""
        person = self.world.people[who]
        for identifier in ids:
            doc = table[identifier]
            if self.world.may_see(person, doc):
                self.visible_returned += 1
            else:
                self.leaks.append(
                    f"{where}: {who} got record {identifier} ({doc.visibility} of {doc.author})"
                )

    def urls(self, who: str, urls: list[str], where: str) -> None:
        """Results that are ingested SDK pages, recognised by the SDK's folder in their URL."""
        self.sdks(who, [sdk for url in urls for sdk in self.world.sdks if f"/{sdk}/" in url], where)

    def sdks(self, who: str, names: list[str], where: str) -> None:
        person = self.world.people[who]
        for name in names:
            if name in self.world.sdks and not self.world.may_see_sdk(person, name):
                self.leaks.append(f"{where}: {who} saw SDK {name}")


def test_no_backend_returns_what_a_caller_may_not_see(library: Librarian, tmp_path: Path) -> None:
    print(f"LIBRARIAN_ACL_SEED={SEED}")
    world = build_world(library, SEED, tmp_path / "docs")
    ledger = Ledger(world)
    for name, person in world.people.items():
        principal = person.principal
        assert principal is not None
        for topic in TOPICS[:4]:
            hits = library.search(f"{topic} pod restart", top_k=30, principal=principal)
            ledger.documents(name, [i for h in hits if (i := document_id_of(h.source_url))], "lib.search")
            ledger.sdks(name, [h.sdk_name for h in hits if h.sdk_name], "lib.search")
            typed = library.search(
                f"{topic} runbook", top_k=20, principal=principal, document_types=("runbook", "solution")
            )
            ledger.documents(name, [i for h in typed if (i := document_id_of(h.source_url))], "typed search")
            found = library.knowledge.search(f"{topic} incident", limit=20, principal=principal)
            ledger.documents(name, [r["id"] for r in found], "knowledge.search")
            ledger.urls(name, [r["source_url"] for r in found], "knowledge.search")
            deploys = library.knowledge.search(
                "deploy a pod with a memory limit", limit=20, principal=principal
            )
            ledger.urls(name, [r["source_url"] for r in deploys], "knowledge.search")
        listed = library.knowledge.documents.list_documents(principal, limit=500)
        ledger.documents(name, [d["id"] for d in listed if d["id"] in world.documents], "list_documents")
        for document_id, doc in world.documents.items():
            try:
                library.knowledge.documents.get(principal, document_id, count_view=False)
                ledger.documents(name, [document_id], "documents.get")
            except NotFoundError:
                assert not world.may_see(person, doc), f"{name} was refused document {document_id} it may see"
        with library.sessions() as session:
            known = indexed_sdks(session, principal.grants)
            ledger.sdks(name, [s.name for s in known], "indexed_sdks")
            names = readable_sdk_names(session, principal.grants)
            ledger.sdks(name, names, "readable_sdk_names")
            assert names == [s.name for s in known]
            for sdk in world.sdks:
                # Research's index walk resolves exactly as grouping every chunk does.
                walked = find_sdk(session, sdk, principal.grants)
                expected = resolve_sdk(sdk, known)
                got = None if walked is None else (walked.name, walked.versions)
                assert got == (None if expected is None else (expected.name, expected.versions)), sdk
                ledger.sdks(name, [walked.name] if walked else [], "find_sdk")
        for document_id in world.documents:
            try:
                page = library.catalog.read_page(principal, PageRequest(document_id=document_id))
                ledger.documents(name, [page["document_id"]], "read_page")
            except NotFoundError:
                pass
        for sdk in world.sdks:
            resolved = library.catalog.resolve_library(principal, sdk)
            ledger.sdks(name, [c["library_id"] for c in resolved], "resolve_library")
        sources = library.catalog.list_sources(principal, limit=500)
        ledger.sdks(name, [s["sdk_name"] for s in sources if s["sdk_name"]], "list_sources")
        for topic in TOPICS[:4]:
            signature = ProblemSignature(symptoms=(f"{topic} alert",), affected_services=(f"svc-{topic}",))
            similar = library.incidents.find_similar(
                principal, f"{topic} alerts", signature=signature, limit=20
            )
            ledger.records(name, [i["id"] for i in similar], world.incidents, "find_similar")
            solutions = library.solutions.get_solution(principal, signature, limit=20)
            ledger.records(
                name, [s["id"] for s in solutions if s["kind"] == "solution"], world.solutions, "get_solution"
            )
        listed_incidents = library.incidents.list_incidents(principal, limit=500)
        ledger.records(name, [i["id"] for i in listed_incidents], world.incidents, "list_incidents")
        for incident_id, record in world.incidents.items():
            try:
                library.incidents.get(principal, incident_id)
                ledger.records(name, [incident_id], world.incidents, "incidents.get")
            except NotFoundError:
                assert not world.may_see(person, record)
        for sdk in world.sdks:
            answer = research_api_usage(library, sdk, "deploy a pod with a memory limit", principal=principal)
            if not answer["error"]:
                ledger.sdks(name, [sdk], "research")
            elif world.may_see_sdk(person, sdk):
                raise AssertionError(f"{name} could not research {sdk}, which it may read")

    assert ledger.leaks == [], f"seed {SEED}: {len(ledger.leaks)} leaks\n" + "\n".join(ledger.leaks[:20])
    assert ledger.visible_returned > 100  # the queries did return what callers may see
    assert world.incidents and world.solutions


def test_the_access_filter_is_inside_the_query(library: Librarian, tmp_path: Path) -> None:
    """A caller who may see at least ``top_k`` matching documents gets ``top_k`` of them, however many
    hidden documents rank above: a filter after ranking would return fewer."""
    world = build_world(library, SEED, tmp_path / "docs", documents=12)
    target = next(p for p in world.people.values() if not p.admin)
    assert target.principal is not None
    hidden = next(p for p in world.people.values() if p.organization != target.organization)
    assert hidden.principal is not None
    from librarian.knowledge.documents import DocumentDraft

    text = "Exact same words about kafka consumer lag and rebalancing storms."
    for index in range(25):  # many better-matching documents the target may not see
        library.knowledge.documents.create(
            hidden.principal, DocumentDraft(title=f"kafka lag {index}", content=text, visibility="private")
        )
    for index in range(6):
        library.knowledge.documents.create(
            target.principal, DocumentDraft(title=f"lag {index}", content="Consumer lag notes " + "x" * index)
        )

    results = library.knowledge.search(
        "kafka consumer lag rebalancing storms", limit=5, principal=target.principal
    )
    chunks = library.search("kafka consumer lag rebalancing storms", top_k=5, principal=target.principal)

    assert len(results) == 5 and len(chunks) == 5
    assert all(r["title"].startswith("lag ") for r in results)


# -- the same store through REST, MCP over HTTP and the CLI -----------------------------------------


@pytest.fixture(scope="module")
def served_world(
    tmp_path_factory: pytest.TempPathFactory, embedder: LocalMiniLMEmbedder
) -> Iterator[tuple[Librarian, World, Path]]:
    root = tmp_path_factory.mktemp("acl")
    with Librarian(Settings(home=root / "home"), embedder=embedder) as lib:
        world = build_world(lib, SEED, root / "docs", documents=30)
        yield lib, world, root / "home"


def test_rest_returns_nothing_a_caller_may_not_see(served_world: tuple[Librarian, World, Path]) -> None:
    lib, world, _ = served_world
    ledger = Ledger(world)
    with TestClient(create_app(lib)) as client:
        assert client.get("/sdks").status_code == 401  # tokens exist: anonymous callers are refused
        for name, person in world.people.items():
            auth = {"Authorization": f"Bearer {person.token}"}
            for topic in TOPICS[:3]:
                body = {"query": f"{topic} incident", "limit": 20}
                found = client.post("/knowledge/search", json=body, headers=auth).json()["results"]
                ledger.documents(name, [r["id"] for r in found], "POST /knowledge/search")
                ledger.urls(name, [r["source_url"] for r in found], "POST /knowledge/search")
                hits = client.post(
                    "/knowledge/query", json={"query": f"{topic} pod", "top_k": 30}, headers=auth
                )
                results = hits.json()["results"]
                ledger.urls(name, [h["source_url"] for h in results], "POST /knowledge/query")
                ledger.documents(
                    name,
                    [i for h in results if (i := document_id_of(h["source_url"]))],
                    "POST /knowledge/query",
                )
            page = client.get("/knowledge/documents", params={"limit": 500}, headers=auth).json()["documents"]
            ledger.documents(
                name, [d["id"] for d in page if d["id"] in world.documents], "GET /knowledge/documents"
            )
            for document_id in world.documents:
                response = client.get(f"/knowledge/documents/{document_id}", headers=auth)
                if response.status_code == 200:
                    ledger.documents(name, [document_id], "GET /knowledge/documents/{id}")
                else:
                    assert response.status_code == 404
            ledger.sdks(name, [s["sdk_name"] for s in client.get("/sdks", headers=auth).json()], "GET /sdks")
            for topic in TOPICS[:3]:
                body = {"description": f"{topic} alerts", "symptoms": [f"{topic} alert"], "limit": 20}
                similar = client.post("/incidents/similar", json=body, headers=auth).json()[
                    "similar_incidents"
                ]
                ledger.records(name, [i["id"] for i in similar], world.incidents, "POST /incidents/similar")
                query = {
                    "problem_signature": {
                        "symptoms": [f"{topic} alert"],
                        "affected_services": [f"svc-{topic}"],
                    }
                }
                found = client.post("/solutions/query", json=query, headers=auth).json()["solutions"]
                ledger.records(
                    name,
                    [s["id"] for s in found if s["kind"] == "solution"],
                    world.solutions,
                    "POST /solutions/query",
                )
            for sdk in world.sdks:
                answer = client.post(
                    "/research", json={"sdk_name": sdk, "query": "deploy"}, headers=auth
                ).json()
                if not answer["error"]:
                    ledger.sdks(name, [sdk], "POST /research")
    assert ledger.leaks == [], f"seed {SEED}:\n" + "\n".join(ledger.leaks[:20])
    assert ledger.visible_returned > 50


@pytest.mark.anyio
async def test_mcp_over_http_returns_nothing_a_caller_may_not_see(
    served_world: tuple[Librarian, World, Path],
) -> None:
    lib, world, _ = served_world
    ledger = Ledger(world)
    rng = random.Random(SEED)
    callers = rng.sample(sorted(world.people), 4)
    for url in serve_with_mcp(lib):
        for name in callers:
            person = world.people[name]
            async with (
                httpx2.AsyncClient(headers={"Authorization": f"Bearer {person.token}"}, timeout=60) as http,
                streamable_http_client(url, http_client=http) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                for topic in TOPICS[:3]:
                    found = structured(
                        await session.call_tool(
                            "search_knowledge", {"query": f"{topic} incident", "limit": 20}
                        )
                    )["results"]
                    ledger.documents(name, [r["id"] for r in found], "mcp search_knowledge")
                    hits = structured(
                        await session.call_tool(
                            "search_documentation", {"query": f"{topic} pod", "top_k": 30}
                        )
                    )["results"]
                    ledger.documents(
                        name,
                        [i for h in hits if (i := document_id_of(h["source_url"]))],
                        "mcp search_documentation",
                    )
                for document_id in world.documents:
                    result = await session.call_tool("get_document", {"document_id": document_id})
                    if not result.is_error:
                        ledger.documents(name, [document_id], "mcp get_document")
                for topic in TOPICS[:2]:
                    similar = structured(
                        await session.call_tool(
                            "find_similar_incidents",
                            {"description": f"{topic} alerts", "symptoms": [f"{topic} alert"]},
                        )
                    )["similar_incidents"]
                    ledger.records(
                        name, [i["id"] for i in similar], world.incidents, "mcp find_similar_incidents"
                    )
                sdks = structured(await session.call_tool("list_sdks", {}))
                ledger.sdks(name, [s["sdk_name"] for s in sdks], "mcp list_sdks")
    assert ledger.leaks == [], f"seed {SEED}:\n" + "\n".join(ledger.leaks[:20])
    assert ledger.visible_returned > 10


def test_the_cli_with_a_token_returns_nothing_its_user_may_not_see(
    served_world: tuple[Librarian, World, Path],
) -> None:
    from tests.cli.test_cli import run

    _, world, home = served_world
    ledger = Ledger(world)
    person = next(p for p in world.people.values() if not p.admin)
    listed = run(home, "--token", str(person.token), "knowledge", "list", "--limit", "500", "--json")
    ledger.documents(
        person.name, [d["id"] for d in _json(listed.stdout) if d["id"] in world.documents], "cli list"
    )
    found = run(home, "--token", str(person.token), "knowledge", "search", "memory incident", "--json")
    ledger.documents(person.name, [r["id"] for r in _json(found.stdout)["results"]], "cli knowledge search")
    sdks = run(home, "--token", str(person.token), "sdks", "--json")
    ledger.sdks(person.name, [s["sdk_name"] for s in _json(sdks.stdout)], "cli sdks")
    revoked = run(home, "--token", "lib_not-a-token", "sdks", check=1)
    assert "not valid" in revoked.stderr
    assert ledger.leaks == []
    assert ledger.visible_returned > 0


def _json(text: str) -> Any:
    import json

    return json.loads(text)


def test_filters_parse_from_every_interface_the_same_way() -> None:
    assert KnowledgeFilters.from_mapping({"document_type": "runbook"}).document_type == ("runbook",)
