"""Schema migrations: a store made by an older revision upgrades in place, data and FTS intact."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import inspect, text

from librarian.index.scope import grant_token
from librarian.storage.database import create_database_engine, migrate, open_database


def test_a_revision_0001_store_upgrades_with_its_chunks_searchable(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    old = create_database_engine(url)
    migrate(old, "0001")
    with old.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO sources (id, source_key, uri, kind, tags, created_at, last_errors, last_stats) "
                "VALUES (1, 'k', '/docs', 'local', '[]', '2026-01-01', '[]', '{}')"
            )
        )
        connection.execute(
            text(
                "INSERT INTO documents (id, source_id, path, source_url, current_version_no, created_at, "
                "updated_at) VALUES (1, 1, 'a.md', 'file:///docs/a.md', 1, '2026-01-01', '2026-01-01')"
            )
        )
        connection.execute(
            text(
                "INSERT INTO chunks (document_id, document_version_no, ordinal, entity_type, section_path, "
                "source_url, content, content_hash, last_fetched_at, embedding_model_version, tags, "
                "search_title, search_scope) VALUES (1, 1, 0, 'section', 'Rotation', 'file:///docs/a.md', "
                "'Rotate the keys quarterly', 'h', '2026-01-01', 'm', '[]', 'Rotation', '')"
            )
        )
    old.dispose()

    engine, _ = open_database(url)

    columns = {column["name"] for column in inspect(engine).get_columns("chunks")}
    with engine.connect() as connection:
        attributes = connection.execute(text("SELECT attributes FROM chunks")).scalar_one()
        hits = connection.execute(text("SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH 'rotate'")).all()
        revision = connection.execute(text("SELECT version_num FROM alembic_version")).scalar_one()
    engine.dispose()
    assert "attributes" in columns and attributes == "{}"
    assert len(hits) == 1 and revision == head_revision()


def head_revision() -> str:
    """The newest migration, so this test does not need editing with every new revision."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    from librarian.storage.database import MIGRATIONS_DIR

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    head = ScriptDirectory.from_config(config).get_current_head()
    assert head is not None
    return head


def test_postgres_migrates_to_head(postgres_url: str) -> None:
    engine, _ = open_database(postgres_url)
    columns = {column["name"] for column in inspect(engine).get_columns("chunks")}
    engine.dispose()
    assert {"attributes", "search_vector", "search_scope"} <= columns


def _insert(connection: Any, table: str, **values: object) -> None:
    columns = ", ".join(values)
    connection.execute(
        text(f"INSERT INTO {table} ({columns}) VALUES ({', '.join(':' + c for c in values)})"), values
    )


def _store_at_0009(url: str) -> None:
    old = create_database_engine(url)
    migrate(old, "0009")
    day = "2026-01-01"
    with old.begin() as connection:
        for number, sdk in ((1, "acme"), (2, None)):
            _insert(
                connection, "sources", id=number, source_key=f"k{number}", uri=f"/docs{number}", kind="local",
                sdk_name=sdk, tags="[]", created_at=day, last_errors="[]", last_stats="{}", options="{}",
            )  # fmt: skip
            _insert(
                connection, "documents", id=number, source_id=number, path="a.md", source_url="file:///a.md",
                current_version_no=1, created_at=day, updated_at=day,
            )  # fmt: skip
            _insert(
                connection, "chunks", document_id=number, document_version_no=1, ordinal=0, sdk_name=sdk,
                entity_type="section", section_path="Rotation", source_url="file:///a.md",
                content="Rotate the keys quarterly", content_hash="h", last_fetched_at=day,
                embedding_model_version="m", tags="[]", attributes="{}", search_title="Rotation",
                search_scope="",
            )  # fmt: skip
    old.dispose()


def test_a_revision_0009_store_moves_into_the_local_organisation(tmp_path: Path) -> None:
    """SDK documentation becomes public, the rest organisation-wide; nothing is dropped; every chunk
    is queued again so the vector index learns its grants."""
    url = f"sqlite:///{tmp_path / 'old.db'}"
    _store_at_0009(url)

    engine, _ = open_database(url)

    with engine.connect() as connection:
        grants: dict[int, str] = dict(
            connection.execute(text("SELECT document_id, access_grants FROM chunks")).all()
        )
        visibility: dict[int, str] = dict(
            connection.execute(text("SELECT id, visibility FROM documents")).all()
        )
        queued = connection.execute(text("SELECT count(*) FROM vector_outbox")).scalar_one()
        users = connection.execute(text("SELECT organization_id, name, is_admin FROM users")).all()
        public_hits = connection.execute(
            text("SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH :match"),
            {"match": f"search_scope : {grant_token('public')} AND rotate"},
        ).all()
    engine.dispose()
    assert grants == {1: '["public"]', 2: '["org:1"]'}
    assert visibility == {1: "public", 2: "organization"}
    assert queued == 2
    assert users == [(1, "local", 1)]
    assert len(public_hits) == 1


def test_postgres_store_moves_into_the_local_organisation(postgres_url: str) -> None:
    _store_at_0009(postgres_url)

    engine, _ = open_database(postgres_url)

    with engine.connect() as connection:
        grants: dict[int, list[str]] = dict(
            connection.execute(text("SELECT document_id, access_grants FROM chunks")).all()
        )
        next_user = connection.execute(
            text("SELECT nextval(pg_get_serial_sequence('users', 'id'))")
        ).scalar_one()
    engine.dispose()
    assert grants == {1: ["public"], 2: ["org:1"]}
    assert next_user == 2  # the sequence moved past the local user created with an explicit id
