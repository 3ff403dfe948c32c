"""Access-filtered vector search: the filter stays inside pgvector's scan, and the retriever lets it.

pgvector servers before 0.8.0 have no iterative scans: an HNSW scan reads ``hnsw.ef_search``
candidates and drops those the filter rejects. ``PgVectorIndex`` therefore reads ``3 x k`` candidates
first, ``10 x k`` when that came back short, and scans exactly when even the widest read could not
do. These tests pin each step against a brute-force answer, and pin that the hybrid retriever hands
the access filter to such an index instead of over-fetching and checking grants itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import pytest
from sqlalchemy import Engine, event

from librarian.index.base import SearchFilter, Vector, VectorMetadata, VectorRecord
from librarian.index.hybrid import ACCESS_OVERFETCH, HybridRetriever
from librarian.index.pgvector import PgVectorIndex, PgVectorStore

DIM = 8
READER = ("public", "org:1")


def grants_for(position: int, every: int) -> tuple[str, ...]:
    """Every ``every``-th record (by distance from the query) is readable by READER."""
    return ("org:1",) if position % every == 0 else ("org:2",)


def records_by_distance(count: int, every: int) -> tuple[Vector, list[VectorRecord]]:
    """A query and ``count`` records whose distance from it grows with their id."""
    query = np.zeros(DIM, dtype=np.float32)
    query[0] = 1.0
    rng = np.random.default_rng(3)
    records = []
    for position in range(count):
        angle = 3.0 * (position + 1) / (count + 1)  # under pi: the distance grows with the angle
        direction = rng.normal(size=DIM - 1)
        direction /= np.linalg.norm(direction)
        vector = np.concatenate([[np.cos(angle)], np.sin(angle) * direction]).astype(np.float32)
        metadata = VectorMetadata(access_grants=grants_for(position, every))
        records.append(VectorRecord(position + 1, vector, metadata))
    return query, records


def nearest_readable(records: Sequence[VectorRecord], k: int) -> list[int]:
    """The brute-force answer: ids of the ``k`` nearest records READER may read."""
    readable = [r.id for r in records if set(r.metadata.access_grants) & set(READER)]
    return readable[:k]  # records are in order of distance


def assert_nearest_readable(hits: list[tuple[int, float]], records: Sequence[VectorRecord], k: int) -> None:
    """``hits`` are the ``k`` nearest readable records, best first (HNSW may swap a rare one)."""
    expected = nearest_readable(records, k)
    found = [chunk_id for chunk_id, _ in hits]
    assert len(found) == len(expected)
    assert set(found) <= {r.id for r in records if set(r.metadata.access_grants) & set(READER)}
    assert len(set(found) & set(expected)) >= 0.9 * len(expected)
    assert [score for _, score in hits] == sorted((score for _, score in hits), reverse=True)


@pytest.fixture
def pg_engine(pgvector_url: str) -> Iterator[Engine]:
    from sqlalchemy import create_engine

    engine = create_engine(pgvector_url.replace("pgvector+postgresql://", "postgresql+psycopg://"))

    @event.listens_for(engine, "connect")
    def hnsw_only(dbapi_connection: Any, _record: Any) -> None:
        # On a few thousand rows the planner would rather sort them all than walk the graph. These
        # tests are about the graph walk, so reading the table looks dear (as it is on a large one)
        # and the grants index is left out; once the exact fallback turns index scans off, reading
        # the table is what remains.
        with dbapi_connection.cursor() as cursor:
            cursor.execute("SET seq_page_cost = 1000")
            cursor.execute("SET enable_bitmapscan = off")
        dbapi_connection.commit()

    yield engine
    engine.dispose()


@pytest.fixture
def pg_index(pg_engine: Engine, request: pytest.FixtureRequest) -> Iterator[PgVectorIndex]:
    store = PgVectorStore(pg_engine)
    name = f"filtered-{request.node.name[:40].replace('[', '-').replace(']', '')}"
    store.drop(name)
    yield store.open(name, DIM)
    store.drop(name)


@pytest.fixture
def statements(pg_engine: Engine) -> Iterator[list[tuple[str, Any]]]:
    """Every SQL statement the engine runs, with its parameters."""
    seen: list[tuple[str, Any]] = []

    def record(_conn: Any, _cursor: Any, statement: str, parameters: Any, _context: Any, _many: Any) -> None:
        seen.append((statement, parameters))

    event.listen(pg_engine, "before_cursor_execute", record)
    yield seen
    event.remove(pg_engine, "before_cursor_execute", record)


def ef_searches(seen: list[tuple[str, Any]]) -> list[str]:
    return [params["ef_search"] for sql, params in seen if "hnsw.ef_search" in sql]


def exact_scans(seen: list[tuple[str, Any]]) -> int:
    return sum("enable_indexscan" in sql for sql, _ in seen)


@pytest.mark.pgvector
def test_a_broad_access_filter_is_answered_by_one_filtered_scan(
    pg_index: PgVectorIndex, statements: list[tuple[str, Any]]
) -> None:
    # Half the records are readable: 3 x k candidates hold k of them.
    query, records = records_by_distance(3000, every=2)
    pg_index.upsert(records)
    statements.clear()

    hits = pg_index.query(query, k=20, where=SearchFilter(access=READER))

    assert_nearest_readable(hits, records, 20)
    assert ef_searches(statements) == ["60"]
    assert exact_scans(statements) == 0


@pytest.mark.pgvector
def test_a_short_first_read_is_repeated_with_ten_times_k(
    pg_index: PgVectorIndex, statements: list[tuple[str, Any]]
) -> None:
    # One record in six is readable: 60 candidates hold 10 of the 20 wanted, 200 hold 33.
    query, records = records_by_distance(3000, every=6)
    pg_index.upsert(records)
    statements.clear()

    hits = pg_index.query(query, k=20, where=SearchFilter(access=READER))

    assert_nearest_readable(hits, records, 20)
    assert ef_searches(statements) == ["60", "200"]
    assert exact_scans(statements) == 0


@pytest.mark.pgvector
def test_a_filter_too_selective_for_any_read_goes_to_the_exact_scan_at_once(
    pg_index: PgVectorIndex, statements: list[tuple[str, Any]]
) -> None:
    # One record in 200: the first 120 candidates hold one, so even 1000 would not hold 40.
    query, records = records_by_distance(2000, every=200)
    pg_index.upsert(records)
    statements.clear()

    hits = pg_index.query(query, k=40, where=SearchFilter(access=READER))

    assert_nearest_readable(hits, records, 40)
    assert ef_searches(statements) == ["120"]
    assert exact_scans(statements) == 1


@pytest.mark.pgvector
@pytest.mark.parametrize(
    ("where", "first_read"),
    [
        (SearchFilter(document_type="runbook"), "200"),
        (SearchFilter(document_type="runbook", access=READER), "600"),
    ],
    ids=["field-filter", "field-and-access-filter"],
)
def test_field_filters_keep_their_wide_first_read(
    pg_index: PgVectorIndex, statements: list[tuple[str, Any]], where: SearchFilter, first_read: str
) -> None:
    # A field filter may be selective, so it reads 10 x k as before; with access, 3 x that (what the
    # retriever's over-fetch read before the access filter went into the scan).
    query, records = records_by_distance(3000, every=2)
    typed = [
        VectorRecord(
            r.id, r.vector, VectorMetadata(document_type="runbook", access_grants=r.metadata.access_grants)
        )
        for r in records
    ]
    pg_index.upsert(typed)
    statements.clear()

    hits = pg_index.query(query, k=20, where=where)

    assert len(hits) == 20
    assert ef_searches(statements) == [first_read]


class FakeIndex:
    """An in-memory vector index recording the filters it was asked with."""

    def __init__(self, records: Sequence[VectorRecord], filters_in_scan: bool) -> None:
        self._records = list(records)
        self.filters_in_scan = filters_in_scan
        self.asked: list[tuple[int, SearchFilter | None]] = []

    @property
    def name(self) -> str:
        return "fake"

    def upsert(self, records: Sequence[VectorRecord]) -> None:
        raise NotImplementedError

    def delete(self, ids: Sequence[int]) -> None:
        raise NotImplementedError

    def count(self) -> int:
        return len(self._records)

    def query(self, vector: Vector, k: int, where: SearchFilter | None = None) -> list[tuple[int, float]]:
        self.asked.append((k, where))
        held = None if where is None or where.access is None else set(where.access)
        passing = [r for r in self._records if held is None or held & set(r.metadata.access_grants)]
        scored = sorted(((r.id, float(np.dot(r.vector, vector))) for r in passing), key=lambda h: -h[1])
        return scored[:k]


class FakeCache:
    """Just enough of EmbeddingCache for vector retrieval: every query embeds to ``vector``."""

    def __init__(self, vector: Vector) -> None:
        self._vector = vector

    def embed_query(self, text: str) -> Any:
        return self._vector.reshape(1, -1)


def retriever(vector: Vector, grants_of: Callable[[Sequence[int]], dict[int, list[str]]]) -> HybridRetriever:
    return HybridRetriever(
        FakeCache(vector),  # type: ignore[arg-type]
        lexical=None,  # type: ignore[arg-type]
        vector_weight=1.0,
        candidates=5,
        grants_of=grants_of,
    )


@pytest.mark.parametrize("filters_in_scan", [True, False], ids=["pgvector-like", "chroma-like"])
def test_the_retriever_over_fetches_only_for_indexes_that_do_not_filter_in_their_scan(
    filters_in_scan: bool,
) -> None:
    query, records = records_by_distance(60, every=3)
    grants = {r.id: list(r.metadata.access_grants) for r in records}
    looked_up: list[int] = []

    def grants_of(ids: Sequence[int]) -> dict[int, list[str]]:
        looked_up.extend(ids)
        return {chunk_id: grants[chunk_id] for chunk_id in ids}

    index = FakeIndex(records, filters_in_scan)
    hybrid = retriever(query, grants_of)
    try:
        hits = hybrid.retrieve(index, "q", 5, SearchFilter(access=READER))
    finally:
        hybrid.close()

    # Either way the answer is the five nearest readable records.
    assert [hit.chunk_id for hit in hits] == nearest_readable(records, 5)
    if filters_in_scan:
        assert index.asked == [(5, SearchFilter(access=READER))]
        assert looked_up == []
    else:
        assert index.asked[0] == (ACCESS_OVERFETCH * 5, None)
        assert len(looked_up) == ACCESS_OVERFETCH * 5
