"""Marking the words a search matched in a snippet, as text segments the template escapes one by one.

Highlighting never builds HTML from document text: a snippet is cut into ``(text, marked)`` segments
and the template wraps marked ones in ``<mark>``, escaping every segment, so a document holding
``<script>`` shows it as text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

__all__ = ["query_spans", "segments"]

# Words shorter than this are too common to be worth marking ("a", "to", "in").
_MIN_WORD = 3
_WORD = re.compile(r"[\w.\-]+", re.UNICODE)
# Words every English query has: marking them everywhere would hide the words that matched.
_COMMON = frozenset(
    {
        "and",
        "are",
        "for",
        "from",
        "has",
        "how",
        "into",
        "not",
        "the",
        "that",
        "this",
        "was",
        "what",
        "when",
        "with",
        "you",
    }
)


def query_spans(text: str, query: str) -> list[tuple[int, int]]:
    """The ``[start, end)`` spans of ``text`` where a word of ``query`` occurs (case-insensitive)."""
    found = {w.lower() for w in _WORD.findall(query) if len(w) >= _MIN_WORD}
    words = sorted(found - _COMMON, key=len, reverse=True)
    if not words:
        return []
    pattern = re.compile("|".join(re.escape(word) for word in words), re.IGNORECASE)
    return [(match.start(), match.end()) for match in pattern.finditer(text)]


def segments(text: str, spans: Iterable[Sequence[int]]) -> list[tuple[str, bool]]:
    """``text`` cut at ``spans`` (overlapping or out-of-range ones are merged or clipped)."""
    cleaned: list[tuple[int, int]] = []
    for span in sorted((max(0, int(s[0])), min(len(text), int(s[1]))) for s in spans if len(s) >= 2):
        start, end = span
        if end <= start:
            continue
        if cleaned and start <= cleaned[-1][1]:
            cleaned[-1] = (cleaned[-1][0], max(end, cleaned[-1][1]))
        else:
            cleaned.append((start, end))
    parts: list[tuple[str, bool]] = []
    position = 0
    for start, end in cleaned:
        if start > position:
            parts.append((text[position:start], False))
        parts.append((text[start:end], True))
        position = end
    if position < len(text):
        parts.append((text[position:], False))
    return parts
