"""The step engine on the real task runtime (embedded, in a bubblewrap sandbox): branches, extraction,
pauses for people and agents, retries, bounded loops, injection, and what a finished run leaves."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from librarian.app import Librarian
from librarian.errors import ConflictError, ForbiddenError, InvalidInputError, NotFoundError
from librarian.runbooks.catalog import RunbookInput
from tests.runbooks.conftest import AddRunbook

FLOW = """
name: measure and decide
description: Measure something, then decide what to do about it
trigger_patterns:
  symptoms: [widget overload]
  error_patterns: ["E_WIDGET_\\\\d+"]
  services: [widgets]
variables:
  limit: 10
steps:
  - step: 1
    title: measure
    action_type: bash
    command: echo "value={{value}}"
    extract:
      measured: "regex:value=(\\\\d+)"
  - step: 2
    title: over the limit?
    action_type: conditional
    condition: "{{measured}} > {{limit}}"
    if_true: 3
    if_false: 4
  - step: 3
    title: high
    action_type: bash
    command: echo high {{measured}}
    final_step: true
  - step: 4
    title: low
    action_type: bash
    command: echo low {{measured}}
    final_step: true
"""


def test_a_run_extracts_branches_and_is_recorded(lib: Librarian, add_runbook: AddRunbook) -> None:
    runbook = add_runbook(FLOW)
    me = lib.default_principal

    high = lib.runbooks.start(
        me, runbook["id"], variables={"value": "42"}, problem="widget overload E_WIDGET_7"
    )
    low = lib.runbooks.start(me, runbook["id"], variables={"value": "3"})

    assert high["status"] == "completed", high
    assert [s["step"] for s in high["steps"]] == [1, 2, 3]
    assert high["steps"][0]["extracted"] == {"measured": "42"}
    assert high["steps"][2]["output"].strip() == "high 42"
    assert [s["step"] for s in low["steps"]] == [1, 2, 4]
    assert low["steps"][1]["output"] == "false"

    stats = lib.runbooks.stats(me, runbook["id"])
    assert stats["execution_count"] == 2 and stats["success_count"] == 2
    assert stats["avg_execution_time_ms"] is not None and stats["last_executed_at"]
    per_step = {entry["step"]: entry for entry in stats["steps"]}
    assert per_step[1]["runs"] == 2 and per_step[3]["runs"] == 1 and per_step[4]["runs"] == 1

    # The finished run became an investigation record (an incident with the steps it took).
    incident = lib.incidents.get(me, high["incident_id"])
    assert incident["title"] == "widget overload E_WIDGET_7"
    assert incident["was_successful"] is True
    assert any("step 3 high: succeeded" in step for step in incident["resolution_steps"])


def test_a_missing_variable_is_refused_before_anything_runs(lib: Librarian, add_runbook: AddRunbook) -> None:
    runbook = add_runbook(FLOW)
    with pytest.raises(InvalidInputError, match="value"):
        lib.runbooks.start(lib.default_principal, runbook["id"])
    assert lib.runbooks.executions(lib.default_principal) == []


def test_a_hostile_variable_stays_one_argument(lib: Librarian, add_runbook: AddRunbook) -> None:
    runbook = add_runbook(
        """
name: injection
steps:
  - {step: 1, title: argv, action_type: bash, command: "printf [%s] {{v}}"}
  - {step: 2, title: shell, action_type: bash, command: "printf '[%s]' {{v}} | cat && ls"}
  - {step: 3, title: quoted, action_type: bash, command: "printf '[%s]' \\"x{{v}}\\" | cat", final_step: true}
"""
    )
    hostile = "; touch PWNED; $(touch PWNED2) `touch PWNED3` && rm -rf ~"

    run = lib.runbooks.start(lib.default_principal, runbook["id"], variables={"v": hostile})

    assert run["status"] == "completed", run
    outputs = [step["output"] for step in run["steps"]]
    assert outputs[0] == f"[{hostile}]"
    assert outputs[1].startswith(f"[{hostile}]") and "PWNED" not in outputs[1][len(hostile) + 2 :]
    assert outputs[2] == f"[x{hostile}]"
    workspaces = lib.settings.home / "workspaces"
    assert not list(workspaces.rglob("PWNED*"))


def test_people_and_agents_answer_paused_steps(lib: Librarian, add_runbook: AddRunbook) -> None:
    runbook = add_runbook(
        """
name: paused
steps:
  - {step: 1, title: look, action_type: bash, command: echo disk at 97%}
  - step: 2
    title: analyse
    action_type: agent_prompt
    prompt: "What should we do? {{step_1_output}}"
    extract:
      action: "regex:ACTION: (\\\\w+)"
  - step: 3
    title: sign off
    action_type: approval
    prompt: "Approve {{action}}"
    approvers: [team:ops]
  - {step: 4, title: done, action_type: bash, command: "echo did {{action}}", final_step: true}
