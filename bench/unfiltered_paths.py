"""Unfiltered search and research's SDK lookup at scale, the new path against the old, alternating.

Two changes made the web UI's unfiltered search and research faster at 100,000 chunks; this puts
each beside what it replaced, in one process, alternating rounds so a busy moment hits both alike:

- keyword candidates from the query's selective terms (``Fts5LexicalIndex``'s budget) against every
  term (the budget set beyond the table's size): ``lib.search`` with no filter;
- research's SDK lookup walking the ``(sdk_name, sdk_version)`` index (``find_sdk``) against
  grouping every chunk (``indexed_sdks`` + ``resolve_sdk``).

The store is the synthetic one of ``bench/search_latency.py`` (built once into ``--home``, reused).

    HF_HUB_OFFLINE=1 PYTHONPATH=src:. .venv/bin/python -m bench.unfiltered_paths --home /tmp/s100k/home
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from sqlalchemy.orm import Session

from bench.search_latency import QUERY_WORDS, SDKS, build, wait_until_idle
from librarian.app import Librarian
from librarian.config import Settings
from librarian.index.lexical import MAX_ESTIMATED_MATCHES, Fts5LexicalIndex
from librarian.research.sdks import find_sdk, indexed_sdks, resolve_sdk


def timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return (time.perf_counter() - started) * 1000


def grouped_lookup(session: Session, sdk: str, grants: tuple[str, ...] | None) -> object:
    """Research's SDK lookup before: group every chunk, then resolve the name among the groups."""
    return resolve_sdk(sdk, indexed_sdks(session, grants))


def summary(label: str, times: list[float]) -> str:
    times = sorted(times)
    p95 = times[int(0.95 * (len(times) - 1))]
    return f"{label:>44}: p50 {statistics.median(times):7.1f} ms, p95 {p95:7.1f} ms ({len(times)})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, required=True, help="built on first use, then reused")
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--per-round", type=int, default=20)
    args = parser.parse_args()
    fresh = not args.home.exists()
    with Librarian(Settings(home=args.home)) as lib:
        if fresh:
            print(f"built {args.chunks} chunks in {build(lib, args.chunks):.0f} s")
            wait_until_idle()
        lib.search("warm up the model")
        lexical = lib.retriever._lexical
        assert isinstance(lexical, Fts5LexicalIndex), "this benchmark measures the SQLite store"
        rng = random.Random(9)
        times: dict[str, list[float]] = {}
        grants = lib.default_principal.grants
        for round_number in range(args.rounds):
            for label, budget in (
                ("search, every term", 10**9),
                ("search, selective terms", MAX_ESTIMATED_MATCHES),
            ):
                lexical._budget = budget
                for number in range(args.per_round):
                    words = " ".join(rng.choice(QUERY_WORDS) for _ in range(3))
                    query = f"how do I {words} {round_number}-{number}-{budget}"
                    times.setdefault(label, []).append(timed(partial(lib.search, query, top_k=10)))
            for _ in range(args.per_round):
                sdk = rng.choice(SDKS)
                with lib.sessions() as session:
                    old = timed(partial(grouped_lookup, session, sdk, grants))
                    new = timed(partial(find_sdk, session, sdk, grants))
                times.setdefault("SDK lookup, grouping every chunk", []).append(old)
                times.setdefault("SDK lookup, walking the index", []).append(new)
    for label, values in times.items():
        print(summary(label, values))


if __name__ == "__main__":
    main()
