"""Regenerate the reference table of docs/configuration.md from the Settings class.

.venv/bin/python scripts/gen_config_docs.py
"""

from __future__ import annotations

from pathlib import Path

from librarian.config import settings_reference

DOC = Path(__file__).parents[1] / "docs" / "configuration.md"
MARKER = "## Reference\n\n"

text = DOC.read_text(encoding="utf-8")
DOC.write_text(text[: text.index(MARKER) + len(MARKER)] + settings_reference(), encoding="utf-8")
