"""The offline correction strategies on real failures of real tools, with their real help as research.

Snippets are built from the project's own CLI help connector (``cli_listing``), exactly as research
returns them: ``entity_name``, Markdown ``content``, ``source_url``, ``score`` and ``attributes``.
"""

from __future__ import annotations

import ast
import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from librarian.correction.candidates import Candidate, FailureInput
from librarian.correction.fix_templates import apply_fix_template
from librarian.correction.helpdocs import command_doc
from librarian.correction.replacement import find_replacements
from librarian.correction.strategies import (
    ExplicitReplacement,
    LearnedFix,
    SynopsisRewrite,
    learned_fix_confidence,
    make_fix_template,
    propose_all,
)
from librarian.correction.triggers import default_trigger_rules
from librarian.ingest.connectors import cli_listing
from tests.correction.tool_env import aws_env, git_env
from tests.skipping import unavailable

BIN = Path(sys.executable).parent
AWS = str(BIN / "aws")
PIP = str(BIN / "pip")
SEED = ["aws", "s3", "cp", "report.csv", "s3://my-bucket/", "--tagging", "compliance=strict"]
SEED_FIX = {
    "program": ["aws", "s3api", "put-object"],
    "options": {
        "--bucket": "my-bucket",
        "--key": "report.csv",
        "--body": "report.csv",
        "--tagging": "compliance=strict",
    },
}
# Research order is not ours to choose: the right command is deliberately neither first nor best scored.
AWS_SCORES = {
    "s3api put-bucket-tagging": 0.91,
    "s3api put-object-tagging": 0.84,
    "s3api copy-object": 0.77,
    "s3 cp": 0.7,
    "s3api put-object": 0.62,
    "s3api create-multipart-upload": 0.55,
    "s3api get-object-tagging": 0.5,
}


def snippets_of(
    command: str, scopes: Sequence[str], max_depth: int, scores: dict[str, float]
) -> list[dict[str, Any]]:
    """Research-shaped snippets of the commands in ``scores``, from the tool's real help."""
    _, listing = cli_listing(command, scopes=scopes, max_depth=max_depth)
    found = []
    for document in listing.documents:
        name = " ".join(document.metadata["subcommand_path"])
        if name in scores:
            found.append(
                {
                    "entity_name": name,
                    "content": document.text,
                    "source_url": document.url,
                    "score": scores[name],
                    "attributes": dict(document.metadata),
                }
            )
    assert {s["entity_name"] for s in found} == set(scores), listing.problems
    return sorted(found, key=lambda s: -float(s["score"]))


@pytest.fixture(scope="session")
def aws_snippets() -> list[dict[str, Any]]:
    return snippets_of(AWS, list(AWS_SCORES), 2, AWS_SCORES)


@pytest.fixture(scope="session")
def git_snippets() -> list[dict[str, Any]]:
    scores = {"branch": 0.8, "checkout": 0.6, "commit": 0.7, "switch": 0.5}
    return snippets_of("git", list(scores), 1, scores)


@pytest.fixture(scope="session")
def pip_snippets() -> list[dict[str, Any]]:
    scores = {"freeze": 0.9, "list": 0.7, "install": 0.6, "show": 0.5}
    return snippets_of(PIP, list(scores), 1, scores)


@dataclass(frozen=True)
class Ran:
    code: int
    stdout: str
    stderr: str


def run(argv: Sequence[str], cwd: Path, env: dict[str, str] | None = None) -> Ran:
    done = subprocess.run(
        list(argv), cwd=cwd, env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
    )
    return Ran(done.returncode, done.stdout, done.stderr)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    (tmp_path / "report.csv").write_text("region,total\nnorth,12\n")
    (tmp_path / "sales.csv").write_text("region,total\nsouth,7\n")
    return tmp_path


def failure_of(argv: list[str], cwd: Path, env: dict[str, str], **extra: Any) -> FailureInput:
    """Run ``argv`` for real (it must fail) and describe the failure."""
    ran = run(argv, cwd, env)
    assert ran.code != 0, ran.stdout
    return FailureInput(
        argv=argv, exit_code=ran.code, stderr=ran.stderr, stdout=ran.stdout, workspace=cwd, **extra
    )


