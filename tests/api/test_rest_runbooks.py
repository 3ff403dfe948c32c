"""/runbooks, /runbook-executions and /runbook-proposals over REST: store and version runbooks,
validate and match them, run them (bash in the sandbox, conditions, manual and approval steps) and
read their history, each as one of an organisation's users."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import anyio
import httpx
import pytest
from fastapi.testclient import TestClient

from librarian.api import create_app
from librarian.app import Librarian
from librarian.config import Settings
from librarian.embeddings.local import LocalMiniLMEmbedder

GREETER = """\
name: Greeter silent
description: The greeter service stopped saying hello
category: demo
tags: [greeter]
trigger_patterns:
  symptoms: [greeter silent, no hello in the logs]
  services: [greeter]
variables:
  who: null
steps:
  - step: 1
    title: Say hello
    action_type: bash
    command: echo hello {{who}}
    extract:
      word: "regex:hello (\\\\w+)"
  - step: 2
    title: Did it greet the world?
    action_type: conditional
    condition: "{{word}} == 'world'"
    if_true: 3
    if_false: abort
  - step: 3
    title: Check the dashboard
    action_type: manual
    prompt: Check that the dashboard shows hello {{word}}
    final_step: true
"""

DISK = """\
name: Disk usage investigation
description: Find what fills a disk before the database stops accepting writes
category: linux
tags: [disk]
trigger_patterns:
  symptoms: [disk full, writes failing]
  error_patterns: ["No space left on device"]
steps:
  - step: 1
    title: Measure the log directory
    action_type: bash
    command: echo 42
    final_step: true
"""

RESTART = """\
name: Restart the greeter
description: Restart the greeter in production, with a sign-off
steps:
  - step: 1
    title: Sign off the restart
    action_type: approval
    prompt: Restart the greeter in production?
    approvers: [root]
  - step: 2
    title: Restart
    action_type: bash
    command: echo restarted
    final_step: true
"""


SLOW = """\
name: Slow warm-up
description: Warm the cache, which takes a few seconds
steps:
  - step: 1
    title: Warm the cache
    action_type: bash
    command: sleep 3
    final_step: true
