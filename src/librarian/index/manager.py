"""Keeps the derived vector index in step with the source of truth.

Chunk changes reach the vector index through the transactional outbox (``vector_outbox``): the
ingest pipeline writes an outbox entry in the same transaction as each chunk change, and
:meth:`VectorIndexManager.apply_outbox` applies pending entries in order. A crash between the two
steps only delays the index update to the next run.

:meth:`VectorIndexManager.rebuild` builds a fresh collection from the relational store (the way an
embedding-model change is rolled out) and switches searches to it only when it is complete.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session, sessionmaker

from librarian.embeddings.cache import EmbeddingCache
from librarian.errors import ConflictError, NotFoundError
from librarian.index.base import VectorIndex, VectorMetadata, VectorRecord, VectorStore
from librarian.storage.models import Chunk, IndexState, VectorOutboxEntry, utcnow

_T = TypeVar("_T")

STATE_NAME = "chunks"
_BATCH = 512

Progress = Callable[[int, int], None]


def embedding_text(entity_name: str | None, section_path: str, content: str) -> str:
    """The text embedded for a chunk: its heading context, then its content."""
    heading = section_path or entity_name or ""
    return f"{heading}\n{content}" if heading else content


def chunk_metadata(chunk: Chunk) -> VectorMetadata:
    """The filterable fields of ``chunk`` as the vector index stores them."""
    return VectorMetadata(
        sdk_name=chunk.sdk_name,
        sdk_version=chunk.sdk_version,
        document_type=chunk.document_type,
        category=chunk.category,
        tags=tuple(chunk.tags or ()),
        fetched_at=chunk.last_fetched_at,
        access_grants=tuple(chunk.access_grants or ()),
    )


class VectorIndexManager:
    """Owns which collection serves searches and every write to the vector index."""

    def __init__(
        self,
        store: VectorStore,
        cache: EmbeddingCache,
        sessions: sessionmaker[Session],
        namespace: str = "librarian",
    ) -> None:
        self._store = store
        self._namespace = namespace
        self._cache = cache
        self._sessions = sessions
        self._active: VectorIndex | None = None
        self._active_name: str | None = None

    def active(self) -> VectorIndex:
        """The collection searches read, created for the current model on first use."""
        with self._sessions.begin() as session:
            state = session.get(IndexState, STATE_NAME)
            if state is None:
                state = IndexState(
                    name=STATE_NAME,
                    collection=self._collection_name(1),
                    model_version=self._cache.embedder.model_version,
                    dimension=self._cache.embedder.dimension,
                    chunk_count=0,
                    build_seconds=0.0,
                )
                session.add(state)
            if state.model_version != self._cache.embedder.model_version:
                raise ConflictError(
                    f"the vector index was built with {state.model_version} but the configured embedding "
                    f"model is {self._cache.embedder.model_version}",
                    hint="run `librarian reindex` to rebuild the index with the configured model",
                )
            name, dimension = state.collection, state.dimension
        if self._active is None or self._active_name != name:
            self._active = self._store.open(name, dimension)
            self._active_name = name
        return self._active

    def read(self, reader: Callable[[VectorIndex], _T]) -> _T:
        """``reader`` applied to the serving collection, even across a rebuild's switch.

        A search that opened the old collection just before :meth:`rebuild` switched and dropped it
        would fail with "collection does not exist"; it is run once more on the new collection, so
        searches keep answering while an index is rebuilt.
        """
        index = self.active()
        try:
            return reader(index)
        except NotFoundError:
            current = self.active()
            if current is index:
                raise
            return reader(current)

    def active_model_version(self) -> str | None:
        """The embedding model of the serving collection, or None before the first ingest."""
        with self._sessions() as session:
            state = session.get(IndexState, STATE_NAME)
            return state.model_version if state else None

    def apply_outbox(self) -> int:
        """Apply every pending outbox entry to the active collection; returns how many were applied."""
        index = self.active()
        applied = 0
        while True:
            with self._sessions() as session:
                entries = session.execute(
                    select(VectorOutboxEntry.id, VectorOutboxEntry.chunk_id, VectorOutboxEntry.operation)
                    .order_by(VectorOutboxEntry.id)
                    .limit(_BATCH)
                ).all()
            if not entries:
                return applied
            last_operation = {chunk_id: operation for _, chunk_id, operation in entries}
            upserts = [chunk_id for chunk_id, op in last_operation.items() if op == "upsert"]
            deletes = [chunk_id for chunk_id, op in last_operation.items() if op == "delete"]
            missing = self._upsert(index, upserts)
            if deletes or missing:
                index.delete([*deletes, *missing])
            with self._sessions.begin() as session:
                # Only the entries read: on PostgreSQL ids are not committed in order, so an id range
                # could swallow an entry that committed after the read.
                read = [entry[0] for entry in entries]
                session.execute(delete(VectorOutboxEntry).where(VectorOutboxEntry.id.in_(read)))
            applied += len(entries)

    def _upsert(self, index: VectorIndex, chunk_ids: Sequence[int]) -> list[int]:
        """Upsert the vectors of ``chunk_ids``; returns the ids whose chunk no longer exists."""
        if not chunk_ids:
            return []
        with self._sessions() as session:
            chunks = list(session.scalars(select(Chunk).where(Chunk.id.in_(list(chunk_ids)))))
        texts = [embedding_text(c.entity_name, c.section_path, c.content) for c in chunks]
        vectors = self._cache.embed_documents(texts)
        index.upsert(
            [
                VectorRecord(chunk.id, vector, chunk_metadata(chunk))
                for chunk, vector in zip(chunks, vectors, strict=True)
            ]
        )
        found = {chunk.id for chunk in chunks}
        return [chunk_id for chunk_id in chunk_ids if chunk_id not in found]

    def rebuild(self, progress: Progress | None = None) -> dict[str, object]:
        """Build a new collection from every stored chunk with the current embedder, then switch.

        Searches keep reading the old collection until the switch, which happens in one transaction
        together with updating every chunk's ``embedding_model_version``; the old collection is then
        dropped. Chunks written during the build are caught up before the switch.
        """
        started = time.perf_counter()
        model = self._cache.embedder.model_version
        with self._sessions() as session:
            state = session.get(IndexState, STATE_NAME)
            generation = _generation(state.collection) + 1 if state else 1
            total = session.scalar(select(func.count()).select_from(Chunk)) or 0
        name = self._collection_name(generation)
        self._store.drop(name)  # a half-built collection left by an interrupted rebuild
        target = self._store.open(name, self._cache.embedder.dimension)
        done, last_id = 0, 0
        indexed: set[int] = set()
        while True:
            with self._sessions() as session:
                ids = list(
                    session.scalars(
                        select(Chunk.id).where(Chunk.id > last_id).order_by(Chunk.id).limit(_BATCH)
                    )
                )
            if not ids:
                break
            missing = self._upsert(target, ids)
            indexed.update(set(ids) - set(missing))
            last_id = ids[-1]
            done += len(ids)
            if progress:
                progress(done, max(total, done))
        with self._sessions.begin() as session:
            # Catch up: chunks deleted during the build must not linger in the new collection.
            still_there: set[int] = set()
            ordered = sorted(indexed)
            for start in range(0, len(ordered), 500):
                batch = ordered[start : start + 500]
                still_there.update(session.scalars(select(Chunk.id).where(Chunk.id.in_(batch))))
            gone = sorted(indexed - still_there)
            if gone:
                target.delete(gone)
            state = session.get(IndexState, STATE_NAME)
            old_collection = state.collection if state else None
            if state is None:
                state = IndexState(name=STATE_NAME)
                session.add(state)
            state.collection = name
            state.model_version = model
            state.dimension = self._cache.embedder.dimension
            state.chunk_count = target.count()
            state.built_at = utcnow()
            state.build_seconds = time.perf_counter() - started
            session.execute(update(Chunk).values(embedding_model_version=model))
            count = state.chunk_count
        # Outbox entries written during the build refer to chunks the new collection may lack.
        self._active, self._active_name = target, name
        self.apply_outbox()
        if old_collection and old_collection != name:
            self._store.drop(old_collection)
        return {
            "collection": name,
            "model_version": model,
            "chunks": count,
            "seconds": round(time.perf_counter() - started, 3),
        }

    def _collection_name(self, generation: int) -> str:
        slug = re.sub(r"[^a-z0-9]+", "-", self._cache.embedder.model_version.lower()).strip("-")[:40]
        return f"{self._namespace}-{slug}-g{generation}"


def _generation(collection: str) -> int:
    match = re.search(r"-g(\d+)$", collection)
    return int(match.group(1)) if match else 0
