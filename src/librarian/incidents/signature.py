"""Problem signatures: what an incident looked like, in the forms that make two incidents comparable.

A signature has ``symptoms``, ``error_messages``, ``affected_services`` and ``infrastructure`` (the
design's ``problem_signature``). Matching uses normal forms:

* a symptom becomes its set of content words, stemmed lightly (``crashes``, ``crashed`` and
  ``crashing`` are ``crash``), so "pod crashed" matches "pods crashing";
* an error message is normalised as research normalises error text
  (:func:`librarian.research.error_signature.normalize_error`: ids, paths, numbers and quoted values
  become placeholders), and generated names keep only their base (``checkout-7f9c4-x2`` becomes
  ``checkout-<gen>``: pods, replica sets and jobs get such suffixes), so ``OOMKilled pod web-7f9c``
  and ``OOMKilled pod web-2b1d`` are one error;
* a service is its lower-case name; infrastructure likewise.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from librarian.errors import InvalidInputError
from librarian.index.query_terms import STOPWORDS
from librarian.research.error_signature import (
    NEAR_THRESHOLD,
    normalize_error,
    terms_of_normalized,
    terms_similarity,
)

FIELDS = ("symptoms", "error_messages", "affected_services", "infrastructure")
_WORD = re.compile(r"[a-z0-9][a-z0-9_.-]*")
_SUFFIXES = ("ing", "ed", "es", "s")
MAX_ITEMS = 50
MAX_ITEM_CHARS = 4000


def stem(word: str) -> str:
    """A light English stem: enough for ``crashed``/``crashes``/``crashing`` to meet at ``crash``."""
    for suffix in _SUFFIXES:
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            word = word[: -len(suffix)]
            if suffix == "ing" and len(word) > 3 and word[-1] == word[-2]:
                word = word[:-1]  # running -> run
            return word
    return word


MAX_MENTIONS = 200
_NAME_PART = re.compile(r"[a-z][a-z0-9_]*")


def mentioned_names(messages: tuple[str, ...]) -> set[str]:
    """The words error lines name, whole and split at dots and dashes (``checkout-7f9c`` names
    ``checkout``): an error often says which service failed when nobody listed it."""
    names: set[str] = set()
    for message in messages:
        for word in _WORD.findall(message.lower()):
            names.add(word)
            names.update(_NAME_PART.findall(word))
    return names


def symptom_terms(symptom: str) -> frozenset[str]:
    """The content words of a symptom, stemmed."""
    return frozenset(stem(word) for word in _WORD.findall(symptom.lower()) if word not in STOPWORDS)


def symptoms_match(first: frozenset[str], second: frozenset[str]) -> bool:
    """Two symptoms match when one's words contain the other's, or they share at least half."""
    if not first or not second:
        return False
    shared = len(first & second)
    return first <= second or second <= first or shared / min(len(first), len(second)) >= 0.5


_GENERATED = re.compile(r"\b([a-z][a-z_]*(?:-[a-z][a-z_]*)*)(?:-[a-z0-9]*\d[a-z0-9]*)(?:-[a-z0-9]+)*\b")


def normalize_incident_error(message: str) -> str:
    """Research's normal form of an error, with generated resource names reduced to their base."""
    return _GENERATED.sub(r"\1-<gen>", normalize_error(message))


def errors_match(first: str, second: str) -> bool:
    """Two normalised errors match when equal or near (research's error-similarity threshold)."""
    if first == second:
        return True
    return terms_similarity(terms_of_normalized(first), terms_of_normalized(second)) >= NEAR_THRESHOLD


@dataclass(frozen=True)
class ProblemSignature:
    """The design's ``problem_signature``."""

    symptoms: tuple[str, ...] = ()
    error_messages: tuple[str, ...] = ()
    affected_services: tuple[str, ...] = ()
    infrastructure: str | None = None

    @classmethod
    def from_mapping(
        cls, value: Mapping[str, Any] | None, *, where: str = "problem_signature"
    ) -> ProblemSignature:
        """A signature from JSON; a wrong type or an unknown key names the field.

        Raises:
            InvalidInputError: not an object, an unknown key, a list of non-strings, too many items.
        """
        if value is None:
            return cls()
        if not isinstance(value, Mapping):
            raise InvalidInputError(f"{where}: expected an object with {', '.join(FIELDS)}")
        unknown = sorted(set(value) - set(FIELDS))
        if unknown:
            raise InvalidInputError(
                f"{where}: unknown field {', '.join(map(repr, unknown))}", hint=f"use {', '.join(FIELDS)}"
            )

        def strings(name: str) -> tuple[str, ...]:
            items = value.get(name)
            if items is None:
                return ()
            if isinstance(items, str):
                items = [items]
            if not isinstance(items, list | tuple) or not all(isinstance(item, str) for item in items):
                raise InvalidInputError(f"{where}.{name}: expected a list of strings")
            if len(items) > MAX_ITEMS or any(len(item) > MAX_ITEM_CHARS for item in items):
                raise InvalidInputError(
                    f"{where}.{name}: at most {MAX_ITEMS} items of {MAX_ITEM_CHARS} characters"
                )
            return tuple(item.strip() for item in items if item.strip())

        infrastructure = value.get("infrastructure")
        if infrastructure is not None and not isinstance(infrastructure, str):
            raise InvalidInputError(f"{where}.infrastructure: expected a string")
        return cls(
            symptoms=strings("symptoms"),
            error_messages=strings("error_messages"),
            affected_services=strings("affected_services"),
            infrastructure=(infrastructure or "").strip() or None,
        )

    def to_dict(self) -> dict[str, Any]:
        """The signature as JSON."""
        return {
            "symptoms": list(self.symptoms),
            "error_messages": list(self.error_messages),
            "affected_services": list(self.affected_services),
            "infrastructure": self.infrastructure,
        }

    def is_empty(self) -> bool:
        """True when nothing is known about the problem."""
        return not (self.symptoms or self.error_messages or self.affected_services or self.infrastructure)

    def normalized(self) -> dict[str, Any]:
        """The normal forms matching compares (see the module documentation)."""
        return {
            "symptoms": [sorted(symptom_terms(symptom)) for symptom in self.symptoms],
            "errors": sorted({normalize_incident_error(message) for message in self.error_messages} - {""}),
            "services": sorted({service.lower() for service in self.affected_services}),
            "infrastructure": (self.infrastructure or "").lower() or None,
            "mentions": sorted(mentioned_names(self.error_messages))[:MAX_MENTIONS],
        }

    def key(self) -> str:
        """SHA-256 of the normal forms: two signatures with one key are the same problem."""
        normal = self.normalized()
        canonical = {
            "symptoms": sorted(" ".join(terms) for terms in normal["symptoms"]),
            "errors": normal["errors"],
            "services": normal["services"],
            "infrastructure": normal["infrastructure"],
        }  # mentions are derived from the errors, which the key already holds
        return hashlib.sha256(json.dumps(canonical, sort_keys=True).encode("utf-8")).hexdigest()

    def text(self, *, title: str = "", description: str = "") -> str:
        """The problem as one text to embed: title, description, symptoms, errors, services."""
        parts = [title, description, "; ".join(self.symptoms), "\n".join(self.error_messages)]
        parts.append(" ".join(self.affected_services))
        if self.infrastructure:
            parts.append(self.infrastructure)
        return "\n".join(part for part in parts if part).strip()
