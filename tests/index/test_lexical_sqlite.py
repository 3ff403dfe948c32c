"""SQLite keyword search finds candidates through the query's selective terms only, as PostgreSQL does."""

from __future__ import annotations

from pathlib import Path

from librarian.app import Librarian
from librarian.config import Settings
from librarian.embeddings.local import LocalMiniLMEmbedder
from librarian.index.base import SearchFilter
from librarian.index.lexical import Fts5LexicalIndex


def test_common_words_do_not_make_sqlite_rank_every_chunk_that_holds_them(
    tmp_path: Path, embedder: LocalMiniLMEmbedder
) -> None:
    manual, guide = tmp_path / "manual", tmp_path / "guide"
    manual.mkdir()
    guide.mkdir()
    for number in range(200):
        extra = " The zeppelin mooring procedure is described here." if number < 3 else ""
        page = f"# Page {number}\n\nConfigure the service settings.{extra}\n"
        (manual / f"page{number}.md").write_text(page)
    for number in range(5):
        (guide / f"page{number}.md").write_text(f"# Guide {number}\n\nConfigure the service once.\n")
    with Librarian(Settings(home=tmp_path / "home"), embedder=embedder) as lib:
        lib.ingest(str(manual), sdk_name="manual", sdk_version="1")
        lib.ingest(str(guide), sdk_name="guide", sdk_version="1")
        lexical = Fts5LexicalIndex(lib.engine, max_estimated_matches=50)

        # "configure" and "service" are in every chunk: only "zeppelin" finds candidates.
        assert lexical._selective(["configure", "service", "zeppelin"], SearchFilter()) == ["zeppelin"]
        hits = lexical.query("configure the zeppelin service", k=10)
        assert len(hits) == 3
        # A query of common words alone still answers, through its rarest word.
        assert len(lexical.query("configure service", k=10)) == 10
        # Counted under the filter: in the guide the same words are rare, so every term is kept.
        in_guide = SearchFilter(sdk_name="guide")
        assert lexical._selective(["configure", "service", "zeppelin"], in_guide) == [
            "zeppelin",
            "configure",
            "service",
        ]
        assert len(lexical.query("configure the zeppelin service", k=10, where=in_guide)) == 5
        # With room for every term, nothing changes.
        assert len(Fts5LexicalIndex(lib.engine).query("configure the zeppelin service", k=10)) == 10
