"""``research_api_usage`` latency over the AWS CLI s3 + s3api help trees plus synthetic chunks.

Ingests the real help of the installed ``aws`` (``--scope s3 --scope s3api``) and N synthetic chunks
of 100 other SDK versions (see search_latency.py), then times research questions with error texts,
warm, one at a time, every question text unique (no LLM).

    .venv/bin/python -m bench.research_latency --chunks 50000 --queries 200
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.search_latency import build, wait_until_idle
from librarian.app import Librarian
from librarian.config import Settings
from librarian.research.service import research_api_usage

QUESTIONS = [
    ("upload a file to a bucket with tags", "Unknown options: --tagging,compliance=strict"),
    ("copy an object between buckets", "Unknown options: --copy-source"),
    ("list the objects in a bucket", "argument --max-keys: invalid int value"),
    ("delete a bucket policy", "Unknown options: --policy"),
    ("enable versioning on a bucket", "Unknown options: --versioning"),
]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--chunks", type=int, default=50_000)
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    aws = str(Path(sys.executable).with_name("aws"))
    with tempfile.TemporaryDirectory(prefix="librarian-bench-") as home:
        with Librarian(Settings(home=Path(home))) as lib:
            started = time.perf_counter()
            report = lib.ingest_cli(aws, sdk_name="aws-cli", scopes=("s3", "s3api"))
            walk_seconds = time.perf_counter() - started
            build(lib, args.chunks)
            wait_until_idle()
        with Librarian(Settings(home=Path(home))) as lib:
            research_api_usage(lib, "aws", "warm up", error_text="Unknown options: --x")
            rng = random.Random(5)
            latencies = []
            for number in range(args.queries):
                question, error = rng.choice(QUESTIONS)
                started = time.perf_counter()
                research_api_usage(lib, "aws", f"{question} ({number})", error_text=error)
                latencies.append((time.perf_counter() - started) * 1000)
            total = lib.stats()["chunks"]
    latencies.sort()
    print(
        json.dumps(
            {
                "aws_commands": report.files_seen,
                "aws_chunks": report.chunks_written,
                "ingest_cli_seconds": round(walk_seconds, 1),
                "total_chunks": total,
                "p50_ms": round(statistics.median(latencies), 2),
                "p95_ms": round(latencies[int(0.95 * (len(latencies) - 1))], 2),
            }
        )
    )


if __name__ == "__main__":
    main()
