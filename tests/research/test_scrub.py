"""Scrubbing secrets, e-mails and home directories out of error text, commands and queries."""

from __future__ import annotations

from pathlib import Path

import pytest

from librarian.research.scrub import looks_random, names_credential, scrub

AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ."
    "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7bq2\nq5Yb3eX9k0\n-----END RSA PRIVATE KEY-----"

# (text, the secret that must disappear, what the scrubbed text must read)
SECRETS = [
    ("key AKIAIOSFODNN7EXAMPLE denied", "AKIAIOSFODNN7EXAMPLE", "key <secret> denied"),
    ("temporary ASIAY34FZKBOKMUTVV7A expired", "ASIAY34FZKBOKMUTVV7A", "temporary <secret> expired"),
    (f"aws_secret_access_key={AWS_SECRET}", AWS_SECRET, "aws_secret_access_key=<secret>"),
    (f"export AWS_SECRET_ACCESS_KEY='{AWS_SECRET}'", AWS_SECRET, "export AWS_SECRET_ACCESS_KEY='<secret>'"),
    (
        "aws_session_token = FwoGZXIvYXdzEBYaDHqa0AP",
        "FwoGZXIvYXdzEBYaDHqa0AP",
        "aws_session_token = <secret>",
    ),
    ("mysql --user bob --password hunter2 db", "hunter2", "mysql --user bob --password <secret> db"),
    ("psql --password=hunter2 -h db", "hunter2", "psql --password=<secret> -h db"),
    ("tool --verbose --api-key 'k 1' go", "k 1", "tool --verbose --api-key '<secret>' go"),
    ("login failed: password=s3cr3t user=bob", "s3cr3t", "login failed: password=<secret> user=bob"),
    ("token=abc123&page=2", "abc123", "token=<secret>&page=2"),
    (
        '{"client_secret": "shh-123", "name": "app"}',
        "shh-123",
        '{"client_secret": "<secret>", "name": "app"}',
    ),
    ("apiKey: 0123456789abcdef", "0123456789abcdef", "apiKey: <secret>"),
    ("Error: password: hunter2", "hunter2", "Error: password: <secret>"),
    (
        "curl -H 'Authorization: Bearer abc.def-123'",
        "abc.def-123",
        "curl -H 'Authorization: Bearer <secret>'",
    ),
    ("Authorization: Basic dXNlcjpwYXNz", "dXNlcjpwYXNz", "Authorization: Basic <secret>"),
    ("got bearer Zm9vYmFyMTIzNDU2 back", "Zm9vYmFyMTIzNDU2", "got bearer <secret> back"),
    (
        "cannot reach postgresql://app:hunter2@db.internal:5432/prod",
        "hunter2",
        "cannot reach postgresql://<secret>@db.internal:5432/prod",
    ),
    (f"invalid token {JWT}", JWT, "invalid token <secret>"),
    (f"key file:\n{PEM}\nend", "MIIEowIBAAKCAQEA7bq2", "key file:\n<secret>\nend"),
    (
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjE (truncated",
        "b3BlbnNzaC1rZXktdjE",
        "<secret>",
    ),
    ("push: ghp_16C7e42F292c6912E7710c838347Ae178B4a refused", "ghp_16C7e42F", "push: <secret> refused"),
    ("github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz", "github_pat_11", "<secret>"),
    ("slack xoxb-123456789012-abcdefghijklmn failed", "xoxb-1234", "slack <secret> failed"),
    ("OPENAI sk-proj-abcdefghijklmnopqrstuvwxyz0123 rejected", "sk-proj-", "OPENAI <secret> rejected"),
    (f"signing with {AWS_SECRET} failed", AWS_SECRET, "signing with <secret> failed"),
    (
        "https://b.s3.amazonaws.com/k?X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20240101&X-Amz-Signature=9f86d08",
        "9f86d08",
        "https://b.s3.amazonaws.com/k?X-Amz-Credential=<secret>%2F20240101&X-Amz-Signature=<secret>",
    ),
    ("notify alice.smith+ops@example.co.uk now", "alice.smith", "notify <email> now"),
]


@pytest.mark.parametrize(("text", "secret", "expected"), SECRETS, ids=[s[2][:30] for s in SECRETS])
def test_each_kind_of_secret_is_replaced(text: str, secret: str, expected: str) -> None:
    scrubbed = scrub(text)

    assert scrubbed == expected
    assert secret not in scrubbed
    assert scrub(scrubbed) == scrubbed  # placeholders are never matched again


# Text that must come out unchanged: the evidence research needs.
KEPT = [
    "aws s3 cp report.csv s3://my-bucket/report.csv --bucket my-bucket --acl private",
    "Unknown options: --tagging,compliance=strict",
    "aws secretsmanager get-secret-value --secret-id prod/db-password --token-file token.txt",
    "ExpiredTokenException: The security token included in the request is expired",
    "NoCredentialsError: Unable to locate credentials",
    "bearer authentication failed; basic auth is disabled",
    "clone git@github.com:owner/repo.git failed",
    "An error occurred (AccessDenied) when calling the PutObject operation: Access Denied",
    # Identifiers of the run, not secrets: a UUID, an MD5 digest, a long constant name.
    "request 123e4567-e89b-12d3-a456-426614174000 etag d41d8cd98f00b204e9800998ecf8427e",
    "THIS_IS_A_VERY_LONG_CONSTANT_NAME_2 is undefined",
    "aws s3api put-object --bucket b --key reports/2024/q1.csv --body q1.csv",
]


@pytest.mark.parametrize("text", KEPT)
def test_ordinary_text_is_kept(text: str) -> None:
    assert scrub(text) == text


def test_home_directories_become_tilde() -> None:
    text = (
        "open /home/alice/.aws/credentials; /Users/bob/proj/x.py; C:\\Users\\carol\\AppData\\x.ini; "
        "/srv/builds/jdoe/out.log; /var/home/dave/y"
    )

    assert scrub(text, homes=["/srv/builds/jdoe"]) == (
        "open ~/.aws/credentials; ~/proj/x.py; ~\\AppData\\x.ini; ~/out.log; ~/y"
    )


def test_the_current_home_is_replaced_whatever_it_is(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    home = tmp_path / "agent-home"
    monkeypatch.setenv("HOME", str(home))

    assert scrub(f"cannot read {home}/.config/tool.toml") == "cannot read ~/.config/tool.toml"
    # A path that only starts with the same characters is another directory.
    assert scrub(f"cannot read {home}2/x") == f"cannot read {home}2/x"


def test_a_root_home_never_turns_every_path_into_tilde(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", "/")

    assert scrub("cannot open /etc/hosts") == "cannot open /etc/hosts"


@pytest.mark.parametrize(
    ("key", "credential"),
    [
        ("AWS_SECRET_ACCESS_KEY", True),
        ("aws_session_token", True),
        ("X-Api-Key", True),
        ("clientSecret", True),
        ("session-id", True),
        ("--password", True),
        ("AccountKey", True),
        ("--secret-id", False),
        ("--token-file", False),
        ("--key", False),
        ("InvalidTokenError", False),
        ("--bucket", False),
        ("AWSAccessKeyId", False),
    ],
)
def test_credential_names(key: str, credential: bool) -> None:
    assert names_credential(key) is credential


def test_random_strings_are_told_from_words_and_digests() -> None:
    assert looks_random(AWS_SECRET)
    assert not looks_random("d41d8cd98f00b204e9800998ecf8427e")  # hex digest: no upper case
    assert not looks_random("AnExtremelyLongCamelCaseIdentifier2")
