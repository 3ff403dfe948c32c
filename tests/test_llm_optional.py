"""Everything works without an LLM, including with a half-configured one."""

from __future__ import annotations

from pathlib import Path

from librarian.app import Librarian
from librarian.config import Settings


def test_an_llm_without_url_or_model_is_disabled_not_fatal(tmp_path: Path) -> None:
    with Librarian(Settings(home=tmp_path, llm_provider="openai")) as lib:
        assert lib.llm is None
        assert lib.llm is None  # created once; the warning is not repeated


def test_no_llm_is_configured_by_default(tmp_path: Path) -> None:
    with Librarian(Settings(home=tmp_path)) as lib:
        assert lib.llm is None
