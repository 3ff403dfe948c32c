"""Ingest throughput against the raw embedder, and re-ingest of an unchanged corpus.

Corpus: the AWS CLI's bundled reStructuredText examples of a few services. The raw figure embeds
exactly the texts the pipeline embeds (same chunking, same batch size) with no storage or parsing;
the pipeline figure is a full ``Librarian.ingest`` into a fresh embedded store (SQLite + Chroma).

    .venv/bin/python bench/ingest_throughput.py --service s3api --service ec2
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from librarian.app import Librarian
from librarian.config import Settings
from librarian.embeddings.local import LocalMiniLMEmbedder
from librarian.index.manager import embedding_text
from librarian.ingest.chunking import chunk_document
from librarian.ingest.parsers.registry import parse_document


def corpus_texts(folders: list[Path], max_chars: int) -> list[str]:
    texts = []
    for folder in folders:
        for path in sorted(folder.rglob("*.rst")):
            parsed = parse_document(path.name, path.read_bytes())
            for draft in chunk_document(parsed, max_chars=max_chars):
                texts.append(embedding_text(draft.entity_name, " > ".join(draft.section_path), draft.content))
    return texts


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--service", action="append", help="awscli example folders (default: s3api, ec2)")
    args = parser.parse_args()
    import awscli  # type: ignore[import-untyped]

    examples = Path(awscli.__file__).parent / "examples"
    folders = [examples / name for name in (args.service or ["s3api", "ec2"])]
    settings = Settings(home=Path(tempfile.mkdtemp(prefix="librarian-bench-")))
    embedder = LocalMiniLMEmbedder(settings.embedding_model, batch_size=settings.embedding_batch_size)
    embedder.embed(["warm up"])

    texts = corpus_texts(folders, settings.chunk_max_chars)
    started = time.perf_counter()
    for start in range(0, len(texts), 256):
        embedder.embed(texts[start : start + 256])
    raw_seconds = time.perf_counter() - started

    with Librarian(settings, embedder=embedder) as lib:
        started = time.perf_counter()
        chunks = sum(
            lib.ingest(str(folder), sdk_name="aws-cli", sdk_version="bench").chunks_written
            for folder in folders
        )
        first_seconds = time.perf_counter() - started
        started = time.perf_counter()
        for folder in folders:
            lib.ingest(str(folder), sdk_name="aws-cli", sdk_version="bench")
        again_seconds = time.perf_counter() - started
    files = sum(1 for folder in folders for _ in folder.rglob("*.rst"))
    print(
        json.dumps(
            {
                "files": files,
                "chunks": chunks,
                "texts_embedded_raw": len(texts),
                "raw_embedder_chunks_per_s": round(len(texts) / raw_seconds, 1),
                "pipeline_chunks_per_s": round(chunks / first_seconds, 1),
                "pipeline_vs_raw": round((chunks / first_seconds) / (len(texts) / raw_seconds), 3),
                "first_ingest_s": round(first_seconds, 2),
                "unchanged_reingest_s": round(again_seconds, 3),
                "reingest_speedup": round(first_seconds / again_seconds, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
