"""Output budgets: search results and research snippets trimmed to fit an agent's context.

A budget is a maximum number of characters of the results' JSON (a token is about four characters
of English; :func:`chars_for` converts). Results are kept whole, best first, while they fit; the first
one alone is cut when even it does not fit, so an answer is never empty because of its budget. What
was left out is said in a ``trimmed`` note (how many were kept and dropped), so an agent knows to
ask for more (a larger budget, a page, or ``read_page`` for a whole document).

The same limits hold on every interface: ``top_k`` is 1-:data:`MAX_TOP_K`, refused outside.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from librarian.errors import InvalidInputError

MAX_TOP_K = 100
MIN_CHARS = 1000
MAX_CHARS = 1_000_000
# What MCP answers fit in when the agent names no budget: about 4,000 tokens.
DEFAULT_AGENT_CHARS = 16_000
CHARS_PER_TOKEN = 4


def check_top_k(top_k: int) -> int:
    """``top_k`` if it is within 1-:data:`MAX_TOP_K`, else :class:`InvalidInputError`."""
    if not 1 <= top_k <= MAX_TOP_K:
        raise InvalidInputError(f"top_k: use 1 to {MAX_TOP_K}, not {top_k}")
    return top_k


def chars_for(max_chars: int | None, max_tokens: int | None) -> int | None:
    """One budget in characters from either unit (the smaller when both are given)."""
    budgets = [b for b in (max_chars, None if max_tokens is None else max_tokens * CHARS_PER_TOKEN) if b]
    if not budgets:
        return None
    budget = min(budgets)
    if not MIN_CHARS <= budget <= MAX_CHARS:
        raise InvalidInputError(
            f"max_chars: use {MIN_CHARS} to {MAX_CHARS} characters ({MIN_CHARS // CHARS_PER_TOKEN} to "
            f"{MAX_CHARS // CHARS_PER_TOKEN} tokens), not {budget}"
        )
    return budget


def fit(
    items: Sequence[dict[str, Any]], max_chars: int | None, text_key: str = "content"
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """``items`` in order while their JSON fits ``max_chars``, and a note of what was left out.

    Returns the kept items (the first cut at ``text_key`` and marked ``truncated`` when it alone is
    too long) and ``None`` when nothing was trimmed, else ``{"max_chars", "returned", "dropped",
    "truncated"}``.
    """
    if max_chars is None:
        return list(items), None
    kept: list[dict[str, Any]] = []
    used = 0
    truncated = False
    for item in items:
        size = _size(item)
        if used + size <= max_chars:
            kept.append(item)
            used += size
            continue
        if not kept:
            kept.append(_cut(item, max_chars, text_key))
            truncated = True
        break
    dropped = len(items) - len(kept)
    if not dropped and not truncated:
        return kept, None
    return kept, {"max_chars": max_chars, "returned": len(kept), "dropped": dropped, "truncated": truncated}


def _cut(item: dict[str, Any], max_chars: int, text_key: str) -> dict[str, Any]:
    """``item`` with its text shortened until its JSON fits (escapes make JSON longer than text)."""
    text = str(item.get(text_key) or "")
    room = len(text)
    while True:
        cut = {**item, text_key: text[:room], "truncated": True}
        over = _size(cut) - max_chars
        if over <= 0 or room == 0:
            return cut
        room = max(0, room - over)


def _size(item: dict[str, Any]) -> int:
    return len(json.dumps(item, ensure_ascii=False, default=str))
