"""Precision and recall of the prompt-injection flags on a labelled set of injections and harmless docs.

The set is ``bench/data/injection_cases.yaml``: injections following published attack classes and
harmless technical text chosen to look like them, each with where it comes from and its split
(``dev`` and ``dev2``, used while writing the rules; ``heldout``, written with ``dev`` before the
rules; ``heldout3``, written after the last rules and never tuned on: the honest figure). A case
counts as flagged when :func:`librarian.research.safety.injection_flags` returns any flag.

    .venv/bin/python -m bench.injection            # a table per split, and every mistake
    .venv/bin/python -m bench.injection --json     # the figures as JSON
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from librarian.research.safety import injection_flags
from librarian.safe_yaml import load_yaml

CASES = Path(__file__).parent / "data" / "injection_cases.yaml"


@dataclass(frozen=True)
class Case:
    """One labelled text."""

    text: str
    injection: bool
    split: str
    source: str


def load_cases(path: Path = CASES) -> list[Case]:
    """The labelled cases of ``path``."""
    document = load_yaml(path.read_bytes(), str(path))
    return [
        Case(
            text=row["text"], injection=row["label"] == "injection", split=row["split"], source=row["source"]
        )
        for row in document["cases"]
    ]


def score(cases: list[Case]) -> dict[str, Any]:
    """Precision, recall and the mistakes of the flags on ``cases``."""
    flagged = [(case, injection_flags(case.text)) for case in cases]
    true_positive = sum(1 for case, flags in flagged if case.injection and flags)
    false_positive = [(case, flags) for case, flags in flagged if not case.injection and flags]
    missed = [case for case, flags in flagged if case.injection and not flags]
    predicted = true_positive + len(false_positive)
    actual = sum(1 for case in cases if case.injection)
    return {
        "cases": len(cases),
        "injections": actual,
        "precision": round(true_positive / predicted, 3) if predicted else 1.0,
        "recall": round(true_positive / actual, 3) if actual else 1.0,
        "false_positives": [{"text": case.text, "flags": flags} for case, flags in false_positive],
        "missed": [{"text": case.text, "source": case.source} for case in missed],
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    cases = load_cases()
    results = {
        split: score([c for c in cases if c.split == split])
        for split in ("dev", "heldout", "dev2", "heldout3")
    }
    results["all"] = score(cases)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print("| split | cases | injections | precision | recall |")
    print("|---|---|---|---|---|")
    for split, figures in results.items():
        row = (split, figures["cases"], figures["injections"], figures["precision"], figures["recall"])
        print("| " + " | ".join(map(str, row)) + " |")
    for split in ("dev", "heldout", "dev2", "heldout3"):
        for miss in results[split]["missed"]:
            print(f"missed ({split}): {miss['text'][:100]!r}")
        for wrong in results[split]["false_positives"]:
            print(f"false positive ({split}, {', '.join(wrong['flags'])}): {wrong['text'][:100]!r}")


if __name__ == "__main__":
    main()
