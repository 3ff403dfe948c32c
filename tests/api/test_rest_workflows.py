"""/workflows, /verified-fixes and /strategy-stats over REST: workflows run in the sandbox as one of an
organisation's users, are seen only by their creator and the organisation's administrators, are
followed as server-sent events, paused and answered, cancelled; the loop corrects a real git drift
submitted over REST, and the fix it learns can be read and retired."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from librarian.api import create_app
from librarian.app import Librarian
from librarian.config import Settings
from librarian.embeddings.local import LocalMiniLMEmbedder
from tests.workflow_samples import sleeping

GIT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_AUTHOR_NAME": "Loop Test",
    "GIT_AUTHOR_EMAIL": "loop@example.com",
    "GIT_COMMITTER_NAME": "Loop Test",
    "GIT_COMMITTER_EMAIL": "loop@example.com",
}

HELLO = """\
name: hello
goal: Say hello and check it
tasks:
  - id: greet
    executor_type: command_executor
    payload: {argv: [echo, hello]}
  - id: check
    executor_type: command_executor
    payload: {script: "test \\"$(echo hello)\\" = hello"}
    depends_on: [greet]
"""


def tracking_workflow(flag: str) -> dict[str, Any]:
    """git drift: ``--set-upstream`` was removed; the error names ``--set-upstream-to``."""
    chain = [
        ("remote-repo", ["git", "init", "-q", "--bare", "-b", "main", "origin.git"]),
        ("repo", ["git", "init", "-q", "-b", "main"]),
        ("commit", ["git", "commit", "-q", "--allow-empty", "-m", "init"]),
        ("remote", ["git", "remote", "add", "origin", "./origin.git"]),
        ("push", ["git", "push", "-q", "origin", "main"]),
        ("track", ["git", "branch", flag, "origin/main"]),
    ]
    tasks: list[dict[str, Any]] = []
    for key, argv in chain:
        depends = [tasks[-1]["id"]] if tasks else []
        tasks.append(
            {
                "id": key,
                "executor_type": "command_executor",
                "payload": {"argv": argv, "env": GIT_ENV},
                "depends_on": depends,
            }
        )
    tasks.append(
        {
            "id": "verify",
            "executor_type": "command_executor",
            "payload": {
                "argv": ["git", "rev-parse", "--abbrev-ref", "main@{upstream}"],
                "env": GIT_ENV,
                "expect": {"stdout_contains": "origin/main"},
            },
            "depends_on": ["track"],
        }
    )
    return {"name": "tracking", "goal": "Make the local main branch track origin/main", "tasks": tasks}


@dataclass
class Api:
    """The REST app and a bearer-token header per user: alice, bob (write) and root (admin) of acme,
    reader (read) of acme, eve (admin) of the organisation globex, and local (admin) of the local
    organisation the runtime belongs to."""

    client: TestClient
    headers: dict[str, dict[str, str]]

    def post(self, user: str, path: str, body: dict[str, Any] | None = None) -> Any:
        return self.client.post(path, json=body, headers=self.headers[user])

    def get(self, user: str, path: str, **params: Any) -> Any:
        return self.client.get(path, params=params, headers=self.headers[user])


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory, embedder: LocalMiniLMEmbedder) -> Iterator[Api]:
    home: Path = tmp_path_factory.mktemp("rest-workflows") / "home"
    settings = Settings(home=home, runtime_workers=2, runtime_task_timeout_seconds=120.0)
    with Librarian(settings, embedder=embedder) as lib:
        lib.ingest_cli("git", sdk_name="git", scopes=("branch",), max_depth=1)
        operator = lib.default_principal
        headers = {}
        for organization, users in (("acme", ("alice", "bob", "root", "reader")), ("globex", ("eve",))):
            lib.identity.create_organization(operator, organization)
            for name in users:
                admin = name in ("root", "eve")
                lib.identity.create_user(operator, organization, name, admin=admin)
                scopes = ["admin"] if admin else ["read"] if name == "reader" else ["write"]
                token = lib.identity.create_token(operator, organization, name, scopes=scopes)["token"]
                headers[name] = {"Authorization": f"Bearer {token}"}
        # The local organisation's own user (the runtime's operator's organisation), as a token.
        token = lib.identity.create_token(operator, 1, 1, scopes=["admin"])["token"]
        headers["local"] = {"Authorization": f"Bearer {token}"}
        with TestClient(create_app(lib)) as client:
            yield Api(client, headers)


def test_a_workflow_submitted_as_yaml_runs_in_the_sandbox_and_reports_its_dag(api: Api) -> None:
    done = api.post("alice", "/workflows", {"workflow": HELLO, "wait_seconds": 60})

    assert done.status_code == 201, done.text
    body = done.json()
    assert body["status"] == "success" and body["name"] == "hello"
    assert [task["key"] for task in body["tasks"]] == ["greet", "check"]
    greet, check = body["tasks"]
    assert check["depends_on"] == [greet["task_id"]]
    assert greet["reward"] > 0 and greet["feedback_notes"]["status"] == "success"
    assert body["created_by"] is not None and body["organization_id"] != 1
    # The event log carries ids (a cursor) and each event's structured data.
    ids = [event["id"] for event in body["events"]]
    assert ids == sorted(ids) and len(set(ids)) == len(ids) and all(i > 0 for i in ids)


def test_an_invalid_workflow_names_the_task_and_field(api: Api) -> None:
    unknown = {"name": "x", "tasks": [{"id": "a", "executor_type": "teleport", "payload": {}}]}
    cycle = {
        "name": "x",
        "tasks": [
            {
                "id": "a",
                "executor_type": "command_executor",
                "payload": {"argv": ["true"]},
                "depends_on": ["b"],
            },
            {
                "id": "b",
                "executor_type": "command_executor",
                "payload": {"argv": ["true"]},
                "depends_on": ["a"],
            },
        ],
    }
    bad_yaml = api.post("alice", "/workflows", {"workflow": "name: x\ntasks: [\n"})
    bad_type = api.post("alice", "/workflows", {"workflow": unknown})
    bad_cycle = api.post("alice", "/workflows", {"workflow": cycle})
    bomb = api.post(
        "alice",
        "/workflows",
        {"workflow": "a: &a [x]\n" + "".join(f"b{i}: &b{i} [*a,*a]\n" for i in range(30))},
    )

    assert bad_yaml.status_code == 422 and "line" in bad_yaml.json()["message"]
    assert bad_type.status_code == 422 and "'a'" in bad_type.json()["message"]
    assert "teleport" in bad_type.json()["message"]
    assert bad_cycle.status_code == 422 and "cycle" in bad_cycle.json()["message"]
    assert bomb.status_code == 422
    assert all("Traceback" not in r.text for r in (bad_yaml, bad_type, bad_cycle, bomb))


def test_workflows_are_seen_by_their_creator_and_the_organisations_administrators_only(api: Api) -> None:
    mine = api.post("alice", "/workflows", {"workflow": HELLO, "wait_seconds": 60}).json()["workflow_id"]
    bobs = api.post("bob", "/workflows", {"workflow": HELLO, "wait_seconds": 60}).json()["workflow_id"]

    alice_sees = {w["workflow_id"] for w in api.get("alice", "/workflows", limit=100).json()["workflows"]}
    root_sees = {w["workflow_id"] for w in api.get("root", "/workflows", limit=100).json()["workflows"]}
    eve_sees = {w["workflow_id"] for w in api.get("eve", "/workflows", limit=100).json()["workflows"]}
    assert mine in alice_sees and bobs not in alice_sees
    assert {mine, bobs} <= root_sees
    assert not eve_sees & {mine, bobs}
    # Another organisation's (or another user's) workflow does not exist for the caller: 404, not 403.
    for user, path in (
        ("bob", f"/workflows/{mine}"),
        ("eve", f"/workflows/{mine}"),
        ("eve", f"/workflows/{mine}/events"),
        ("eve", f"/workflows/{mine}/follow"),
    ):
        assert api.get(user, path).status_code == 404, (user, path)
    assert api.post("eve", f"/workflows/{mine}/cancel").status_code == 404
    assert api.post("bob", f"/workflows/{mine}/answer", {"answer": "x"}).status_code == 404
    assert api.get("root", f"/workflows/{bobs}").status_code == 200
    # A read token reads but does not run.
    refused = api.post("reader", "/workflows", {"workflow": HELLO})
    assert refused.status_code == 403 and "write" in refused.json()["message"]


def test_idempotency_keys_belong_to_their_caller(api: Api) -> None:
    first = api.post("alice", "/workflows", {"workflow": HELLO, "idempotency_key": "deploy-7"}).json()
    again = api.post("alice", "/workflows", {"workflow": HELLO, "idempotency_key": "deploy-7"}).json()
    other = api.post("bob", "/workflows", {"workflow": HELLO, "idempotency_key": "deploy-7"})
    changed = api.post(
        "alice", "/workflows", {"workflow": HELLO.replace("hello", "bye"), "idempotency_key": "deploy-7"}
    )

    assert again["workflow_id"] == first["workflow_id"]
    assert other.status_code == 201 and other.json()["workflow_id"] != first["workflow_id"]
    assert changed.status_code == 409


def test_the_list_pages_with_a_cursor_and_filters_by_status(api: Api) -> None:
    for _ in range(3):
        api.post("bob", "/workflows", {"workflow": HELLO, "wait_seconds": 60})
    seen: list[str] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = api.get("bob", "/workflows", **params).json()
        seen += [w["workflow_id"] for w in page["workflows"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    everything = [w["workflow_id"] for w in api.get("bob", "/workflows", limit=100).json()["workflows"]]
    assert seen == everything and len(seen) >= 3 and len(set(seen)) == len(seen)
    succeeded = api.get("bob", "/workflows", status="success", limit=100).json()["workflows"]
    assert succeeded and all(w["status"] == "success" for w in succeeded)
    assert api.get("bob", "/workflows", status="sleeping").status_code == 422
    assert api.get("bob", "/workflows", cursor="not-a-cursor").status_code == 422


def test_progress_is_followed_as_server_sent_events(api: Api) -> None:
    slow = {
        "name": "slow",
        "tasks": [
            {"id": "wait", "executor_type": "command_executor", "payload": {"argv": ["sleep", "1"]}},
            {
                "id": "done",
                "executor_type": "command_executor",
                "payload": {"argv": ["true"]},
                "depends_on": ["wait"],
            },
        ],
    }
    workflow_id = api.post("alice", "/workflows", {"workflow": slow}).json()["workflow_id"]

    with api.client.stream("GET", f"/workflows/{workflow_id}/follow", headers=api.headers["alice"]) as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")
        text = "".join(stream.iter_text())
    blocks = [block for block in text.split("\n\n") if block.strip()]
    fields = [dict(line.split(": ", 1) for line in block.splitlines()) for block in blocks]
    assert fields[-1]["event"] == "end" and json.loads(fields[-1]["data"])["status"] == "success"
    ids = [int(f["id"]) for f in fields[:-1]]
    assert ids == sorted(ids) and len(ids) == len(set(ids)) and ids
    final = api.get("alice", f"/workflows/{workflow_id}").json()
    assert ids == [event["id"] for event in final["events"]]  # every event, once, in order

    # A reconnecting client resumes after its Last-Event-ID; the JSON form pages the same log.
    headers = {**api.headers["alice"], "Last-Event-ID": str(ids[2])}
    with api.client.stream("GET", f"/workflows/{workflow_id}/follow", headers=headers) as stream:
        rest = "".join(stream.iter_text())
    assert [int(line[4:]) for line in rest.splitlines() if line.startswith("id: ")] == ids[3:]
    after = api.get("alice", f"/workflows/{workflow_id}/events", after=ids[-2]).json()
    assert [e["id"] for e in after["events"]] == ids[-1:] and after["finished"] is True


def test_a_running_workflow_is_cancelled(api: Api) -> None:
    slow = sleeping(2)
    workflow_id = api.post("bob", "/workflows", {"workflow": slow}).json()["workflow_id"]
    cancelled = api.post("root", f"/workflows/{workflow_id}/cancel")  # the organisation's administrator

    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    later = api.get("bob", f"/workflows/{workflow_id}", wait_seconds=10).json()
    assert later["status"] == "cancelled"
    assert {t["key"]: t["status"] for t in later["tasks"]}["never"] == "pending"


def test_network_tasks_need_an_administrator(api: Api) -> None:
    online = {
        "name": "online",
        "tasks": [
            {
                "id": "fetch",
                "executor_type": "command_executor",
                "payload": {"argv": ["true"], "network": True},
            }
        ],
    }
    refused = api.post("alice", "/workflows", {"workflow": online})
    allowed = api.post("root", "/workflows", {"workflow": online, "wait_seconds": 60})

    assert refused.status_code == 403 and "'fetch'" in refused.json()["message"]
    assert "payload.network" in refused.json()["message"]
    assert allowed.status_code == 201 and allowed.json()["status"] == "success"


def test_the_loop_corrects_real_drift_submitted_over_rest_and_the_fix_can_be_retired(api: Api) -> None:
    done = api.post(
        "alice", "/workflows", {"workflow": tracking_workflow("--set-upstream"), "wait_seconds": 240}
    )

    body = done.json()
    assert body["status"] == "success", body["failure_report"]
    stages = [e["data"].get("stage") for e in body["events"] if e["kind"] == "correction_step"]
    assert stages[:2] == ["trigger", "version"] and "correction" in stages
    track = next(task for task in body["tasks"] if task["key"] == "track")
    assert track["retries"] == 1 and "--set-upstream-to" in track["outcome"]
    [correction] = [e for e in body["events"] if e["data"].get("stage") == "correction"]
    assert correction["task"] == "track" and correction["data"]["strategy"]
    assert correction["data"]["argv"] == ["git", "branch", "--set-upstream-to", "origin/main"]

    # The workflow's end settles the correction: the loop learned a verified fix, shown to the local
    # organisation's administrator (the runtime's own knowledge) and to nobody else.
    assert api.get("root", "/verified-fixes").status_code == 403  # acme is not the local organisation
    [fix] = api.get("local", "/verified-fixes", tool="git").json()["fixes"]
    assert "--set-upstream-to" in fix["fixed_template"] and fix["successes"] == 1
    assert api.get("local", f"/verified-fixes/{fix['id']}").json()["snippets"]
    stats = api.get("local", "/strategy-stats", category="api_drift").json()["strategies"]
    assert stats and all(s["error_category"] == "api_drift" and s["trials"] >= 1 for s in stats)

    retired = api.post("local", f"/verified-fixes/{fix['id']}/retire", {"reason": "wrong remote"})
    twice = api.post("local", f"/verified-fixes/{fix['id']}/retire", {"reason": "again"})
    assert retired.status_code == 200 and retired.json()["retired"]["reason"] == "wrong remote"
    assert twice.status_code == 409
    assert api.get("local", "/verified-fixes", tool="git").json()["fixes"] == []
    shown = api.get("local", "/verified-fixes", tool="git", include_retired=True).json()
    assert [f["id"] for f in shown["fixes"]] == [fix["id"]]

    # A retired fix is never reused: the same drift is researched again, not replayed.
    again = api.post(
        "alice", "/workflows", {"workflow": tracking_workflow("--set-upstream"), "wait_seconds": 240}
    )
    steps = [e["data"] for e in again.json()["events"] if e["kind"] == "correction_step"]
    [redone] = [step for step in steps if step["stage"] == "correction"]
    assert again.json()["status"] == "success" and "research" in [step["stage"] for step in steps]
    assert redone["source"] == correction["data"]["source"] != "knowledge_base"


def test_planning_without_an_llm_says_how_to_configure_one(api: Api) -> None:
    answer = api.post("alice", "/workflows/plan", {"goal": "lint the repository"})
    assert answer.status_code == 422 and "LLM" in answer.json()["message"]
