"""The seed scenario, for real: upload a file to S3 with a tag through a CLI whose API drifted.

What it does, with real software only (the AWS CLI and moto's S3 server of the ``demo`` extra):

1. **Docs.** Indexes the help of the AWS CLI that tasks run (the one on the sandbox's ``PATH``), for
   the ``s3`` and ``s3api`` subtrees, at the version that program reports -- unless that exact
   source is already indexed in ``LIBRARIAN_HOME``.
2. **Memory.** Starts the loop with an empty memory of fixes (a fresh runtime store under
   ``<home>/demo``), so the demo always shows a first run that must research and a second one
   that must not. The documentation index is kept.
3. **Two runs of one goal** -- "upload report.csv to bucket my-bucket with tag compliance=strict" --
   each against a fresh S3 server on a free loopback port: create the bucket, write ``report.csv``,
   upload it with ``aws s3 cp ... --tagging compliance=strict`` (the planner's static knowledge, which
   this CLI rejects: exit 255, ``Unknown options``), and verify the object's tags with
   ``aws s3api get-object-tagging``. The self-correcting loop fixes the upload; the first run from
   research, the second from the verified fix the first one taught it.
4. **Evidence.** For each run: whether it succeeded, how many research calls the loop made, the
   strategy, the final command as stored on the task, the timings from the runtime's event log, and
   the object's tags as the S3 server returns them.

If the loop cannot fix the upload, the run fails and its escalation report is part of the result;
nothing is ever reported as a success that the runtime did not record as one.
"""

from __future__ import annotations

import shutil
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import select

from librarian.app import Librarian
from librarian.config import Settings
from librarian.correction.fixes import Settlement, learn_from_workflow
from librarian.correction.loop import SelfCorrectingCorrector
from librarian.correction.timeline import STEP_KIND, TimelineEvent, read_timeline
from librarian.demo.s3 import S3Server, object_tags
from librarian.errors import LibrarianError, MissingExtraError, NotFoundError
from librarian.runtime.engine import Runtime
from librarian.runtime.models import Task
from librarian.runtime.report import WorkflowReport
from librarian.runtime.sandbox import EnvironmentManager
from librarian.runtime.spec import WorkflowBuilder, WorkflowSpec
from librarian.runtime.version_probe import detect_version
from librarian.storage.models import Source

__all__ = ["DemoResult", "RunResult", "demo_spec", "run_demo"]

GOAL = "Upload report.csv to bucket my-bucket with tag compliance=strict"
BUCKET = "my-bucket"
KEY = "report.csv"
TAG = "compliance=strict"
SDK_NAME = "aws-cli"
PROGRAM = "aws"
DEFAULT_SCOPES: tuple[str, ...] = ("s3", "s3api")
UPLOAD_TASK = "upload"
REPORT_CSV = "region,total\nnorth,12\nsouth,7\n"
RUN_TIMEOUT_SECONDS = 600.0

Progress = Callable[[str], None]


@dataclass(frozen=True)
class RunResult:
    """One run of the goal.

    Attributes:
        number: 1 or 2.
        spec: the workflow as submitted (the DAG before surgery).
        workflow_id: the runtime's workflow id.
        succeeded: the runtime recorded the workflow as a success.
        research_calls: research calls the loop made to correct the upload.
        strategy: the strategy that produced the correction (``None`` without one).
        source: where its knowledge came from (``research``, ``knowledge_base``...).
        final_command: the upload task's command as stored after the run.
        correction_seconds: from the upload's failure to the corrected retry being inserted (the
            time the loop took to decide, from the event log).
        failure_to_success_seconds: from the upload's failure to its successful retry.
        object_tags: the uploaded object's tags, read back from that run's S3 server.
        timeline: the workflow's events, oldest first.
        report: the workflow as the runtime reports it (the DAG after surgery).
        learned: what the loop learned when the run ended.
        escalation: the escalation report, when the loop gave up.
    """

    number: int
    spec: WorkflowSpec
    workflow_id: str
    succeeded: bool
    research_calls: int
    strategy: str | None
    source: str | None
    final_command: list[str]
    correction_seconds: float | None
    failure_to_success_seconds: float | None
    object_tags: list[dict[str, str]]
    timeline: list[TimelineEvent] = field(default_factory=list)
    report: WorkflowReport | None = None
    learned: list[Settlement] = field(default_factory=list)
    escalation: dict[str, Any] | None = None

    def to_dict(self, *, with_timeline: bool = False) -> dict[str, Any]:
        """The run as JSON-ready data (the timeline only when asked)."""
        data: dict[str, Any] = {
            "succeeded": self.succeeded,
            "research_calls": self.research_calls,
            "strategy": self.strategy,
            "source": self.source,
            "final_command": list(self.final_command),
            "correction_seconds": _rounded(self.correction_seconds),
            "failure_to_success_seconds": _rounded(self.failure_to_success_seconds),
            "object_tags": self.object_tags,
            "workflow_id": self.workflow_id,
            "learned": [s.to_dict() for s in self.learned],
        }
        if self.escalation is not None:
            data["escalation"] = self.escalation
        if with_timeline:
            data["timeline"] = [event.to_dict() for event in self.timeline]
        return data


