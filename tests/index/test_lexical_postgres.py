"""PostgreSQL keyword search finds candidates through the query's selective terms only."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import text

from librarian.app import Librarian
from librarian.config import Settings
from librarian.embeddings.local import LocalMiniLMEmbedder
from librarian.index.lexical import PostgresLexicalIndex


def test_common_words_do_not_make_postgres_rank_the_whole_table(
    tmp_path: Path, postgres_url: str, embedder: LocalMiniLMEmbedder
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for number in range(200):
        extra = " The zeppelin mooring procedure is described here." if number < 3 else ""
        (docs / f"page{number}.md").write_text(f"# Page {number}\n\nConfigure the service settings.{extra}\n")
    with Librarian(Settings(home=tmp_path / "home", database_url=postgres_url), embedder=embedder) as lib:
        lib.ingest(str(docs), sdk_name="manual", sdk_version="1")
        with lib.engine.begin() as connection:
            connection.execute(text("ANALYZE chunks"))
        lexical = PostgresLexicalIndex(lib.engine, max_estimated_matches=50)

        # "configur" and "servic" are in every chunk: only "zeppelin" finds candidates.
        assert lexical._selective(["configur", "servic", "zeppelin"]) == ["zeppelin"]
        hits = lexical.query("configure the zeppelin service", k=10)
        assert len(hits) == 3
        # A query of common words alone still answers, through its rarest word.
        assert len(lexical.query("configure service", k=10)) == 10
        # A word PostgreSQL drops as a stop word ("don", not in our own list) is never the only one chosen.
        assert lexical._selective(["don", "configur"]) == ["configur"]
        # With room for every term, nothing changes.
        assert len(PostgresLexicalIndex(lib.engine).query("configure the zeppelin service", k=10)) == 10
