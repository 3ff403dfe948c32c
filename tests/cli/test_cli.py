"""The ``librarian`` command, run as a real subprocess the way users and agents run it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

LIBRARIAN = [sys.executable, "-m", "librarian.cli.main"]
REQUIRED_RESULT_KEYS = {
    "content",
    "score",
    "sdk_name",
    "sdk_version",
    "entity_name",
    "source_url",
    "last_fetched_at",
}


def run(home: Path, *args: str, check: int | None = 0) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "NO_COLOR": "1", "COLUMNS": "200"}
    env.pop("LIBRARIAN_HOME", None)
    result = subprocess.run(
        [*LIBRARIAN, "--home", str(home), *args], capture_output=True, text=True, env=env, timeout=300
    )
    if check is not None:
        assert result.returncode == check, result.stderr
    return result


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    root.mkdir()
    (root / "queue.md").write_text(
        "# send-message\n\nDelivers a message to a queue.\n\n# purge-queue\n\nDeletes all messages.\n"
    )
    (root / "storage.rst").write_text("put-object\n==========\n\nAdds an object to a bucket.\n")
    return root


def test_ingest_search_sources_stats_reindex_with_json(tmp_path: Path, docs: Path) -> None:
    home = tmp_path / "home"

    ingest = json.loads(
        run(home, "ingest", str(docs), "--sdk", "aws-cli", "--version", "1.45", "--json").stdout
    )
    results = json.loads(
        run(home, "search", "deliver a message", "--sdk", "aws-cli", "--version", "1.45", "--json").stdout
    )
    sources = json.loads(run(home, "sources", "--json").stdout)
    stats = json.loads(run(home, "stats", "--json").stdout)
    reindex = json.loads(run(home, "reindex", "--json").stdout)
    again = json.loads(run(home, "search", "deliver a message", "--top-k", "1", "--json").stdout)

    assert ingest["status"] == "ok" and ingest["added"] == 2
    assert set(results[0]) >= REQUIRED_RESULT_KEYS and results[0]["entity_name"] == "send-message"
    assert results[0]["sdk_version"] == "1.45"
    assert sources[0]["sdk_name"] == "aws-cli" and sources[0]["last_status"] == "ok"
    assert stats["chunks"] == 3 and stats["vector_index"]["model_version"].startswith("sentence-transformers")
    assert reindex["chunks"] == 3
    assert len(again) == 1 and again[0]["entity_name"] == "send-message"


def test_human_output_names_entity_version_and_source(tmp_path: Path, docs: Path) -> None:
    home = tmp_path / "home"
    run(home, "ingest", str(docs), "--sdk", "aws-cli", "--version", "1.45")

    out = run(home, "search", "add an object to a bucket", "--top-k", "1").stdout

    assert "put-object" in out and "aws-cli 1.45" in out and "storage.rst" in out


def test_partial_ingest_exits_3_and_reports_the_file(tmp_path: Path, docs: Path) -> None:
    (docs / "broken.pdf").write_bytes(b"%PDF-1.7 truncated")

    result = run(tmp_path / "home", "ingest", str(docs), check=3)

    assert "broken.pdf" in result.stderr
    sources = json.loads(run(tmp_path / "home", "sources", "--json").stdout)
    assert sources[0]["last_status"] == "partial" and sources[0]["last_errors"][0]["path"] == "broken.pdf"


def test_errors_exit_1_with_a_message_on_stderr(tmp_path: Path) -> None:
    missing = run(tmp_path / "home", "ingest", str(tmp_path / "nope"), check=1)
    no_sdk = run(tmp_path / "home", "ingest", str(tmp_path), "--version", "1", check=1)

    assert "does not exist" in missing.stderr and missing.stdout == ""
    assert "--version needs --sdk" in no_sdk.stderr


def write_beir(
    dataset: Path, corpus: list[dict[str, str]], queries: dict[str, str], relevant: dict[str, str]
) -> None:
    """A BEIR folder: ``queries`` maps query id to text, ``relevant`` query id to its document."""
    (dataset / "qrels").mkdir(parents=True)
    (dataset / "corpus.jsonl").write_text("\n".join(json.dumps(c) for c in corpus))
    (dataset / "queries.jsonl").write_text(
        "\n".join(json.dumps({"_id": query_id, "text": text}) for query_id, text in queries.items())
    )
    qrels = "".join(f"{query_id}\t{doc_id}\t1\n" for query_id, doc_id in relevant.items())
    (dataset / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + qrels)


def test_eval_retrieval_reports_every_metric(tmp_path: Path) -> None:
    dataset = tmp_path / "beir"
    corpus = [
        {"_id": "d1", "title": "weather", "text": "Forecast of rain and sunshine for a city."},
        {"_id": "d2", "title": "tax", "text": "Compute the sales tax of a purchase."},
        {"_id": "d3", "title": "flights", "text": "Book airline tickets between airports."},
    ]
    queries = {"q1": "will it rain tomorrow", "q2": "sales tax on $500"}
    write_beir(dataset, corpus, queries, {"q1": "d1", "q2": "d2"})

    metrics = json.loads(run(tmp_path / "home", "eval", "retrieval", str(dataset), "--json").stdout)

    expected = {"hit@1", "hit@5", "hit@10", "recall@5", "recall@10", "ndcg@10", "mrr@10", "p50_ms", "p95_ms"}
    assert expected <= set(metrics)
    assert metrics["hit@1"] == 100.0 and metrics["p50_ms"] > 0


def test_eval_retrieval_measures_learning_from_use_on_queries_it_never_saw(tmp_path: Path) -> None:
    # Cold, the badge question finds the page that talks about badges; the page that answers it
    # shares no word with it. The learn half (q4) marks the answer helpful; the test half (q1, a
    # paraphrase) is measured before and after.
    dataset = tmp_path / "beir"
    corpus = [
        {"_id": "d1", "title": "badges", "text": "Badges are printed by the front desk on weekdays."},
        {"_id": "d2", "title": "procedure Z9", "text": "Open ticket type Z9 and wait for a new card."},
        {"_id": "d3", "title": "flights", "text": "Book airline tickets between airports."},
    ]
    queries = {"q1": "how can I get my badge reset", "q4": "how do I reset my badge"}
    write_beir(dataset, corpus, queries, {"q1": "d2", "q4": "d2"})
    from librarian.evaluation.split import learn_half

    assert learn_half("q4") and not learn_half("q1")

    metrics = json.loads(run(tmp_path / "home", "eval", "retrieval", str(dataset), "--json").stdout)
    cold_only = json.loads(
        run(tmp_path / "home2", "eval", "retrieval", str(dataset), "--no-learning", "--json").stdout
    )

    learned = metrics["learned"]
    assert (learned["queries_learned"], learned["queries_test"], learned["feedback_recorded"]) == (1, 1, 1)
    assert learned["cold"]["hit@1"] == 0.0 and learned["learned"]["hit@1"] == 100.0
    assert "learned" not in cold_only and cold_only["hit@1"] == metrics["hit@1"]


def test_eval_retrieval_names_the_bad_line(tmp_path: Path) -> None:
    dataset = tmp_path / "beir"
    (dataset / "qrels").mkdir(parents=True)
    (dataset / "corpus.jsonl").write_text('{"_id": "d1", "text": "ok"}\n{not json\n')

    result = run(tmp_path / "home", "eval", "retrieval", str(dataset), check=1)

    assert "corpus.jsonl:2" in result.stderr


def test_eval_tools_reports_cold_and_learned_figures_on_the_held_apart_half(tmp_path: Path) -> None:
    from librarian.evaluation.split import learn_half

    dataset = tmp_path / "tools"
    (dataset / "qrels").mkdir(parents=True)
    corpus = [
        {"_id": "weather_api", "title": "weather", "text": "Forecast of rain and sunshine for a city."},
        {"_id": "tax_calc", "title": "tax", "text": "Compute the sales tax of a purchase."},
        {"_id": "flights", "title": "flights", "text": "Book airline tickets between airports."},
    ]
    texts = ["will it rain tomorrow in Rome", "sales tax on a $500 laptop", "a plane ticket to Oslo"]
    queries = [{"_id": f"q{n}", "text": f"{texts[n % 3]} #{n}"} for n in range(12)]
    (dataset / "corpus.jsonl").write_text("\n".join(json.dumps(c) for c in corpus))
    (dataset / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in queries))
    qrels = "".join(f"q{n}\t{corpus[n % 3]['_id']}\t1\n" for n in range(12))
    (dataset / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + qrels)

    result = json.loads(run(tmp_path / "home", "eval", "tools", str(dataset), "--json").stdout)

    test_half = [q for q in queries if not learn_half(q["_id"])]
    assert result["queries_test"] == len(test_half) and result["queries_learned"] == 12 - len(test_half)
    for phase in ("cold", "learned"):
        assert result[phase]["hit@1"] == 100.0 and result[phase]["comp@5"] == 100.0
        assert result[phase]["calibration"]
    assert result["cold"]["p50_ms"] > 0 and "p50_ms" not in result["learned"]
    assert result["coverage@5"] == 100.0
    table = run(tmp_path / "home2", "eval", "tools", str(dataset), "--no-learning").stdout
    assert "hit@5" in table and "┃ learned" not in table and "0 learned" in table
