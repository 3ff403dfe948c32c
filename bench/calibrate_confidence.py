"""Fit and check the confidence models of ``research_api_usage`` on labelled documentation sets,
with questions whose answer is not indexed among them.

Plain questions: each BEIR dataset (real documentation records with real natural-language questions
and relevance labels) is ingested as one SDK, **except a held-out share of its records** (by a hash of
the record id, ``--hold-out``); every question goes through ``research_api_usage``; the label is
whether its top snippet is a relevant record. A question whose relevant records were all held out is
unanswerable: its label can only be 0, and its confidence should be low.

Error-driven questions (``--cli aws``): the CLI's help is walked once (``--cli-scope`` groups) and
ingested twice: whole, to write the questions (``bench/error_questions.py``), and without the
``--hold-out-scope`` groups and the held-out share of the other commands, to answer them, as an index
limited to some scopes (``ingest-cli --scope``) or missing commands is. The label is whether the top
snippet is the example's command; a question whose command was left out is unanswerable. Half the
questions (by a hash of their id) also give the failed command line (a sibling that refused the
option), as an agent's error does.

Queries are split in two by a hash of their id: a logistic regression per kind (plain, error-driven;
they are ranked differently) is fitted on one half and its reliability table measured on the other,
on answerable and unanswerable questions together and apart.

    .venv/bin/python -m bench.calibrate_confidence \
        ../shared/datasets/gorilla-torchhub ../shared/datasets/metatool \
        --cli aws --cli-sdk aws-cli --cli-scope s3 --cli-scope s3api --cli-scope dynamodb ... \
        --hold-out-scope sns --hold-out-scope logs --hold-out 0.2
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import tempfile
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression  # type: ignore[import-untyped]

from bench.error_questions import error_questions
from librarian.app import Librarian
from librarian.config import Settings
from librarian.evaluation.retrieval import load_beir
from librarian.ingest.connectors import cli_listing
from librarian.ingest.sources.base import SourceListing
from librarian.research.confidence import MODELS, RankingFeatures
from librarian.research.service import research_api_usage

FEATURES = [f.name for f in fields(RankingFeatures)]


@dataclass(frozen=True)
class Row:
    """One question's features as research computed them, its label and whether it had an answer."""

    qid: str
    features: list[float]
    label: int
    kind: str
    answerable: bool


def held_out(key: str, share: float) -> bool:
    """Whether ``key`` is in the held-out ``share`` (by a hash, so every run holds out the same)."""
    return int(hashlib.sha256(f"held-out|{key}".encode()).hexdigest(), 16) % 1000 < share * 1000


def collect(dataset_dir: Path, home: Path, hold_out: float) -> list[Row]:
    """Plain questions of a BEIR dataset, asked of an index without its held-out records."""
    dataset = load_beir(dataset_dir)
    corpus = home / "corpus"
    corpus.mkdir(parents=True)
    indexed = {doc_id for doc_id in dataset.corpus if not held_out(doc_id, hold_out)}
    for doc_id in indexed:
        title, text = dataset.corpus[doc_id]
        body = text if text.lstrip().startswith("#") or not title else f"# {title}\n\n{text}"
        (corpus / f"{hashlib.sha1(doc_id.encode()).hexdigest()[:16]}.md").write_text(body, encoding="utf-8")
    name_of = {f"{hashlib.sha1(d.encode()).hexdigest()[:16]}.md": d for d in dataset.corpus}
    rows = []
    with Librarian(Settings(home=home / "store")) as lib:
        lib.ingest(str(corpus), sdk_name=dataset_dir.name, sdk_version="1")
        for query_id, query in dataset.queries.items():
            result = research_api_usage(lib, dataset_dir.name, query)
            features = result["confidence_features"]
            if not result["snippets"] or features is None:
                continue
            top_doc = name_of.get(result["snippets"][0]["source_url"].rsplit("/", 1)[-1])
            relevant = dataset.qrels[query_id]
            rows.append(
                Row(
                    f"{dataset_dir.name}:{query_id}",
                    [float(features[f]) for f in FEATURES],
                    int(top_doc in relevant),
                    str(result["confidence_model"]),
                    any(doc in indexed for doc in relevant),
                )
            )
    return rows


def collect_cli(
    command: str,
    sdk: str,
    scopes: list[str],
    hold_out_scopes: list[str],
    hold_out: float,
    max_commands: int,
    scratch: Path,
) -> list[Row]:
    """Error-driven questions written from a whole CLI walk, asked of an index missing some of it."""
    version, listing = cli_listing(command, scopes=scopes, max_commands=max_commands)
    kept_scopes = [scope for scope in scopes if scope not in hold_out_scopes]

    def kept(path: str) -> bool:
        return path.split("/", 1)[0] in kept_scopes and not held_out(path, hold_out)

    partial = SourceListing(
        root=listing.root,
        files=[],
        problems=listing.problems,
        documents=[d for d in listing.documents if kept(d.path)],
    )
    homes = {
        "whole": (scratch / "whole", listing, scopes),
        "partial": (scratch / "partial", partial, kept_scopes),
    }
    for home, source, source_scopes in homes.values():
        with Librarian(Settings(home=home)) as lib:
            lib.ingest_listing(
                f"cli://{command}?scope={','.join(source_scopes)}",
                "cli-help",
                lambda source=source: source,  # type: ignore[misc]
                sdk_name=sdk,
                sdk_version=version,
                options={"command": command, "scopes": source_scopes},
            )
    with Librarian(Settings(home=homes["whole"][0])) as lib:
        questions = error_questions(lib, sdk)
    indexed = {" ".join(d.path.split("/")) for d in partial.documents}
    rows = []
    with Librarian(Settings(home=homes["partial"][0])) as lib:
        for question in questions:
            error = question.error
            if question.failed_command and int(hashlib.sha1(question.qid.encode()).hexdigest(), 16) % 2:
                error = f"$ {question.failed_command}\n{error}"
            result = research_api_usage(lib, sdk, question.query, error_text=error)
            features = result["confidence_features"]
            if not result["snippets"] or features is None:
                continue
            rows.append(
                Row(
                    f"{sdk}:{question.qid}",
                    [float(features[f]) for f in FEATURES],
                    int(result["snippets"][0]["entity_name"] == question.entity),
                    str(result["confidence_model"]),
                    question.entity in indexed,
                )
            )
    return rows