"""
    )
    me = lib.default_principal
    run = lib.runbooks.start(me, runbook["id"])
    assert run["status"] == "waiting"
    waiting = run["waiting_for"]
    assert waiting["kind"] == "agent_prompt" and waiting["step"] == 2
    # Step outputs reach a model or agent as quoted data.
    assert '<data source="step_1_output">\ndisk at 97%' in waiting["prompt"]

    run = lib.runbooks.answer(me, run["id"], "Clean the cache. ACTION: prune")
    assert run["waiting_for"]["kind"] == "approval"
    assert run["waiting_for"]["prompt"] == "Approve prune"
    with pytest.raises(ConflictError, match="approval"):
        lib.runbooks.answer(me, run["id"], "yes")

    team = lib.identity.create_team(me, 1, "ops")
    lib.identity.create_user(me, 1, "ops-lead", teams=["ops"])
    lib.identity.create_user(me, 1, "dev")
    outsider = lib.identity.principal_of(1, "dev")
    with pytest.raises(ForbiddenError, match="team:ops"):
        lib.runbooks.approve(outsider, run["id"])
    ops = lib.identity.principal_of(1, "ops-lead")
    assert ops.team_ids == {team["id"]}
    run = lib.runbooks.approve(ops, run["id"], comment="go")

    assert run["status"] == "completed", run
    assert run["steps"][-1]["output"].strip() == "did prune"
    assert run["steps"][2]["actor"] == "ops-lead" and "approved by ops-lead: go" in run["steps"][2]["output"]


def test_a_rejection_and_a_timeout_follow_on_failure(lib: Librarian, add_runbook: AddRunbook) -> None:
    runbook = add_runbook(
        """
name: gated
steps:
  - step: 1
    title: gate
    action_type: approval
    prompt: go?
    timeout_seconds: 0.3
    on_success: 2
    on_failure: 3
  - {step: 2, title: went, action_type: bash, command: echo went, final_step: true}
  - {step: 3, title: stopped, action_type: bash, command: echo stopped, final_step: true}
"""
    )
    me = lib.default_principal
    rejected = lib.runbooks.approve(me, lib.runbooks.start(me, runbook["id"])["id"], approved=False)
    assert [s["step"] for s in rejected["steps"]] == [1, 3]
    assert rejected["steps"][0]["status"] == "failed"

    waiting = lib.runbooks.start(me, runbook["id"])
    time.sleep(0.4)
    touched = lib.runbooks.resume_interrupted()
    assert waiting["id"] in touched
    timed_out = lib.runbooks.execution(me, waiting["id"])
    assert timed_out["status"] == "completed"
    assert timed_out["steps"][0]["status"] == "timed_out"
    assert [s["step"] for s in timed_out["steps"]] == [1, 3]


def test_retries_and_bounded_loops_end(lib: Librarian, add_runbook: AddRunbook) -> None:
    runbook = add_runbook(
        """
name: stubborn
steps:
  - step: 1
    title: flaky
    action_type: bash
    command: sh -c "echo trying; exit 3"
    retries: 2
    retry_delay_seconds: 0.05
    on_failure: 2
  - step: 2
    title: poll
    action_type: bash
    command: echo polling
    max_visits: 3
  - step: 3
    title: again?
    action_type: conditional
    condition: "true"
    if_true: 2
    if_false: 4
  - {step: 4, title: never, action_type: bash, command: echo never, final_step: true}
