"""Exact identifiers first: a token only one page holds puts that page first, on every backend, never
past the caller's access, and a common token changes nothing."""

from __future__ import annotations

import shutil
from pathlib import Path

from librarian.app import Librarian
from librarian.config import Settings
from librarian.embeddings.local import LocalMiniLMEmbedder
from librarian.evaluation.exact_tokens import first_hits, unique_tokens
from librarian.index.identifiers import lookup_identifiers, query_identifiers
from librarian.knowledge.access import SourceOwner, Visibility

ROOT = Path(__file__).resolve().parents[2]


def test_forty_unique_tokens_of_the_docs_each_find_their_page_first(
    tmp_path: Path, embedder: LocalMiniLMEmbedder
) -> None:
    corpus = tmp_path / "corpus"
    shutil.copytree(ROOT / "docs", corpus / "docs")
    shutil.copy(ROOT / "README.md", corpus / "README.md")
    cases = unique_tokens(sorted(corpus.rglob("*.md")), 40)
    assert len(cases) == 40
    with Librarian(Settings(home=tmp_path / "home"), embedder=embedder) as lib:
        lib.ingest(str(corpus))
        outcomes = first_hits(lib, cases)
    missed = [f"{case.token} ({case.path.name}) -> {first}" for case, ok, first in outcomes if not ok]
    assert missed == []


def test_the_page_holding_an_identifier_comes_first_on_every_backend(
    library: Librarian, tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for index in range(30):  # thirty pages about retries, each naming the common option --retries
        (docs / f"retry{index}.md").write_text(
            f"# Retry policy {index}\n\nRetries failed uploads with backoff. Set `--retries` to tune it.\n"
        )
    (docs / "socket.md").write_text(
        "# Network errors\n\nA stalled upload fails with ERR_SOCKET_STALL_4127 after the backoff.\n"
    )
    library.ingest(str(docs), sdk_name="tool", sdk_version="1.0")

    [first, *_] = library.search("ERR_SOCKET_STALL_4127", top_k=5)
    assert first.source_url.endswith("socket.md") and first.score == 1.0
    [first, *_] = library.search("what does err_socket_stall_4127 mean", top_k=5)  # any case, in a sentence
    assert first.source_url.endswith("socket.md")
    common = library.search("--retries", top_k=10)  # 30 pages hold it: the ranking is fusion's own
    plain = library.search("--retries", top_k=10, exact_identifiers=False)
    assert [hit.chunk_id for hit in common] == [hit.chunk_id for hit in plain]


def test_the_exact_lookup_never_returns_a_page_the_caller_may_not_read(
    settings: Settings, embedder: LocalMiniLMEmbedder, tmp_path: Path
) -> None:
    with Librarian(settings, embedder=embedder) as lib:
        operator = lib.default_principal
        lib.identity.create_organization(operator, "acme")
        for name in ("alice", "bob"):
            lib.identity.create_user(operator, "acme", name)
        alice, bob = (lib.identity.principal_of("acme", name) for name in ("alice", "bob"))
        secret = tmp_path / "secret"
        secret.mkdir()
        (secret / "keys.md").write_text("# Keys\n\nRotate KEY_ROTATION_9931 every quarter.\n")
        owner = SourceOwner(alice.organization_id, alice.user_id, Visibility.PRIVATE)
        lib.ingest(str(secret), owner=owner)
        assert lib.search("KEY_ROTATION_9931", top_k=5, principal=alice)[0].source_url.endswith("keys.md")
        assert lib.search("KEY_ROTATION_9931", top_k=5, principal=bob) == []


def test_only_identifier_like_tokens_count() -> None:
    assert query_identifiers("how do I upload a file with tags") == []
    assert query_identifiers("put-object --tagging fails with E1107") == ["put-object", "--tagging", "E1107"]
    assert len(query_identifiers("s3api put-object --tagging fails with E1107")) == 3  # at most three
    assert lookup_identifiers("what does E1107 mean") == ["E1107"]
    assert lookup_identifiers("I want to classify images of birds with ResNet50 pretrained on ImageNet") == []
    assert query_identifiers("call getObjectTagging on client.s3") == ["getObjectTagging", "client.s3"]