@dataclass(frozen=True)
class DemoResult:
    """Both runs, the documentation used and the tags read back from the last S3 server."""

    runs: list[RunResult]
    object_tags: list[dict[str, str]]
    tool_version: str | None
    docs: dict[str, Any]

    @property
    def succeeded(self) -> bool:
        """Every run succeeded."""
        return all(run.succeeded for run in self.runs)

    def to_dict(self) -> dict[str, Any]:
        """The ``librarian demo --json`` document."""
        return {
            "runs": [run.to_dict() for run in self.runs],
            "object_tags": self.object_tags,
            "tool_version": self.tool_version,
            "docs": self.docs,
        }


def demo_spec(endpoint: str, program: str = PROGRAM) -> WorkflowSpec:
    """The initial workflow: what a planner with out-of-date static knowledge would write."""
    env = {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    return (
        WorkflowBuilder("seed-scenario", goal=GOAL)
        .task(
            "create-bucket",
            "command_executor",
            {"argv": [program, "s3api", "create-bucket", "--bucket", BUCKET], "env": env, "network": True},
            description=f"Create the bucket {BUCKET}",
        )
        .task(
            "write-report",
            "file_writer",
            {"path": KEY, "content": REPORT_CSV, "expect": {"content": REPORT_CSV}},
            description=f"Write {KEY}",
        )
        .task(
            UPLOAD_TASK,
            "command_executor",
            {
                "argv": [program, "s3", "cp", KEY, f"s3://{BUCKET}/", "--tagging", TAG],
                "env": env,
                "network": True,
            },
            description=f"Upload {KEY} to bucket {BUCKET} with tag {TAG}",
            depends_on=["create-bucket", "write-report"],
        )
        .task(
            "verify-tags",
            "command_executor",
            {
                "argv": [program, "s3api", "get-object-tagging", "--bucket", BUCKET, "--key", KEY],
                "env": env,
                "network": True,
                "expect": {"stdout_regex": r'"Key":\s*"compliance",\s*"Value":\s*"strict"'},
            },
            description=f"Check that s3://{BUCKET}/{KEY} carries the tag {TAG}",
            depends_on=[UPLOAD_TASK],
        )
        .build()
    )


def run_demo(
    settings: Settings,
    *,
    scopes: Sequence[str] = DEFAULT_SCOPES,
    runs: int = 2,
    progress: Progress | None = None,
) -> DemoResult:
    """Run the seed scenario (see the module docs).

    Args:
        settings: the user's settings; documentation goes to their store, the demo's runtime and
            memory of fixes to ``<home>/demo`` (emptied first).
        scopes: AWS CLI subtrees to index when they are not indexed yet.
        runs: how many times the goal is run.
        progress: called with a line of text at each stage.

    Raises:
        MissingExtraError: the AWS CLI or moto is not installed.
        BackendUnavailableError: the S3 server did not start.
    """
    say = progress or (lambda _line: None)
    demo_home = settings.home / "demo"
    shutil.rmtree(demo_home, ignore_errors=True)
    runtime_settings = settings.model_copy(
        update={"home": demo_home, "database_url": None, "broker_url": None, "runtime_workers": 2}
    )
    environment = EnvironmentManager.from_settings(runtime_settings)
    program = shutil.which(PROGRAM, path=environment.path)
    if program is None:
        raise MissingExtraError("awscli", "demo")
    probe = detect_version(program, environment, environment.workspace_for("demo-probe"))
    version = probe.version if probe else None
    results: list[RunResult] = []
    with Librarian(settings) as lib:
        docs = ensure_docs(lib, program, scopes, say)
        # Loading the embedding model is a one-off start-up cost, not part of correcting anything:
        # paid here, the timings of both runs measure the loop.
        say("loading the embedding model")
        lib.search("upload a file", sdk_name=SDK_NAME, top_k=1)
        corrector = SelfCorrectingCorrector.from_settings(runtime_settings, librarian=lib)
        try:
            with Runtime(runtime_settings, correctors=[corrector]) as runtime:
                for number in range(1, runs + 1):
                    results.append(_one_run(number, runtime, corrector, demo_home, say))
        finally:
            corrector.close()
    tags = results[-1].object_tags if results else []
    return DemoResult(runs=results, object_tags=tags, tool_version=version, docs=docs)


def ensure_docs(lib: Librarian, program: str, scopes: Sequence[str], say: Progress) -> dict[str, Any]:
    """Index the CLI's help for ``scopes`` unless that source is already indexed; say which."""
    scope = f"?scope={','.join(sorted(scopes))}" if scopes else ""
    uri = f"cli://{program}{scope}"
    with lib.sessions() as session:
        source = session.scalar(select(Source).where(Source.uri == uri, Source.kind == "cli-help"))
        indexed = source is not None and source.last_status == "ok"
        version = source.sdk_version if source is not None else None
    if indexed:
        say(f"documentation: {uri} already indexed (aws-cli {version})")
        return {"uri": uri, "ingested": False, "sdk_version": version, "seconds": 0.0}
    say(
        f"documentation: indexing the help of {program} ({', '.join(scopes) or 'everything'}); "
        "this takes a minute or two"
    )
    started = time.monotonic()
    report = lib.ingest_cli(program, sdk_name=SDK_NAME, scopes=tuple(scopes))
    seconds = time.monotonic() - started
    with lib.sessions() as session:
        source = session.scalar(select(Source).where(Source.uri == uri))
        version = source.sdk_version if source is not None else None
    say(f"documentation: {report.files_seen} commands indexed as aws-cli {version} in {seconds:.0f} s")
    return {"uri": uri, "ingested": True, "sdk_version": version, "seconds": round(seconds, 1)}


def _one_run(
    number: int, runtime: Runtime, corrector: SelfCorrectingCorrector, demo_home: Path, say: Progress
) -> RunResult:
    with S3Server(demo_home) as s3:
        say(f"run {number}: S3 server at {s3.endpoint}")
        spec = demo_spec(s3.endpoint)
        report = runtime.run(spec, timeout=RUN_TIMEOUT_SECONDS)
        learned = learn_from_workflow(
            corrector.sessions,
            report.workflow_id,
            workspaces=corrector.environment.root,
            feedback_sessions=corrector.fixes.feedback_sessions,
            on_settled=corrector.investigation_settled,
        )
        store = corrector.librarian
        if store is not None:
            saved = store.incidents.list_incidents(store.default_principal, limit=500)
            mine = [item["id"] for item in saved if item["workflow_id"] == str(report.workflow_id)]
            if mine:
                say(f"run {number}: the investigation was saved as incident {', '.join(map(str, mine))}")
        # The settlements wrote their own timeline entries; read the log after them.
        timeline = read_timeline(corrector.sessions, report.workflow_id)
        report = runtime.status(report.workflow_id)
        try:
            tags = object_tags(s3.endpoint, BUCKET, KEY)
        except LibrarianError as exc:
            say(f"run {number}: the object's tags could not be read back: {exc.message}")
            tags = []
    return _result(number, spec, report, timeline, learned, tags, corrector)


def _result(
    number: int,
    spec: WorkflowSpec,
    report: WorkflowReport,
    timeline: list[TimelineEvent],
    learned: list[Settlement],
    tags: list[dict[str, str]],
    corrector: SelfCorrectingCorrector,
) -> RunResult:
    steps = [event for event in timeline if event.kind == STEP_KIND and event.task == UPLOAD_TASK]
    correction = next((event for event in steps if event.stage == "correction"), None)
    escalation = next((event for event in steps if event.stage == "escalation"), None)
    failed_at = _first(
        timeline, lambda e: e.task == UPLOAD_TASK and e.kind == "result_applied" and e.to_status == "failed"
    )
    surgery_at = _first(timeline, lambda e: e.task == UPLOAD_TASK and e.kind == "surgery")
    success_at = _first(
        timeline,
        lambda e: (
            e.task == UPLOAD_TASK
            and e.kind == "result_applied"
            and e.to_status == "success"
            and surgery_at is not None
            and e.at >= surgery_at
        ),
    )
    with corrector.sessions() as session:
        task = session.scalar(
            select(Task).where(
                Task.workflow_id == uuid.UUID(report.workflow_id), Task.task_key == UPLOAD_TASK
            )
        )
        if task is None:
            raise NotFoundError(f"workflow {report.workflow_id} has no task {UPLOAD_TASK!r}")
        final_command = [str(token) for token in task.payload.get("argv") or []]
    return RunResult(
        number=number,
        spec=spec,
        workflow_id=report.workflow_id,
        succeeded=report.status == "success",
        research_calls=sum(1 for event in steps if event.stage == "research"),
        strategy=str(correction.data.get("strategy")) if correction else None,
        source=str(correction.data.get("source")) if correction else None,
        final_command=final_command,
        correction_seconds=_seconds(failed_at, surgery_at),
        failure_to_success_seconds=_seconds(failed_at, success_at),
        object_tags=tags,
        timeline=timeline,
        report=report,
        learned=learned,
        escalation=escalation.data.get("report") if escalation else None,
    )


def _first(events: list[TimelineEvent], test: Callable[[TimelineEvent], bool]) -> datetime | None:
    return next((event.at for event in events if test(event)), None)


def _seconds(start: datetime | None, end: datetime | None) -> float | None:
    if start is None or end is None:
        return None
    return max(0.0, (end - start).total_seconds())


def _rounded(value: float | None) -> float | None:
    return round(value, 3) if value is not None else None
