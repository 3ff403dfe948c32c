"""The stable split of a dataset's queries into a half to learn from and a half to measure on."""

from __future__ import annotations

import hashlib

SPLIT_RULE = "SHA-256 of the query id, even last byte: learn, odd: test"


def learn_half(query_id: str) -> bool:
    """Whether a query belongs to the half a learning component may learn from (a stable hash split)."""
    return hashlib.sha256(query_id.encode("utf-8")).digest()[-1] % 2 == 0
