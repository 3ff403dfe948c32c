"""Changing the embedding model: refused until `reindex`, which rolls the new model out."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from librarian.app import Librarian
from librarian.config import Settings
from librarian.embeddings.base import Matrix, normalize_rows
from librarian.embeddings.local import LocalMiniLMEmbedder
from librarian.errors import ConflictError
from librarian.index.base import VectorIndex


class HashingEmbedder:
    """A second, different embedding model (bag of hashed words), to stand for a model change."""

    model_version = "hashing-words-v1"
    dimension = 64

    def embed(self, texts: Sequence[str]) -> Matrix:
        matrix = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().split():
                matrix[row, int(hashlib.md5(word.encode()).hexdigest(), 16) % self.dimension] += 1.0
        return normalize_rows(matrix)


def test_a_new_model_needs_reindex_and_then_serves(tmp_path: Path, embedder: LocalMiniLMEmbedder) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text(
        "# rotate-keys\n\nRotate access keys.\n\n# delete-bucket\n\nRemove a bucket.\n"
    )
    settings = Settings(home=tmp_path / "home")
    with Librarian(settings, embedder=embedder) as lib:
        lib.ingest(str(docs))

    with Librarian(settings, embedder=HashingEmbedder()) as lib:
        with pytest.raises(ConflictError, match="librarian reindex"):
            lib.ingest(str(docs))
        result = lib.reindex()
        found = lib.search("delete bucket", top_k=1)

    assert result["model_version"] == "hashing-words-v1" and result["chunks"] == 2
    assert found[0].entity_name == "delete-bucket"
    assert found[0].embedding_model_version == "hashing-words-v1"


def test_searches_keep_answering_while_reindex_builds(tmp_path: Path, embedder: LocalMiniLMEmbedder) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for number in range(60):
        (docs / f"cmd{number}.md").write_text(
            f"# command-{number}\n\nRotates key number {number} of the vault.\n"
        )
    with Librarian(Settings(home=tmp_path / "home"), embedder=embedder) as lib:
        lib.ingest(str(docs))
        old_collection = lib.stats()["vector_index"]["collection"]
        answers: list[int] = []
        worker = threading.Thread(target=lib.reindex)
        worker.start()
        # The first search starts with the rebuild; more follow for as long as it runs.
        answers.append(len(lib.search("rotate the vault key", top_k=3)))
        while worker.is_alive():
            answers.append(len(lib.search("rotate the vault key", top_k=3)))
        worker.join()
        answers.append(len(lib.search("rotate the vault key", top_k=3)))
        new_collection = lib.stats()["vector_index"]["collection"]

    assert len(answers) >= 2 and all(count == 3 for count in answers)
    assert new_collection != old_collection


def test_a_search_holding_the_collection_a_rebuild_drops_answers_from_the_new_one(
    tmp_path: Path, embedder: LocalMiniLMEmbedder
) -> None:
    """The race the test above can only sometimes hit, made certain: the switch and the drop happen
    between a search opening the serving collection and querying it."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# rotate-keys\n\nRotate access keys.\n")
    with Librarian(Settings(home=tmp_path / "home"), embedder=embedder) as lib:
        lib.ingest(str(docs))
        opened: list[str] = []

        def count_after_a_rebuild(index: VectorIndex) -> int:
            opened.append(index.name)
            if len(opened) == 1:
                lib.vectors.rebuild()  # switches to a new collection and drops the one held here
            return index.count()

        assert lib.vectors.read(count_after_a_rebuild) == 1
    assert len(opened) == 2 and opened[0] != opened[1]
