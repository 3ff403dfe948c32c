"""The contract every vector store backend keeps: embedded Chroma, a Chroma server and pgvector.

Each test in the first part runs once per backend (see ``vector_url`` in conftest.py). The factory
tests at the end need no service except where they say so.
"""

from __future__ import annotations

import socket
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest
from sqlalchemy import create_engine

from librarian.errors import (
    BackendUnavailableError,
    ConflictError,
    InvalidInputError,
    MissingExtraError,
    NotFoundError,
)
from librarian.index.base import SearchFilter, Vector, VectorIndex, VectorMetadata, VectorRecord, VectorStore
from librarian.index.factory import create_vector_store

if TYPE_CHECKING:
    from tests.service_fixtures import ChromaServer

DIM = 8


def unit(*components: float) -> Vector:
    """A unit vector of dimension DIM from its leading components."""
    vector = np.zeros(DIM, dtype=np.float32)
    vector[: len(components)] = components
    return (vector / np.linalg.norm(vector)).astype(np.float32)


def ids_of(hits: list[tuple[int, float]]) -> list[int]:
    return [record_id for record_id, _ in hits]


def assert_best_first(hits: list[tuple[int, float]]) -> None:
    similarities = [similarity for _, similarity in hits]
    assert similarities == sorted(similarities, reverse=True)


# The query direction for the filter tests; every record below lies near it but never on it.
QUERY = unit(1.0)

FILTER_RECORDS = [
    VectorRecord(
        1,
        unit(1.0, 0.3),
        VectorMetadata(
            "alpha", "1.0", "reference", "api", ("python", "async"), datetime(2024, 1, 1, tzinfo=UTC)
        ),
    ),
    VectorRecord(
        2,
        unit(1.0, 0.4),
        VectorMetadata("alpha", "2.0", "guide", "api", ("python",), datetime(2024, 6, 1, tzinfo=UTC)),
    ),
    VectorRecord(
        3,
        unit(1.0, 0.5),
        VectorMetadata("beta", "1.0", "reference", "cli", ("async",), datetime(2025, 1, 1, tzinfo=UTC)),
    ),
    VectorRecord(4, unit(1.0, 0.6), VectorMetadata("beta", "2.0", "runbook")),
    # A naive datetime is taken as UTC by every backend.
    VectorRecord(
        5, unit(1.0, 0.7), VectorMetadata(tags=("python", "async", "beta"), fetched_at=datetime(2023, 1, 1))
    ),
    VectorRecord(6, unit(1.0, 0.8)),
]

FILTER_CASES = {
    "sdk_name": (SearchFilter(sdk_name="alpha"), {1, 2}),
    "sdk_version": (SearchFilter(sdk_version="1.0"), {1, 3}),
    "sdk_name_and_version": (SearchFilter(sdk_name="beta", sdk_version="2.0"), {4}),
    "document_type": (SearchFilter(document_type="reference"), {1, 3}),
    "category": (SearchFilter(category="api"), {1, 2}),
    "one_tag": (SearchFilter(tags=("python",)), {1, 2, 5}),
    "all_tags_must_match": (SearchFilter(tags=("python", "async")), {1, 5}),
    "three_tags": (SearchFilter(tags=("beta", "async", "python")), {5}),
    "fetched_after": (SearchFilter(fetched_after=datetime(2024, 3, 1, tzinfo=UTC)), {2, 3}),
    "fetched_before": (SearchFilter(fetched_before=datetime(2024, 3, 1, tzinfo=UTC)), {1, 5}),
    "fetched_bounds_are_inclusive": (
        SearchFilter(
            fetched_after=datetime(2024, 1, 1, tzinfo=UTC), fetched_before=datetime(2024, 6, 1, tzinfo=UTC)
        ),
        {1, 2},
    ),
    "fetched_after_in_another_zone": (
        # 02:00 at UTC+2 is midnight UTC, so record 2 (fetched at midnight UTC) is included.
        SearchFilter(fetched_after=datetime(2024, 6, 1, 2, 0, tzinfo=timezone(timedelta(hours=2)))),
        {2, 3},
    ),
    "combined": (
        SearchFilter(sdk_name="alpha", tags=("python",), fetched_after=datetime(2024, 3, 1, tzinfo=UTC)),
        {2},
    ),
    "nothing_matches": (SearchFilter(sdk_name="gamma"), set()),
    "unknown_tag": (SearchFilter(tags=("python", "rust")), set()),
}