def in_test_half(row: Row) -> bool:
    return int(hashlib.sha1(row.qid.encode()).hexdigest(), 16) % 2 == 1


def fitted_on(row: Row, traceless: bool) -> bool:
    """Whether a row of the fitting half is fitted on.

    An unanswerable question whose missing answer leaves no trace in the index (no gap in coverage:
    a record held out at random) is not, unless ``traceless``: its share in this set is ours to choose
    (``--hold-out``), and fitting it would lower every confidence by that arbitrary prior. It is still
    counted in the reliability tables.
    """
    return row.answerable or traceless or row.features[FEATURES.index("coverage_gap")] > 0


def fit_and_check(rows: list[Row], traceless: bool = False) -> dict[str, object]:
    """Per kind, a model fitted on the fitting half; its and the shipped weights' reliability on the other."""
    report: dict[str, object] = {}
    predicted: list[tuple[Row, float, float]] = []
    for kind in sorted({row.kind for row in rows}):
        train = [r for r in rows if r.kind == kind and not in_test_half(r) and fitted_on(r, traceless)]
        test = [r for r in rows if r.kind == kind and in_test_half(r)]
        x_train, y_train = np.array([r.features for r in train]), np.array([r.label for r in train])
        x_test, y_test = np.array([r.features for r in test]), np.array([r.label for r in test])
        model = LogisticRegression(C=10.0, max_iter=1000).fit(x_train, y_train)
        fitted = model.predict_proba(x_test)[:, 1]
        shipped = np.array([shipped_confidence(kind, x) for x in x_test])
        predicted += list(zip(test, fitted, shipped, strict=True))
        report[kind] = {
            "queries": len(train) + len(test),
            "train": len(train),
            "test": len(test),
            "unanswerable_test": sum(1 for r in test if not r.answerable),
            "top1_accuracy_test": round(float(y_test.mean()), 3),
            "fitted_weights": dict(zip(FEATURES, (round(float(w), 3) for w in model.coef_[0]), strict=True)),
            "fitted_bias": round(float(model.intercept_[0]), 3),
            "reliability_fitted_on_test": reliability(fitted, y_test),
            "reliability_shipped_weights_on_test": reliability(shipped, y_test),
        }
    for name, keep in (
        ("all", lambda r: True),
        ("answerable", lambda r: r.answerable),
        ("unanswerable", lambda r: not r.answerable),
    ):
        chosen = [(r, f, s) for r, f, s in predicted if keep(r)]
        if not chosen:
            continue
        labels = np.array([r.label for r, _, _ in chosen])
        report[f"together_{name}"] = {
            "test": len(chosen),
            "mean_confidence_shipped": round(float(np.mean([s for _, _, s in chosen])), 3),
            "share_correct": round(float(labels.mean()), 3),
            "reliability_fitted": reliability(np.array([f for _, f, _ in chosen]), labels),
            "reliability_shipped": reliability(np.array([s for _, _, s in chosen]), labels),
        }
    return report


def shipped_confidence(kind: str, features: list[float]) -> float:
    weights, bias = MODELS[kind]
    return 1 / (1 + math.exp(-(bias + sum(weights[f] * v for f, v in zip(FEATURES, features, strict=True)))))


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
    parser.add_argument("--cli", help="a CLI to walk for error-driven questions (aws)")
    parser.add_argument("--cli-sdk", default="aws-cli", help="SDK name of that CLI")
    parser.add_argument("--cli-scope", action="append", default=[], help="a command group to walk")
    parser.add_argument("--hold-out-scope", action="append", default=[], help="a group left out of the index")
    parser.add_argument("--max-commands", type=int, default=3000)
    parser.add_argument("--hold-out", type=float, default=0.2, help="share of records/commands left out")
    parser.add_argument("--rows", type=Path, help="write every question's row here (JSON lines)")
    parser.add_argument("--from-rows", type=Path, help="refit on rows written by --rows instead of asking")
    parser.add_argument(
        "--fit-traceless", action="store_true", help="also fit unanswerable questions that leave no trace"
    )
    args = parser.parse_args()
    if args.from_rows:
        lines = args.from_rows.read_text(encoding="utf-8").splitlines()
        print(
            json.dumps(
                fit_and_check([Row(**json.loads(line)) for line in lines], args.fit_traceless), indent=1
            )
        )
        return
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="librarian-calibrate-") as scratch:
        for number, dataset in enumerate(args.datasets):
            rows += collect(dataset, Path(scratch) / str(number), args.hold_out)
        if args.cli:
            rows += collect_cli(
                args.cli,
                args.cli_sdk,
                args.cli_scope,
                args.hold_out_scope,
                args.hold_out,
                args.max_commands,
                Path(scratch) / "cli",
            )
    if args.rows:
        args.rows.write_text("".join(json.dumps(row.__dict__) + "\n" for row in rows), encoding="utf-8")
    print(json.dumps(fit_and_check(rows, args.fit_traceless), indent=1))


if __name__ == "__main__":
    main()
