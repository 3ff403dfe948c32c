"""How option and command names relate: the same meaning words, or only a similar spelling.

A drifted option is usually renamed so that its meaning words survive (``--format`` becomes
``--output-format``, ``--loglevel`` becomes ``--log-level``); a tool's "did you mean" only measures
spelling (``--allow-none`` and ``--allow-net``). Every strategy that maps an old name onto a new one
asks here, so they all draw the line in the same place.
"""

from __future__ import annotations

import difflib
import re

from librarian.correction.matching import singular

__all__ = ["content_words", "keeps_meaning", "name_similarity"]

# Words that say how, not what: they do not make two option names related.
_GENERIC = frozenset(
    [
        "enable",
        "disable",
        "use",
        "show",
        "no",
        "with",
        "without",
        "allow",
        "set",
        "get",
        "do",
        "is",
        "the",
        "a",
        "an",
        "experimental",
        "force",
    ]
)
_WORDS = re.compile(r"[A-Za-z][a-z]*|[A-Z]+(?![a-z])|\d+")


def content_words(name: str) -> list[str]:
    """The meaningful lower-case words of an option, value or placeholder name."""
    stems = [singular(w) for w in _WORDS.findall(name.lstrip("-").replace("_", "-"))]
    return [w for w in stems if w not in _GENERIC and len(w) > 1]


def name_similarity(old: str, new: str) -> float:
    """How clearly two option or command names are related, 0..1.

    Equal once separators are ignored (``--loglevel``, ``--log-level``): 1. Otherwise how much of
    the old name's meaning words the new one keeps, and how few it adds (``--format`` is all of
    ``--output-format`` but one word), or, for near-identical spellings, the character similarity.

    Example:
        >>> name_similarity("--loglevel", "--log-level")
        1.0
        >>> round(name_similarity("--format", "--output-format"), 2)
        0.75
        >>> name_similarity("--show-source", "--show-fixes") < 0.5
        True
    """
    a, b = old.lstrip("-").lower(), new.lstrip("-").lower()
    if re.sub(r"[-_.]", "", a) == re.sub(r"[-_.]", "", b):
        return 1.0
    ratio = difflib.SequenceMatcher(None, a, b).ratio()
    wa, wb = set(content_words(a)), set(content_words(b))
    words = 0.0
    if wa and wb:
        shared = len(wa & wb)
        words = 0.5 * shared / len(wa) + 0.5 * shared / len(wa | wb)
    return max(words, ratio if ratio >= 0.8 else 0.6 * ratio)


def keeps_meaning(old: str, new: str) -> bool:
    """Whether ``new`` keeps most of ``old``'s meaning words (or is a near-identical spelling).

    A rename keeps what the option was about; ``--screw-ie8`` and ``--ie`` share a word but not a
    meaning, ``--clear-app-data`` and ``--reset-app-data`` do; ``--allow-none`` and ``--allow-net``
    are spelt alike but mean different things.
    """
    a, b = old.lstrip("-").lower(), new.lstrip("-").lower()
    if re.sub(r"[-_.]", "", a) == re.sub(r"[-_.]", "", b):
        return True
    wa, wb = set(content_words(a)), set(content_words(b))
    if not wa or not wb:
        return difflib.SequenceMatcher(None, a, b).ratio() >= 0.8
    return len(kept_words(wa, wb)) / len(wa) >= 0.6


def kept_words(wanted: set[str], among: set[str]) -> set[str]:
    """The words of ``wanted`` that ``among`` keeps: as themselves, or shortened or spelled out
    (``dir``, ``directory``); a near spelling of another word is not kept (``--allow-none`` and
    ``--allow-net`` differ by one meaning word)."""
    return {w for w in wanted if any(w == x or x.startswith(w) or w.startswith(x) for x in among)}
