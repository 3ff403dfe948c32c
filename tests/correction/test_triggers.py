"""Trigger rules and failure classes, checked against the real output of real tools."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from librarian.correction.triggers import (
    FailureClass,
    classify_failure,
    default_trigger_rules,
    load_trigger_rules,
)
from librarian.errors import InvalidInputError, NotFoundError
from tests.correction.tool_env import aws_env, git_env

AWS = str(Path(sys.executable).with_name("aws"))


def run(argv: Sequence[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """Run a real command; return its exit code, stdout and stderr."""
    done = subprocess.run(
        list(argv), cwd=cwd, env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
    )
    return done.returncode, done.stdout, done.stderr


def classify(argv: Sequence[str], cwd: Path, env: dict[str, str] | None = None) -> FailureClass:
    code, out, err = run(argv, cwd, env)
    return classify_failure(argv, code, err, out)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    env = git_env(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    for argv in (["git", "init", "-q", "-b", "main"], ["git", "commit", "-q", "--allow-empty", "-m", "init"]):
        subprocess.run(argv, cwd=work, env=env, check=True, timeout=30)
    return work


def test_aws_unknown_option_is_correctable_drift(tmp_path: Path) -> None:
    (tmp_path / "report.csv").write_text("a,b\n")
    argv = [AWS, "s3", "cp", "report.csv", "s3://my-bucket/", "--tagging", "compliance=strict"]
    code, _, err = run(argv, tmp_path, aws_env(tmp_path))
    assert code == 255
    failure = classify_failure(argv, code, err)
    assert failure == FailureClass(
        "api_drift", "unknown-option", True, "Unknown options: --tagging,compliance=strict"
    )


def test_git_failures_are_drift(repo: Path) -> None:
    env = git_env(repo.parent)
    colour = classify(["git", "log", "--oneline", "--colour"], repo, env)
    assert (colour.category, colour.rule_id) == ("api_drift", "unknown-option")
    assert "--colour" in colour.matched_text
    typo = classify(["git", "comit", "-m", "x"], repo, env)
    assert (typo.category, typo.rule_id, typo.correctable) == ("api_drift", "invalid-choice", True)
    removed = classify(["git", "branch", "--set-upstream", "origin/main"], repo, env)
    assert (removed.category, removed.rule_id) == ("api_drift", "removed")
    assert "no longer supported" in removed.matched_text
    short = classify(["git", "checkout", "--orpan", "x"], repo, env)
    assert (short.rule_id, short.matched_text) == ("unknown-option", "error: unknown option `orpan'")


def test_pip_failures_are_drift(tmp_path: Path) -> None:
    pip = [sys.executable, "-m", "pip"]
    env = {**os.environ, "PIP_NO_INPUT": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    outdated = classify([*pip, "freeze", "--outdated"], tmp_path, env)
    assert (outdated.rule_id, outdated.matched_text) == ("unknown-option", "no such option: --outdated")
    typo = classify([*pip, "instal", "x"], tmp_path, env)
    assert typo.rule_id == "invalid-choice"
    assert 'maybe you meant "install"' in typo.matched_text
    feature = classify([*pip, "install", "--use-feature=2020-resolver", "x"], tmp_path, env)
    assert (feature.category, feature.rule_id) == ("api_drift", "invalid-choice")


def test_missing_executable_and_module_are_missing_tool(tmp_path: Path) -> None:
    # Through a real shell: exit 127 and "sh: 1: no-such-tool: not found".
    code, _, err = run(["sh", "-c", "no-such-tool-xyz --version"], tmp_path)
    assert code == 127
    by_exit = classify_failure(["no-such-tool-xyz", "--version"], code, err)
    assert (by_exit.category, by_exit.correctable) == ("missing_tool", False)
    # The same message with another exit status is still recognised by its text.
    by_text = classify_failure(["no-such-tool-xyz", "--version"], 2, err)
    assert (by_text.category, by_text.rule_id) == ("missing_tool", "executable-not-found")
    # What Python reports when it cannot start the program.
    with pytest.raises(FileNotFoundError) as raised:
        subprocess.run(["no-such-tool-xyz"], check=False)
    started = classify_failure("no-such-tool-xyz --version", 1, str(raised.value))
    assert started.category == "missing_tool"
    module = classify([sys.executable, "-m", "nosuchmodule_xyz"], tmp_path)
    assert (module.category, module.rule_id) == ("missing_tool", "executable-not-found")


def test_missing_data_file_is_not_a_missing_tool(tmp_path: Path) -> None:
    failure = classify(["cat", "missing.txt"], tmp_path)
    assert failure == FailureClass("logic", None, False, "")


class _Unavailable(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(503)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def unavailable_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Unavailable)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def test_transient_failures(tmp_path: Path, repo: Path, unavailable_server: str) -> None:
    refused = classify(["git", "ls-remote", "http://127.0.0.1:1/x"], repo, git_env(repo.parent))
    assert (refused.category, refused.correctable) == ("transient", False)
    fetch = f"import urllib.request; urllib.request.urlopen({unavailable_server!r})"
    server_error = classify([sys.executable, "-c", fetch], tmp_path)
    assert server_error.category == "transient"
    assert "503" in server_error.matched_text
    # AWS's throttling and slow-down errors, in the CLI's wording.
    for message in (
        "An error occurred (Throttling) when calling the ListStacks operation: Rate exceeded",
        "An error occurred (SlowDown) when calling the PutObject operation: Please reduce your request rate.",
        "Resource temporarily unavailable",
    ):
        assert classify_failure(["tool"], 254, message).category == "transient", message


def test_deprecation_with_failure_is_drift(tmp_path: Path) -> None:
    failure = classify([sys.executable, "-W", "error", "-c", "import imp"], tmp_path)
    assert (failure.category, failure.rule_id) == ("api_drift", "deprecated")
    assert "deprecated in favour of importlib" in failure.matched_text


@pytest.mark.parametrize(
    ("message", "rule"),
    [
        ("Unknown options: --a,1", "unknown-option"),
        ("error: unrecognized arguments: --a", "unknown-option"),
        ("Error: No such option: --a", "unknown-option"),
        ("Error: unknown flag: --a", "unknown-option"),
        ("error: unexpected argument '--a' found", "unknown-option"),
        ("tool: invalid option -- 'z'", "unknown-option"),
        ("argument command: invalid choice: 'x' (choose from 'a', 'b')", "invalid-choice"),
        ("'x' is not a valid command. See 'tool --help'.", "invalid-choice"),
        ('Error: unknown command "x" for "tool"', "invalid-choice"),
        ("option --a is deprecated and will be removed", "deprecated"),
        ("the --a flag has been removed", "removed"),
        ("warning: --a is deprecated, use --b", "deprecated"),
        ("--a will be removed in a future release", "deprecated"),
        ("--a has been renamed to --b", "deprecated"),
        ('The option "--no-dev" does not exist', "unknown-option"),
        ("error: parameter --format is unknown", "unknown-option"),
        ("Error: `--apply-unsafe` is not expected in this context", "unknown-option"),
        ("'--enable-unstable-feature' requires '--preview'.", "required-option"),
        ('Option "testPathPattern" was replaced by "--testPathPatterns".', "removed"),
        ("`BaseSettings` has been moved to the `pydantic-settings` package.", "removed"),
        ("Want to run without a config file? Use --no-config", "suggested-option"),
        ('[error] Couldn\'t resolve parser "postcss"', "invalid-choice"),
        ("error: parameter --validate-formats must be boolean", "invalid-choice"),
        ("TypeError: simpson() takes 1 positional argument but 2 were given", "python-api-changed"),
        ("AttributeError: 'ImageDraw' object has no attribute 'textsize'", "python-api-changed"),
        ("TypeError: unsupported operand type(s) for -: 'method' and 'method'", "python-api-changed"),
        ("TypeError: Object of type method is not JSON serializable", "python-api-changed"),
    ],
)
def test_default_rules_cover_the_common_phrasings(message: str, rule: str) -> None:
    failure = classify_failure(["tool", "x"], 1, message)
    assert (failure.category, failure.rule_id) == ("api_drift", rule)


def test_success_and_unmatched_failures_are_not_triggered() -> None:
    assert classify_failure(["tool"], 0, "warning: --a is deprecated").rule_id is None
    assert classify_failure(["tool"], 1, "division by zero") == FailureClass("logic", None, False, "")
    assert classify_failure(["tool"], 1, "TypeError: can't multiply sequence by non-int").rule_id is None
    # Pointing at the help is not a suggestion to change the command.
    assert (
        classify_failure(["tool"], 2, "error: bad input\nFor more information, try '--help'.").rule_id is None
    )


def test_user_file_extends_and_overrides_defaults(tmp_path: Path) -> None:
    extra = tmp_path / "rules.yaml"
    extra.write_text(
        "rules:\n"
        "  - id: quota\n"
        "    category: transient\n"
        "    priority: 5\n"
        "    patterns: ['quota exceeded']\n"
        "  - id: deprecated\n"
        "    enabled: false\n"
        "  - id: local-drift\n"
        "    category: api_drift\n"
        "    exit: [3]\n"
        "    stream: stdout\n"
        "    patterns: ['^E: option gone']\n"
    )
    rules = load_trigger_rules([extra])
    assert {r.id for r in rules} >= {r.id for r in default_trigger_rules()} | {"quota", "local-drift"}
    # Priority 5 runs before the unknown-option rule.
    both = classify_failure(["tool"], 1, "quota exceeded; unknown option --a", rules=rules)
    assert (both.rule_id, both.category, both.correctable) == ("quota", "transient", False)
    assert classify_failure(["tool"], 1, "--a is deprecated", rules=rules).rule_id is None
    assert classify_failure(["tool"], 3, "", "E: option gone", rules=rules).rule_id == "local-drift"
    assert classify_failure(["tool"], 3, "E: option gone", "", rules=rules).rule_id is None
    assert classify_failure(["tool"], 4, "", "E: option gone", rules=rules).rule_id is None
    # Without the defaults, the override of "deprecated" is a new rule that lacks its category.
    with pytest.raises(InvalidInputError, match=r"line 6: trigger rule 'deprecated', .*'category'"):
        load_trigger_rules([extra], defaults=False)


def test_bad_yaml_names_file_and_line(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("rules:\n  - id: a\n    patterns: ['x'\n    category: api_drift\n")
    with pytest.raises(InvalidInputError, match=r"broken\.yaml: invalid YAML at line \d+"):
        load_trigger_rules([broken])


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            "rules:\n  - id: a\n    category: weird\n    patterns: ['x']\n",
            r"at line 2: trigger rule 'a', field category",
        ),
        (
            "rules:\n  - id: ok\n    category: logic\n    patterns: ['x']\n  - id: b\n    category: logic\n"
            "    patterns: ['(']\n",
            r"at line 5: trigger rule 'b', patterns\[0\] is not a valid regular expression",
        ),
        (
            "rules:\n  - id: c\n    category: logic\n",
            r"at line 2: trigger rule 'c' needs patterns or a list of exit",
        ),
        ("rules:\n  - category: logic\n", r"at line 2: rules/0: 'id' is a required property"),
        ("rule: []\n", r"at line 1: document: Additional properties are not allowed \('rule' was"),
    ],
)
def test_invalid_rules_name_file_and_line(tmp_path: Path, body: str, expected: str) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(body)
    with pytest.raises(InvalidInputError, match=expected) as raised:
        load_trigger_rules([path])
    assert str(path) in str(raised.value)


def test_missing_rule_file(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match=r"nope\.yaml"):
        load_trigger_rules([tmp_path / "nope.yaml"])


def test_a_library_asking_for_a_value_of_an_argument_is_drift() -> None:
    said = (
        'DecodeError: It is required that you pass in a value for the "algorithms" argument when calling f().'
    )
    assert classify_failure(["python3", "t.py"], 1, said).category == "api_drift"