def distractors(count: int) -> list[VectorRecord]:
    """Records closer to QUERY than any filter record, matching none of the filter cases."""
    rng = np.random.default_rng(7)
    records = []
    for index in range(count):
        vector = QUERY + rng.normal(0.0, 0.02, DIM).astype(np.float32)
        metadata = VectorMetadata("noise", "0", "noise", "noise", ("noise",), None)
        records.append(
            VectorRecord(1000 + index, (vector / np.linalg.norm(vector)).astype(np.float32), metadata)
        )
    return records


@pytest.fixture
def index(store: VectorStore, collection_name: str) -> VectorIndex:
    return store.open(collection_name, DIM)


def test_nearest_first_with_similarity_one_for_the_identical_vector(index: VectorIndex) -> None:
    index.upsert(
        [VectorRecord(1, unit(1.0)), VectorRecord(2, unit(0.0, 1.0)), VectorRecord(3, unit(1.0, 1.0))]
    )

    hits = index.query(unit(1.0), k=3)

    assert ids_of(hits) == [1, 3, 2]
    assert hits[0][1] == pytest.approx(1.0, abs=1e-4)
    assert_best_first(hits)


def test_similarity_is_cosine_similarity(index: VectorIndex) -> None:
    index.upsert(
        [VectorRecord(1, unit(1.0, 1.0)), VectorRecord(2, unit(0.0, 1.0)), VectorRecord(3, unit(-1.0))]
    )

    similarities = dict(index.query(unit(1.0), k=3))

    assert similarities[1] == pytest.approx(2**-0.5, abs=1e-4)
    assert similarities[2] == pytest.approx(0.0, abs=1e-4)
    assert similarities[3] == pytest.approx(-1.0, abs=1e-4)


def test_k_limits_the_results_and_may_exceed_the_collection(index: VectorIndex) -> None:
    index.upsert([VectorRecord(i, unit(1.0, i / 10)) for i in range(1, 6)])

    assert ids_of(index.query(unit(1.0), k=2)) == [1, 2]
    assert sorted(ids_of(index.query(unit(1.0), k=50))) == [1, 2, 3, 4, 5]


def test_query_with_k_below_one_is_invalid(index: VectorIndex) -> None:
    with pytest.raises(InvalidInputError):
        index.query(unit(1.0), k=0)


def test_empty_collection_returns_nothing(index: VectorIndex) -> None:
    assert index.query(unit(1.0), k=5) == []
    assert index.query(unit(1.0), k=5, where=SearchFilter(sdk_name="alpha")) == []


@pytest.mark.parametrize("padding", [0, 150], ids=["small", "selective"])
@pytest.mark.parametrize("case", list(FILTER_CASES))
def test_filter(index: VectorIndex, case: str, padding: int) -> None:
    # With padding, the nearest 150 records match no filter, so a backend that filters only the first
    # candidates its approximate index returns would come back empty.
    where, expected = FILTER_CASES[case]
    index.upsert(FILTER_RECORDS + distractors(padding))

    hits = index.query(QUERY, k=10, where=where)

    assert set(ids_of(hits)) == expected
    assert_best_first(hits)


def test_empty_filter_filters_nothing(index: VectorIndex) -> None:
    index.upsert(FILTER_RECORDS)

    filtered = index.query(QUERY, k=10, where=SearchFilter())

    assert ids_of(filtered) == ids_of(index.query(QUERY, k=10))
    assert len(filtered) == len(FILTER_RECORDS)