@pytest.fixture(scope="session")
def seed_run(tmp_path_factory: pytest.TempPathFactory) -> Ran:
    """The seed command, run for real once: exit 255 and "Unknown options" before any network call."""
    home = tmp_path_factory.mktemp("seed")
    (home / "report.csv").write_text("region,total\nnorth,12\n")
    ran = run(SEED, home, aws_env(home))
    assert ran.code == 255 and "Unknown options: --tagging,compliance=strict" in ran.stderr, ran
    return ran


def seed_failure(seed_run: Ran, workspace: Path, argv: list[str] = SEED, **extra: Any) -> FailureInput:
    """The seed failure in ``workspace`` (the error does not depend on the directory or argv[0])."""
    return FailureInput(argv, seed_run.code, seed_run.stderr, workspace, seed_run.stdout, **extra)


def shape(argv: Sequence[str], path_length: int) -> tuple[list[str], dict[str, str]]:
    """``(program and subcommands, {option: value})`` of a command whose options all take one value."""
    head = list(argv[: path_length + 1])
    rest = list(argv[path_length + 1 :])
    assert len(rest) % 2 == 0, argv
    return head, dict(zip(rest[::2], rest[1::2], strict=True))


# --- synopsis rewrite: the seed scenario -------------------------------------------------------------


def test_seed_failure_is_rewritten_to_the_documented_upload(
    workspace: Path, aws_snippets: list[dict[str, Any]], seed_run: Ran
) -> None:
    failure = seed_failure(seed_run, workspace, snippets=aws_snippets)
    started = time.perf_counter()
    candidates = SynopsisRewrite().propose(failure)
    elapsed = time.perf_counter() - started
    best = candidates[0]
    head, options = shape(best.argv, 2)
    assert (head, options) == (SEED_FIX["program"], SEED_FIX["options"])
    assert best.strategy == "synopsis_rewrite" and best.confidence >= 0.8
    assert best.evidence["entity_name"] == "s3api put-object"
    for said in ("--bucket", "--key", "existing local file report.csv", "optional `--body`"):
        assert said in best.rationale
    by_command = {" ".join(c.argv[1:3]): c for c in candidates}
    # The tagging commands take --tagging as a structure, and have nowhere to send the file's content.
    for other in ("s3api put-bucket-tagging", "s3api put-object-tagging"):
        assert by_command[other].confidence < 0.5 * best.confidence
        assert "expects a structure" in by_command[other].rationale
        assert "has no place" in by_command[other].rationale
    assert "s3api get-object-tagging" not in by_command  # it does not accept --tagging
    assert "s3 cp" not in by_command  # the command that failed
    assert elapsed < 1.0


def test_seed_rewrite_keeps_the_program_as_spelled(
    workspace: Path, aws_snippets: list[dict[str, Any]], seed_run: Ran
) -> None:
    failure = seed_failure(seed_run, workspace, [AWS, *SEED[1:]], snippets=aws_snippets)
    best = SynopsisRewrite().propose(failure)[0]
    assert best.argv[:3] == [AWS, "s3api", "put-object"]


def test_rewrite_reads_content_when_attributes_are_missing(
    workspace: Path, aws_snippets: list[dict[str, Any]], seed_run: Ran
) -> None:
    bare = [{k: v for k, v in s.items() if k != "attributes"} for s in aws_snippets]
    doc = command_doc(next(s for s in bare if s["entity_name"] == "s3api put-object"))
    assert doc is not None and doc.tool == "aws" and doc.path == ("s3api", "put-object")
    assert [sorted(group) for group in doc.forms[0].required] == [["--bucket"], ["--key"]]
    best = SynopsisRewrite().propose(seed_failure(seed_run, workspace, snippets=bare))[0]
    assert shape(best.argv, 2) == (SEED_FIX["program"], SEED_FIX["options"])


