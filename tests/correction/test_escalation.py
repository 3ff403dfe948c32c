"""Escalation: the report's content (Markdown and JSON, scrubbed), and the loop escalating a real failure."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from librarian.app import Librarian
from librarian.config import Settings
from librarian.correction.escalation import EscalationReport, FailedCommand
from librarian.correction.loop import LoopOptions, SelfCorrectingCorrector
from librarian.correction.timeline import STEP_KIND, read_timeline
from librarian.runbooks.catalog import RunbookInput
from librarian.runtime.engine import Runtime
from librarian.runtime.spec import WorkflowBuilder, WorkflowSpec
from librarian.runtime.version_probe import parse_version

SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
SEED = ["aws", "s3", "cp", "report.csv", "s3://my-bucket/", "--tagging", "compliance=strict"]


def sample() -> EscalationReport:
    return EscalationReport(
        goal="Publish the nightly report",
        task_key="publish",
        reason="no correction reached confidence 0.70",
        workflow_id="wf-1",
        tool="tool",
        version="4.2.0",
        version_output="tool 4.2.0",
        failures=[
            FailedCommand(
                ["tool", "put", f"--secret={SECRET}"],
                2,
                f"error: unknown option --colour\nAWS_SECRET_ACCESS_KEY={SECRET}\nsee /home/alice/notes",
                classification={"category": "api_drift", "rule_id": "unknown-option", "correctable": True},
            ),
            FailedCommand(["tool", "put", "--color"], 3, "error: bucket not found"),
        ],
        research=[
            {
                "sdk_name": "tool",
                "query": "publish the report",
                "version": "4.2.0",
                "resolved_version": "4.1.0",
                "version_note": "4.2.0 is not indexed; used the nearest, 4.1.0",
                "confidence": 0.31,
                "top_snippets": [
                    {
                        "entity_name": "tool put",
                        "source_url": "cli://tool/put",
                        "score": 0.62,
                        "excerpt": "put FILE",
                    }
                ],
            }
        ],
        candidates=[
            {
                "argv": ["tool", "upload", "x"],
                "strategy": "synopsis_rewrite",
                "confidence": 0.4,
                "rationale": "weak match",
                "rejected_because": "confidence 0.40 is below 0.70",
            }
        ],
        threshold=0.7,
        clarification=[{"question": "Which bucket?", "answer": "the nightly one"}],
        next_steps=["index the missing version 4.2.0"],
    )


def test_the_markdown_report_tells_the_whole_story_without_secrets() -> None:
    text = sample().to_markdown()

    for expected in (
        "# Escalation: `publish` needs a person",
        "Publish the nightly report",
        "version **4.2.0**",
        "`tool put '--secret=<secret>'` exited with 2 (api_drift, rule `unknown-option`)",
        "error: unknown option --colour",
        "`tool put --color` exited with 3",
        "error: bucket not found",
        "### Attempt 1: `publish the report`",
        "used `4.1.0`; confidence 0.31. 4.2.0 is not indexed",
        "- `tool put` (score 0.62) <cli://tool/put>",
        "confidence 0.40 (threshold 0.70); rejected: confidence 0.40 is below 0.70",
        "Q: Which bucket?",
        "- index the missing version 4.2.0",
    ):
        assert expected in text, expected
    assert SECRET not in text and "/home/alice" not in text


def test_the_json_report_round_trips_and_is_written_next_to_the_markdown(tmp_path: Path) -> None:
    report = sample()
    markdown, document = report.write(tmp_path / "escalations")

    data = json.loads(document.read_text())
    assert markdown.read_text() == report.to_markdown()
    assert data["failures"][0]["exit_code"] == 2 and SECRET not in document.read_text()
    assert data["research"][0]["top_snippets"][0]["entity_name"] == "tool put"
    assert EscalationReport.from_dict(data).to_dict() == data


S3_RUNBOOK = """
name: S3 upload failures
trigger_patterns:
  symptoms: [upload fails]
  services: [s3]
  error_patterns: ['Unknown options: --\\w+']
steps:
  - {step: 1, title: check the CLI version, action_type: bash, command: aws --version, final_step: true}