def test_filtered_query_returns_the_nearest_matches_first(index: VectorIndex) -> None:
    index.upsert(FILTER_RECORDS + distractors(150))

    hits = index.query(QUERY, k=2, where=SearchFilter(tags=("python",)))

    # Records 1, 2 and 5 carry the tag; 1 and 2 lie nearest to the query.
    assert ids_of(hits) == [1, 2]


def test_delete_removes_and_ignores_unknown_ids(index: VectorIndex) -> None:
    index.upsert(
        [VectorRecord(1, unit(1.0)), VectorRecord(2, unit(1.0, 0.1)), VectorRecord(3, unit(0.0, 1.0))]
    )

    index.delete([2, 999])

    assert index.count() == 2
    assert 2 not in ids_of(index.query(unit(1.0, 0.1), k=3))
    index.delete([])
    assert index.count() == 2


def test_upsert_replaces_vector_and_metadata(index: VectorIndex) -> None:
    old = VectorMetadata(
        "alpha", "1.0", "reference", "api", ("python", "async"), datetime(2024, 1, 1, tzinfo=UTC)
    )
    index.upsert([VectorRecord(1, unit(1.0), old), VectorRecord(2, unit(0.0, 1.0), old)])

    index.upsert([VectorRecord(1, unit(0.0, 0.0, 1.0), VectorMetadata("beta", tags=("rust",)))])

    assert index.count() == 2
    hits = index.query(unit(0.0, 0.0, 1.0), k=1)
    assert ids_of(hits) == [1]
    assert hits[0][1] == pytest.approx(1.0, abs=1e-4)
    # Nothing of the old metadata may survive: not a field, not a tag, not the fetch time.
    assert ids_of(index.query(unit(1.0), k=5, where=SearchFilter(sdk_name="alpha"))) == [2]
    assert ids_of(index.query(unit(1.0), k=5, where=SearchFilter(tags=("python",)))) == [2]
    assert ids_of(index.query(unit(1.0), k=5, where=SearchFilter(document_type="reference"))) == [2]
    assert ids_of(
        index.query(unit(1.0), k=5, where=SearchFilter(fetched_before=datetime(2025, 1, 1, tzinfo=UTC)))
    ) == [2]
    assert ids_of(index.query(unit(1.0), k=5, where=SearchFilter(sdk_name="beta", tags=("rust",)))) == [1]


def test_upsert_without_metadata_clears_the_old_metadata(index: VectorIndex) -> None:
    index.upsert([VectorRecord(1, unit(1.0), VectorMetadata("alpha", tags=("python",)))])

    index.upsert([VectorRecord(1, unit(1.0))])

    assert index.query(unit(1.0), k=5, where=SearchFilter(tags=("python",))) == []
    assert ids_of(index.query(unit(1.0), k=5)) == [1]


def test_duplicate_ids_in_one_upsert_keep_the_last(index: VectorIndex) -> None:
    index.upsert([VectorRecord(1, unit(1.0)), VectorRecord(1, unit(0.0, 1.0))])

    assert index.count() == 1
    assert index.query(unit(0.0, 1.0), k=1)[0][1] == pytest.approx(1.0, abs=1e-4)


def test_count_follows_upserts_and_deletes(index: VectorIndex) -> None:
    assert index.count() == 0
    index.upsert([VectorRecord(i, unit(1.0, i)) for i in range(10)])
    assert index.count() == 10
    index.upsert([VectorRecord(i, unit(1.0, -i)) for i in range(5, 15)])
    assert index.count() == 15
    index.delete(list(range(3)))
    assert index.count() == 12


@pytest.mark.slow
def test_upsert_larger_than_one_backend_batch(index: VectorIndex) -> None:
    # Chroma refuses calls above its max batch size (5461 on a default build).
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(6000, DIM)).astype(np.float32)
    index.upsert([VectorRecord(i, vectors[i], VectorMetadata(sdk_name=f"s{i % 3}")) for i in range(6000)])

    assert index.count() == 6000
    assert index.query(vectors[5999], k=1)[0][0] == 5999
    index.delete(list(range(6000)))
    assert index.count() == 0