def test_rewrite_without_the_right_command_is_not_confident(
    workspace: Path, aws_snippets: list[dict[str, Any]], seed_run: Ran
) -> None:
    others = [s for s in aws_snippets if s["entity_name"] != "s3api put-object"]
    candidates = SynopsisRewrite().propose(seed_failure(seed_run, workspace, snippets=others))
    assert candidates and max(c.confidence for c in candidates) < 0.7
    assert all(c.evidence["problems"] for c in candidates if c.confidence < 0.5)


def test_unfillable_required_option_lowers_confidence_and_says_which(
    workspace: Path, aws_snippets: list[dict[str, Any]]
) -> None:
    # Uploading from standard input: nothing in the command can name the object.
    argv = ["aws", "s3", "cp", "-", "s3://my-bucket/", "--tagging", "compliance=strict"]
    candidates = SynopsisRewrite().propose(
        failure_of(argv, workspace, aws_env(workspace), snippets=aws_snippets)
    )
    upload = next(c for c in candidates if c.argv[1:3] == ["s3api", "put-object"])
    assert upload.confidence < 0.25
    assert "Required `--key` could not be filled" in upload.rationale
    assert upload.argv[3:5] == ["--bucket", "my-bucket"]


# --- running the proposed commands against a real S3 server ------------------------------------------