"""


def test_the_loop_escalates_when_nothing_can_be_researched(tmp_path: Path) -> None:
    """The real AWS CLI rejects the option, no documentation is indexed, and none is indexed on demand."""
    settings = Settings(home=tmp_path / "home", runtime_workers=2, runtime_task_timeout_seconds=120.0)
    spec = (
        WorkflowBuilder("upload", goal="Upload report.csv to bucket my-bucket with tag compliance=strict")
        .task("write", "file_writer", {"path": "report.csv", "content": "a,b\n"})
        .task(
            "upload",
            "command_executor",
            {"argv": SEED, "env": {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}},
            depends_on=["write"],
        )
        .build()
    )
    with Librarian(settings) as docs:
        # The team's runbook for this kind of failure: the escalation names it.
        docs.runbooks.add(docs.default_principal, RunbookInput(S3_RUNBOOK))
        loop = SelfCorrectingCorrector.from_settings(
            settings, librarian=docs, options=LoopOptions(ask_user=False, index_on_demand=False)
        )
        try:
            with Runtime(settings, correctors=[loop]) as runtime:
                report = runtime.run(spec, timeout=120)
                timeline = read_timeline(loop.sessions, report.workflow_id)
        finally:
            loop.close()

    assert report.status == "failed"
    steps = [event for event in timeline if event.kind == STEP_KIND]
    assert [e.stage for e in steps] == [
        "trigger",
        "version",
        "session_cache",
        "knowledge_base",
        "research",
        "candidates",
        "research",
        "candidates",
        "escalation",
    ]
    escalation = steps[-1].data
    markdown_path, json_path = (Path(p) for p in escalation["paths"])
    data = json.loads(json_path.read_text())
    version = parse_version(
        subprocess.run(
            [str(Path(sys.executable).parent / "aws"), "--version"], capture_output=True, text=True
        ).stdout
    )
    assert data["goal"] == spec.goal and data["version"] == version and data["tool"] == "aws"
    [failure] = data["failures"]
    assert failure["argv"] == SEED and failure["exit_code"] == 255
    assert "Unknown options: --tagging,compliance=strict" in failure["stderr"]
    assert [(r["version"], r["error"]) for r in data["research"]] == [(version, True), ("latest", True)]
    assert any("ingest-cli aws" in step for step in data["next_steps"])
    # Without documentation the only idea is dropping the rejected option, too weak to apply.
    assert [c["argv"] for c in data["candidates"]] == [SEED[:5]]
    assert all(c["confidence"] < data["threshold"] for c in data["candidates"])
    assert "Unknown options" in markdown_path.read_text()
    [runbook] = data["runbooks"]
    assert runbook["name"] == "S3 upload failures"
    assert any("Unknown options" in reason for reason in runbook["reasons"])
    assert "## Runbooks that match" in markdown_path.read_text()


# --- clarification: the workflow pauses with a question, an answer resumes it -------------------------


def leaves_spec() -> WorkflowSpec:
    return (
        WorkflowBuilder("leaves", goal="List the installed packages nothing else depends on")
        .task(
            "leaves",
            "command_executor",
            {
                "argv": ["python", "-m", "pip", "freeze", "--not-required"],
                "expect": {"stdout_contains": "Package"},
            },
        )
        .build()
    )


@pytest.mark.parametrize(
    ("answer", "strategy"),
    [("use list instead of freeze", "explicit_replacement"), ("pip list --not-required", "user_answer")],
)
def test_the_loop_asks_before_escalating_and_the_answer_resumes_the_workflow(
    tmp_path: Path, answer: str, strategy: str
) -> None:
    """No documentation and no LLM: only the user can say that the option belongs to another command."""
    settings = Settings(home=tmp_path / "home", runtime_workers=2, runtime_task_timeout_seconds=120.0)
    loop = SelfCorrectingCorrector.from_settings(settings)
    try:
        with Runtime(settings, correctors=[loop]) as runtime:
            paused = runtime.run(leaves_spec(), timeout=120)
            assert paused.status == "paused"
            asked = [
                e for e in read_timeline(loop.sessions, paused.workflow_id) if e.stage == "clarification"
            ]
            assert len(asked) == 1 and "Which command should run instead?" in asked[0].summary
            assert "no such option: --not-required" in asked[0].summary

            runtime.answer(paused.workflow_id, answer)
            report = runtime.wait(paused.workflow_id, timeout=120)
            timeline = read_timeline(loop.sessions, report.workflow_id)
    finally:
        loop.close()

    assert report.status == "success", report.failure_report
    steps = [event for event in timeline if event.kind == STEP_KIND]
    correction = next(e.data for e in steps if e.stage == "correction")
    assert correction["argv"] == ["python", "-m", "pip", "list", "--not-required"]
    assert (correction["strategy"], correction["source"]) == (strategy, "user")
    # The research done before the question is not repeated after the answer: one call with it.
    after = [e.stage for e in steps][[e.stage for e in steps].index("clarification") + 1 :]
    assert after.count("research") == 1


def test_an_answer_that_leads_nowhere_ends_in_the_escalation_report(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path / "home", runtime_workers=2, runtime_task_timeout_seconds=120.0)
    loop = SelfCorrectingCorrector.from_settings(settings)
    try:
        with Runtime(settings, correctors=[loop]) as runtime:
            paused = runtime.run(leaves_spec(), timeout=120)
            runtime.answer(paused.workflow_id, "no idea, sorry")
            report = runtime.wait(paused.workflow_id, timeout=120)
            timeline = read_timeline(loop.sessions, report.workflow_id)
    finally:
        loop.close()

    assert report.status == "failed"
    escalation = next(e for e in timeline if e.stage == "escalation")
    [clarification] = escalation.data["report"]["clarification"]
    assert "Which command should run instead?" in clarification["question"]
    assert clarification["answer"] == "no idea, sorry"
