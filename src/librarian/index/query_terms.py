"""Turning a natural-language query into lexical search terms."""

from __future__ import annotations

import re

# A compact English stop-word list (the usual BM25 set): these words match nearly every chunk and
# only add ranking noise and latency to an OR query.
STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further had
    has have having he her here hers herself him himself his how i if in into is it its itself just
    me more most my myself no nor not now of off on once only or other our ours ourselves out over
    own same she should so some such than that the their theirs them themselves then there these
    they this those through to too under until up very was we were what when where which while who
    whom why will with would you your yours yourself yourselves i'm i'd i'll i've let us need want
    please provide give using use used""".split()
)

_WORD = re.compile(r"[A-Za-z0-9_]+")
MAX_TERMS = 32


def query_terms(query: str) -> list[str]:
    """Distinct lower-case words of ``query`` without stop words, in order, at most ``MAX_TERMS``.

    >>> query_terms("How do I upload a file to S3 with tags?")
    ['upload', 'file', 's3', 'tags']
    """
    seen: dict[str, None] = {}
    for match in _WORD.finditer(query.lower()):
        word = match.group(0)
        if word not in STOPWORDS and len(word) < 64:
            seen.setdefault(word, None)
    return list(seen)[:MAX_TERMS]
