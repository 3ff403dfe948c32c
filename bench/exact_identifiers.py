"""Exact identifiers first (issue 17): search for 40 tokens that each occur in one file of a corpus,
and count how often that file's page comes first, with and without the exact-identifier lookup, side
by side in one run, with the latency of both (query embeddings cached, so the difference is the
lookup's own cost).

The corpus is this repository's documentation (``docs/*.md`` and ``README.md``, real prose with real
identifiers) unless ``--corpus`` names another folder of Markdown; the cases are chosen by a hash of
the token (:mod:`librarian.evaluation.exact_tokens`), never by looking at results.

``--dataset`` also runs ``librarian eval retrieval``'s measurement on a BEIR dataset with and
without the lookup, to show it costs nothing on natural-language questions.

    .venv/bin/python -m bench.exact_identifiers
    .venv/bin/python -m bench.exact_identifiers --corpus ../shared/some-docs --cases 40
    .venv/bin/python -m bench.exact_identifiers --dataset ../shared/datasets/gorilla-torchhub \
        --dataset ../shared/datasets/metatool
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from librarian.app import Librarian
from librarian.config import Settings
from librarian.evaluation.exact_tokens import first_hits, unique_tokens
from librarian.evaluation.retrieval import evaluate_retrieval

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, help="a folder of Markdown (default: this repository's docs)")
    parser.add_argument("--cases", type=int, default=40)
    parser.add_argument("--dataset", type=Path, action="append", default=[], help="a BEIR dataset folder")
    args = parser.parse_args()
    tokens(args.corpus, args.cases)
    for dataset in args.dataset:
        for exact in (False, True):
            metrics = evaluate_retrieval(dataset, Settings(), exact_identifiers=exact)
            shown = {
                key: metrics[key] for key in ("hit@1", "hit@5", "ndcg@10", "mrr@10", "p50_ms", "queries")
            }
            print(f"{dataset.name} {'exact identifiers first' if exact else 'fusion only'}: {shown}")


def tokens(corpus_folder: Path | None, count: int) -> None:
    """The unique-token measurement on ``corpus_folder`` (default: this repository's docs)."""
    with tempfile.TemporaryDirectory() as scratch:
        corpus = Path(scratch) / "corpus"
        if corpus_folder:
            shutil.copytree(corpus_folder, corpus)
        else:
            shutil.copytree(ROOT / "docs", corpus / "docs")
            shutil.copy(ROOT / "README.md", corpus / "README.md")
        files = sorted(corpus.rglob("*.md"))
        cases = unique_tokens(files, count)
        with Librarian(Settings(home=Path(scratch) / "home")) as lib:
            lib.ingest(str(corpus))
            # Every query embedded once first: both modes then read the query cache, so the
            # latencies differ only by the exact-identifier lookup.
            first_hits(lib, cases, exact_identifiers=False)
            for exact in (False, True):
                started = []
                hits = 0
                for case in cases:
                    begin = time.perf_counter()
                    [(_, first, _)] = first_hits(lib, [case], exact_identifiers=exact)
                    started.append((time.perf_counter() - begin) * 1000)
                    hits += first
                label = "exact identifiers first" if exact else "fusion only            "
                print(
                    f"{label}: {hits}/{len(cases)} first; search p50 {statistics.median(started):.1f} ms "
                    f"({len(files)} files)"
                )


if __name__ == "__main__":
    main()