"""
    )
    run = lib.runbooks.start(lib.default_principal, runbook["id"])

    assert run["status"] == "failed"
    flaky = [s for s in run["steps"] if s["step"] == 1]
    assert [s["attempt"] for s in flaky] == [1, 2, 3] and {s["status"] for s in flaky} == {"failed"}
    assert flaky[0]["error_context"]["exit_code"] == 3
    assert len([s for s in run["steps"] if s["step"] == 2]) == 3
    assert "max_visits (3)" in run["resolution_notes"]


def test_step_by_step_runs_one_step_per_call(lib: Librarian, add_runbook: AddRunbook) -> None:
    runbook = add_runbook(FLOW)
    me = lib.default_principal
    run = lib.runbooks.start(me, runbook["id"], variables={"value": "1"}, mode="step")
    assert run["status"] == "running" and run["steps"] == [] and run["current_step_number"] == 1

    run = lib.runbooks.step(me, run["id"])
    assert [s["step"] for s in run["steps"]] == [1] and run["current_step_number"] == 2
    run = lib.runbooks.step(me, run["id"])
    run = lib.runbooks.step(me, run["id"])
    assert run["status"] == "completed" and [s["step"] for s in run["steps"]] == [1, 2, 4]


def test_get_runbook_ranks_by_triggers_meaning_and_says_why(lib: Librarian, add_runbook: AddRunbook) -> None:
    examples = Path(__file__).resolve().parents[2] / "examples" / "runbooks"
    result = lib.runbooks.catalog.import_path(lib.default_principal, examples)
    assert len(result["created"]) >= 4 and result["errors"] == []

    found = lib.runbooks.find(
        lib.default_principal, problem_description="writes fail with: No space left on device on /var"
    )
    assert found["runbook"]["name"] == "Disk usage investigation"
    assert any("No space left on device" in reason for reason in found["matches"][0]["reasons"])

    by_topic = lib.runbooks.find(lib.default_principal, topic="postgres queries hanging on locks")
    assert by_topic["matches"][0]["name"] == "PostgreSQL health investigation"
    assert by_topic["runbook"]["steps"][0]["action_type"] == "bash"

    again = lib.runbooks.catalog.import_path(lib.default_principal, examples)
    assert again["created"] == [] and len(again["unchanged"]) == len(result["created"])


def test_an_edit_is_a_new_version_and_runs_record_theirs(lib: Librarian, add_runbook: AddRunbook) -> None:
    first = add_runbook(FLOW)
    me = lib.default_principal
    old_run = lib.runbooks.start(me, first["id"], variables={"value": "1"})
    second = add_runbook(FLOW.replace("echo low {{measured}}", "echo LOW {{measured}}"))

    assert second["id"] == first["id"] and second["version"] == 2 and second["change"] == "new_version"
    new_run = lib.runbooks.start(me, first["id"], variables={"value": "1"})
    assert old_run["runbook_version"] == 1 and new_run["runbook_version"] == 2
    assert new_run["steps"][-1]["output"].strip() == "LOW 1"
    assert [v["version"] for v in lib.runbooks.catalog.versions(me, first["id"])] == [2, 1]
    assert "echo low" in lib.runbooks.catalog.get(me, first["id"], version=1)["steps"][3]["command"]
    document = lib.knowledge.documents.get(me, second["knowledge_document_id"])
    assert document["document_type"] == "runbook" and "echo LOW" in document["content"]


def test_the_sweeper_times_out_a_forgotten_wait(lib: Librarian, add_runbook: AddRunbook) -> None:
    runbook = add_runbook(
        """
name: forgotten
steps:
  - {step: 1, title: ask, action_type: manual, prompt: "anyone?", timeout_seconds: 0.2, on_failure: 2}
  - {step: 2, title: fallback, action_type: bash, command: echo nobody answered, final_step: true}
"""
    )
    run = lib.runbooks.start(lib.default_principal, runbook["id"])
    assert run["status"] == "waiting"

    lib.runbooks.start_sweeper(interval_seconds=0.05)
    deadline = time.monotonic() + 30
    while lib.runbooks.execution(lib.default_principal, run["id"])["status"] != "completed":
        assert time.monotonic() < deadline
        time.sleep(0.05)

    done = lib.runbooks.execution(lib.default_principal, run["id"])
    assert [(s["step"], s["status"]) for s in done["steps"]] == [(1, "timed_out"), (2, "succeeded")]


def test_a_private_runbook_is_neither_shown_nor_matched_nor_run_for_others(lib: Librarian) -> None:
    me = lib.default_principal
    lib.identity.create_user(me, 1, "alice")
    lib.identity.create_user(me, 1, "bob")
    alice, bob = lib.identity.principal_of(1, "alice"), lib.identity.principal_of(1, "bob")
    text = FLOW.replace("name: measure and decide", "name: alice's widget runbook")
    private = lib.runbooks.add(alice, RunbookInput(text, visibility="private"))

    problem = "widget overload E_WIDGET_3 on widgets"
    assert [m["id"] for m in lib.runbooks.match(alice, problem)] == [private["id"]]
    assert lib.runbooks.match(bob, problem) == []
    assert lib.runbooks.catalog.list_runbooks(bob) == []
    with pytest.raises(NotFoundError):
        lib.runbooks.catalog.get(bob, private["id"])
    with pytest.raises(NotFoundError):
        lib.runbooks.start(bob, private["id"], variables={"value": "1"})
    run = lib.runbooks.start(alice, private["id"], variables={"value": "1"})
    with pytest.raises(NotFoundError):
        lib.runbooks.execution(bob, run["id"])
    assert lib.runbooks.executions(bob) == []


def test_two_callers_cannot_drive_one_run_at_once(lib: Librarian, add_runbook: AddRunbook) -> None:
    runbook = add_runbook(
        """
name: slow steps
steps:
  - {step: 1, title: slow, action_type: bash, command: sleep 1.5}
  - {step: 2, title: done, action_type: bash, command: echo done, final_step: true}
"""
    )
    me = lib.default_principal
    run = lib.runbooks.start(me, runbook["id"], mode="step")
    first = threading.Thread(target=lib.runbooks.step, args=(me, run["id"]))
    first.start()
    deadline = time.monotonic() + 30
    while not lib.runbooks.execution(me, run["id"])["steps"]:
        assert time.monotonic() < deadline
        time.sleep(0.02)

    with pytest.raises(ConflictError, match="running a step now"):
        lib.runbooks.step(me, run["id"])
    first.join(30)

    after = lib.runbooks.step(me, run["id"])
    assert after["status"] == "completed"
    assert [(s["step"], s["status"]) for s in after["steps"]] == [(1, "succeeded"), (2, "succeeded")]
