"""Feedback on knowledge documents and the usefulness it earns them.

Each verdict is worth a value on a 0-5 scale: the reader's rating when given (1 star = 0, 5 stars =
5), otherwise ``helpful`` 5, ``not_helpful`` 0, ``outdated`` 1, ``incorrect`` 0. A document's
usefulness is the Bayesian average of those values with five phantom votes at the neutral 2.5, so one
vote moves a new document from 2.5 to at most 2.92 and it takes a consistent record to reach the ends
of the scale. ``outdated`` and ``incorrect`` votes on the current version are also shown as flags in
results until someone saves a new version.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from librarian.errors import InvalidInputError, NotFoundError
from librarian.knowledge.access import Principal, Scope, can_read
from librarian.knowledge.documents import flags_of
from librarian.knowledge.models import KnowledgeFeedback
from librarian.storage.models import Document, utcnow

FEEDBACK_TYPES = {"helpful": 5.0, "not_helpful": 0.0, "outdated": 1.0, "incorrect": 0.0}
PRIOR_MEAN = 2.5
PRIOR_WEIGHT = 5.0


def vote_value(feedback_type: str, rating: int | None) -> float:
    """What one verdict is worth on the 0-5 usefulness scale."""
    if rating is not None:
        return (rating - 1) * 1.25
    return FEEDBACK_TYPES[feedback_type]


def smoothed_usefulness(values: list[float]) -> float:
    """The Bayesian average of ``values`` with :data:`PRIOR_WEIGHT` votes at :data:`PRIOR_MEAN`."""
    return (PRIOR_MEAN * PRIOR_WEIGHT + sum(values)) / (PRIOR_WEIGHT + len(values))


def record_feedback(
    sessions: sessionmaker[Session],
    principal: Principal,
    document_id: int,
    feedback_type: str,
    *,
    rating: int | None = None,
    comment: str | None = None,
    search_query: str | None = None,
    was_used: bool = False,
) -> dict[str, Any]:
    """Store one verdict and update the document's usefulness; returns the new figures.

    Raises:
        InvalidInputError: an unknown feedback type, a rating outside 1-5, an overlong comment.
        NotFoundError: no such document, or one the caller may not read.
        ForbiddenError: a token without the ``write`` scope.
    """
    principal.require(Scope.WRITE, "giving feedback")
    if feedback_type not in FEEDBACK_TYPES:
        raise InvalidInputError(
            f"feedback_type: unknown type {feedback_type!r}", hint=f"use {', '.join(FEEDBACK_TYPES)}"
        )
    if rating is not None and (isinstance(rating, bool) or not 1 <= rating <= 5):
        raise InvalidInputError("rating: use 1 to 5 stars")
    if comment is not None and len(comment) > 10_000:
        raise InvalidInputError("comment: at most 10,000 characters")
    with sessions.begin() as session:
        document = session.get(Document, document_id, with_for_update=True)
        if (
            document is None
            or document.deleted_at is not None
            or not can_read(principal, document.access_grants)
        ):
            raise NotFoundError(f"no knowledge document {document_id}")
        session.add(
            KnowledgeFeedback(
                document_id=document.id,
                document_version_no=document.current_version_no,
                organization_id=principal.organization_id,
                user_id=principal.user_id,
                feedback_type=feedback_type,
                rating=rating,
                comment=comment,
                search_query=search_query,
                was_used=was_used,
                details={},
            )
        )
        session.flush()
        votes = session.execute(
            select(KnowledgeFeedback.feedback_type, KnowledgeFeedback.rating).where(
                KnowledgeFeedback.document_id == document.id
            )
        ).all()
        document.usefulness_score = smoothed_usefulness([vote_value(kind, stars) for kind, stars in votes])
        document.feedback_count = len(votes)
        if was_used or feedback_type == "helpful":
            document.last_used_at = utcnow()
        return {
            "document_id": document.id,
            "feedback_type": feedback_type,
            "usefulness_score": round(document.usefulness_score, 3),
            "feedback_count": document.feedback_count,
            "flags": flags_of(session, document),
        }
