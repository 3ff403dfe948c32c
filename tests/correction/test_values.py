"""Values of failed commands and the options their errors reject, on real command lines and stderr."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from librarian.correction.values import (
    RejectedOption,
    classify_value,
    normalize_error_text,
    parse_command,
    rejected_options,
)

AWS = str(Path(sys.executable).with_name("aws"))
AWS_FAILED = ["aws", "s3", "cp", "report.csv", "s3://my-bucket/", "--tagging", "compliance=strict"]


def aws_stderr(argv: list[str], cwd: Path) -> str:
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(cwd),
        "AWS_ACCESS_KEY_ID": "x",
        "AWS_SECRET_ACCESS_KEY": "x",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": str(cwd / "none"),
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    done = subprocess.run([AWS, *argv[1:]], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 255, done.stderr
    return done.stderr


def test_values_of_the_seed_command(tmp_path: Path) -> None:
    (tmp_path / "report.csv").write_text("a,b\n")
    parsed = parse_command(AWS_FAILED, tmp_path)
    assert parsed.program == ("aws",)
    assert parsed.command_path == ("s3", "cp")
    assert [(v.text, v.kind, v.option) for v in parsed.values] == [
        ("report.csv", "file", None),
        ("s3://my-bucket/", "url", None),
        ("compliance=strict", "key_value", "--tagging"),
    ]
    report, bucket, tag = parsed.values
    assert report.exists and report.parts["basename"] == "report.csv" and report.parts["suffix"] == ".csv"
    assert bucket.parts == {"scheme": "s3", "host": "my-bucket"} and bucket.segments == ()
    assert tag.pairs == (("compliance", "strict"),)
    # The same name without the file in the workspace is still a file by its shape, but not existing.
    assert not parse_command(AWS_FAILED, tmp_path / "elsewhere").values[0].exists


def test_value_kinds() -> None:
    url = classify_value("https://example.org:8443/a/b/data.tar.gz?x=1")
    assert url.kind == "url"
    assert url.parts == {
        "scheme": "https",
        "host": "example.org",
        "path": "a/b/data.tar.gz",
        "basename": "data.tar.gz",
    }
    assert url.segments == ("a", "b", "data.tar.gz")
    assert classify_value("k=v,k2=v2").pairs == (("k", "v"), ("k2", "v2"))
    assert classify_value("k=v,oops").kind == "word"  # not every item is a pair
    assert [classify_value(t).kind for t in ("42", "-3.5", "1e3")] == ["number"] * 3
    assert classify_value("1.2.3").kind == "word"  # a version, not a file with extension "3"
    assert classify_value("./build").kind == "file"
    assert classify_value("origin/main").kind == "word"
    assert classify_value("/etc/hostname").exists


def test_options_attached_values_and_double_dash() -> None:
    parsed = parse_command(["tool", "run", "--out=a.json", "-v", "--level", "3", "--", "--literal", "x.txt"])
    assert parsed.command_path == ("run",)
    assert [(o.name, o.attached_value) for o in parsed.options] == [
        ("--out", "a.json"),
        ("-v", None),
        ("--level", None),
    ]
    assert [(v.text, v.kind, v.option, v.attached) for v in parsed.values] == [
        ("a.json", "file", "--out", True),
        ("3", "number", "--level", False),
        ("--literal", "word", None, False),
        ("x.txt", "file", None, False),
    ]


def test_arity_from_docs_keeps_positionals_positional() -> None:
    argv = ["git", "log", "--oneline", "HEAD~3"]
    greedy = parse_command(argv)
    assert greedy.values[0].option == "--oneline"  # unknown arity: the next token is taken
    informed = parse_command(argv, takes_value=lambda name: False)
    assert informed.values[0].option is None


def test_program_prefix_and_known_paths() -> None:
    argv = [sys.executable, "-m", "pip", "install", "requests", "--user"]
    parsed = parse_command(argv, tool="pip", known_paths=[("install",), ("list",)])
    assert parsed.program == (sys.executable, "-m", "pip")
    assert parsed.command_path == ("install",)
    assert [v.text for v in parsed.values] == ["requests"]
    # Without documentation every leading plain word counts as a subcommand word.
    assert parse_command(argv, tool="pip").command_path == ("install", "requests")


def test_rejected_options_from_real_aws_errors(tmp_path: Path) -> None:
    stderr = aws_stderr(AWS_FAILED, tmp_path)
    assert "Unknown options: --tagging,compliance=strict" in stderr
    assert rejected_options(stderr, AWS_FAILED) == [
        RejectedOption("--tagging", 5, ("compliance=strict",), True)
    ]
    # A value that holds commas itself is rejoined against the command line.
    several = ["aws", "s3", "cp", "report.csv", "s3://my-bucket/", "--tagging", "a=b,c=d", "--sse-x"]
    stderr = aws_stderr(several, tmp_path)
    assert rejected_options(stderr, several) == [
        RejectedOption("--tagging", 5, ("a=b,c=d",), True),
        RejectedOption("--sse-x", 7, (), True),
    ]


def test_rejected_options_from_real_git_and_pip_errors(tmp_path: Path) -> None:
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_AUTHOR_NAME": "T",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "T",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, env=env, check=True)
    subprocess.run(["git", "commit", "-q", "--allow-empty", "-m", "init"], cwd=tmp_path, env=env, check=True)
    cases = [
        (["git", "checkout", "--orpan", "x"], RejectedOption("--orpan", 2, (), False)),
        (["git", "log", "--oneline", "--colour"], RejectedOption("--colour", 3, (), False)),
        ([sys.executable, "-m", "pip", "freeze", "--outdated"], RejectedOption("--outdated", 4, (), False)),
        (
            [sys.executable, "-m", "json.tool", "--sort-keys", "--colour=yes"],
            RejectedOption("--colour", 4, ("yes",), True),
        ),
    ]
    for argv, expected in cases:
        done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode != 0
        assert rejected_options(done.stderr, argv) == [expected], done.stderr


def test_rejected_options_ignore_what_the_command_does_not_contain() -> None:
    assert rejected_options("no such option: --elsewhere", ["tool", "run", "--here"]) == []
    assert rejected_options("all fine", ["tool", "--here"]) == []


def test_normalized_error_is_the_same_for_other_values(tmp_path: Path) -> None:
    other = ["aws", "s3", "cp", "sales.csv", "s3://archive-bucket/", "--tagging", "team=blue"]
    first = normalize_error_text(aws_stderr(AWS_FAILED, tmp_path), parse_command(AWS_FAILED, tmp_path))
    second = normalize_error_text(aws_stderr(other, tmp_path), parse_command(other, tmp_path))
    assert first == second == "Unknown options: --tagging,<key_value>"


@pytest.mark.parametrize("token", ["-", "--", "-5", "-0.5"])
def test_dashes_and_negative_numbers_are_not_options(token: str) -> None:
    parsed = parse_command(["tool", "x", token])
    assert parsed.options == ()


def test_rejected_options_named_before_what_is_wrong_with_them() -> None:
    """Symfony Console / cleo and others name the option first: 'The option "--x" does not exist'."""
    argv = ["tool", "lock", "--no-update", "--keep"]
    assert [r.option for r in rejected_options('The option "--no-update" does not exist', argv)] == [
        "--no-update"
    ]
    assert [r.option for r in rejected_options("error: parameter --keep is unknown", argv)] == ["--keep"]
    assert rejected_options("The option --keep is documented below", argv) == []


def test_a_rejected_name_means_the_negated_spelling_on_the_command_line() -> None:
    """cac, yargs and commander read ``--no-x`` as ``x`` set to false, and reject it as ``--x``."""
    argv = ["vitest", "run", "--globals", "--no-threads"]

    assert rejected_options("CACError: Unknown option `--threads`", argv) == [
        RejectedOption("--no-threads", 3, (), False)
    ]
    # A plain spelling on the command line wins over the negated one.
    both = ["tool", "--no-color", "--color", "x"]
    assert rejected_options("error: unknown option '--color'", both)[0].index == 2
