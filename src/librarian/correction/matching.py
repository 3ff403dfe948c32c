"""Match a failed command's values to a documented command's options by meaning.

A value offers *facets*: an existing file can be passed as the file itself (its content) or named by
its base name; a URL offers its host, its path, its last segment or the whole URL; a ``k=v`` pair, a
number and a word are passed whole. Each facet carries *cues*, plain English words that option names
and descriptions use for that kind of thing ("bucket", "host", "container" for a URL's host; "body",
"data", "file" for a file's content; "key", "name", "object" for a base name). An option scores a facet
by how its name (its last word, the head noun, counts most), its description's opening words and its
value hint share those cues. The vocabulary is generic documentation English and names no tool.

Example:
    >>> from librarian.correction.values import classify_value
    >>> from librarian.correction.helpdocs import OptionDoc
    >>> host = next(f for f in facets(classify_value("proto://box/")) if f.name == "host")
    >>> match = score(host, OptionDoc("--bucket", description="The bucket name."))
    >>> match.points, match.agreed
    (4.0, ('bucket', 'name'))
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from librarian.correction.helpdocs import OptionDoc
from librarian.correction.values import CommandValue

__all__ = [
    "PRIMARY_FACET",
    "STRONG",
    "WEAK",
    "Facet",
    "Match",
    "facets",
    "flat",
    "score",
    "singular",
    "structured_hint",
    "words",
]

STRONG = 4.0  # the option's head noun or hint agrees with the facet, and more
WEAK = 2.0  # some agreement, enough to fill a required option that nothing else fits


def _vocabulary(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Not "source": a "source" option as often names a remote object (to copy from) as a local file.
_CONTENT = _vocabulary(
    "file body data content input upload blob stream payload document attachment path filename infile"
)
_NAMING = _vocabulary("name key object filename destination dest target title id remote entry")
_HOST = _vocabulary(
    "host hostname bucket container domain server registry repository repo account namespace remote "
    "name store site vault share"
)
_LOCATION = _vocabulary("key path prefix object name destination dest target location file filename resource")
_URL = _vocabulary("url uri endpoint location address link href remote source destination target origin")
_PAIRS = _vocabulary(
    "tag tagging label metadata attribute property pair map setting parameter variable env environment "
    "header annotation option config configuration"
)
_NUMBER = _vocabulary(
    "count number size limit max maximum min minimum timeout second port length depth retry offset "
    "index num day age byte job thread worker level"
)
_WORD = _vocabulary(
    "name id identifier value ref reference label title branch version alias target revision commit "
    "package project module user group profile"
)
_CONTENT_HINTS = _vocabulary("file path blob stream streaming filename")
_NUMBER_HINTS = _vocabulary("integer int long number float double count")
_URL_HINTS = _vocabulary("url uri")
_PAIR_HINTS = _vocabulary("map dict dictionary")
_STRUCTURED = _vocabulary("structure struct object dict json document")

# Which facet must be used for a value to count as passed on (a file is data: naming it is not enough).
PRIMARY_FACET = {"file": "content", "url": "host", "key_value": "whole", "number": "whole", "word": "whole"}

_STOP = _vocabulary("a an the of to for in on by with and or is are be as at it its this that from")
_WORD_RE = re.compile(r"[A-Za-z][a-z]*|[0-9]+")


@dataclass(frozen=True)
class Facet:
    """One way of passing a value: its ``text``, the ``cues`` it answers to, the hints it fits."""

    value: CommandValue
    name: str
    text: str
    cues: frozenset[str]
    hints: frozenset[str] = frozenset()
    origin: frozenset[str] = frozenset()  # words of the option the value was given to before


@dataclass(frozen=True)
class Match:
    """How well a facet fits an option: ``points`` and the words that agreed."""

    points: float
    agreed: tuple[str, ...]


def singular(word: str) -> str:
    """A lower-case word without its English plural ending, for matching names (not for display).

    Example:
        >>> [singular(w) for w in ("aliases", "alias", "tags", "entries", "classes", "status")]
        ['alias', 'alias', 'tag', 'entry', 'class', 'status']
    """
    lower = word.lower()
    if len(lower) <= 3:
        return lower
    if lower.endswith("ies"):
        return lower[:-3] + "y"
    if lower.endswith(("sses", "shes", "ches", "xes", "zes", "ses")):
        return lower[:-2]
    if lower.endswith("s") and not lower.endswith(("ss", "us", "is", "as")):
        return lower[:-1]
    return lower


def words(text: str) -> list[str]:
    """Lower-case word stems of ``text``, stop words left out.

    Example:
        >>> words("--bucket-name"), words("The Tags")
        (['bucket', 'name'], ['tag'])
    """
    out = []
    for word in _WORD_RE.findall(text):
        lower = singular(word)
        if lower not in _STOP:
            out.append(lower)
    return out


def facets(value: CommandValue) -> list[Facet]:
    """The ways ``value`` can be passed to an option, each with its cues."""
    origin = frozenset(words(value.option or ""))
    if value.kind == "file":
        found = [Facet(value, "content", value.text, _CONTENT, _CONTENT_HINTS, origin)]
        if "basename" in value.parts:
            found.append(Facet(value, "basename", value.parts["basename"], _NAMING, frozenset(), origin))
        return found
    if value.kind == "url":
        found = []
        if "host" in value.parts:
            found.append(Facet(value, "host", value.parts["host"], _HOST, frozenset(), origin))
        if "path" in value.parts:
            found.append(
                Facet(value, "path", value.parts["path"].rstrip("/"), _LOCATION, frozenset(), origin)
            )
        if "basename" in value.parts and value.parts["basename"] != value.parts.get("path", "").rstrip("/"):
            found.append(Facet(value, "basename", value.parts["basename"], _NAMING, frozenset(), origin))
        found.append(Facet(value, "whole", value.text, _URL, _URL_HINTS, origin))
        return found
    cues, hints = {
        "key_value": (_PAIRS, _PAIR_HINTS),
        "number": (_NUMBER, _NUMBER_HINTS),
        "word": (_WORD, frozenset()),
    }[value.kind]
    return [Facet(value, "whole", value.text, cues, hints, origin)]


def score(facet: Facet, option: OptionDoc | str, *, description_words: int = 30) -> Match:
    """How well ``facet`` fits ``option`` (an :class:`OptionDoc`, or a placeholder name such as ``<branch>``).

    Points: 3 when the option name's head (last) word is a cue, 1.5 per other name word that is,
    1 per cue among the first ``description_words`` words of the description (at most 2), 2 when the
    value hint fits (``blob`` for a file, ``integer`` for a number), and 2 per word shared with the
    option the value was given to in the failed command (at most 4).
    """
    name = option if isinstance(option, str) else option.name
    description = "" if isinstance(option, str) else option.description
    hint = "" if isinstance(option, str) else option.value_hint
    name_words = words(name)
    agreed: list[str] = []
    points = 0.0
    if name_words and name_words[-1] in facet.cues:
        points += 3.0
        agreed.append(name_words[-1])
    for word in dict.fromkeys(name_words[:-1]):
        if word in facet.cues:
            points += 1.5
            agreed.append(word)
    described = [w for w in dict.fromkeys(words(description)[:description_words]) if w in facet.cues]
    described = [w for w in described if w not in agreed][:2]
    points += len(described)
    agreed.extend(described)
    hinted = sorted(set(words(hint)) & facet.hints)
    if hinted:
        points += 2.0
        agreed.extend(hinted)
    shared = sorted(facet.origin & set(name_words))[:2]
    points += 2.0 * len(shared)
    agreed.extend(f"was {w}" for w in shared)
    return Match(points, tuple(agreed))


def structured_hint(option: OptionDoc | None) -> bool:
    """Whether the option's value hint asks for a nested structure (an object, a document, JSON)."""
    return option is not None and bool(set(words(option.value_hint)) & _STRUCTURED)


def flat(values: Iterable[str]) -> bool:
    """Whether none of ``values`` is written as a nested structure (no brackets or braces)."""
    return not any(ch in value for value in values for ch in "[{")
