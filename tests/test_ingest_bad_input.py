"""Bad input never loses data: each bad file is reported with its path and reason, the rest goes on."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from librarian.app import Librarian
from librarian.config import Settings
from librarian.embeddings.local import LocalMiniLMEmbedder
from librarian.errors import BackendUnavailableError, NotFoundError


@pytest.fixture
def lib(tmp_path: Path, embedder: LocalMiniLMEmbedder) -> Librarian:
    return Librarian(Settings(home=tmp_path / "home", max_file_bytes=50_000), embedder=embedder)


def reasons(lib: Librarian) -> dict[str, str]:
    return {error["path"]: error["reason"] for error in lib.sources()[-1]["last_errors"]}


def test_each_bad_file_is_reported_and_good_files_are_ingested(lib: Librarian, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "good.md").write_text("# Good\n\nA healthy document about bucket policies.\n", encoding="utf-8")
    (docs / "corrupt.pdf").write_bytes(b"%PDF-1.4\n1 0 obj << /Type /Catalog >>\nthis is not a pdf at all")
    (docs / "binary.md").write_bytes(b"\x00\x01\x02\x03" * 200)
    (docs / "latin1.txt").write_bytes("caf\xe9 cr\xe8me".encode("latin-1"))
    (docs / "huge.md").write_text("# Huge\n\n" + "word " * 20_000, encoding="utf-8")
    outside = tmp_path / "secret.md"
    outside.write_text("# Secret\n\nnot part of the docs\n", encoding="utf-8")
    (docs / "escape.md").symlink_to(outside)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "private.md").write_text("# Private\n\nanother folder's notes\n", encoding="utf-8")
    (docs / "linked-folder").symlink_to(elsewhere, target_is_directory=True)
    (docs / "deep.html").write_text("<p>top</p>" + "<div>" * 3000 + "<p>deep</p>" + "</div>" * 3000)
    (docs / "nested.html").write_text(
        "<h1>Nested</h1><p>before</p>" + "<div>" * 300 + "<p>deep text</p>" + "</div>" * 300
    )
    os.mkfifo(docs / "pipe.md")

    report = lib.ingest(str(docs))

    assert report.status == "partial" and report.added == 2
    found = reasons(lib)
    assert set(found) == {
        "corrupt.pdf", "binary.md", "latin1.txt", "huge.md", "escape.md", "pipe.md", "linked-folder",
        "deep.html",
    }  # fmt: skip
    assert "folder outside the source root" in found["linked-folder"]
    assert "nested more than 2,048 levels" in found["deep.html"]
    assert "deep text" in lib.search("deep text", top_k=1)[0].content  # 300 levels: read in full
    assert "pdf" in found["corrupt.pdf"].lower()
    assert "binary" in found["binary.md"]
    assert "UTF-8" in found["latin1.txt"]
    assert "over the limit" in found["huge.md"]
    assert "outside the source root" in found["escape.md"]
    assert "regular file" in found["pipe.md"]
    assert next(r.entity_name for r in lib.search("bucket policies")) == "Good"
    assert all(r.entity_name != "Secret" for r in lib.search("not part of the docs", top_k=5))


def test_a_file_that_turns_bad_keeps_its_stored_chunks(lib: Librarian, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    page = docs / "page.md"
    page.write_text("# Rotation\n\nRotate the access keys every ninety days.\n", encoding="utf-8")
    lib.ingest(str(docs))
    page.write_bytes(b"# Rotation\n\nRotate \x80\x81 broken bytes\n")

    report = lib.ingest(str(docs))

    assert report.status == "partial" and report.deleted == 0
    assert [r.entity_name for r in lib.search("rotate access keys")] == ["Rotation"]


def test_missing_folder_is_a_clear_error(lib: Librarian, tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match="does not exist"):
        lib.ingest(str(tmp_path / "nowhere"))


def test_git_url_that_does_not_exist_is_recorded_on_the_source(lib: Librarian, tmp_path: Path) -> None:
    missing = f"file://{tmp_path}/no-such-repo.git"

    with pytest.raises(BackendUnavailableError, match="clone"):
        lib.ingest(missing, sdk_name="x", sdk_version="1")

    source = lib.sources()[-1]
    assert source["last_status"] == "failed" and source["last_errors"][0]["path"] == missing