def test_collections_are_independent(store: VectorStore, collection_name: str) -> None:
    other_name = f"{collection_name}-other"
    first = store.open(collection_name, DIM)
    second = store.open(other_name, DIM)
    try:
        first.upsert([VectorRecord(1, unit(1.0))])
        second.upsert([VectorRecord(1, unit(0.0, 1.0)), VectorRecord(2, unit(1.0))])

        assert first.count() == 1
        assert second.count() == 2
        assert first.name == collection_name
        assert second.name == other_name
        assert first.query(unit(0.0, 1.0), k=1)[0][1] == pytest.approx(0.0, abs=1e-4)
    finally:
        store.drop(other_name)


def test_data_persists_across_store_instances(
    open_store: Callable[[], VectorStore], collection_name: str
) -> None:
    first = open_store()
    first.open(collection_name, DIM).upsert(
        [
            VectorRecord(1, unit(1.0), VectorMetadata("alpha", tags=("python",))),
            VectorRecord(2, unit(0.0, 1.0)),
        ]
    )
    first.close()

    second = open_store()
    assert second.exists(collection_name)
    reopened = second.open(collection_name, DIM)
    assert reopened.count() == 2
    assert ids_of(reopened.query(unit(1.0), k=2, where=SearchFilter(tags=("python",)))) == [1]


def test_exists_and_drop(store: VectorStore, collection_name: str) -> None:
    assert not store.exists(collection_name)
    store.open(collection_name, DIM).upsert([VectorRecord(1, unit(1.0))])
    assert store.exists(collection_name)

    store.drop(collection_name)

    assert not store.exists(collection_name)
    store.drop(collection_name)  # a missing collection is ignored
    assert store.open(collection_name, DIM).count() == 0


def test_index_of_a_dropped_collection_reports_not_found(store: VectorStore, collection_name: str) -> None:
    index = store.open(collection_name, DIM)
    index.upsert([VectorRecord(1, unit(1.0))])
    store.drop(collection_name)

    with pytest.raises(NotFoundError):
        index.query(unit(1.0), k=1)


def test_open_with_another_dimension_conflicts(store: VectorStore, collection_name: str) -> None:
    store.open(collection_name, DIM).upsert([VectorRecord(1, unit(1.0))])

    with pytest.raises(ConflictError, match="dimension"):
        store.open(collection_name, DIM + 1)


def test_vectors_of_the_wrong_dimension_are_invalid(index: VectorIndex) -> None:
    with pytest.raises(InvalidInputError, match="dimension"):
        index.upsert([VectorRecord(1, np.ones(DIM + 1, dtype=np.float32))])
    with pytest.raises(InvalidInputError, match="dimension"):
        index.query(np.ones(DIM - 1, dtype=np.float32), k=1)
    assert index.count() == 0


@pytest.mark.parametrize("name", ["ab", "-leading-dash", "trailing.", "has space", "a..b", "x" * 513])
def test_invalid_collection_names_are_rejected(store: VectorStore, name: str) -> None:
    with pytest.raises(InvalidInputError, match="collection name"):
        store.open(name, DIM)


def test_names_differing_only_in_case_or_punctuation_are_distinct(
    store: VectorStore, collection_name: str
) -> None:
    # pgvector maps names to table names; the mapping must not merge different names.
    variants = [f"{collection_name}-x", f"{collection_name}_x", f"{collection_name}-X"]
    try:
        for number, name in enumerate(variants, start=1):
            store.open(name, DIM).upsert([VectorRecord(number, unit(1.0))])
        for number, name in enumerate(variants, start=1):
            assert ids_of(store.open(name, DIM).query(unit(1.0), k=5)) == [number]
    finally:
        for name in variants:
            store.drop(name)


