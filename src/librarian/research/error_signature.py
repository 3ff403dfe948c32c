"""Error signatures: one key for every occurrence of "the same error", and a measure of near ones.

Two runs that fail the same way rarely print the same bytes: bucket names, request ids, paths,
line numbers, timestamps and the values given to an option differ. :func:`normalize_error` keeps
what identifies the *kind* of failure and replaces the rest with placeholders:

1. secrets, e-mails and home directories are scrubbed first (:mod:`librarian.research.scrub`);
2. only the meaningful lines are kept: usage blocks (``usage: ...`` up to the next blank line),
   help hints (``To see help text, you can run:`` with its indented examples), traceback frames and
   chaining banners are dropped; of the rest, the first :data:`MAX_LINES` lines that read as errors
   (``error``, ``unknown``, ``invalid``, ``denied``, ``FooError:``...) are kept, or the first
   :data:`MAX_LINES` lines when none does;
3. lower case; URLs become ``<url>``, ARNs/URNs ``<id>``, paths ``<path>``, quoted values
   ``<value>``, the value of ``--opt,value`` / ``--opt=value`` is dropped (the option name is the
   evidence: ``--tagging,env=prod`` and ``--tagging,compliance=strict`` are the same mistake,
   ``--acl`` another), other ``key=value`` values become ``<value>``, UUIDs and hex strings of 8+
   characters with a digit ``<hex>``, dates and times ``<time>``, long letter-digit ids ``<id>``,
   numbers ``<n>``;
4. punctuation goes and whitespace collapses.

:func:`error_signature` is the SHA-256 of that text (64 hex characters), the exact-match key stored
with feedback. :func:`terms_similarity` compares errors that are close but not equal (a different
operation name, an extra ``aws: error:`` prefix): a weighted Jaccard index over their terms in which
an option weighs :data:`OPTION_WEIGHT` words and a placeholder half a word, and two errors that name
options, none shared, score 0. :data:`NEAR_THRESHOLD` (0.6) says how close counts as near: errors of
one kind that differ in one or two words of eight or more score 0.7-0.85, different kinds of error
from one tool share only generic words and score below 0.35, and naming a different option costs
six words of weight, so two errors differing only in the option cannot pass unless they share nine
other words (the option rule above then stops them anyway).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

from librarian.research.scrub import scrub

MAX_LINES = 2
NEAR_THRESHOLD = 0.6
OPTION_WEIGHT = 3.0
PLACEHOLDER_WEIGHT = 0.5
# Below this much term weight an error says too little ("error: failed") to be matched loosely.
MIN_NEAR_WEIGHT = 3.0

_USAGE = re.compile(r"^\s*usage:", re.IGNORECASE)
_HINT = re.compile(
    r"^\s*(to see help|for more (information|details)|see ['\"`]?\S+ (--)?help|try ['\"`]?\S+ (--)?help|"
    r"run ['\"`]?\S+ (--)?help)",
    re.IGNORECASE,
)
_TRACEBACK = re.compile(r"^\s*Traceback \(most recent call last\):")
_CHAINING = re.compile(
    r"^\s*(During handling of the above exception|The above exception was the direct cause)", re.IGNORECASE
)
_ERROR_LINE = re.compile(
    r"\b(error|errors|exception|fatal|fail|failed|failure|unknown|unrecognized|unrecognised|invalid|"
    r"denied|forbidden|unauthori[sz]ed|not found|no such|cannot|can't|could not|couldn't|unable|missing|"
    r"required|expected|refused|timed out|timeout|not allowed|not permitted|not supported|conflict|"
    r"does not exist|doesn't exist|no longer|removed|deprecated)\b"
    r"|\w(Error|Exception):",
    re.IGNORECASE,
)

# Applied in order to the lower-cased text; each placeholder is safe from the rules after it.
_PLACEHOLDERS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s\"'<>)\]]+"), "<url>"),
    (re.compile(r"\b(?:arn|urn):[^\s\"'<>)\]]+"), "<id>"),
    (re.compile(r"(?<![\w])[a-z]:\\[^\s\"'<>]*"), "<path>"),
    (
        re.compile(
            r"(?<![\w<>.-])(?:(?:~|\.{1,2})[\\/]|/(?=[\w.@%+~-]))[^\s\"'<>:;,()]*|(?<![\w<>.-])~(?=[\s:;,]|$)"
        ),
        "<path>",
    ),
    (re.compile(r"(?<!\w)\"[^\"\n]*\"|(?<!\w)'[^'\n]*'(?!\w)|`[^`\n]*`|“[^”\n]*”|‘[^’\n]*’"), "<value>"),
    (re.compile(r"(?<![\w-])(--?[a-z][\w-]*)(?:[=,](?!-)[^\s,]*)+"), r"\1"),
    (re.compile(r"(?<![\w-])([a-z_][\w.-]*)=(?!<)[^\s,;&]+"), r"\1=<value>"),
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), "<hex>"),
    (re.compile(r"\b0x[0-9a-f]+\b|\b(?=[0-9a-f]*\d)[0-9a-f]{8,}\b"), "<hex>"),
    (
        re.compile(
            r"\b\d{4}-\d{2}-\d{2}(?:[t ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:z|[+-]\d{2}:?\d{2})?)?\b"
            r"|\b\d{1,2}:\d{2}:\d{2}(?:\.\d+)?\b"
        ),
        "<time>",
    ),
    # Request ids and the like: 12+ letters and digits with at least three digits (``listobjectsv2``,
    # an operation name, has one).
    (re.compile(r"\b(?=(?:[a-z]*\d){3})(?=[a-z0-9]*[a-z])[a-z0-9]{12,}\b"), "<id>"),
    (re.compile(r"\b\d+(?:\.\d+)*\b"), "<n>"),
)
_PUNCTUATION = re.compile(r"[^\w\s<>-]|(?<![\w-])-(?![\w-])")
_TERM = re.compile(r"<\w+>|--?[a-z][\w-]*|[a-z0-9][\w-]*")
_STOPWORDS = frozenset(
    {
        "a", "an", "the", "to", "of", "in", "on", "at", "by", "for", "from", "with", "and", "or", "is",
        "are", "was", "were", "be", "been", "it", "this", "that", "as", "you", "your", "can", "not",
        "error", "errors",
    }
)  # fmt: skip


def _meaningful_lines(text: str) -> list[str]:
    kept: list[str] = []
    # After a usage line, a help hint, a traceback header or a chaining banner, the indented (and
    # blank) lines that follow belong to it: usage continuations, help examples, traceback frames.
    skipping = False
    for raw in text.splitlines():
        line = raw.rstrip()
        if not line.strip() or (skipping and line[:1].isspace()):
            continue
        if _USAGE.match(line) or _HINT.match(line) or _TRACEBACK.match(line) or _CHAINING.match(line):
            skipping = True
            continue
        skipping = False
        kept.append(line.strip())
    errors = [line for line in kept if _ERROR_LINE.search(line)]
    return (errors or kept)[:MAX_LINES]


def normalize_error(text: str) -> str:
    """The part of ``text`` that identifies the kind of error, with variable parts as placeholders.

    Example:
        >>> normalize_error("usage: aws [options]\\n\\nUnknown options: --tagging,compliance=strict")
        'unknown options --tagging'
    """
    normalized = " ".join(_meaningful_lines(scrub(text))).lower()
    for pattern, replacement in _PLACEHOLDERS:
        normalized = pattern.sub(replacement, normalized)
    return " ".join(_PUNCTUATION.sub(" ", normalized).split())


def error_signature(text: str) -> str:
    """The SHA-256 (64 hex characters) of :func:`normalize_error` of ``text``: equal for one kind."""
    return signature_of_normalized(normalize_error(text))


def signature_of_normalized(normalized: str) -> str:
    """:func:`error_signature` of text that :func:`normalize_error` already produced."""
    return hashlib.sha256(normalized.encode("utf-8")).hexdigest()


def error_terms(text: str) -> frozenset[str]:
    """The distinctive terms of ``text`` after normalisation (stop words and ``error`` removed)."""
    return terms_of_normalized(normalize_error(text))


def terms_of_normalized(normalized: str) -> frozenset[str]:
    """:func:`error_terms` of text that :func:`normalize_error` already produced."""
    return frozenset(t for t in _TERM.findall(normalized) if t not in _STOPWORDS)


def _weight(term: str) -> float:
    if term.startswith("-"):
        return OPTION_WEIGHT
    if term.startswith("<"):
        return PLACEHOLDER_WEIGHT
    return 1.0


def _total(terms: Iterable[str]) -> float:
    return sum(_weight(t) for t in terms)


def terms_similarity(first: frozenset[str], second: frozenset[str]) -> float:
    """Weighted Jaccard index of two term sets, in [0, 1] (see the module docstring).

    Two errors that both name options but share none score 0: a different option needs a
    different fix. Errors with less than :data:`MIN_NEAR_WEIGHT` of terms score 0 unless equal.
    """
    if first == second:
        return 1.0 if first else 0.0
    first_options = {t for t in first if t.startswith("-")}
    second_options = {t for t in second if t.startswith("-")}
    if first_options and second_options and not first_options & second_options:
        return 0.0
    union = _total(first | second)
    if min(_total(first), _total(second)) < MIN_NEAR_WEIGHT:
        return 0.0
    return _total(first & second) / union


def error_similarity(first: str, second: str) -> float:
    """:func:`terms_similarity` of two raw error texts (1.0 when their signatures are equal)."""
    first_normalized, second_normalized = normalize_error(first), normalize_error(second)
    if first_normalized == second_normalized:
        return 1.0 if first_normalized else 0.0
    return terms_similarity(terms_of_normalized(first_normalized), terms_of_normalized(second_normalized))
