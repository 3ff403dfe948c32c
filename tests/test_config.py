"""Settings: documented, layered (overrides > environment > file > defaults), with clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from librarian.config import Settings, settings_reference
from librarian.errors import InvalidInputError

DOCS = Path(__file__).parents[1] / "docs" / "configuration.md"


def test_every_setting_has_a_description() -> None:
    undocumented = [name for name, field in Settings.model_fields.items() if not field.description]
    assert undocumented == []


def test_configuration_doc_lists_every_setting() -> None:
    assert settings_reference() in DOCS.read_text(encoding="utf-8"), (
        "docs/configuration.md is stale: regenerate it with .venv/bin/python scripts/gen_config_docs.py"
    )


def test_defaults_place_everything_in_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LIBRARIAN_HOME", raising=False)
    settings = Settings.load(home=tmp_path)

    assert settings.resolved_database_url == f"sqlite:///{tmp_path.resolve()}/librarian.db"
    assert settings.resolved_vector_url == f"chroma://{tmp_path.resolve()}/chroma"
    assert Settings().home == Path(".librarian")


def test_file_then_environment_then_overrides(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "config.toml").write_text("chunk_max_chars = 900\nsearch_candidates = 11\n")
    monkeypatch.setenv("LIBRARIAN_SEARCH_CANDIDATES", "22")

    settings = Settings.load(home=tmp_path)
    overridden = Settings.load(home=tmp_path, chunk_max_chars=1200)

    assert settings.chunk_max_chars == 900 and settings.search_candidates == 22
    assert overridden.chunk_max_chars == 1200


def test_config_file_errors_name_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("chunk_max_chars = [unclosed\n")
    unknown = tmp_path / "unknown.toml"
    unknown.write_text("chunk_size = 3\n")

    with pytest.raises(InvalidInputError, match=r"bad\.toml is not valid TOML"):
        Settings.load(config_file=bad)
    with pytest.raises(InvalidInputError, match="unknown settings: chunk_size"):
        Settings.load(config_file=unknown)
    with pytest.raises(InvalidInputError, match="does not exist"):
        Settings.load(config_file=tmp_path / "missing.toml")
