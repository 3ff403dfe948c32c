"""The self-correcting loop in the real runtime, on real failures of three real tools with their real docs.

Documentation comes from the project's own CLI help connector (``ingest_cli``), indexed once per
module; every command runs in the runtime's sandbox; the S3 server is moto's, on a loopback port.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from librarian.app import Librarian
from librarian.config import Settings
from librarian.correction.fix_templates import make_fix_template
from librarian.correction.fixes import FixStore, learn_from_workflow
from librarian.correction.loop import SelfCorrectingCorrector, loop_correctors
from librarian.correction.models import VerifiedFix
from librarian.correction.options import CorrectionOption, rank_options
from librarian.correction.problem import problem_of
from librarian.correction.timeline import STEP_KIND, TimelineEvent, read_timeline
from librarian.demo.s3 import S3Server, object_tags
from librarian.embeddings.local import LocalMiniLMEmbedder
from librarian.runtime.engine import Runtime
from librarian.runtime.report import WorkflowReport
from librarian.runtime.spec import WorkflowBuilder, WorkflowSpec
from librarian.runtime.version_probe import parse_version

BIN = Path(sys.executable).parent
AWS = str(BIN / "aws")
PIP = str(BIN / "pip")
# The commands a search for the upload meets, the right one among look-alikes that also take --tagging.
AWS_SCOPES = (
    "s3 cp",
    "s3api put-object",
    "s3api put-object-tagging",
    "s3api put-bucket-tagging",
    "s3api get-object-tagging",
    "s3api copy-object",
    "s3api create-multipart-upload",
    "s3api create-bucket",
)
GIT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_AUTHOR_NAME": "Loop Test",
    "GIT_AUTHOR_EMAIL": "loop@example.com",
    "GIT_COMMITTER_NAME": "Loop Test",
    "GIT_COMMITTER_EMAIL": "loop@example.com",
}
TRACK = ["git", "branch", "--set-upstream", "origin/main"]
BAD_TRACK = ["git", "branch", "--set-upstream-too", "origin/main"]


@pytest.fixture(scope="module")
def docs(tmp_path_factory: pytest.TempPathFactory, embedder: LocalMiniLMEmbedder) -> Iterator[Librarian]:
    """The real help of the three tools, indexed by the CLI help connector."""
    settings = Settings(home=tmp_path_factory.mktemp("docs"))
    with Librarian(settings, embedder=embedder) as lib:
        lib.ingest_cli(AWS, sdk_name="aws-cli", scopes=AWS_SCOPES, max_depth=2)
        lib.ingest_cli("git", sdk_name="git", scopes=("branch", "checkout", "switch", "commit"), max_depth=1)
        lib.ingest_cli(PIP, sdk_name="pip", scopes=("freeze", "list", "install", "show"), max_depth=1)
        yield lib


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with S3Server(tmp_path_factory.mktemp("s3")) as server:
        yield server.endpoint


class Loop:
    """A runtime whose only corrector is the loop, with helpers to read what it did."""

    def __init__(self, settings: Settings, docs: Librarian) -> None:
        self.settings = settings
        self.corrector = SelfCorrectingCorrector.from_settings(settings, librarian=docs)
        self.runtime = Runtime(settings, correctors=[self.corrector])

    def run(self, spec: WorkflowSpec) -> WorkflowReport:
        return self.runtime.run(spec, timeout=300)

    def steps(self, report: WorkflowReport, task: str) -> list[TimelineEvent]:
        timeline = read_timeline(self.corrector.sessions, report.workflow_id)
        return [event for event in timeline if event.kind == STEP_KIND and event.task == task]

    def correction(self, report: WorkflowReport, task: str) -> dict[str, Any]:
        return next(e.data for e in reversed(self.steps(report, task)) if e.stage == "correction")

    def learn(self, report: WorkflowReport) -> list[Any]:
        return learn_from_workflow(self.corrector.sessions, report.workflow_id)

    def close(self) -> None:
        self.runtime.close()
        self.corrector.close()


@pytest.fixture
def open_loop(tmp_path: Path, docs: Librarian) -> Iterator[Any]:
    opened: list[Loop] = []

    def factory(**overrides: Any) -> Loop:
        settings = Settings(
            home=tmp_path / "home", runtime_workers=2, runtime_task_timeout_seconds=120.0, **overrides
        )
        loop = Loop(settings, docs)
        opened.append(loop)
        return loop

    yield factory
    for loop in opened:
        loop.close()


def stages(events: Sequence[TimelineEvent]) -> list[str]:
    return [event.stage for event in events]


def shape(argv: Sequence[str], path_length: int) -> tuple[list[str], dict[str, str]]:
    head, rest = list(argv[: path_length + 1]), list(argv[path_length + 1 :])
    return head, dict(zip(rest[::2], rest[1::2], strict=True))


# --- the AWS CLI against a real S3 server ------------------------------------------------------------


def upload_spec(endpoint: str, uploads: Sequence[tuple[str, str, str]], goal: str) -> WorkflowSpec:
    """Create each bucket, write each file, upload it with a tag the old way, check the tag."""
    env = {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    builder = WorkflowBuilder("uploads", goal=goal)
    previous: list[str] = []
    for number, (name, bucket, tag) in enumerate(uploads, start=1):
        key, value = tag.split("=")
        builder.task(
            f"bucket-{number}",
            "command_executor",
            {"argv": ["aws", "s3api", "create-bucket", "--bucket", bucket], "env": env, "network": True},
        )
        builder.task(
            f"write-{number}", "file_writer", {"path": name, "content": f"region,total\nnorth,{number}\n"}
        )
        builder.task(
            f"upload-{number}",
            "command_executor",
            {
                "argv": ["aws", "s3", "cp", name, f"s3://{bucket}/", "--tagging", tag],
                "env": env,
                "network": True,
            },
            description=f"Upload {name} to bucket {bucket} with tag {tag}",
            depends_on=[f"bucket-{number}", f"write-{number}", *previous],
        )
        builder.task(
            f"verify-{number}",
            "command_executor",
            {
                "argv": ["aws", "s3api", "get-object-tagging", "--bucket", bucket, "--key", name],
                "env": env,
                "network": True,
                "expect": {"stdout_regex": rf'"Key":\s*"{key}",\s*"Value":\s*"{value}"'},
            },
            depends_on=[f"upload-{number}"],
        )
        previous = [f"verify-{number}"]
    return builder.build()


@pytest.mark.slow
def test_aws_upload_is_corrected_from_the_docs_then_from_the_learned_fix(open_loop: Any, s3: str) -> None:
    loop = open_loop()
    goal = "Upload report.csv to bucket my-bucket with tag compliance=strict"
    first = loop.run(upload_spec(s3, [("report.csv", "my-bucket", "compliance=strict")], goal))

    assert first.status == "success", first.failure_report
    steps = loop.steps(first, "upload-1")
    assert stages(steps) == [
        "trigger",
        "version",
        "session_cache",
        "knowledge_base",
        "research",
        "candidates",
        "correction",
    ]
    assert steps[0].data["category"] == "api_drift" and "Unknown options" in steps[0].data["matched_text"]
    version = parse_version(subprocess.run([AWS, "--version"], capture_output=True, text=True).stdout)
    assert steps[1].data["version"] == version
    assert steps[4].data["resolved_version"] == version and steps[4].data["top_snippets"]
    correction = loop.correction(first, "upload-1")
    assert (correction["strategy"], correction["source"], correction["research_calls"]) == (
        "synopsis_rewrite",
        "research",
        1,
    )
    assert shape(correction["argv"], 2) == (
        ["aws", "s3api", "put-object"],
        {
            "--bucket": "my-bucket",
            "--key": "report.csv",
            "--body": "report.csv",
            "--tagging": "compliance=strict",
        },
    )
    assert correction["evidence"]["entity_name"] == "s3api put-object"
    assert object_tags(s3, "my-bucket", "report.csv") == [{"Key": "compliance", "Value": "strict"}]
    [settled] = loop.learn(first)
    assert settled.outcome == "succeeded" and settled.new_fix

    # Another file, bucket and tag with the same problem: the verified fix, and no research at all.
    second = loop.run(
        upload_spec(s3, [("sales.csv", "archive-bucket", "team=blue")], "Archive the sales figures")
    )
    assert second.status == "success", second.failure_report
    steps = loop.steps(second, "upload-1")
    assert stages(steps) == ["trigger", "version", "session_cache", "knowledge_base", "correction"]
    correction = loop.correction(second, "upload-1")
    assert (correction["strategy"], correction["source"], correction["research_calls"]) == (
        "learned_fix",
        "knowledge_base",
        0,
    )
    assert correction["argv"][3:] == [
        "--bucket",
        "archive-bucket",
        "--key",
        "sales.csv",
        "--body",
        "sales.csv",
        "--tagging",
        "team=blue",
    ]
    assert object_tags(s3, "archive-bucket", "sales.csv") == [{"Key": "team", "Value": "blue"}]
    [settled] = loop.learn(second)
    assert (settled.outcome, settled.successes, settled.new_fix) == ("succeeded", 2, False)


@pytest.mark.slow
def test_a_correction_made_earlier_in_the_workflow_is_reused_without_research(
    open_loop: Any, s3: str
) -> None:
    loop = open_loop()
    uploads = [("q1.csv", "ledger", "quarter=q1"), ("q2.csv", "ledger", "quarter=q2")]
    report = loop.run(upload_spec(s3, uploads, "Upload both quarterly ledgers with their quarter tags"))

    assert report.status == "success", report.failure_report
    assert "research" in stages(loop.steps(report, "upload-1"))
    assert stages(loop.steps(report, "upload-2")) == ["trigger", "version", "session_cache", "correction"]
    correction = loop.correction(report, "upload-2")
    assert (correction["source"], correction["research_calls"]) == ("session_cache", 0)
    assert object_tags(s3, "ledger", "q2.csv") == [{"Key": "quarter", "Value": "q2"}]


# --- git: an option removed in favour of two named replacements --------------------------------------


def git_spec(last: list[str], *, verify: bool = True) -> WorkflowSpec:
    builder = WorkflowBuilder("tracking", goal="Make the local main branch track origin/main")
    chain = [
        ("remote-repo", ["git", "init", "-q", "--bare", "-b", "main", "origin.git"]),
        ("repo", ["git", "init", "-q", "-b", "main"]),
        ("commit", ["git", "commit", "-q", "--allow-empty", "-m", "init"]),
        ("remote", ["git", "remote", "add", "origin", "./origin.git"]),
        ("push", ["git", "push", "-q", "origin", "main"]),
    ]
    previous: list[str] = []
    for key, argv in chain:
        builder.task(key, "command_executor", {"argv": argv, "env": GIT_ENV}, depends_on=previous)
        previous = [key]
    builder.task(
        "track",
        "command_executor",
        {"argv": last, "env": GIT_ENV},
        description="Set origin/main as the upstream of the current branch",
        depends_on=previous,
    )
    if verify:
        builder.task(
            "verify",
            "command_executor",
            {
                "argv": ["git", "rev-parse", "--abbrev-ref", "main@{upstream}"],
                "env": GIT_ENV,
                "expect": {"stdout_contains": "origin/main"},
            },
            depends_on=["track"],
        )
    return builder.build()


def test_git_removed_option_is_replaced_as_the_error_says(open_loop: Any) -> None:
    loop = open_loop()
    report = loop.run(git_spec(TRACK))

    assert report.status == "success", report.failure_report
    steps = loop.steps(report, "track")
    assert steps[0].data["category"] == "api_drift" and "no longer supported" in steps[0].data["matched_text"]
    correction = loop.correction(report, "track")
    # The command-line edit that follows the error's own words ("use ... instead") wins.
    assert correction["strategy"] in ("explicit_replacement", "command_edit")
    assert "no longer supported" in correction["rationale"]
    assert correction["argv"] == ["git", "branch", "--set-upstream-to", "origin/main"]
    assert report.task("verify").status == "success"  # git itself confirms the upstream


def test_a_logic_failure_is_not_the_loops_to_fix(open_loop: Any) -> None:
    loop = open_loop()
    report = loop.run(git_spec(["git", "rev-parse", "--verify", "no-such-branch"], verify=False))

    assert report.status == "failed"
    [trigger] = loop.steps(report, "track")
    assert trigger.stage == "trigger" and (trigger.data["category"], trigger.data["correctable"]) == (
        "logic",
        False,
    )
    assert report.failure_report is not None and "no correction strategy" in report.failure_report["reason"]


def seed_bad_fix(loop: Loop, tmp_path: Path) -> int:
    """Store a 'verified' fix that is wrong, for the problem the git workflow will hit."""
    repo = tmp_path / "probe"
    repo.mkdir()
    env = {**GIT_ENV, "PATH": "/usr/bin:/bin", "HOME": str(repo)}
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, env=env, check=True)
    failed = subprocess.run(TRACK, cwd=repo, env=env, capture_output=True, text=True)
    version = parse_version(subprocess.run(["git", "--version"], capture_output=True, text=True).stdout)
    problem = problem_of(TRACK, failed.stderr, version)
    template = make_fix_template(TRACK, BAD_TRACK)
    with loop.corrector.sessions.begin() as session:
        fix = VerifiedFix(
            signature=problem.signature,
            tool=problem.tool,
            tool_version=problem.version,
            normalized_error=problem.normalized_error,
            intent=problem.intent,
            template_key="seeded",
            failed_template=template.failed,
            fixed_template=template.fixed,
            strategy="synopsis_rewrite",
            rationale="seeded wrong on purpose",
            snippets=[],
            successes=0,
            failures=0,
        )
        session.add(fix)
        session.flush()
        return fix.id


def test_a_wrong_learned_fix_is_counted_and_the_loop_goes_back_to_the_original_command(
    open_loop: Any, tmp_path: Path
) -> None:
    loop = open_loop()
    bad = seed_bad_fix(loop, tmp_path)
    report = loop.run(git_spec(TRACK))

    assert report.status == "success", report.failure_report
    steps = loop.steps(report, "track")
    corrections = [e.data for e in steps if e.stage == "correction"]
    assert [(c["source"], c["argv"]) for c in corrections] == [
        ("knowledge_base", BAD_TRACK),
        ("research", ["git", "branch", "--set-upstream-to", "origin/main"]),
    ]
    # git rejects the option the wrong fix brought in: a setback, not progress, and that option is
    # blamed so no later candidate brings it back; the original command is corrected again.
    back = next(e for e in steps if e.stage == "stage")
    assert back.data["relation"] == "setback" and back.data["tried"] == 1
    assert back.data["blamed"] == ["--set-upstream-too"]
    fixes = FixStore(loop.corrector.sessions)
    wrong = fixes.fix(bad)
    assert wrong is not None and (wrong.successes, wrong.failures) == (0, 1)
    [settled] = loop.learn(report)
    assert settled.outcome == "succeeded" and settled.new_fix
    # Next time the right fix is trusted and the wrong one is not.
    first = next(e for e in steps if e.stage == "trigger")
    ranked = fixes.lookup(problem_of(TRACK, str(first.data["matched_text"]), wrong.tool_version))
    assert ranked[0].entry["fixed_argv_template"][-2] == "--set-upstream-to"


def test_the_retry_limit_ends_a_failing_correction_with_a_report(open_loop: Any, tmp_path: Path) -> None:
    loop = open_loop(runtime_max_retries=1)
    bad = seed_bad_fix(loop, tmp_path)
    report = loop.run(git_spec(TRACK))

    assert report.status == "failed"
    assert (
        report.failure_report is not None and "after 1 retries (limit 1)" in report.failure_report["reason"]
    )
    assert report.task("track").retries == 1
    [settled] = loop.learn(report)
    assert (settled.outcome, settled.fix_id, settled.failures) == ("failed", bad, 1)


# --- pip: an option that moved to another command ----------------------------------------------------


def test_pip_option_moved_to_another_command_is_rewritten_from_its_synopsis(open_loop: Any) -> None:
    loop = open_loop()
    spec = (
        WorkflowBuilder("leaves", goal="List the installed packages that nothing else depends on")
        .task(
            "leaves",
            "command_executor",
            {
                "argv": ["python", "-m", "pip", "freeze", "--not-required"],
                "expect": {"stdout_contains": "Package"},
            },
            description="List the installed packages that no other installed package requires",
        )
        .build()
    )
    report = loop.run(spec)

    assert report.status == "success", report.failure_report
    steps = loop.steps(report, "leaves")
    pip_version = parse_version(subprocess.run([PIP, "--version"], capture_output=True, text=True).stdout)
    assert next(e for e in steps if e.stage == "version").data["version"] == pip_version
    correction = loop.correction(report, "leaves")
    assert correction["strategy"] == "synopsis_rewrite"
    assert correction["argv"] == ["python", "-m", "pip", "list", "--not-required"]


def test_loop_correctors_wire_the_loop_into_a_runtime(tmp_path: Path) -> None:
    """The factory for workers and the CLI: nothing is indexed in this home, so the loop indexes git's
    help itself (in the task's environment) before it researches."""
    settings = Settings(home=tmp_path / "fresh", runtime_workers=2, runtime_task_timeout_seconds=120.0)
    correctors = loop_correctors(settings)
    assert [c.name for c in correctors] == ["self_correcting", "create_missing_path", "novel_verb"]
    loop = correctors[0]
    assert isinstance(loop, SelfCorrectingCorrector)
    try:
        with Runtime(settings, correctors=correctors) as runtime:
            report = runtime.run(git_spec(TRACK), timeout=300)
            timeline = read_timeline(loop.sessions, report.workflow_id)
    finally:
        loop.close()
    assert report.status == "success", report.failure_report
    docs = next(e for e in timeline if e.stage == "docs")
    assert docs.data["indexed"] and "indexed the help of `git`" in docs.summary
    research = next(e for e in timeline if e.stage == "research")
    assert not research.data["error"] and research.data["resolved_version"] == research.data["version"]
    correction = next(e for e in timeline if e.stage == "correction")
    assert correction.data["argv"] == ["git", "branch", "--set-upstream-to", "origin/main"]


def test_near_ties_follow_the_policy_and_tried_commands_are_left_out() -> None:
    def option(argv: list[str], strategy: str, confidence: float) -> CorrectionOption:
        return CorrectionOption(argv, strategy, "research", confidence, "because")

    options = [
        option(["tool", "a"], "synopsis_rewrite", 0.801),
        option(["tool", "b"], "explicit_replacement", 0.799),
        option(["tool", "c"], "explicit_replacement", 0.9),
        option(["tool", "a"], "learned_fix", 0.7),
    ]
    ranked = rank_options(
        options, preference=["explicit_replacement", "synopsis_rewrite"], exclude=[["tool", "c"]]
    )
    # 0.801 and 0.799 agree to two decimals: the strategy that earned more reward goes first.
    assert [(o.argv[1], o.strategy) for o in ranked] == [
        ("b", "explicit_replacement"),
        ("a", "synopsis_rewrite"),
    ]
    ranked = rank_options(options, preference=["synopsis_rewrite", "explicit_replacement"])
    assert [o.argv[1] for o in ranked] == ["c", "a", "b"]