@pytest.fixture(scope="module")
def s3_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A moto S3 server on a free loopback port, stopped at the end of the module."""
    server = BIN / "moto_server"
    if not server.exists():
        unavailable(f"moto_server is not installed next to {sys.executable}")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = tmp_path_factory.mktemp("moto") / "server.log"
    with log.open("wb") as out:
        process = subprocess.Popen([str(server), "-H", "127.0.0.1", "-p", str(port)], stdout=out, stderr=out)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(url, timeout=1.0).status_code < 500:
                    break
            except httpx.HTTPError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                unavailable(f"moto_server did not start: {log.read_text()[-500:]}")
            time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.fixture(scope="module")
def s3_client(s3_endpoint: str) -> Any:
    """An in-process S3 client (the AWS CLI's own botocore) to check what the server stored."""
    from botocore.session import get_session  # type: ignore[import-untyped]

    return get_session().create_client(
        "s3",
        endpoint_url=s3_endpoint,
        region_name="us-east-1",
        aws_access_key_id="x",
        aws_secret_access_key="x",
    )


def test_proposed_and_learned_commands_work_against_s3(
    workspace: Path, aws_snippets: list[dict[str, Any]], s3_endpoint: str, s3_client: Any, seed_run: Ran
) -> None:
    env = aws_env(workspace)
    endpoint = ["--endpoint-url", s3_endpoint]
    for bucket in ("my-bucket", "archive-bucket"):
        s3_client.create_bucket(Bucket=bucket)
    fix = SynopsisRewrite().propose(seed_failure(seed_run, workspace, snippets=aws_snippets))[0]
    assert run([*fix.argv, *endpoint], workspace, env).code == 0
    tags = s3_client.get_object_tagging(Bucket="my-bucket", Key="report.csv")["TagSet"]
    assert tags == [{"Key": "compliance", "Value": "strict"}]
    stored = s3_client.get_object(Bucket="my-bucket", Key="report.csv")["Body"].read()
    assert stored == (workspace / "report.csv").read_bytes()
    # The verified fix, learned and applied to another file, bucket and tag without any research.
    template = make_fix_template(SEED, fix.argv, workspace)
    second = ["aws", "s3", "cp", "sales.csv", "s3://archive-bucket/", "--tagging", "team=blue"]
    learned = {"signature": "s", **template.to_dict(), "successes": 1, "failures": 0}
    candidates = LearnedFix().propose(failure_of(second, workspace, env, learned_fixes=[learned]))
    assert len(candidates) == 1
    assert run([*candidates[0].argv, *endpoint], workspace, env).code == 0
    tags = s3_client.get_object_tagging(Bucket="archive-bucket", Key="sales.csv")["TagSet"]
    assert tags == [{"Key": "team", "Value": "blue"}]


# --- learned fixes -----------------------------------------------------------------------------------


def test_learned_fix_round_trip(workspace: Path) -> None:
    fixed = [
        "aws",
        "s3api",
        "put-object",
        "--bucket",
        "my-bucket",
        "--key",
        "report.csv",
        "--body",
        "report.csv",
        "--tagging",
        "compliance=strict",
    ]
    template = make_fix_template(SEED, fixed, workspace)
    assert template.failed == ["aws", "s3", "cp", "{v0:file}", "{v1:url}", "--tagging", "{v2:key_value}"]
    assert template.fixed == [
        "{argv0}",
        "s3api",
        "put-object",
        "--bucket",
        "{v1.host}",
        "--key",
        "{v0}",
        "--body",
        "{v0}",
        "--tagging",
        "{v2}",
    ]
    stored = json.loads(json.dumps({"signature": "sig", **template.to_dict(), "successes": 3, "failures": 1}))
    other = [AWS, "s3", "cp", "sales.csv", "s3://archive-bucket/", "--tagging", "team=blue"]
    failure = failure_of(other, workspace, aws_env(workspace), learned_fixes=[stored])
    [candidate] = LearnedFix().propose(failure)
    assert candidate.argv == [
        AWS,
        "s3api",
        "put-object",
        "--bucket",
        "archive-bucket",
        "--key",
        "sales.csv",
        "--body",
        "sales.csv",
        "--tagging",
        "team=blue",
    ]
    assert candidate.confidence == pytest.approx(learned_fix_confidence(3, 1), abs=1e-4)
    assert candidate.evidence["signature"] == "sig"
    # Another command, or a value of another kind, does not fit the template (they fail the same way).
    for argv in (
        ["aws", "s3", "mv", "sales.csv", "s3://archive-bucket/", "--tagging", "team=blue"],
        ["aws", "s3", "cp", "s3://other/sales.csv", "s3://archive-bucket/", "--tagging", "team=blue"],
    ):
        mismatch = FailureInput(argv, failure.exit_code, failure.stderr, workspace, learned_fixes=[stored])
        assert LearnedFix().propose(mismatch) == []


def test_learned_fix_confidence_follows_its_record() -> None:
    assert learned_fix_confidence(0, 0) == pytest.approx(0.7125)
    assert learned_fix_confidence(1, 0) > learned_fix_confidence(0, 0) > learned_fix_confidence(0, 1)
    assert learned_fix_confidence(10, 0) < 0.95
    assert learned_fix_confidence(0, 3) < 0.5


# --- explicit replacement ----------------------------------------------------------------------------


@pytest.fixture
def repo_with_remote(tmp_path: Path) -> Path:
    env = git_env(tmp_path)
    subprocess.run(
        ["git", "init", "-q", "--bare", "-b", "main", "origin.git"], cwd=tmp_path, env=env, check=True
    )
    work = tmp_path / "work"
    work.mkdir()
    for argv in (
        ["git", "init", "-q", "-b", "main"],
        ["git", "commit", "-q", "--allow-empty", "-m", "init"],
        ["git", "remote", "add", "origin", str(tmp_path / "origin.git")],
        ["git", "push", "-q", "origin", "main"],
    ):
        subprocess.run(argv, cwd=work, env=env, check=True, timeout=60)
    return work


def test_git_removed_option_follows_the_named_replacement(
    repo_with_remote: Path, git_snippets: list[dict[str, Any]]
) -> None:
    env = git_env(repo_with_remote.parent)
    argv = ["git", "branch", "--set-upstream", "origin/main"]
    failure = failure_of(argv, repo_with_remote, env, snippets=git_snippets)
    assert "no longer supported" in failure.stderr
    candidates = ExplicitReplacement().propose(failure)
    best = max(candidates, key=lambda c: c.confidence)
    assert best.argv == ["git", "branch", "--set-upstream-to", "origin/main"]
    assert best.evidence["source"] == "error" and best.confidence >= 0.8
    alternatives = {tuple(c.argv) for c in candidates}
    assert ("git", "branch", "--track", "origin/main") in alternatives
    # The option's own description in the docs says the same, with less weight.
    assert any(c.evidence["source"] == "docs" and c.argv == best.argv for c in candidates)
    assert run(best.argv, repo_with_remote, env).code == 0
    upstream = run(["git", "rev-parse", "--abbrev-ref", "main@{upstream}"], repo_with_remote, env)
    assert upstream.stdout.strip() == "origin/main"


def test_git_mistyped_command_follows_the_suggestion(
    repo_with_remote: Path, git_snippets: list[dict[str, Any]]
) -> None:
    env = git_env(repo_with_remote.parent)
    (repo_with_remote / "notes.txt").write_text("hello\n")
    subprocess.run(["git", "add", "notes.txt"], cwd=repo_with_remote, env=env, check=True)
    argv = ["git", "comit", "-m", "add notes"]
    failure = failure_of(argv, repo_with_remote, env, snippets=git_snippets)
    [best, *_] = propose_all(failure)
    assert best.argv == ["git", "commit", "-m", "add notes"]
    assert best.strategy == "explicit_replacement"
    assert best.evidence["old_identified_by"] == "quoted"
    assert run(best.argv, repo_with_remote, env).code == 0
    assert run(["git", "log", "-1", "--format=%s"], repo_with_remote, env).stdout.strip() == "add notes"


def test_aws_invalid_choice_follows_the_suggestion(
    workspace: Path, aws_snippets: list[dict[str, Any]]
) -> None:
    argv = [
        "aws",
        "s3api",
        "put-objet",
        "--bucket",
        "my-bucket",
        "--key",
        "report.csv",
        "--body",
        "report.csv",
    ]
    failure = failure_of(argv, workspace, aws_env(workspace), snippets=aws_snippets)
    [best, *_] = propose_all(failure)
    assert best.argv == ["aws", "s3api", "put-object", *argv[3:]]
    # The docs confirm that the suggested command exists, which raises the confidence.
    assert (
        best.confidence
        > ExplicitReplacement()
        .propose(FailureInput(failure.argv, failure.exit_code, failure.stderr))[0]
        .confidence
    )


def test_pip_mistyped_command_follows_the_suggestion(
    tmp_path: Path, pip_snippets: list[dict[str, Any]]
) -> None:
    argv = [sys.executable, "-m", "pip", "instal", "--no-index", "requests"]
    failure = failure_of(argv, tmp_path, dict(os.environ), snippets=pip_snippets)
    [best] = ExplicitReplacement().propose(failure)
    assert best.argv == [sys.executable, "-m", "pip", "install", "--no-index", "requests"]


# --- synopsis rewrite on another tool ----------------------------------------------------------------


def test_pip_option_moved_to_another_command(tmp_path: Path, pip_snippets: list[dict[str, Any]]) -> None:
    argv = [sys.executable, "-m", "pip", "freeze", "--not-required"]
    failure = failure_of(argv, tmp_path, dict(os.environ), snippets=pip_snippets)
    assert "no such option: --not-required" in failure.stderr
    [best, *_] = propose_all(failure)
    assert best.argv == [sys.executable, "-m", "pip", "list", "--not-required"]
    assert best.strategy == "synopsis_rewrite" and best.confidence >= 0.8
    done = run(best.argv, tmp_path, dict(os.environ))
    assert done.code == 0 and done.stdout.startswith("Package")


# --- reading help and error phrasing ----------------------------------------------------------------


def test_synopsis_forms_of_real_help(
    git_snippets: list[dict[str, Any]], pip_snippets: list[dict[str, Any]]
) -> None:
    branch = command_doc(next(s for s in git_snippets if s["entity_name"] == "branch"))
    assert branch is not None and len(branch.forms) == 8
    upstream = next(f for f in branch.forms if "--set-upstream-to" in f.mentioned)
    assert upstream.required == (frozenset({"--set-upstream-to", "-u"}),)
    assert [(p.name, p.required) for p in upstream.positionals] == [("branchname", False)]
    create = branch.forms[1]
    assert create.required == () and [(p.name, p.required) for p in create.positionals] == [
        ("branchname", True),
        ("start-point", False),
    ]
    # "--unset-upstream [<branchname>]": the options list says it is a flag, so the word is positional.
    assert branch.takes_value("--unset-upstream") is False
    assert branch.takes_value("--set-upstream-to") is True
    assert branch.takes_value("--no-such-option") is None
    listing = command_doc(next(s for s in pip_snippets if s["entity_name"] == "list"))
    assert listing is not None and listing.accepts_own("--outdated") and not listing.accepts_own("--verbose")
    assert listing.accepts("--verbose")  # a global option


@pytest.mark.parametrize(
    ("message", "old", "new"),
    [
        ("error: --colour is deprecated, use --color", "--colour", ("--color",)),
        ("The --foo flag has been renamed to --bar.", "--foo", ("--bar",)),
        ("'old-cmd' was replaced by 'new-cmd'", "old-cmd", ("new-cmd",)),
        ("Error: No such option: --colour Did you mean --color?", None, ("--color",)),
        ("Did you mean one of these?\n    status\n    stash\n", None, ("status", "stash")),
        ("The most similar commands are\n\tcommit\n\tcommit-tree\n", None, ("commit", "commit-tree")),
        ("use `--new-flag` instead of `--old-flag`", "--old-flag", ("--new-flag",)),
    ],
)
def test_replacement_phrasings(message: str, old: str | None, new: tuple[str, ...]) -> None:
    found = find_replacements(message)
    assert (found[0].old, found[0].new) == (old, new)


# --- generality --------------------------------------------------------------------------------------

_TOOL_WORDS = re.compile(
    r"\b(?:aws|s3|s3api|git|pip|moto|boto\w*|put-object|copy-object)\b|--(?:tagging|bucket|key|body|set-upstream)\b",
    re.IGNORECASE,
)


def _code_strings(path: Path) -> Iterator[str]:
    """String constants of a module that are not docstrings: what the code actually uses."""
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            yield node.value


def test_no_strategy_names_a_tool_option_or_command() -> None:
    assert _TOOL_WORDS.search("uses --tagging") and _TOOL_WORDS.search("runs aws")  # the check can fail
    package = Path(__file__).resolve().parents[2] / "src" / "librarian" / "correction"
    offenders = [
        (path.name, text)
        for path in sorted(package.glob("*.py"))
        for text in _code_strings(path)
        if _TOOL_WORDS.search(text)
    ]
    offenders += [
        ("default_triggers.yaml", p)
        for r in default_trigger_rules()
        for p in r.patterns
        if _TOOL_WORDS.search(p)
    ]
    assert offenders == []


def test_candidates_serialise_to_json() -> None:
    candidate = Candidate(["tool", "x"], "explicit_replacement", 0.812345, "because", {"source": "error"})
    assert json.loads(json.dumps(candidate.to_dict()))["confidence"] == 0.8123


def test_a_learned_fix_applies_before_the_directory_it_creates_exists(tmp_path: Path) -> None:
    """Learned after a first try had made ``venv``, the fix still applies where ``venv`` is not there yet."""
    made = tmp_path / "made"
    (made / "venv").mkdir(parents=True)
    template = make_fix_template(
        ["virtualenv", "--clear-app-data", "venv"], ["virtualenv", "--seeder=app-data", "venv"], made
    )
    assert template.failed == ["virtualenv", "--clear-app-data", "{v0:file}"]
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    argv = ["virtualenv", "--clear-app-data", "venv"]
    assert apply_fix_template(template.failed, template.fixed, argv, fresh) == [
        "virtualenv",
        "--seeder=app-data",
        "venv",
    ]
    # A path with a directory part is a file only where it exists.
    nested = ["virtualenv", "--clear-app-data", "out/venv"]
    assert apply_fix_template(template.failed, template.fixed, nested, fresh) is None
