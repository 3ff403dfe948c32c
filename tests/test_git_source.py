"""Git sources: tags as versions, refs, fetch on refresh, and a URI git cannot clone."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from librarian.app import Librarian
from librarian.config import Settings
from librarian.embeddings.local import LocalMiniLMEmbedder
from librarian.errors import InvalidInputError
from librarian.ingest.sources.git import GitCheckout, version_from_ref


def git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        check=True,
        capture_output=True,
    )


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository whose v1 documents ``--legacy`` and whose v2 renamed it to ``--modern``."""
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "docs").mkdir()
    (path / "docs" / "sync.md").write_text("# sync\n\nSynchronise folders; pass --legacy for old servers.\n")
    git(path, "add", ".")
    git(path, "commit", "-q", "-m", "v1")
    git(path, "tag", "v1")
    (path / "docs" / "sync.md").write_text("# sync\n\nSynchronise folders; pass --modern for new servers.\n")
    git(path, "commit", "-q", "-am", "v2")
    git(path, "tag", "v2")
    return path


@pytest.fixture
def lib(tmp_path: Path, embedder: LocalMiniLMEmbedder) -> Librarian:
    return Librarian(Settings(home=tmp_path / "home"), embedder=embedder)


def test_two_tags_become_two_versions(lib: Librarian, repo: Path) -> None:
    lib.ingest(str(repo), ref="v1", sdk_name="syncer", sdk_version="1")
    lib.ingest(str(repo), ref="v2", sdk_name="syncer", sdk_version="2")

    v1 = lib.search("synchronise folders", sdk_name="syncer", sdk_version="1")
    v2 = lib.search("synchronise folders", sdk_name="syncer", sdk_version="2")

    assert "--legacy" in v1[0].content and "--modern" in v2[0].content
    assert "@" in v1[0].source_url and v1[0].source_url.endswith("docs/sync.md")
    revisions = {s["ref"]: s["last_revision"] for s in lib.sources()}
    assert revisions["v1"] != revisions["v2"] and len(revisions["v1"]) == 40


def test_branch_refresh_fetches_new_commits(lib: Librarian, repo: Path) -> None:
    lib.ingest(str(repo), ref="main", sdk_name="syncer", sdk_version="dev")
    (repo / "docs" / "sync.md").write_text("# sync\n\nSynchronise folders; pass --future.\n")
    git(repo, "commit", "-q", "-am", "v3")

    report = lib.ingest(str(repo), ref="main", sdk_name="syncer", sdk_version="dev")

    assert report.updated == 1
    assert "--future" in lib.search("synchronise", sdk_name="syncer", sdk_version="dev")[0].content


def test_unknown_ref_is_a_clear_error(lib: Librarian, repo: Path) -> None:
    with pytest.raises(InvalidInputError, match="ref 'v9' does not exist"):
        lib.ingest(str(repo), ref="v9", sdk_name="syncer", sdk_version="9")


def test_option_injection_through_the_uri_or_ref_is_refused(tmp_path: Path, repo: Path) -> None:
    checkout = GitCheckout(tmp_path / "cache")
    marker = tmp_path / "pwned"

    with pytest.raises(InvalidInputError, match="may not start with '-'"):
        checkout.list(f"--upload-pack=touch {marker}", None)
    with pytest.raises(InvalidInputError, match="may not start with '-'"):
        checkout.list(str(repo), f"--output={marker}")
    assert not marker.exists()


@pytest.mark.parametrize(
    "uri", ["https://user:token@git.example.org/repo.git", "https://token@git.example.org/repo.git"]
)
def test_credentials_in_the_url_are_refused_before_anything_is_stored(tmp_path: Path, uri: str) -> None:
    with pytest.raises(InvalidInputError, match="credentials are refused"):
        GitCheckout(tmp_path / "cache").list(uri, None)
    assert not (tmp_path / "cache").exists()


def test_several_tags_in_one_command_become_versions(repo: Path, tmp_path: Path) -> None:
    from tests.cli.test_cli import run

    home = tmp_path / "home"
    reports = json.loads(
        run(home, "ingest", str(repo), "--sdk", "syncer", "--ref", "v1", "--ref", "v2", "--json").stdout
    )
    sdks = json.loads(run(home, "sdks", "--json").stdout)
    refused = run(
        home, "ingest", str(repo), "--sdk", "syncer", "--version", "3", "--ref", "v1", "--ref", "v2", check=1
    )

    assert [r["status"] for r in reports] == ["ok", "ok"]
    assert sdks == [{"sdk_name": "syncer", "versions": ["2", "1"], "chunks": 2}]
    assert "each ref names its own version" in refused.stderr


def test_version_from_ref() -> None:
    assert [version_from_ref(r) for r in ["v2.15.0", "refs/tags/V3", "release-1", "main"]] == [
        "2.15.0",
        "3",
        "release-1",
        "main",
    ]
