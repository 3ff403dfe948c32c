"""lib.jobs: stored ingest jobs that survive a restart, report progress, cancel, resume and refuse
sources outside the server's policy; and their REST and MCP routes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select, update
from typer.testing import CliRunner

from librarian.api import create_app
from librarian.app import Librarian
from librarian.catalog.jobs import STALE_SECONDS, IngestRequest
from librarian.catalog.models import IngestJob
from librarian.catalog.policy import SourcePolicy
from librarian.cli.main import app
from librarian.config import Settings
from librarian.embeddings.local import LocalMiniLMEmbedder
from librarian.errors import ConflictError, ForbiddenError, InvalidInputError, NotFoundError
from librarian.mcp import create_mcp_server
from librarian.refresh_schedule import set_refresh_interval
from librarian.storage.models import Document, Source, utcnow
from mcp import Client
from tests.mcp.test_mcp import structured


@pytest.fixture
def lib(settings: Settings, embedder: LocalMiniLMEmbedder) -> Iterator[Librarian]:
    with Librarian(settings, embedder=embedder) as library:
        yield library


def many_files(root: Path, count: int) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for index in range(count):
        (root / f"page{index:04}.md").write_text(f"# command-{index}\n\nRuns step {index} of the deploy.\n")
    return root


def stale_job(lib: Librarian, job_id: str, docs: Path, root: Path) -> None:
    """What a server killed mid-job leaves behind: a running job whose heartbeat stopped."""
    me = lib.default_principal
    stale = utcnow() - timedelta(seconds=STALE_SECONDS + 5)
    request = IngestRequest(uri=str(docs), sdk_name="tool", sdk_version="1")
    with lib.sessions.begin() as session:
        session.add(
            IngestJob(
                id=job_id,
                kind="ingest",
                status="running",
                organization_id=me.organization_id,
                created_by=me.user_id,
                request={**request.to_dict(), "policy": SourcePolicy.of([root]).to_dict()},
                progress={"stage": "files", "done": 1, "total": 2},
                cancel_requested=False,
                created_at=stale,
                heartbeat_at=stale,
            )
        )


def documents(lib: Librarian) -> int:
    with lib.sessions() as session:
        return (
            session.scalar(select(func.count()).select_from(Document).where(Document.deleted_at.is_(None)))
            or 0
        )


def test_a_job_runs_reports_and_is_kept_across_a_restart(
    settings: Settings, embedder: LocalMiniLMEmbedder, tmp_path: Path
) -> None:
    docs = many_files(tmp_path / "docs", 3)
    policy = SourcePolicy.of([tmp_path])
    with Librarian(settings, embedder=embedder) as lib:
        me = lib.default_principal
        job = lib.jobs.submit_ingest(
            me, IngestRequest(uri=str(docs), sdk_name="tool", sdk_version="1"), policy
        )
        assert job["status"] in ("queued", "running")
        done = lib.jobs.wait(me, job["id"], timeout=120)
        assert done["status"] == "succeeded" and done["result"]["added"] == 3
        assert done["progress"] == {"stage": "files", "done": 3, "total": 3}
    with Librarian(settings, embedder=embedder) as restarted:
        again = restarted.jobs.get(restarted.default_principal, job["id"])
        assert again["status"] == "succeeded" and again["request"]["uri"] == str(docs.resolve())
        listed = restarted.jobs.list_jobs(restarted.default_principal, status="succeeded")
        assert [j["id"] for j in listed["jobs"]] == [job["id"]] and listed["next_before"] is None


def test_a_job_whose_process_died_reads_interrupted_and_resumes(lib: Librarian, tmp_path: Path) -> None:
    docs = many_files(tmp_path / "docs", 4)
    me = lib.default_principal
    stale_job(lib, "deadbeef" * 4, docs, tmp_path)
    assert lib.jobs.get(me, "deadbeef" * 4)["status"] == "interrupted"
    resumed = lib.jobs.resume(me, "deadbeef" * 4)
    assert resumed["resumed_from"] == "deadbeef" * 4
    assert lib.jobs.wait(me, resumed["id"], timeout=120)["status"] == "succeeded"
    assert documents(lib) == 4
    with pytest.raises(ConflictError, match="succeeded"):
        lib.jobs.resume(me, resumed["id"])
    with pytest.raises(ConflictError, match="already resumed"):
        lib.jobs.resume(me, "deadbeef" * 4)
    assert lib.jobs.get(me, "deadbeef" * 4)["finished_at"] is not None


def test_cancelling_stops_the_ingest_and_keeps_what_it_wrote(lib: Librarian, tmp_path: Path) -> None:
    docs = many_files(tmp_path / "docs", 400)
    me = lib.default_principal
    policy = SourcePolicy.of([tmp_path])
    job = lib.jobs.submit_ingest(me, IngestRequest(uri=str(docs), sdk_name="tool", sdk_version="1"), policy)
    lib.jobs.cancel(me, job["id"])
    stopped = lib.jobs.wait(me, job["id"], timeout=120)
    assert stopped["status"] == "cancelled" and stopped["cancel_requested"] is True
    written = documents(lib)
    assert written < 400
    with pytest.raises(ConflictError, match="already finished"):
        lib.jobs.cancel(me, job["id"])
    resumed = lib.jobs.resume(me, job["id"])
    finished = lib.jobs.wait(me, resumed["id"], timeout=300)
    assert finished["status"] == "succeeded" and documents(lib) == 400
    assert finished["result"]["unchanged"] == written  # the first run's files were not read again


def test_the_policy_refuses_sources_before_a_job_exists(lib: Librarian, tmp_path: Path) -> None:
    me = lib.default_principal
    strict = SourcePolicy()
    outside = many_files(tmp_path / "outside", 1)
    with pytest.raises(InvalidInputError, match="allowed roots"):
        lib.jobs.submit_ingest(me, IngestRequest(uri=str(outside)), strict)
    with pytest.raises(InvalidInputError):
        lib.jobs.submit_ingest(me, IngestRequest(uri="http://127.0.0.1:9/repo.git"), strict)
    with pytest.raises(InvalidInputError, match="ssh"):
        lib.jobs.submit_ingest(me, IngestRequest(uri="git@127.0.0.1:repo"), strict)
    assert lib.jobs.list_jobs(me)["jobs"] == []
    with lib.sessions() as session:
        assert session.scalar(select(func.count()).select_from(Source)) == 0


def test_another_organisation_never_sees_or_stops_a_job(lib: Librarian, tmp_path: Path) -> None:
    operator = lib.default_principal
    lib.identity.create_organization(operator, "rival")
    lib.identity.create_user(operator, "rival", "spy")
    spy = lib.identity.principal_of("rival", "spy")
    job = lib.jobs.submit_ingest(
        operator, IngestRequest(uri=str(many_files(tmp_path / "d", 2))), SourcePolicy.of([tmp_path])
    )
    lib.jobs.wait(operator, job["id"], timeout=120)
    for action in (lib.jobs.get, lib.jobs.cancel, lib.jobs.resume):
        with pytest.raises(NotFoundError):
            action(spy, job["id"])
    assert lib.jobs.list_jobs(spy)["jobs"] == []


def test_rest_adds_lists_cancels_and_resumes(lib: Librarian, tmp_path: Path) -> None:
    client = TestClient(create_app(lib, allowed_roots=[tmp_path]))
    docs = many_files(tmp_path / "docs", 2)
    job_id = client.post("/sources", json={"uri": str(docs), "sdk_name": "tool", "sdk_version": "1"}).json()[
        "job_id"
    ]
    done = lib.jobs.wait(lib.default_principal, job_id, timeout=120)
    assert done["status"] == "succeeded"
    assert client.get(f"/jobs/{job_id}").json()["result"]["added"] == 2
    assert [j["id"] for j in client.get("/jobs", params={"limit": 5}).json()["jobs"]] == [job_id]
    assert client.post(f"/jobs/{job_id}/cancel").status_code == 409
    assert client.post(f"/jobs/{job_id}/resume").status_code == 409
    assert client.get("/jobs/nope").status_code == 404
    assert client.get("/jobs", params={"status": "exploded"}).status_code == 422
    refused = client.post("/sources", json={"uri": "/etc"})
    assert refused.status_code == 422 and "allowed roots" in refused.json()["message"]
    refresh = client.post("/sources/tool/refresh").json()["job_id"]
    refreshed = lib.jobs.wait(lib.default_principal, refresh, timeout=120)
    assert refreshed["status"] == "succeeded" and refreshed["result"]["outcomes"][0]["status"] == "unchanged"

    # Every source the caller may refresh; with due=true only those whose interval has passed.
    every = lib.jobs.wait(
        lib.default_principal, client.post("/sources/refresh").json()["job_id"], timeout=120
    )
    due = lib.jobs.wait(
        lib.default_principal,
        client.post("/sources/refresh", params={"due": "true"}).json()["job_id"],
        timeout=120,
    )
    assert [o["status"] for o in every["result"]["outcomes"]] == ["unchanged"]
    assert due["status"] == "succeeded" and due["result"]["outcomes"] == []  # refreshed just now
    # How often the scheduler refreshes it: its own interval, then the default again.
    own = client.put("/sources/tool/refresh-interval", json={"seconds": 3600}).json()["sources"]
    default = client.put("/sources/tool/refresh-interval", json={"seconds": None}).json()["sources"]
    assert [(s["refresh_interval_seconds"], s["own_interval"]) for s in own] == [(3600, True)]
    assert default[0]["own_interval"] is False
    assert client.put("/sources/tool/refresh-interval", json={"seconds": 5}).status_code == 422
    assert client.put("/sources/nothing-like-it/refresh-interval", json={"seconds": 600}).status_code == 404
    # Another organisation can neither see nor set it.
    operator = lib.default_principal
    lib.identity.create_organization(operator, "rival")
    lib.identity.create_user(operator, "rival", "spy")
    spy = lib.identity.principal_of("rival", "spy")
    with pytest.raises(NotFoundError):
        set_refresh_interval(lib, "tool", 600, spy)


@pytest.mark.anyio
async def test_an_agent_adds_documentation_and_follows_its_job(lib: Librarian, tmp_path: Path) -> None:
    docs = many_files(tmp_path / "docs", 2)
    server = create_mcp_server(lib, SourcePolicy.of([tmp_path]))
    async with Client(server) as client:
        added = structured(
            await client.call_tool(
                "add_source",
                {
                    "uri": str(docs),
                    "sdk_name": "tool",
                    "sdk_version": "1",
                    "wait_seconds": 60,
                    "category": "cli",
                },
            )
        )
        assert added["status"] == "succeeded" and added["result"]["added"] == 2
        assert {
            hit.category for hit in lib.search("file", sdk_name="tool", principal=lib.default_principal)
        } == {"cli"}
        read = structured(await client.call_tool("get_job", {"job_id": added["id"]}))
        assert read["progress"]["done"] == 2
        listed = structured(await client.call_tool("list_jobs", {"limit": 5}))
        assert [j["id"] for j in listed["jobs"]] == [added["id"]]
        assert (await client.call_tool("cancel_job", {"job_id": added["id"]})).is_error
        assert (await client.call_tool("resume_job", {"job_id": added["id"]})).is_error  # it succeeded
        stale_job(lib, "0123abcd" * 4, docs, tmp_path)
        again = structured(await client.call_tool("resume_job", {"job_id": "0123abcd" * 4}))
        assert again["resumed_from"] == "0123abcd" * 4
        refused = await client.call_tool("add_source", {"uri": "/etc"})
        assert refused.is_error
        refresh = structured(await client.call_tool("refresh_source", {"source": "tool"}))
        refreshed = structured(
            await client.call_tool("get_job", {"job_id": refresh["id"], "wait_seconds": 60})
        )
        assert refreshed["status"] == "succeeded"
        assert {o["status"] for o in refreshed["result"]["outcomes"]} == {"unchanged"}
        interval = structured(
            await client.call_tool("set_refresh_interval", {"source": "tool", "seconds": 900})
        )
        assert {s["refresh_interval_seconds"] for s in interval["sources"]} == {900}
        assert (await client.call_tool("set_refresh_interval", {"source": "tool", "seconds": 1})).is_error
        assert (await client.call_tool("refresh_source", {"source": "no-such-sdk"})).is_error
        everything = structured(await client.call_tool("refresh_source", {"due_only": True}))
        assert structured(
            await client.call_tool("get_job", {"job_id": everything["id"], "wait_seconds": 60})
        )["request"] == {"selector": None, "due_only": True}
    strict = create_mcp_server(lib)  # the default policy: public git URLs only
    async with Client(strict) as client:
        assert (await client.call_tool("add_source", {"uri": str(docs)})).is_error


def test_the_jobs_command_lists_shows_resumes_and_refuses_to_cancel_a_finished_job(
    settings: Settings, embedder: LocalMiniLMEmbedder, tmp_path: Path
) -> None:
    docs = many_files(tmp_path / "docs", 2)
    with Librarian(settings, embedder=embedder) as lib:
        stale_job(lib, "feedface" * 4, docs, tmp_path)
    runner = CliRunner()

    def cli(*args: str, code: int = 0) -> Any:
        result = runner.invoke(app, ["--home", str(settings.home), *args, "--json"])
        assert result.exit_code == code, (result.stdout, result.stderr)
        return json.loads(result.stdout) if code == 0 else result.stderr

    [listed] = cli("jobs", "list")["jobs"]
    assert listed["status"] == "interrupted"
    resumed = cli("jobs", "resume", "feedface" * 4)
    assert resumed["status"] == "succeeded" and resumed["resumed_from"] == "feedface" * 4
    assert cli("jobs", "show", resumed["id"])["result"]["added"] == 2
    assert "already finished" in cli("jobs", "cancel", resumed["id"], code=1)


def test_one_rebuild_of_the_index_at_a_time_and_only_for_the_servers_administrators(
    lib: Librarian, tmp_path: Path
) -> None:
    operator = lib.default_principal
    lib.identity.create_organization(operator, "rival")
    lib.identity.create_user(operator, "rival", "boss", admin=True)
    with pytest.raises(ForbiddenError):
        lib.jobs.submit_reindex(lib.identity.principal_of("rival", "boss"))
    # A rebuild another thread of this server is running (its heartbeat is fresh).
    with lib.sessions.begin() as session:
        session.add(
            IngestJob(
                id="feed" * 8,
                kind="reindex",
                status="running",
                organization_id=1,
                created_by=1,
                request={},
                progress={},
                cancel_requested=False,
                heartbeat_at=utcnow(),
            )
        )
    with pytest.raises(ConflictError, match="already being rebuilt"):
        lib.jobs.submit_reindex(operator)
    # Once its process stops beating, it reads as interrupted and a new rebuild may start.
    stale = utcnow() - timedelta(seconds=STALE_SECONDS + 5)
    with lib.sessions.begin() as session:
        session.execute(update(IngestJob).where(IngestJob.id == "feed" * 8).values(heartbeat_at=stale))
    job = lib.jobs.submit_reindex(operator)
    assert lib.jobs.wait(operator, job["id"], timeout=120)["status"] == "succeeded"


def beir(folder: Path) -> Path:
    """A tiny BEIR-layout dataset: three records, two questions, each with its relevant record."""
    (folder / "qrels").mkdir(parents=True)
    records = {
        "d1": "Upload a file to a bucket with the put command.",
        "d2": "Delete a queue and every message in it.",
        "d3": "Rotate the signing key every quarter.",
    }
    (folder / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": key, "title": "", "text": text}) + "\n" for key, text in records.items())
    )
    (folder / "queries.jsonl").write_text(
        json.dumps({"_id": "q1", "text": "how to upload a file"})
        + "\n"
        + json.dumps({"_id": "q2", "text": "remove a queue"})
        + "\n"
    )
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\n")
    return folder


def test_an_evaluation_runs_as_a_job_on_a_dataset_under_an_allowed_root(
    lib: Librarian, tmp_path: Path
) -> None:
    dataset = beir(tmp_path / "allowed" / "set")
    client = TestClient(create_app(lib, allowed_roots=[tmp_path / "allowed"]))
    started = client.post("/eval", json={"kind": "retrieval", "dataset": str(dataset)})
    assert started.status_code == 202
    done = lib.jobs.wait(lib.default_principal, started.json()["job_id"], timeout=300)
    assert done["status"] == "succeeded", done
    assert done["result"]["queries"] == 2 and done["result"]["hit@5"] == 100.0
    before = documents(lib)  # the throwaway store leaves the real one as it was

    outside = beir(tmp_path / "elsewhere")
    refused = client.post("/eval", json={"kind": "retrieval", "dataset": str(outside)})
    assert refused.status_code == 422 and "allowed roots" in refused.json()["message"]
    not_a_folder = client.post("/eval", json={"kind": "tools", "dataset": str(dataset / "corpus.jsonl")})
    assert not_a_folder.status_code == 422 and "not a folder" in not_a_folder.json()["message"]
    assert client.post("/eval", json={"kind": "speed", "dataset": str(dataset)}).status_code == 422
    assert documents(lib) == before
