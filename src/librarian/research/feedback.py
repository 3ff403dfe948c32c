"""Research feedback: which snippet resolved which error, and the ranking boost that earns later.

An agent whose failed command was fixed by a snippet says so (``librarian feedback``, ``POST
/feedback``); the error text, command and query are scrubbed of secrets and home directories before
they are stored (:mod:`librarian.research.scrub`), with the error's signature
(:mod:`librarian.research.error_signature`). Later research for the same or a similar error asks
:func:`feedback_boosts` for a score adjustment per snippet.

A snippet is identified by ``(source_url, entity_name)``, the key research already uses for "one
snippet per entity": chunk ids and content change on every re-ingest, those two do not. The SDK is
stored in its normal form (:func:`librarian.research.sdks.normal_form`), so feedback given for
``aws-cli`` counts for ``aws``. The snippet's URL and entity are our own index's identifiers and are
stored as given, not scrubbed.

The boost of a snippet ``s`` for an error ``e``::

    net(s)   = sum over feedback f on s of  sign(f) * weight(f)
    sign(f)  = +1 if f.helpful else -1
    weight(f) = 1                                   if signature(f) == signature(e)
              = NEAR_DISCOUNT * similarity(f, e)     if similarity >= NEAR_THRESHOLD (0.6)
              = 0                                   otherwise
              (* OTHER_VERSION_DISCOUNT when f was given for another version than the one asked)
    boost(s) = MAX_BOOST * tanh(net(s))

So one exact helpful report adds 0.23, two add 0.29, one near report (similarity 0.8) adds 0.16,
and an unhelpful report subtracts as much. ``|boost| < MAX_BOOST`` = 0.3 however many reports
agree: below the research service's option-match boost (0.5) and close to its entity boost (0.25),
so feedback reorders candidates whose scores are close, never outweighs an option the error names,
and, since it only adjusts snippets the search already returned, never brings in an irrelevant one.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any, NamedTuple

from sqlalchemy import select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from librarian.errors import BackendUnavailableError, InvalidInputError
from librarian.research.error_signature import (
    NEAR_THRESHOLD,
    normalize_error,
    signature_of_normalized,
    terms_of_normalized,
    terms_similarity,
)
from librarian.research.scrub import scrub, scrub_optional
from librarian.research.sdks import normal_form
from librarian.storage.models import ResearchFeedback

MAX_BOOST = 0.3
NEAR_DISCOUNT = 0.75
OTHER_VERSION_DISCOUNT = 0.5
# How many records of one SDK are read per lookup (newest first), for exact and near matches each.
SCAN_LIMIT = 1000
MAX_TEXT_CHARS = 65_536
MAX_NAME_CHARS = 255
MAX_URL_CHARS = 4096
_CONTENT_HASH = re.compile(r"^[0-9a-f]{64}$")


class SnippetKey(NamedTuple):
    """What identifies a snippet across re-ingests."""

    source_url: str
    entity_name: str | None


@dataclass(frozen=True)
class FeedbackBoost:
    """The score adjustment of one snippet and the feedback behind it."""

    boost: float
    helpful: int
    unhelpful: int
    exact: int

    def to_dict(self) -> dict[str, Any]:
        """What research shows on a boosted snippet (``"feedback": {...}``)."""
        return {
            "helpful": self.helpful,
            "unhelpful": self.unhelpful,
            "exact_matches": self.exact,
            "boost": round(self.boost, 4),
        }


def record_feedback(
    sessions: sessionmaker[Session],
    *,
    sdk_name: str,
    error_text: str,
    source_url: str,
    entity_name: str | None = None,
    sdk_version: str | None = None,
    command: str | None = None,
    query: str | None = None,
    chunk_content_hash: str | None = None,
    helpful: bool = True,
) -> dict[str, Any]:
    """Record that the snippet at ``source_url`` (``entity_name``) did or did not resolve an error.

    Args:
        sessions: the store's session factory (``Librarian.sessions``).
        sdk_name: the SDK the research was about; stored in its normal form (``aws-cli`` -> ``aws``).
        error_text: what the failed command printed (stderr); scrubbed before it is stored.
        source_url: the snippet's ``source_url`` as research returned it.
        entity_name: the snippet's ``entity_name``.
        sdk_version: the version the snippet documents.
        command: the failed command line; scrubbed.
        query: the research question; scrubbed.
        chunk_content_hash: the SHA-256 of the snippet's content, when known (kept for audit).
        helpful: False when the snippet did not help (it then ranks lower for that error).

    Returns:
        The stored record, as stored (scrubbed), with its ``id`` and ``error_signature``.

    Raises:
        InvalidInputError: a field is empty, too long or malformed; the message names it.
        BackendUnavailableError: the store cannot be written.
    """
    sdk = _sdk_form(sdk_name)
    error = _required("error_text", error_text, MAX_TEXT_CHARS)
    normalized = normalize_error(error)
    if not normalized:
        raise InvalidInputError(
            "feedback field 'error_text' has no error message in it",
            hint="pass the stderr of the failed command",
        )
    url = _required("source_url", source_url, MAX_URL_CHARS)
    if any(c.isspace() for c in url):
        raise InvalidInputError(
            f"feedback field 'source_url' contains whitespace: {url!r}",
            hint="pass the snippet's source_url exactly as research returned it",
        )
    if not isinstance(helpful, bool):
        raise InvalidInputError(f"feedback field 'helpful' must be true or false, not {helpful!r}")
    content_hash = _optional("chunk_content_hash", chunk_content_hash, 64)
    if content_hash is not None and not _CONTENT_HASH.match(content_hash.lower()):
        raise InvalidInputError(
            f"feedback field 'chunk_content_hash' is not a SHA-256 hex digest: {content_hash!r}",
            hint="pass the 64 hexadecimal characters of the snippet's content hash, or leave it out",
        )
    record = ResearchFeedback(
        sdk_name=sdk,
        sdk_version=_optional("sdk_version", sdk_version, MAX_NAME_CHARS),
        error_signature=signature_of_normalized(normalized),
        error_text=scrub(error),
        command=scrub_optional(_optional("command", command, MAX_TEXT_CHARS)),
        query=scrub_optional(_optional("query", query, MAX_TEXT_CHARS)),
        entity_name=_optional("entity_name", entity_name, MAX_URL_CHARS),
        source_url=url,
        chunk_content_hash=content_hash.lower() if content_hash else None,
        helpful=helpful,
    )
    try:
        with sessions() as session, session.begin():
            session.add(record)
    except SQLAlchemyError as exc:
        raise BackendUnavailableError(f"cannot store research feedback: {exc}") from exc
    return feedback_dict(record)


def feedback_boosts(
    sessions: sessionmaker[Session],
    *,
    sdk_name: str,
    error_text: str | None,
    sdk_version: str | None = None,
) -> dict[SnippetKey, FeedbackBoost]:
    """Score adjustments for snippets with feedback on ``error_text`` or errors like it.

    Args:
        sessions: the store's session factory.
        sdk_name: the SDK researched (any alias; compared by normal form).
        error_text: the error of the failed command; no error means no boosts.
        sdk_version: the version researched; feedback given for another version counts half.

    Returns:
        One :class:`FeedbackBoost` per snippet with matching feedback (formula in the module
        docstring); snippets without any are absent.

    Raises:
        BackendUnavailableError: the store cannot be read.
    """
    normalized = normalize_error(error_text or "")
    sdk = normal_form(sdk_name)
    if not normalized or not sdk:
        return {}
    signature = signature_of_normalized(normalized)
    terms = terms_of_normalized(normalized)
    columns = (
        ResearchFeedback.source_url,
        ResearchFeedback.entity_name,
        ResearchFeedback.error_signature,
        ResearchFeedback.error_text,
        ResearchFeedback.sdk_version,
        ResearchFeedback.helpful,
    )
    newest = (ResearchFeedback.created_at.desc(), ResearchFeedback.id.desc())
    same_sdk = ResearchFeedback.sdk_name == sdk
    try:
        with sessions() as session:
            exact = session.execute(
                select(*columns)
                .where(same_sdk, ResearchFeedback.error_signature == signature)
                .order_by(*newest)
                .limit(SCAN_LIMIT)
            ).all()
            others = session.execute(
                select(*columns)
                .where(same_sdk, ResearchFeedback.error_signature != signature)
                .order_by(*newest)
                .limit(SCAN_LIMIT)
            ).all()
    except SQLAlchemyError as exc:
        raise BackendUnavailableError(f"cannot read research feedback: {exc}") from exc

    tallies: dict[SnippetKey, _Tally] = {}
    for row in [*exact, *others]:
        if row.error_signature == signature:
            weight = 1.0
        else:
            similarity = terms_similarity(terms, _stored_terms(row.error_text))
            if similarity < NEAR_THRESHOLD:
                continue
            weight = NEAR_DISCOUNT * similarity
        if sdk_version and row.sdk_version and row.sdk_version != sdk_version:
            weight *= OTHER_VERSION_DISCOUNT
        tally = tallies.setdefault(SnippetKey(row.source_url, row.entity_name), _Tally())
        tally.add(weight, row.helpful, row.error_signature == signature)
    return {key: tally.boost() for key, tally in tallies.items()}


def feedback_dict(record: ResearchFeedback) -> dict[str, Any]:
    """A JSON-ready copy of a stored feedback record."""
    created: datetime | None = record.created_at
    return {
        "id": record.id,
        "sdk_name": record.sdk_name,
        "sdk_version": record.sdk_version,
        "error_signature": record.error_signature,
        "error_text": record.error_text,
        "command": record.command,
        "query": record.query,
        "entity_name": record.entity_name,
        "source_url": record.source_url,
        "chunk_content_hash": record.chunk_content_hash,
        "helpful": record.helpful,
        "created_at": created.isoformat() if created else None,
    }


@dataclass
class _Tally:
    net: float = 0.0
    helpful: int = 0
    unhelpful: int = 0
    exact: int = 0

    def add(self, weight: float, helpful: bool, exact: bool) -> None:
        self.net += weight if helpful else -weight
        self.helpful += helpful
        self.unhelpful += not helpful
        self.exact += exact

    def boost(self) -> FeedbackBoost:
        return FeedbackBoost(MAX_BOOST * math.tanh(self.net), self.helpful, self.unhelpful, self.exact)


@lru_cache(maxsize=4096)
def _stored_terms(error_text: str) -> frozenset[str]:
    # Stored texts never change, and the same records are compared on every research call.
    return terms_of_normalized(normalize_error(error_text))


def _sdk_form(sdk_name: str) -> str:
    name = _required("sdk_name", sdk_name, MAX_NAME_CHARS)
    form = normal_form(name)
    if not form:
        raise InvalidInputError(
            f"feedback field 'sdk_name' has no letters or digits: {sdk_name!r}",
            hint="pass the SDK name research was asked about, e.g. aws-cli",
        )
    return form


def _required(field: str, value: str, limit: int) -> str:
    text = _optional(field, value, limit)
    if text is None:
        raise InvalidInputError(f"feedback field {field!r} is empty", hint=f"pass a non-empty {field}")
    return text


def _optional(field: str, value: str | None, limit: int) -> str | None:
    """``value`` stripped; ``None`` when absent or blank. Rejects non-strings and overlong values."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidInputError(f"feedback field {field!r} must be text, not {type(value).__name__}")
    text = value.strip()
    if len(text) > limit:
        raise InvalidInputError(
            f"feedback field {field!r} is too long ({len(text)} characters, at most {limit})",
            hint="pass the relevant part only (for error_text, the lines around the error)",
        )
    return text or None
