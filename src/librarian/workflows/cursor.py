"""The opaque cursor of a workflow listing: the creation time and id of the last workflow shown.

Keyset pagination (``WHERE (created, id) < cursor``) stays exact while workflows are added: an offset
would skip or repeat rows as new ones push the list down.
"""

from __future__ import annotations

import base64
import binascii
import uuid
from datetime import UTC, datetime

from librarian.errors import InvalidInputError

__all__ = ["decode_cursor", "encode_cursor"]


def encode_cursor(created: datetime, workflow_id: uuid.UUID) -> str:
    """The cursor that continues after the workflow created at ``created`` with ``workflow_id``."""
    text = f"{created.astimezone(UTC).isoformat()}|{workflow_id}"
    return base64.urlsafe_b64encode(text.encode("ascii")).decode("ascii").rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, uuid.UUID]:
    """The (creation time, id) a cursor holds.

    Raises:
        InvalidInputError: not a cursor this service made.
    """
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        stamp, _, ident = base64.urlsafe_b64decode(padded.encode("ascii")).decode("ascii").partition("|")
        created = datetime.fromisoformat(stamp)
        return (created if created.tzinfo else created.replace(tzinfo=UTC)), uuid.UUID(ident)
    except (ValueError, UnicodeError, binascii.Error):
        raise InvalidInputError(
            f"cursor: {cursor[:40]!r} is not a cursor of this listing",
            hint="pass the next_cursor of the previous page unchanged",
        ) from None
