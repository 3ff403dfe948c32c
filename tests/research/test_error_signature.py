"""Error signatures make one kind of error one key; similarity finds errors of nearly that kind."""

from __future__ import annotations

import pytest

from librarian.research.error_signature import (
    NEAR_THRESHOLD,
    error_signature,
    error_similarity,
    error_terms,
    normalize_error,
)
from librarian.research.scrub import scrub

AWS_USAGE = """
usage: aws [options] <command> <subcommand> [<subcommand> ...] [parameters]
To see help text, you can run:

  aws help
  aws <command> help
  aws <command> <subcommand> help

{error}
"""
TAGGING = AWS_USAGE.format(error="Unknown options: --tagging,compliance=strict")


def test_option_values_do_not_change_the_signature_but_the_option_does() -> None:
    same = error_signature(AWS_USAGE.format(error="Unknown options: --tagging,env=prod"))
    other_option = error_signature(AWS_USAGE.format(error="Unknown options: --acl,private"))

    assert error_signature(TAGGING) == same == error_signature("Unknown options: --tagging,a=b,c=d")
    assert error_signature(TAGGING) != other_option
    assert len(error_signature(TAGGING)) == 64 and int(error_signature(TAGGING), 16) >= 0
    assert normalize_error(TAGGING) == "unknown options --tagging"


@pytest.mark.parametrize(
    ("first", "second"),
    [
        # Buckets, keys, request ids, timestamps and paths vary from run to run.
        (
            "upload failed: ./a.csv to s3://bucket-one/a.csv An error occurred (RequestTimeTooSkewed) "
            "at 2024-01-01T10:00:00Z, request id 4442587FB7D0A2F9",
            "upload failed: /tmp/b.csv to s3://other/b.csv An error occurred (RequestTimeTooSkewed) "
            "at 2025-06-30T23:59:59Z, request id 9C1D2E3F4A5B6C7D",
        ),
        (
            'Parameter validation failed:\nInvalid bucket name "My_Bucket": Bucket name must match',
            'Parameter validation failed:\nInvalid bucket name "x..y": Bucket name must match',
        ),
        # The same traceback from two checkouts, at other line numbers, with another value.
        (
            'Traceback (most recent call last):\n  File "/home/alice/p/x.py", line 12, in <module>\n'
            "    main()\nValueError: invalid literal for int() with base 10: 'abc'",
            'Traceback (most recent call last):\n  File "/Users/bob/q/x.py", line 40, in <module>\n'
            "    run()\nValueError: invalid literal for int() with base 10: 'x7'",
        ),
        # argparse: a multi-line usage block before the error line.
        (
            "usage: prog [-h] [--foo FOO]\n            [--bar BAR]\n"
            "prog: error: unrecognized arguments: --baz=3",
            "usage: prog [-h]\nprog: error: unrecognized arguments: --baz=hello",
        ),
        # Secrets differ, the error does not.
        (
            "An error occurred (InvalidClientTokenId): key AKIAIOSFODNN7EXAMPLE is not valid",
            "An error occurred (InvalidClientTokenId): key AKIAI44QH8DHBEXAMPLE is not valid",
        ),
        ("Error:   Access   DENIED.", "error: access denied"),
        # A progress line with a generated name before the error line, which alone is the error.
        (
            'Creating virtualenv demo-vTdeFko8-py3.11 in /w/1\nThe option "--no-update" does not exist',
            'Creating virtualenv demo-Qm2xPa0k-py3.11 in /w/2\nThe option "--no-update" does not exist',
        ),
    ],
)
def test_variable_parts_give_equal_signatures(first: str, second: str) -> None:
    assert error_signature(first) == error_signature(second)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("Unknown options: --tagging,x=y", "Unknown options: --acl,x=y"),
        (
            "An error occurred (AccessDenied) when calling the PutObject operation: Access Denied",
            "An error occurred (NoSuchBucket) when calling the PutObject operation: bucket does not exist",
        ),
        (
            "An error occurred (NoSuchBucket) when calling the ListObjectsV2 operation: no bucket",
            "An error occurred (NoSuchBucket) when calling the ListObjects operation: no bucket",
        ),
    ],
)
def test_different_errors_give_different_signatures(first: str, second: str) -> None:
    assert error_signature(first) != error_signature(second)


def test_only_the_error_lines_are_kept() -> None:
    v2_choice = AWS_USAGE.format(
        error="aws: error: argument --acl: Invalid choice, valid choices are:\n\n"
        "private                                  | public-read\n"
        "public-read-write                        | authenticated-read"
    )
    warned = "Downloading plugins\nresolving host\nfatal: repository 'https://x.example/r.git/' not found"

    assert normalize_error(v2_choice) == "aws error argument --acl invalid choice valid choices are"
    assert normalize_error(warned) == "fatal repository <value> not found"
    # Without any line that reads as an error, the first lines stand for it.
    assert normalize_error("segmentation fault (core dumped)") == "segmentation fault core dumped"


def test_stored_scrubbed_text_keeps_the_signature() -> None:
    raw = (
        "An error occurred (InvalidClientTokenId) when calling the GetCallerIdentity operation: "
        "token=AKIAIOSFODNN7EXAMPLE for alice@example.com in /home/alice/.aws"
    )

    assert error_signature(scrub(raw)) == error_signature(raw)
    assert "alice" not in normalize_error(raw) and "akia" not in normalize_error(raw)


def test_near_errors_are_similar_and_other_kinds_are_not() -> None:
    put = "An error occurred (AccessDenied) when calling the PutObject operation: Access Denied"
    get = "An error occurred (AccessDenied) when calling the GetObject operation: Access Denied"
    missing = (
        "An error occurred (NoSuchBucket) when calling the PutObject operation: The bucket does not exist"
    )

    assert error_signature(put) != error_signature(get)
    assert error_similarity(put, get) >= NEAR_THRESHOLD
    assert error_similarity(put, missing) < NEAR_THRESHOLD
    assert error_similarity(TAGGING, "aws: error: Unknown options: --tagging,env=prod") >= NEAR_THRESHOLD
    assert error_similarity(put, put.upper()) == 1.0


def test_errors_naming_different_options_are_never_near() -> None:
    long_prefix = "aws: error: the following arguments could not be parsed by the s3api put-object command "

    assert error_similarity(long_prefix + "--tagging,x=1", long_prefix + "--acl,x=1") == 0.0
    # One option in common is enough to compare the rest.
    assert error_similarity(long_prefix + "--tagging --acl", long_prefix + "--tagging") > 0.0


def test_short_errors_match_only_exactly() -> None:
    assert error_similarity("error: failed", "error: failed to x") == 0.0
    assert error_similarity("error: failed", "ERROR: Failed!") == 1.0


def test_terms_drop_stop_words_and_keep_options() -> None:
    terms = error_terms("aws: error: Unknown options: --tagging,compliance=strict for the bucket")

    assert terms == frozenset({"aws", "unknown", "options", "--tagging", "bucket"})
