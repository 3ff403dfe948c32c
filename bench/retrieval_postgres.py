"""Retrieval quality with PostgreSQL as the store (its lexical side is tsvector, not FTS5).

Starts a throwaway PostgreSQL (the ``pgserver`` package) and runs the same evaluation as
``librarian eval retrieval`` against it, vectors in embedded Chroma as by default.

    .venv/bin/python -m bench.retrieval_postgres ../shared/datasets/gorilla-torchhub
    LIBRARIAN_HYBRID_VECTOR_WEIGHT=0.0 .venv/bin/python -m bench.retrieval_postgres ...   # lexical only
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from pgserver.postgres_server import get_server

from librarian.config import Settings
from librarian.evaluation.retrieval import evaluate_retrieval


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("dataset", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="librarian-bench-") as scratch:
        server = get_server(Path(scratch) / "pg", cleanup_mode="delete")
        url = server.get_uri().replace("postgresql://", "postgresql+psycopg://", 1)
        result = evaluate_retrieval(args.dataset, Settings.load(), database_url=url)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
