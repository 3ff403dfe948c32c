"""Fit and check the confidence models of ``research_api_usage`` on labelled documentation sets.

Plain questions: each BEIR dataset (real documentation records with real natural-language questions
and relevance labels) is ingested as one SDK; every question goes through ``research_api_usage``; the
label is whether its top snippet is a relevant document.

Error-driven questions (``--cli-store``): built by ``bench/error_questions.py`` from a CLI's help as
ingested in that Librarian home; the label is whether the top snippet is the example's command.

Queries are split in two by a hash of their id: a logistic regression per kind (plain, error-driven;
they are ranked differently) is fitted on one half and its reliability table measured on the other.

    .venv/bin/python -m bench.calibrate_confidence \
        ../shared/datasets/gorilla-torchhub ../shared/datasets/metatool \
        --cli-store /tmp/awshome --cli-sdk aws-cli
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import tempfile
from dataclasses import fields
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression  # type: ignore[import-untyped]

from bench.error_questions import error_questions
from librarian.app import Librarian
from librarian.config import Settings
from librarian.evaluation.retrieval import load_beir
from librarian.research.confidence import MODELS, RankingFeatures
from librarian.research.service import research_api_usage

FEATURES = [f.name for f in fields(RankingFeatures)]


def collect(dataset_dir: Path, home: Path) -> list[tuple[str, list[float], int]]:
    dataset = load_beir(dataset_dir)
    corpus = home / "corpus"
    corpus.mkdir(parents=True)
    for doc_id, (title, text) in dataset.corpus.items():
        body = text if text.lstrip().startswith("#") or not title else f"# {title}\n\n{text}"
        (corpus / f"{hashlib.sha1(doc_id.encode()).hexdigest()[:16]}.md").write_text(body, encoding="utf-8")
    name_of = {f"{hashlib.sha1(d.encode()).hexdigest()[:16]}.md": d for d in dataset.corpus}
    rows = []
    with Librarian(Settings(home=home / "store")) as lib:
        lib.ingest(str(corpus), sdk_name=dataset_dir.name, sdk_version="1")
        for query_id, query in dataset.queries.items():
            result = research_api_usage(lib, dataset_dir.name, query)
            features = result["confidence_features"]
            if not result["snippets"] or features is None or result["confidence_model"] != "plain":
                continue
            top_doc = name_of.get(result["snippets"][0]["source_url"].rsplit("/", 1)[-1])
            rows.append(
                (query_id, [float(features[f]) for f in FEATURES], int(top_doc in dataset.qrels[query_id]))
            )
    return rows


def collect_error_driven(home: Path, sdk: str) -> list[tuple[str, list[float], int]]:
    rows = []
    with Librarian(Settings(home=home)) as lib:
        for question in error_questions(lib, sdk):
            result = research_api_usage(lib, sdk, question.query, error_text=question.error)
            features = result["confidence_features"]
            if not result["snippets"] or features is None or result["confidence_model"] != "error_driven":
                continue
            label = int(result["snippets"][0]["entity_name"] == question.entity)
            rows.append((f"{sdk}:{question.qid}", [float(features[f]) for f in FEATURES], label))
    return rows


def fit_and_check(rows: list[tuple[str, list[float], int]], kind: str) -> dict[str, object]:
    train = [r for r in rows if int(hashlib.sha1(r[0].encode()).hexdigest(), 16) % 2 == 0]
    test = [r for r in rows if int(hashlib.sha1(r[0].encode()).hexdigest(), 16) % 2 == 1]
    x_train, y_train = np.array([r[1] for r in train]), np.array([r[2] for r in train])
    x_test, y_test = np.array([r[1] for r in test]), np.array([r[2] for r in test])
    model = LogisticRegression(C=10.0, max_iter=1000).fit(x_train, y_train)
    weights, bias = MODELS[kind]
    shipped = np.array(
        [
            1 / (1 + math.exp(-(bias + sum(weights[f] * v for f, v in zip(FEATURES, x, strict=True)))))
            for x in x_test
        ]
    )
    return {
        "queries": len(rows),
        "train": len(train),
        "test": len(test),
        "top1_accuracy_test": round(float(y_test.mean()), 3),
        "fitted_weights": dict(zip(FEATURES, (round(float(w), 3) for w in model.coef_[0]), strict=True)),
        "fitted_bias": round(float(model.intercept_[0]), 3),
        "reliability_fitted_on_test": reliability(model.predict_proba(x_test)[:, 1], y_test),
        "reliability_shipped_weights_on_test": reliability(shipped, y_test),
    }


def reliability(
    probabilities: np.ndarray, labels: np.ndarray, bins: int = 10
) -> tuple[list[dict[str, object]], float]:
    table: list[dict[str, object]] = []
    ece = 0.0
    for low in np.linspace(0, 1, bins, endpoint=False):
        high = low + 1 / bins
        mask = (probabilities >= low) & (probabilities < high if high < 1 else probabilities <= high)
        if mask.sum() == 0:
            continue
        mean_p, accuracy = float(probabilities[mask].mean()), float(labels[mask].mean())
        ece += mask.sum() / len(labels) * abs(mean_p - accuracy)
        table.append(
            {
                "bin": f"{low:.1f}-{high:.1f}",
                "n": int(mask.sum()),
                "mean_confidence": round(mean_p, 3),
                "accuracy": round(accuracy, 3),
            }
        )
    return table, round(float(ece), 4)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("datasets", nargs="*", type=Path, help="BEIR datasets of plain questions")
    parser.add_argument("--cli-store", type=Path, help="Librarian home holding an ingested CLI's help")
    parser.add_argument("--cli-sdk", default="aws-cli", help="SDK name of that CLI in the store")
    args = parser.parse_args()
    report: dict[str, object] = {}
    if args.datasets:
        rows = []
        with tempfile.TemporaryDirectory(prefix="librarian-calibrate-") as scratch:
            for number, dataset in enumerate(args.datasets):
                rows += [
                    (f"{dataset.name}:{q}", x, y) for q, x, y in collect(dataset, Path(scratch) / str(number))
                ]
        report["plain"] = fit_and_check(rows, "plain")
    if args.cli_store:
        report["error_driven"] = fit_and_check(
            collect_error_driven(args.cli_store, args.cli_sdk), "error_driven"
        )
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
