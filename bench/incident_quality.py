"""Quality of ``find_similar_incidents`` against plain text similarity, on one evaluation set.

The set (``bench/data/incidents_eval.yaml``, where every entry comes from is stated there) holds
incidents with look-alikes and queries written as an agent meets a recurrence: other words, other
identifiers in the error lines. For each query we rank every incident three ways:

* ``find_similar_incidents``: ours (text, errors normalised as research does, symptoms, services,
  outcome);
* ``text_document``: cosine similarity between the query text and the incident's whole report
  (title, description, symptoms, errors, services, root cause, solution): searching the reports;
* ``text_problem``: cosine similarity with the incident's problem text only (our text part alone).

and report Hit@1, Hit@3 and MRR (mean reciprocal rank). Same embedding model for all.

    .venv/bin/python -m bench.incident_quality
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from librarian.app import Librarian
from librarian.config import Settings
from librarian.incidents.service import IncidentDraft
from librarian.incidents.signature import ProblemSignature
from librarian.safe_yaml import load_yaml

DATA = Path(__file__).parent / "data" / "incidents_eval.yaml"


def signature(entry: dict[str, Any]) -> ProblemSignature:
    return ProblemSignature.from_mapping(
        {
            name: entry[name]
            for name in ("symptoms", "error_messages", "affected_services", "infrastructure")
            if name in entry
        }
    )


def metrics(ranks: list[int]) -> dict[str, float]:
    """Hit@1, Hit@3 and MRR from 1-based ranks (0 = not found)."""
    found = [rank for rank in ranks if rank]
    return {
        "hit@1": round(sum(1 for r in found if r == 1) / len(ranks), 3),
        "hit@3": round(sum(1 for r in found if r <= 3) / len(ranks), 3),
        "mrr": round(sum(1 / r for r in found) / len(ranks), 3),
    }


def evaluate(lib: Librarian, data: dict[str, Any]) -> dict[str, Any]:
    me = lib.default_principal
    ids: dict[str, int] = {}
    documents: dict[str, str] = {}
    problems: dict[str, str] = {}
    for entry in data["incidents"]:
        draft = IncidentDraft(
            title=entry["title"],
            description=entry.get("description", ""),
            signature=signature(entry),
            was_successful=entry.get("was_successful"),
        )
        ids[entry["key"]] = lib.incidents.create(me, draft)["id"]
        problems[entry["key"]] = draft.signature.text(title=draft.title, description=draft.description)
        documents[entry["key"]] = draft.markdown()
    keys = list(ids)
    by_id = {value: key for key, value in ids.items()}
    document_matrix = lib.cache.embed_documents([documents[key] for key in keys])
    problem_matrix = lib.cache.embed_documents([problems[key] for key in keys])
    ours: list[int] = []
    text_document: list[int] = []
    text_problem: list[int] = []
    for query in data["queries"]:
        sig = signature(query)
        found = lib.incidents.find_similar(me, query["description"], signature=sig, limit=min(50, len(keys)))
        order = [by_id[item["id"]] for item in found]
        ours.append(order.index(query["target"]) + 1 if query["target"] in order else 0)
        vector = lib.cache.embed_query(sig.text(description=query["description"])).reshape(-1)
        for matrix, ranks in ((document_matrix, text_document), (problem_matrix, text_problem)):
            scores = matrix @ vector
            ranking = [keys[i] for i in np.argsort(-scores, kind="stable")]
            ranks.append(ranking.index(query["target"]) + 1)
    return {
        "incidents": len(keys),
        "queries": len(data["queries"]),
        "find_similar_incidents": metrics(ours),
        "text_document": metrics(text_document),
        "text_problem": metrics(text_problem),
        "misses": [
            q["target"] for q, rank in zip(data["queries"], ours, strict=True) if not rank or rank > 3
        ],
    }


def _fill(template: str, service: str, rng: random.Random) -> str:
    """A template with fresh identifiers: {hex}, {alnum}, {num}, {date} differ at every use."""
    out = template.replace("{service}", service)
    makers: dict[str, Callable[[], str]] = {
        "{hex}": lambda: f"{rng.getrandbits(24):06x}"[:5],
        "{alnum}": lambda: "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(5)),
        "{num}": lambda: str(rng.randint(2, 99999)),
        "{date}": lambda: (
            f"20{rng.randint(24, 27)}-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}T0{rng.randint(0, 9)}:00:00Z"
        ),
    }
    for name, make in makers.items():
        while name in out:
            out = out.replace(name, make(), 1)
    return out


def families(spec: dict[str, Any]) -> dict[str, Any]:
    """Incidents (every kind on every service) and queries generated from the ``families`` templates."""
    rng = random.Random(int(spec.get("seed", 1)))
    incidents, queries = [], []
    for kind in spec["kinds"]:
        for service in spec["services"]:
            incidents.append(
                {
                    "key": f"{service}/{kind['key']}",
                    "title": kind["title"].replace("{service}", service),
                    "description": rng.choice(kind["descriptions"]),
                    "symptoms": list(kind["symptoms"]),
                    "error_messages": [_fill(kind["error"], service, rng)],
                    "affected_services": [service],
                }
            )
    for number in range(int(spec["queries"])):
        kind = rng.choice(spec["kinds"])
        service = rng.choice(spec["services"])
        query: dict[str, Any] = {
            "target": f"{service}/{kind['key']}",
            "description": rng.choice(kind["descriptions"]),
            "error_messages": [_fill(kind["error"], service, rng)],
        }
        if number % 2 == 0:
            query["affected_services"] = [service]
        queries.append(query)
    return {"incidents": incidents, "queries": queries}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--set", choices=("written", "families", "both"), default="both")
    parser.add_argument("--seed", type=int, default=None, help="generate the families set with this seed")
    args = parser.parse_args()
    data = load_yaml(args.data.read_text(encoding="utf-8"), str(args.data))
    if args.seed is not None:
        data["families"]["seed"] = args.seed
    sets = {
        "written": {"incidents": data["incidents"], "queries": data["queries"]},
        "families": families(data["families"]),
    }
    for name, chosen in sets.items():
        if args.set not in (name, "both"):
            continue
        with (
            tempfile.TemporaryDirectory(prefix="librarian-bench-") as home,
            Librarian(Settings(home=Path(home))) as lib,
        ):
            print(json.dumps({"set": name, **evaluate(lib, chosen)}), flush=True)


if __name__ == "__main__":
    main()
