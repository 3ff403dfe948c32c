"""Evidence an error text gives about which entity is meant: the options it names and their values.

When a command fails with ``Unknown options: --tagging,compliance=strict``, the documentation entity
that fixes it almost always *accepts* ``--tagging``, and accepts it in the *shape* the user gave
(a flat ``key=value``, not a structure). That is stronger evidence than how the question is phrased,
so error-driven research (1) looks at every entity that declares the option, not only the ones the
hybrid search happened to return, (2) scores each entity by its best chunk's similarity to the
question, and (3) weighs how well the given value fits the option's documented type and example.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import Text, cast, func, or_, select
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from librarian.embeddings.cache import EmbeddingCache
from librarian.index.grants_sql import grants_condition
from librarian.storage.models import Chunk

# Chunks of entities declaring an option that are compared with the question at most: every chunk of
# a few dozen commands, enough for options shared by many commands without scanning a large SDK.
MAX_ACCEPTOR_CHUNKS = 3000

# `--tagging,compliance=strict` (AWS CLI's list), `--tagging=compliance=strict`, `--tagging value`.
_OPTION_WITH_VALUE = re.compile(
    r"(?<![\w-])(--?[A-Za-z][\w-]*)(?:[,=]|\s+)(?!-)([^\s,]+(?:,[^\s,-][^\s,]*)*)"
)
_STRUCTURED_HINT = re.compile(r"(?i)\b(structure|list|map|object|dict|array|json)\b|^[\[{]")
_EXAMPLE = re.compile(r"""(?i)(?:for example|e\.g\.|example)[,:]?\s*\(?\s*["“'`]([^"”'`]{1,80})["”'`]""")


@dataclass(frozen=True)
class OptionDoc:
    """How one entity documents one option: its value type as printed and its description."""

    hint: str
    description: str


def option_values(error_text: str, options: Sequence[str]) -> dict[str, str]:
    """The value the failed command gave each of ``options``, when the error text shows it.

    Example:
        >>> option_values("Unknown options: --tagging,compliance=strict", ["--tagging"])
        {'--tagging': 'compliance=strict'}
    """
    values: dict[str, str] = {}
    for match in _OPTION_WITH_VALUE.finditer(error_text):
        option, value = match.group(1), match.group(2)
        if option in options and option not in values:
            values[option] = value
    return values


def value_shape(value: str) -> str:
    """The shape of a value: runs of letters and digits become ``a`` (``Key1=Value1`` -> ``a=a``)."""
    return re.sub(r"[A-Za-z0-9_.]+", "a", value.strip())


def option_fit(value: str | None, doc: OptionDoc | None) -> float:
    """How well ``value`` fits an option as documented, from 0.5 (mismatch) to 1.0 (as in the example).

    * 1.0: the description gives an example of the same shape (``Key1=Value1`` for ``env=prod``);
    * 0.5: the option takes a structure (``structure``, ``list``, JSON) and the value is flat;
    * 0.8: nothing either way (no value in the error, or a plain type without an example).
    """
    if value is None or doc is None:
        return 0.8
    shape = value_shape(value)
    if any(value_shape(example) == shape for example in _EXAMPLE.findall(doc.description)):
        return 1.0
    flat = not any(char in value for char in "{[")
    if _STRUCTURED_HINT.search(doc.hint) and flat:
        return 0.5
    return 0.8


def option_docs(contents: Sequence[str], option: str) -> OptionDoc | None:
    """The option's line in a command page (``- `--opt` `type`: description``), if there is one."""
    pattern = re.compile(
        rf"^-\s+(?:`[^`]+`,\s*)*`{re.escape(option)}`(?:,\s*`[^`]+`)*\s*(?:`([^`]*)`)?:?\s*(.*)$"
    )
    for content in contents:
        for line in content.splitlines():
            match = pattern.match(line.strip())
            if match:
                return OptionDoc(hint=match.group(1) or "", description=match.group(2))
    return None


# The options of an error text that research looks up, and how many one SQL statement tests.
MAX_ERROR_OPTIONS = 64
_OPTIONS_PER_QUERY = 32


@dataclass(frozen=True)
class ChunkRef:
    """The columns of a chunk that ranking by similarity needs (no attributes to decode)."""

    id: int
    entity_name: str | None
    source_url: str
    content_hash: str
    content: str


def acceptor_chunks(
    session: Session,
    sdk_name: str,
    sdk_version: str | None,
    options: Sequence[str],
    grants: tuple[str, ...] | None = None,
) -> list[ChunkRef]:
    """Chunks of every entity of the SDK version whose connector declared one of ``options``.

    A connector's attributes are the same on every chunk of a document, so they are decoded once per
    document: a textual prefilter in SQL (JSON is text on SQLite, cast on PostgreSQL), then the exact
    check on one parsed chunk per document. Only chunks the holder of ``grants`` may read count.
    """
    scope = chunk_scope(session, sdk_name, sdk_version, grants)
    text = cast(Chunk.attributes, Text)
    # An error text may name hundreds of options (pasted help, garbage): the first few carry the
    # evidence, and one OR term each keeps the statement within SQLite's expression depth.
    options = list(dict.fromkeys(options))[:MAX_ERROR_OPTIONS]
    declared: list[Any] = []
    for start in range(0, len(options), _OPTIONS_PER_QUERY):
        batch = options[start : start + _OPTIONS_PER_QUERY]
        firsts = (
            select(func.min(Chunk.id))
            .where(*scope, or_(*(text.like(f'%"{option}"%') for option in batch)))
            .group_by(Chunk.document_id)
        )
        declared += session.execute(
            select(Chunk.document_id, Chunk.attributes).where(Chunk.id.in_(firsts.scalar_subquery()))
        ).all()
    declared = list({document: (document, attributes) for document, attributes in declared}.values())
    documents = [document for document, attributes in declared if _declares(attributes, options)]
    if not documents:
        return []
    rows = session.execute(
        select(Chunk.id, Chunk.entity_name, Chunk.source_url, Chunk.content_hash, Chunk.content)
        .where(Chunk.document_id.in_(documents))
        .order_by(Chunk.id)
        .limit(MAX_ACCEPTOR_CHUNKS)
    ).all()
    return [ChunkRef(*row) for row in rows]


class AcceptorCache:
    """Remembers :func:`acceptor_chunks` per SDK version and options while the version is unchanged.

    Agents ask about the same few options again and again; decoding the attributes of a version's
    chunks each time costs milliseconds. An entry is reused only while the version's fingerprint
    (count, sum and maximum of its chunk ids, as in ``index/exact.py``) is the same: re-ingest gives
    changed chunks new ids.
    """

    def __init__(self, max_entries: int = 256) -> None:
        self._entries: OrderedDict[tuple[object, ...], list[ChunkRef]] = OrderedDict()
        self._max_entries = max_entries
        self._lock = threading.Lock()

    def acceptors(
        self,
        session: Session,
        sdk_name: str,
        sdk_version: str | None,
        options: Sequence[str],
        grants: tuple[str, ...] | None = None,
    ) -> list[ChunkRef]:
        """Like :func:`acceptor_chunks`, from memory when the readable SDK version did not change."""
        scope = chunk_scope(session, sdk_name, sdk_version, grants)
        fingerprint = tuple(
            session.execute(
                select(
                    func.count(), func.coalesce(func.sum(Chunk.id), 0), func.coalesce(func.max(Chunk.id), 0)
                )
                .select_from(Chunk)
                .where(*scope)
            ).one()
        )
        key = (sdk_name, sdk_version, tuple(sorted(options)), grants, fingerprint)
        with self._lock:
            cached = self._entries.get(key)
            if cached is not None:
                self._entries.move_to_end(key)
                return cached
        found = acceptor_chunks(session, sdk_name, sdk_version, options, grants)
        with self._lock:
            self._entries[key] = found
            while len(self._entries) > self._max_entries:
                self._entries.popitem(last=False)
        return found


def chunk_scope(
    session: Session, sdk_name: str, sdk_version: str | None, grants: tuple[str, ...] | None
) -> list[ColumnElement[bool]]:
    scope = [Chunk.sdk_name == sdk_name]
    if sdk_version is not None:
        scope.append(Chunk.sdk_version == sdk_version)
    if grants is not None:
        scope.append(grants_condition(session.get_bind().dialect.name, Chunk.access_grants, grants))
    return scope


def _declares(attributes: object, options: Sequence[str]) -> bool:
    declared = attributes.get("options") if isinstance(attributes, dict) else None
    return isinstance(declared, list) and any(option in declared for option in options)


def best_chunk_by_similarity(
    cache: EmbeddingCache, chunks: Sequence[ChunkRef], query_vector: np.ndarray
) -> dict[tuple[str | None, str], tuple[ChunkRef, float]]:
    """Per entity (name, source URL): its chunk most similar to the question, and that cosine.

    Vectors come from the embedding cache (every stored chunk's embedded text is there), so nothing
    is embedded at query time.
    """
    vectors = cache.lookup([chunk.content_hash for chunk in chunks])
    query = query_vector.reshape(-1)
    query = query / (np.linalg.norm(query) or 1.0)
    best: dict[tuple[str | None, str], tuple[ChunkRef, float]] = {}
    for chunk in chunks:
        vector = vectors.get(chunk.content_hash)
        if vector is None:
            continue
        cosine = float(np.dot(vector, query) / (np.linalg.norm(vector) or 1.0))
        key = (chunk.entity_name, chunk.source_url)
        if key not in best or cosine > best[key][1]:
            best[key] = (chunk, cosine)
    return best
