"""``research_api_usage`` latency over the AWS CLI s3 + s3api help trees plus synthetic chunks.

Ingests the real help of the installed ``aws`` (``--scope s3 --scope s3api``) and N synthetic chunks
of 100 other SDK versions (see search_latency.py), then times research questions with error texts,
warm, one at a time, every question text unique (no LLM).

    .venv/bin/python -m bench.research_latency --chunks 50000 --queries 200

``--compare-coverage`` alternates each question with and without the coverage check
(``research/coverage.py``) in the same process, and adds questions whose error quotes a command line,
some of a group that is not indexed, so every lookup the check makes is timed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from bench.search_latency import build, wait_until_idle
from librarian.app import Librarian
from librarian.config import Settings
from librarian.research import service
from librarian.research.coverage import Coverage
from librarian.research.service import research_api_usage

QUESTIONS = [
    ("upload a file to a bucket with tags", "Unknown options: --tagging,compliance=strict"),
    ("copy an object between buckets", "Unknown options: --copy-source"),
    ("list the objects in a bucket", "argument --max-keys: invalid int value"),
    ("delete a bucket policy", "Unknown options: --policy"),
    ("enable versioning on a bucket", "Unknown options: --versioning"),
]

# Errors quoting the failed command line: the coverage check looks the subcommand up.
COMMAND_LINE_QUESTIONS = [
    ("put an item into a table", "$ aws dynamodb put-item --table-name t\nUnknown options: --table-name"),
    ("upload a file with tags", "$ aws s3 cp f s3://b/f --tagging env=prod\nUnknown options: --tagging"),
    ("copy an object", "$ aws s3api copy-object --copy-source a/b --bucket c --key d\nAccess Denied"),
]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--chunks", type=int, default=50_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--compare-coverage", action="store_true", help="time with and without coverage")
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
            questions = QUESTIONS + (COMMAND_LINE_QUESTIONS if args.compare_coverage else [])
            variants = ["with_coverage", "without_coverage"] if args.compare_coverage else ["with_coverage"]
            latencies: dict[str, list[float]] = {variant: [] for variant in variants}
            for number in range(args.queries):
                question, error = rng.choice(questions)
                for variant in variants:
                    with _coverage_off() if variant == "without_coverage" else contextlib.nullcontext():
                        started = time.perf_counter()
                        research_api_usage(lib, "aws", f"{question} ({number} {variant})", error_text=error)
                        latencies[variant].append((time.perf_counter() - started) * 1000)
            total = lib.stats()["chunks"]
    result: dict[str, object] = {
        "aws_commands": report.files_seen,
        "aws_chunks": report.chunks_written,
        "ingest_cli_seconds": round(walk_seconds, 1),
        "total_chunks": total,
    }
    for variant, times in latencies.items():
        times.sort()
        prefix = "" if variant == "with_coverage" and not args.compare_coverage else f"{variant}_"
        result[f"{prefix}p50_ms"] = round(statistics.median(times), 2)
        result[f"{prefix}p95_ms"] = round(times[int(0.95 * (len(times) - 1))], 2)
    print(json.dumps(result))


@contextlib.contextmanager
def _coverage_off() -> Iterator[None]:
    """Research as it was before the coverage check: nothing the index lacks is looked up."""
    original = service._coverage
    service._coverage = lambda *args, **kwargs: Coverage()
    try:
        yield
    finally:
        service._coverage = original


if __name__ == "__main__":
    main()
