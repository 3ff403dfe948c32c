"""Verbs in workflows: a task naming only a verb is substituted, decomposed, or created with a
question, through the runtime's own surgery and clarification; ``tool_call`` runs a registered
Python tool in the sandbox (issue 16)."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from librarian.app import Librarian
from librarian.config import Settings
from librarian.discovery.workflow_tasks import NovelVerbCorrector
from librarian.embeddings.local import LocalMiniLMEmbedder
from librarian.runtime.engine import Runtime
from librarian.runtime.spec import WorkflowBuilder

PLUGIN = '''
def forecast(city: str) -> dict:
    """Weather forecast for a city: temperature, rain and wind for the next days."""
    return {"city": city, "rain": True}


def summarize(text: str = "the quarterly report") -> str:
    """Summarize the text of a PDF document."""
    return "summary of " + text


def send(to: str = "bob@example.org") -> str:
    """Send an email message to a recipient."""
    return "sent to " + to
'''


@pytest.fixture
def setup(tmp_path: Path, embedder: LocalMiniLMEmbedder) -> Iterator[tuple[Librarian, Runtime]]:
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "office.py").write_text(textwrap.dedent(PLUGIN))
    settings = Settings(home=tmp_path / "home")
    with Librarian(settings, embedder=embedder) as lib:
        for function, description in (
            ("forecast", "Weather forecast for a city: temperature, rain and wind for the next days"),
            ("summarize", "Summarize the text of a PDF document"),
            ("send", "Send an email message to a recipient with a subject and a body"),
        ):
            lib.discovery.register_tool(
                {
                    "toolId": f"office.{function}",
                    "name": function,
                    "type": "python",
                    "description": description,
                    "binding": {"module": "office", "function": function, "path": [str(plugins)]},
                }
            )
        runtime = Runtime(settings, correctors=[NovelVerbCorrector(lib)])
        try:
            yield lib, runtime
        finally:
            runtime.close()


def test_a_paraphrased_verb_is_substituted_and_the_surgery_says_why(setup: tuple[Librarian, Runtime]) -> None:
    _, runtime = setup
    spec = (
        WorkflowBuilder("rain", goal="know whether to take an umbrella")
        .task(
            "check",
            "verb",
            {
                "verb": "CHECK_RAIN",
                "description": "weather forecast for a city",
                "inputs": {"city": "Berlin"},
            },
        )
        .build()
    )

    report = runtime.run(spec, timeout=120)

    assert report.status == "success", report.failure_report
    task = report.task("check")
    assert task.retries == 1 and "office.forecast answered" in task.outcome and "Berlin" in task.outcome
    surgery = next(event for event in report.events if event.kind == "surgery")
    assert "novel_verb" in surgery.reason and "office.forecast" in surgery.reason


def test_a_compound_verb_is_decomposed_into_tool_calls(setup: tuple[Librarian, Runtime]) -> None:
    _, runtime = setup
    spec = (
        WorkflowBuilder("brief", goal="brief Bob")
        .task(
            "brief",
            "verb",
            {
                "verb": "BRIEF_BOB",
                "description": "summarize the text of the PDF document and then send an email message",
            },
        )
        .build()
    )

    report = runtime.run(spec, timeout=120)

    assert report.status == "success", report.failure_report
    inserted = [event for event in report.events if event.kind == "task_inserted"]
    assert len(inserted) == 2
    calls = [task for task in report.tasks if task.executor_type == "tool_call"]
    assert all(task.status == "success" for task in calls)
    assert sorted(task.outcome.split()[1] for task in calls) == ["office.send", "office.summarize"]
    assert "decomposition" in report.task("brief").outcome


def test_a_new_verb_is_created_and_the_workflow_asks_instead_of_failing(
    setup: tuple[Librarian, Runtime],
) -> None:
    lib, runtime = setup
    spec = (
        WorkflowBuilder("launch", goal="reach orbit")
        .task(
            "launch", "verb", {"verb": "LAUNCH_ROCKET", "description": "launch a rocket into low earth orbit"}
        )
        .build()
    )

    paused = runtime.run(spec, timeout=120)

    assert paused.status == "paused" and paused.question is not None
    assert "LAUNCH_ROCKET" in paused.question["question"] and "novel verb" in paused.question["question"]
    assert lib.discovery.verb("LAUNCH_ROCKET")["status"] == "novel"
    runtime.answer(paused.workflow_id, "office.send")
    report = runtime.wait(paused.workflow_id, timeout=120)
    assert report.status == "success", report.failure_report
    assert "sent to bob@example.org" in report.task("launch").outcome
