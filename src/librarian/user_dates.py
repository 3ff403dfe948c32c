"""Dates and times as people and agents type them into a filter ("2026-11-01", "2026-11-01T09:30")."""

from __future__ import annotations

from datetime import UTC, datetime

from librarian.errors import InvalidInputError


def parse_user_date(value: str | None, field: str) -> datetime | None:
    """``value`` as an aware moment (no time zone means UTC; a date means its midnight), or None
    when it is empty.

    Example:
        >>> parse_user_date("2026-11-01", "since").isoformat()
        '2026-11-01T00:00:00+00:00'

    Raises:
        InvalidInputError: not an ISO 8601 date or time; the message names ``field``.
    """
    if value is None or not value.strip():
        return None
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError:
        raise InvalidInputError(
            f"{field}: {value!r} is not a date (use YYYY-MM-DD or an ISO 8601 time)"
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
