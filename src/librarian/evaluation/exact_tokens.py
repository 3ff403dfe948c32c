"""Exact-identifier retrieval: does searching for a token that only one document holds put that
document first?

Users paste identifiers, error codes, option names and entity names (``ERR_SOCKET_TIMEOUT``,
``--max-retry-backoff``, ``get_object_tagging``) and expect the one page holding it first, as a
code search would. The cases come from the corpus itself: identifier-like tokens (with ``_``, ``.``,
``-``, ``:``, ``/`` inside, a leading ``--``, camelCase, or letters and digits mixed) that occur in
exactly one file, spelled exactly as written, picked by a hash so the choice is fixed and not tuned.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from librarian.index.identifiers import identifiers_in

if TYPE_CHECKING:
    from librarian.app import Librarian

MIN_LENGTH = 6


@dataclass(frozen=True)
class TokenCase:
    """One token and the only file that holds it."""

    token: str
    path: Path


def unique_tokens(files: Iterable[Path], count: int = 40) -> list[TokenCase]:
    """``count`` identifier-like tokens that each occur in exactly one of ``files``."""
    holders: dict[str, set[Path]] = defaultdict(set)
    texts = {path: path.read_text(encoding="utf-8", errors="replace") for path in files}
    for path, text in texts.items():
        for token in identifiers_in(text, MIN_LENGTH):
            holders[token].add(path)
    # Unique also means no other file holds it in another case or as part of a longer word.
    lowered = {path: text.lower() for path, text in texts.items()}
    unique = [
        TokenCase(token, next(iter(paths)))
        for token, paths in holders.items()
        if len(paths) == 1 and sum(token.lower() in text for text in lowered.values()) == 1
    ]
    unique.sort(key=lambda case: hashlib.sha256(case.token.encode("utf-8")).hexdigest())
    return unique[:count]


def first_hits(
    lib: Librarian, cases: list[TokenCase], top_k: int = 10, *, exact_identifiers: bool = True
) -> list[tuple[TokenCase, bool, str]]:
    """For each case: whether the first result comes from its file, and that result's URL."""
    outcomes = []
    for case in cases:
        results = lib.search(case.token, top_k=top_k, exact_identifiers=exact_identifiers)
        first = results[0].source_url if results else ""
        outcomes.append((case, first == case.path.resolve().as_uri(), first))
    return outcomes