"""


@dataclass
class Api:
    """The REST app and a bearer-token header per user of the organisation ``acme``."""

    client: TestClient
    headers: dict[str, dict[str, str]]

    def post(self, user: str, path: str, body: dict[str, Any] | None = None) -> Any:
        return self.client.post(path, json=body, headers=self.headers[user])

    def get(self, user: str, path: str, **params: Any) -> Any:
        return self.client.get(path, params=params, headers=self.headers[user])

    def put(self, user: str, path: str, body: dict[str, Any]) -> Any:
        return self.client.put(path, json=body, headers=self.headers[user])


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory, embedder: LocalMiniLMEmbedder) -> Iterator[Api]:
    """alice and bob (write scope) and root (an administrator) in the organisation ``acme``."""
    home = tmp_path_factory.mktemp("rest-runbooks") / "home"
    with Librarian(Settings(home=home), embedder=embedder) as lib:
        operator = lib.default_principal
        lib.identity.create_organization(operator, "acme")
        headers = {}
        for name in ("alice", "bob", "root"):
            admin = name == "root"
            lib.identity.create_user(operator, "acme", name, admin=admin)
            scopes = ["admin"] if admin else ["write"]
            token = lib.identity.create_token(operator, "acme", name, scopes=scopes)["token"]
            headers[name] = {"Authorization": f"Bearer {token}"}
        with TestClient(create_app(lib)) as client:
            yield Api(client, headers)


@pytest.fixture(scope="module")
def greeter(api: Api) -> int:
    created = api.post("alice", "/runbooks", {"text": GREETER})
    assert created.status_code == 201, created.text
    runbook_id: int = created.json()["id"]
    return runbook_id


def test_runbooks_are_added_versioned_listed_and_edited(api: Api) -> None:
    text = (
        GREETER.replace("Greeter silent", "Welcome banner blank")
        .replace("The greeter service stopped saying hello", "The welcome banner shows nothing")
        .replace("[greeter silent, no hello in the logs]", "[blank banner]")
        .replace("[greeter]", "[banner]")
    )
    created = api.post("alice", "/runbooks", {"text": text})
    again = api.post("alice", "/runbooks", {"text": text.replace("echo hello", "echo  hello")})
    same = api.post("alice", "/runbooks", {"text": text.replace("echo hello", "echo  hello")})
    runbook_id = created.json()["id"]
    first = api.get("alice", f"/runbooks/{runbook_id}", version=1).json()
    current = api.get("alice", f"/runbooks/{runbook_id}").json()
    listed = api.get("bob", "/runbooks", tag="banner").json()["runbooks"]
    versions = api.get("alice", f"/runbooks/{runbook_id}/versions").json()["versions"]

    assert created.status_code == 201 and created.json()["change"] == "created"
    assert created.json()["version"] == 1 and created.json()["variables"] == {"who": None}
    assert (again.json()["id"], again.json()["change"], again.json()["version"]) == (
        runbook_id,
        "new_version",
        2,
    )
    assert same.json()["change"] == "unchanged" and same.json()["version"] == 2
    assert first["steps"][0]["action"] == "echo hello {{who}}" and first["current_version"] == 2
    assert current["steps"][0]["action"] == "echo  hello {{who}}"
    assert [s["action_type"] for s in current["steps"]] == ["bash", "conditional", "manual"]
    assert runbook_id in [r["id"] for r in listed]  # organisation-wide by default: bob reads it
    assert [v["version"] for v in versions] == [2, 1]

    # An edit names the version it was based on; a stale one is a conflict, and bob may not edit.
    edited = api.put(
        "alice", f"/runbooks/{runbook_id}", {"text": text, "base_version": 2, "note": "back to one space"}
    )
    stale = api.put("alice", f"/runbooks/{runbook_id}", {"text": GREETER, "base_version": 2})
    foreign = api.put("bob", f"/runbooks/{runbook_id}", {"text": text + "\n", "base_version": 3})
    assert edited.status_code == 200 and edited.json()["version"] == 3
    assert stale.status_code == 409 and "version 3, not 2" in stale.json()["message"]
    assert foreign.status_code == 403

    # Retired runbooks leave the default list and cannot be started; activating brings them back.
    retired = api.post("alice", f"/runbooks/{runbook_id}/deactivate")
    hidden = api.get("alice", "/runbooks", tag="banner").json()["runbooks"]
    everything = api.get("alice", "/runbooks", tag="banner", include_inactive=True).json()["runbooks"]
    refused = api.post("alice", f"/runbooks/{runbook_id}/executions", {"variables": {"who": "world"}})
    back = api.post("alice", f"/runbooks/{runbook_id}/activate")
    assert retired.json()["is_active"] is False and back.json()["is_active"] is True
    assert runbook_id not in [r["id"] for r in hidden] and runbook_id in [r["id"] for r in everything]
    assert refused.status_code == 422 and "retired" in refused.json()["message"]


def test_a_json_runbook_is_accepted(api: Api) -> None:
    text = (
        '{"name": "Ping check", "steps": [{"step": 1, "title": "Ping", "action_type": "bash", '
        '"command": "echo pong", "final_step": true}]}'
    )
    created = api.post("alice", "/runbooks", {"text": text, "format": "json"})
    assert created.status_code == 201 and created.json()["name"] == "Ping check"


def test_validation_names_the_step_and_the_field(api: Api) -> None:
    broken = GREETER.replace("condition: \"{{word}} == 'world'\"", "command: echo oops").replace(
        "if_true: 3", "on_success: 7"
    )
    checked = api.post("alice", "/runbooks/validate", {"text": broken})
    refused = api.post("alice", "/runbooks", {"text": broken})
    fine = api.post("alice", "/runbooks/validate", {"text": GREETER}).json()

    assert checked.status_code == 200 and checked.json()["valid"] is False
    problems = checked.json()["problems"]
    assert any("step 2" in p and "field condition" in p for p in problems), problems
    assert any("step 2" in p and "field command" in p for p in problems), problems
    assert refused.status_code == 422 and "step 2" in refused.json()["message"]
    assert "field condition" in refused.json()["message"]
    assert fine["valid"] is True and fine["required_variables"] == ["who"] and fine["steps"] == 3

    unknown_format = api.post("alice", "/runbooks", {"text": GREETER, "format": "toml"})
    assert unknown_format.status_code == 422 and "format" in unknown_format.json()["message"]


def test_runbooks_match_a_problem_description(api: Api, greeter: int) -> None:
    disk = api.post("alice", "/runbooks", {"text": DISK}).json()
    problem = "orders database refuses writes: could not extend file: No space left on device"
    matched = api.get("bob", "/runbooks/match", problem=problem).json()
    found = api.post("bob", "/runbooks/find", {"topic": "greeter says no hello"}).json()
    by_id = api.post("bob", "/runbooks/find", {"runbook_id": greeter}).json()
    nothing = api.get("bob", "/runbooks/match")

    assert matched["runbook"]["id"] == disk["id"] and matched["runbook"]["steps"][0]["action"] == "echo 42"
    assert matched["matches"][0]["id"] == disk["id"] and matched["matches"][0]["reasons"]
    assert found["matches"][0]["id"] == greeter
    assert by_id["runbook"]["name"] == "Greeter silent" and by_id["matches"] == []
    assert nothing.status_code == 422 and "problem_description" in nothing.json()["message"]


def test_a_run_goes_through_bash_a_condition_and_a_manual_step(api: Api, greeter: int) -> None:
    started = api.post(
        "alice", f"/runbooks/{greeter}/executions", {"variables": {"who": "world"}, "problem": "no hello"}
    )
    assert started.status_code == 201, started.text
    execution = started.json()
    assert execution["status"] == "waiting" and execution["current_step_number"] == 3
    assert execution["steps"][0]["rendered"] == "echo hello world"
    assert execution["steps"][0]["output"] == "hello world\n" and execution["variables"]["word"] == "world"
    assert [s["output"] for s in execution["steps"][1:]] == ["true", ""]
    assert execution["waiting_for"]["kind"] == "manual"
    assert execution["waiting_for"]["prompt"] == "Check that the dashboard shows hello world"

    answered = api.post(
        "alice", f"/runbook-executions/{execution['id']}/answer", {"answer": "the dashboard is green"}
    ).json()
    assert answered["status"] == "completed" and answered["completed_steps"] == [1, 2, 3]
    assert answered["steps"][2]["output"] == "the dashboard is green"
    assert answered["steps"][2]["actor"] == "alice"
    again = api.post("alice", f"/runbook-executions/{execution['id']}/answer", {"answer": "twice"})
    assert again.status_code == 409

    closed = api.post(
        "alice", f"/runbook-executions/{execution['id']}/close", {"outcome": "resolved", "rating": 5}
    ).json()
    assert closed["outcome"] == "resolved" and closed["effectiveness_rating"] == 5

    # The other branch: the condition is false and leads to abort.
    other = api.post("alice", f"/runbooks/{greeter}/executions", {"variables": {"who": "moon"}}).json()
    assert other["status"] == "failed" and other["variables"]["word"] == "moon"
    assert other["completed_steps"] == [1, 2] and other["current_step_number"] == 2

    history = api.get("bob", "/runbook-executions", runbook_id=greeter).json()["executions"]
    completed = api.get("bob", "/runbook-executions", runbook_id=greeter, status="completed").json()
    stats = api.get("bob", f"/runbooks/{greeter}/stats").json()
    read = api.get("bob", f"/runbook-executions/{execution['id']}").json()

    ids = [e["id"] for e in history]
    assert ids.index(other["id"]) < ids.index(execution["id"])  # newest first
    assert [e["id"] for e in completed["executions"]] == [execution["id"]]
    assert (stats["execution_count"], stats["success_count"], stats["success_rate"]) == (2, 1, 0.5)
    assert stats["average_rating"] == 5 and stats["avg_execution_time_ms"] is not None
    per_step = {s["step"]: s for s in stats["steps"]}
    assert per_step[1]["runs"] == 2 and per_step[3]["runs"] == 1
    assert read["status"] == "completed" and len(read["steps"]) == 3
    assert api.get("bob", f"/runbooks/{greeter}/proposals").json() == {"proposals": []}
    assert api.post("bob", "/runbook-proposals/999/accept").status_code == 404


def test_missing_variables_and_unknown_executions(api: Api, greeter: int) -> None:
    missing = api.post("alice", f"/runbooks/{greeter}/executions", {})
    unknown = api.get("alice", "/runbook-executions/no-such-execution")
    stepped = api.post("alice", "/runbook-executions/no-such-execution/step")
    assert missing.status_code == 422 and "who" in missing.json()["message"]
    assert unknown.status_code == 404 and stepped.status_code == 404


def test_a_dry_run_renders_steps_and_the_path(api: Api, greeter: int) -> None:
    planned = api.post(
        "alice", f"/runbooks/{greeter}/dry-run", {"variables": {"who": "world"}, "assume": {"word": "moon"}}
    ).json()
    assert planned["steps"][0]["command"] == "echo hello world"
    assert [(visit["step"], visit["next"]) for visit in planned["path"]] == [(1, 2), (2, "abort")]
    assert planned["missing_variables"] == []
    bare = api.post("alice", f"/runbooks/{greeter}/dry-run").json()
    assert bare["missing_variables"] == ["who"]


def test_step_by_step_runs_one_step_per_call(api: Api, greeter: int) -> None:
    started = api.post(
        "alice", f"/runbooks/{greeter}/executions", {"variables": {"who": "world"}, "mode": "step"}
    ).json()
    first = api.post("alice", f"/runbook-executions/{started['id']}/step").json()
    second = api.post("alice", f"/runbook-executions/{started['id']}/step").json()
    third = api.post("alice", f"/runbook-executions/{started['id']}/step").json()
    done = api.post("alice", f"/runbook-executions/{started['id']}/step", {"answer": "looks right"}).json()

    assert started["status"] == "running" and started["steps"] == []
    assert [len(first["steps"]), len(second["steps"])] == [1, 2]
    assert third["status"] == "waiting" and third["waiting_for"]["kind"] == "manual"
    assert done["status"] == "completed" and done["steps"][2]["output"] == "looks right"


def test_approval_steps_need_a_named_approver(api: Api) -> None:
    runbook = api.post("alice", "/runbooks", {"text": RESTART}).json()
    started = api.post("alice", f"/runbooks/{runbook['id']}/executions").json()
    assert started["status"] == "waiting" and started["waiting_for"]["kind"] == "approval"
    assert started["waiting_for"]["approvers"] == ["root"]

    not_an_approver = api.post("alice", f"/runbook-executions/{started['id']}/approve", {"comment": "go"})
    answer_instead = api.post("alice", f"/runbook-executions/{started['id']}/answer", {"answer": "yes"})
    approved = api.post("root", f"/runbook-executions/{started['id']}/approve", {"comment": "go"}).json()
    assert not_an_approver.status_code == 403 and "root" in not_an_approver.json()["message"]
    assert answer_instead.status_code == 409
    assert approved["status"] == "completed"
    assert approved["steps"][0]["output"] == "approved by root: go"
    assert approved["steps"][1]["output"] == "restarted\n"

    rejected_run = api.post("alice", f"/runbooks/{runbook['id']}/executions").json()
    rejected = api.post(
        "root",
        f"/runbook-executions/{rejected_run['id']}/approve",
        {"approved": False, "comment": "not during the sale"},
    ).json()
    assert rejected["status"] == "failed" and rejected["failed_steps"] == [1]
    assert [s["step"] for s in rejected["steps"]] == [1]  # the restart never ran

    cancelled_run = api.post("alice", f"/runbooks/{runbook['id']}/executions").json()
    cancelled = api.post("alice", f"/runbook-executions/{cancelled_run['id']}/cancel", {"reason": "moot"})
    assert cancelled.json()["status"] == "cancelled" and cancelled.json()["resolution_notes"] == "moot"


@pytest.mark.anyio
async def test_a_long_run_does_not_block_other_requests(api: Api) -> None:
    slow = api.post("alice", "/runbooks", {"text": SLOW}).json()
    finished: list[str] = []
    transport = httpx.ASGITransport(app=api.client.app)
    async with httpx.AsyncClient(
        transport=transport, base_url="http://test", headers=api.headers["alice"], timeout=60
    ) as http:

        async def run_it() -> None:
            done = await http.post(f"/runbooks/{slow['id']}/executions")
            assert done.json()["status"] == "completed"
            finished.append("run")

        async def read_meanwhile() -> None:
            # Once the run exists its bash step is running in the thread pool: other requests go on.
            with anyio.fail_after(20):
                while not (await http.get("/runbook-executions", params={"runbook_id": slow["id"]})).json()[
                    "executions"
                ]:
                    await anyio.sleep(0.02)
            assert (await http.get(f"/runbooks/{slow['id']}")).status_code == 200
            finished.append("read")

        async with anyio.create_task_group() as group:
            group.start_soon(run_it)
            group.start_soon(read_meanwhile)
    assert finished == ["read", "run"]


def test_a_private_runbook_is_not_found_for_another_user(api: Api) -> None:
    text = GREETER.replace("Greeter silent", "Alice's secret greeter")
    private = api.post("alice", "/runbooks", {"text": text, "visibility": "private"}).json()
    run = api.post("alice", f"/runbooks/{private['id']}/executions", {"variables": {"who": "world"}}).json()

    assert api.get("alice", f"/runbooks/{private['id']}").status_code == 200
    assert api.get("bob", f"/runbooks/{private['id']}").status_code == 404
    assert api.get("bob", f"/runbooks/{private['id']}/versions").status_code == 404
    assert api.get("bob", f"/runbooks/{private['id']}/stats").status_code == 404
    assert (
        api.post("bob", f"/runbooks/{private['id']}/executions", {"variables": {"who": "x"}}).status_code
        == 404
    )
    assert private["id"] not in [r["id"] for r in api.get("bob", "/runbooks").json()["runbooks"]]
    matched = api.get("bob", "/runbooks/match", problem="Alice's secret greeter says no hello").json()
    assert private["id"] not in [m["id"] for m in matched["matches"]]
    assert api.get("bob", f"/runbook-executions/{run['id']}").status_code == 404
    assert run["id"] not in [e["id"] for e in api.get("bob", "/runbook-executions").json()["executions"]]
    answered = api.post("bob", f"/runbook-executions/{run['id']}/answer", {"answer": "meddling"})
    assert answered.status_code == 404
    assert api.get("alice", f"/runbook-executions/{run['id']}").json()["status"] == "waiting"


def test_requests_without_a_token_are_refused(api: Api) -> None:
    assert api.client.get("/runbooks").status_code == 401


def test_the_openapi_document_lists_the_runbook_routes(api: Api) -> None:
    document = api.client.get("/openapi.json").json()
    paths = document["paths"]
    expected = {
        "/runbooks": {"get", "post"},
        "/runbooks/validate": {"post"},
        "/runbooks/match": {"get"},
        "/runbooks/find": {"post"},
        "/runbooks/{runbook_id}": {"get", "put"},
        "/runbooks/{runbook_id}/versions": {"get"},
        "/runbooks/{runbook_id}/activate": {"post"},
        "/runbooks/{runbook_id}/deactivate": {"post"},
        "/runbooks/{runbook_id}/dry-run": {"post"},
        "/runbooks/{runbook_id}/stats": {"get"},
        "/runbooks/{runbook_id}/proposals": {"get"},
        "/runbooks/{runbook_id}/executions": {"post"},
        "/runbook-proposals/{proposal_id}/accept": {"post"},
        "/runbook-proposals/{proposal_id}/reject": {"post"},
        "/runbook-executions": {"get"},
        "/runbook-executions/{execution_id}": {"get"},
        **{
            f"/runbook-executions/{{execution_id}}/{action}": {"post"}
            for action in ("step", "answer", "approve", "cancel", "resume", "close")
        },
    }
    for path, methods in expected.items():
        assert path in paths, path
        assert set(paths[path]) == methods, path
        for operation in paths[path].values():
            assert operation["summary"] and operation["description"], path
            assert operation["security"] == [{"bearerAuth": []}, {}]
    start = paths["/runbooks/{runbook_id}/executions"]["post"]
    schema = document["components"]["schemas"]["StartRequest"]
    assert (
        "StartRequest" in str(start["requestBody"]) and "step" in schema["properties"]["mode"]["description"]
    )