# --- the factory ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url", ["sqlite:///x.db", "chroma", "chroma+grpc://host:1", "pgvector+mysql://u@h/db", "pgvector://x"]
)
def test_unknown_url_forms_are_invalid(url: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        create_vector_store(url)
    assert "chroma+http://host:port" in str(caught.value) or "psycopg" in str(caught.value)


def test_chroma_url_without_a_path_is_invalid() -> None:
    with pytest.raises(InvalidInputError, match="directory"):
        create_vector_store("chroma://")


def test_relative_chroma_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    store = create_vector_store("chroma://relative/chroma")
    try:
        store.open("relative-test", DIM).upsert([VectorRecord(1, unit(1.0))])
    finally:
        store.close()
    assert (tmp_path / "relative" / "chroma" / "chroma.sqlite3").exists()


def test_unreachable_chroma_server_is_unavailable() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # bound but not listening: connections are refused

        with pytest.raises(BackendUnavailableError, match="Chroma server"):
            create_vector_store(f"chroma+http://127.0.0.1:{port}")


@pytest.mark.chroma_server
def test_chroma_server_that_went_away_is_unavailable(
    chroma_server_launcher: Callable[[Path], AbstractContextManager[ChromaServer]], tmp_path: Path
) -> None:
    with chroma_server_launcher(tmp_path) as server:
        store = create_vector_store(server.url)
        index = store.open("going-away", DIM)
        index.upsert([VectorRecord(1, unit(1.0))])
        server.process.terminate()
        server.process.wait(timeout=15)

        with pytest.raises(BackendUnavailableError):
            index.query(unit(1.0), k=1)
        store.close()


def test_unreachable_postgresql_is_unavailable() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        store = create_vector_store(f"pgvector+postgresql+psycopg://nobody@127.0.0.1:{port}/nowhere")
        try:
            with pytest.raises(BackendUnavailableError, match=r"127\.0\.0\.1"):
                store.open("unreachable", DIM)
        finally:
            store.close()


@pytest.mark.postgres
def test_postgresql_without_the_vector_extension_is_named(postgres_without_pgvector_url: str) -> None:
    store = create_vector_store(postgres_without_pgvector_url)
    try:
        with pytest.raises(BackendUnavailableError, match="'vector' extension") as caught:
            store.open("needs-pgvector", DIM)
        assert caught.value.hint is not None and "pgvector" in caught.value.hint
    finally:
        store.close()


def test_pgvector_without_a_postgresql_engine_is_invalid() -> None:
    with pytest.raises(InvalidInputError, match="PostgreSQL"):
        create_vector_store("pgvector")
    sqlite = create_engine("sqlite://")
    try:
        with pytest.raises(InvalidInputError, match="sqlite"):
            create_vector_store("pgvector", engine=sqlite)
    finally:
        sqlite.dispose()


@pytest.mark.pgvector
def test_pgvector_in_the_given_engine(pgvector_url: str) -> None:
    engine = create_engine(pgvector_url.replace("pgvector+postgresql://", "postgresql+psycopg://"))
    try:
        store = create_vector_store("pgvector", engine=engine)
        index = store.open("shared-engine", DIM)
        index.upsert([VectorRecord(1, unit(1.0))])
        assert index.count() == 1
        store.drop("shared-engine")
        store.close()
        # The store does not own the engine, so closing it leaves the engine usable.
        with engine.connect():
            pass
    finally:
        engine.dispose()


def test_missing_pgvector_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    # A None entry in sys.modules makes the import fail as if the package were not installed.
    for module in [name for name in sys.modules if name == "pgvector" or name.startswith("pgvector.")]:
        monkeypatch.setitem(sys.modules, module, None)
    monkeypatch.setitem(sys.modules, "pgvector", None)
    monkeypatch.delitem(sys.modules, "librarian.index.pgvector", raising=False)

    with pytest.raises(MissingExtraError, match=r"librarian\[postgres\]"):
        create_vector_store("pgvector+postgresql+psycopg://user@127.0.0.1:1/db")
