"""Recording research feedback and turning it into ranking boosts, on SQLite and PostgreSQL."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from librarian.errors import InvalidInputError
from librarian.research.error_signature import error_signature
from librarian.research.feedback import (
    MAX_BOOST,
    NEAR_DISCOUNT,
    OTHER_VERSION_DISCOUNT,
    SnippetKey,
    feedback_boosts,
    record_feedback,
)
from librarian.storage.database import open_database
from librarian.storage.models import ResearchFeedback

TAGGING = "usage: aws [options]\n\nUnknown options: --tagging,compliance=strict"
TAGGING_OTHER_VALUE = "Unknown options: --tagging,env=prod"
TAGGING_PREFIXED = "aws: error: Unknown options: --tagging,team=data"
ACL = "Unknown options: --acl,private"
PUT_OBJECT = SnippetKey("cli://aws/s3api/put-object", "s3api put-object")
TAGGING_CMD = SnippetKey("cli://aws/s3api/put-object-tagging", "s3api put-object-tagging")


def _store(url: str) -> Iterator[sessionmaker[Session]]:
    engine, factory = open_database(url)
    try:
        yield factory
    finally:
        engine.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def sessions(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[sessionmaker[Session]]:
    """A migrated store: a SQLite file, or a fresh database on the real PostgreSQL server."""
    if request.param == "sqlite":
        yield from _store(f"sqlite:///{tmp_path / 'store.sqlite'}")
    else:
        yield from _store(str(request.getfixturevalue("postgres_url")))


@pytest.fixture(scope="module")
def sqlite_sessions(tmp_path_factory: pytest.TempPathFactory) -> Iterator[sessionmaker[Session]]:
    """One SQLite store for the input checks, which must all leave it empty."""
    yield from _store(f"sqlite:///{tmp_path_factory.mktemp('feedback') / 'store.sqlite'}")


def _record(sessions: sessionmaker[Session], key: SnippetKey, error: str, **extra: object) -> None:
    record_feedback(
        sessions,
        sdk_name=str(extra.pop("sdk_name", "aws-cli")),
        error_text=error,
        source_url=key.source_url,
        entity_name=key.entity_name,
        **extra,  # type: ignore[arg-type]
    )


def test_exact_feedback_boosts_most_near_less_and_unrelated_not_at_all(
    sessions: sessionmaker[Session],
) -> None:
    _record(sessions, PUT_OBJECT, TAGGING)

    exact = feedback_boosts(sessions, sdk_name="aws", error_text=TAGGING_OTHER_VALUE)
    near = feedback_boosts(sessions, sdk_name="aws", error_text=TAGGING_PREFIXED)

    assert set(exact) == {PUT_OBJECT}
    assert exact[PUT_OBJECT].boost == pytest.approx(MAX_BOOST * math.tanh(1.0))
    assert (exact[PUT_OBJECT].helpful, exact[PUT_OBJECT].unhelpful, exact[PUT_OBJECT].exact) == (1, 0, 1)
    assert 0.0 < near[PUT_OBJECT].boost < exact[PUT_OBJECT].boost and near[PUT_OBJECT].exact == 0
    # Shared terms: --tagging (weight 3), unknown, options; the near error adds "aws".
    similarity = (3 + 1 + 1) / (3 + 1 + 1 + 1)
    assert near[PUT_OBJECT].boost == pytest.approx(MAX_BOOST * math.tanh(NEAR_DISCOUNT * similarity))
    assert feedback_boosts(sessions, sdk_name="aws", error_text=ACL) == {}
    assert feedback_boosts(sessions, sdk_name="aws", error_text=None) == {}


def test_unhelpful_feedback_lowers_and_cancels(sessions: sessionmaker[Session]) -> None:
    _record(sessions, PUT_OBJECT, TAGGING)
    _record(sessions, PUT_OBJECT, TAGGING_OTHER_VALUE, helpful=False)
    _record(sessions, TAGGING_CMD, TAGGING, helpful=False)

    boosts = feedback_boosts(sessions, sdk_name="aws", error_text=TAGGING)

    assert boosts[PUT_OBJECT].boost == pytest.approx(0.0)
    assert (boosts[PUT_OBJECT].helpful, boosts[PUT_OBJECT].unhelpful) == (1, 1)
    assert boosts[TAGGING_CMD].boost == pytest.approx(-MAX_BOOST * math.tanh(1.0))
    assert boosts[TAGGING_CMD].to_dict()["unhelpful"] == 1


def test_the_boost_stays_bounded_however_many_agree(sessions: sessionmaker[Session]) -> None:
    for _ in range(25):
        _record(sessions, PUT_OBJECT, TAGGING)
        _record(sessions, TAGGING_CMD, TAGGING, helpful=False)

    boosts = feedback_boosts(sessions, sdk_name="aws", error_text=TAGGING)

    assert 0.29 < boosts[PUT_OBJECT].boost <= MAX_BOOST
    assert -MAX_BOOST <= boosts[TAGGING_CMD].boost < -0.29
    assert boosts[PUT_OBJECT].helpful == 25


def test_feedback_is_per_sdk_by_normal_form_and_discounted_across_versions(
    sessions: sessionmaker[Session],
) -> None:
    _record(sessions, PUT_OBJECT, TAGGING, sdk_name="AWS-CLI", sdk_version="1.45.11")

    same_version = feedback_boosts(sessions, sdk_name="awscli", error_text=TAGGING, sdk_version="1.45.11")
    other_version = feedback_boosts(sessions, sdk_name="aws", error_text=TAGGING, sdk_version="2.0.1")

    assert same_version[PUT_OBJECT].boost == pytest.approx(MAX_BOOST * math.tanh(1.0))
    assert other_version[PUT_OBJECT].boost == pytest.approx(MAX_BOOST * math.tanh(OTHER_VERSION_DISCOUNT))
    assert feedback_boosts(sessions, sdk_name="gcloud", error_text=TAGGING) == {}


def test_stored_feedback_holds_no_secret(sessions: sessionmaker[Session]) -> None:
    error = (
        "An error occurred (SignatureDoesNotMatch) when calling the PutObject operation: key "
        "AKIAIOSFODNN7EXAMPLE, file /home/alice/reports/q1.csv, contact alice@example.com"
    )
    command = (
        "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY aws s3api put-object "
        "--bucket my-bucket --key q1.csv --body /home/alice/reports/q1.csv --sse-customer-key-md5 x "
        "--password hunter2"
    )

    returned = record_feedback(
        sessions,
        sdk_name="aws-cli",
        error_text=error,
        command=command,
        query="upload with token=ghp_16C7e42F292c6912E7710c838347Ae178B4a",
        source_url=PUT_OBJECT.source_url,
        entity_name=PUT_OBJECT.entity_name,
        sdk_version="1.45.11",
        chunk_content_hash="AB" * 32,
    )

    with sessions() as session:
        row = session.execute(select(ResearchFeedback)).scalar_one()
    stored = f"{row.error_text}\n{row.command}\n{row.query}"
    for secret in ("AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI", "hunter2", "ghp_16C7", "alice"):
        assert secret not in stored
    assert (
        row.command is not None and "--bucket my-bucket" in row.command and "~/reports/q1.csv" in row.command
    )
    assert row.sdk_name == "aws" and row.sdk_version == "1.45.11" and row.helpful is True
    assert row.error_signature == error_signature(error) and len(row.error_signature) == 64
    assert row.chunk_content_hash == "ab" * 32 and row.source_url == PUT_OBJECT.source_url
    assert returned["id"] == row.id and returned["error_text"] == row.error_text
    assert returned["created_at"] is not None


@pytest.mark.parametrize(
    ("field", "overrides"),
    [
        ("sdk_name", {"sdk_name": "  "}),
        ("sdk_name", {"sdk_name": "--"}),
        ("error_text", {"error_text": ""}),
        ("error_text", {"error_text": "   \n  "}),
        ("error_text", {"error_text": "x" * 70_000}),
        ("source_url", {"source_url": ""}),
        ("source_url", {"source_url": "cli://aws/s3 cp"}),
        ("chunk_content_hash", {"chunk_content_hash": "not-a-hash"}),
        ("helpful", {"helpful": "yes"}),
        ("command", {"command": 42}),
    ],
)
def test_bad_input_names_the_field_and_stores_nothing(
    sqlite_sessions: sessionmaker[Session], field: str, overrides: dict[str, object]
) -> None:
    arguments: dict[str, object] = {
        "sdk_name": "aws",
        "error_text": TAGGING,
        "source_url": PUT_OBJECT.source_url,
        **overrides,
    }

    with pytest.raises(InvalidInputError, match=f"'{field}'"):
        record_feedback(sqlite_sessions, **arguments)  # type: ignore[arg-type]
    with sqlite_sessions() as session:
        assert session.scalar(select(func.count()).select_from(ResearchFeedback)) == 0
