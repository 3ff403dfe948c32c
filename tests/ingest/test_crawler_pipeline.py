"""A crawl through the real ingest pipeline: pages searchable, refresh conditional, gone pages deleted."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select

from librarian.app import Librarian
from librarian.config import Settings
from librarian.embeddings.local import LocalMiniLMEmbedder
from librarian.ingest.pipeline import IngestReport
from librarian.ingest.sources.crawler import crawl_listing, known_page_validators
from librarian.storage import repository
from librarian.storage.models import Document
from tests.ingest.test_crawler_site import Response, Site, demo_site, serve


@pytest.fixture
def site() -> Iterator[Site]:
    """The demo documentation site, served on 127.0.0.1."""
    yield from serve(demo_site())


def ingest_crawl(lib: Librarian, start: str) -> IngestReport:
    """What ``Librarian.crawl`` does: a crawl made conditional by the validators stored for the source."""
    key = repository.SourceSpec(uri=start, kind="website", sdk_name="demo", sdk_version="1.0").key
    with lib.sessions() as session:
        known = known_page_validators(session, key)
    settings = lib.settings
    return lib.ingest_listing(
        start,
        "website",
        lambda: crawl_listing(
            start,
            max_pages=settings.crawl_max_pages,
            max_depth=settings.crawl_max_depth,
            requests_per_second=1000.0,
            user_agent=settings.crawl_user_agent,
            allowed_private_hosts=settings.allowed_private_hosts,
            max_page_bytes=settings.max_file_bytes,
            known_pages=known,
        ),
        sdk_name="demo",
        sdk_version="1.0",
    )


def test_crawled_pages_are_searchable_and_a_refresh_keeps_unchanged_ones(
    site: Site, tmp_path: Path, embedder: LocalMiniLMEmbedder
) -> None:
    settings = Settings.load(home=tmp_path / "home", allowed_private_hosts=["127.0.0.1"])
    start = f"{site.base}/docs/"
    with Librarian(settings, embedder=embedder) as lib:
        first = ingest_crawl(lib, start)

        assert (first.added, first.failed, first.status) == (6, 3, "partial")  # 404, binary, redirect
        hit = lib.search("frobnicate at level three", sdk_name="demo", sdk_version="1.0")[0]
        assert hit.source_url == f"{start}guide.html" and hit.section_path == "Guide > Install"
        assert "```bash\npip install demo-sdk==1.0" in hit.content
        with lib.sessions() as session:
            stored = session.scalars(select(Document).where(Document.source_id == first.source_id)).all()
            assert all(d.etag and d.last_modified for d in stored)
            assert first.source_id is not None
            by_id = known_page_validators(session, first.source_id)
        assert len(by_id) == 6

        site.requests.clear()
        second = ingest_crawl(lib, start)

        assert second.status == "unchanged"
        assert (second.unchanged, second.added, second.updated, second.deleted) == (6, 0, 0, 0)
        assert second.chunks_written == 0
        not_modified = [p for p, headers, _ in site.requests if "If-None-Match" in headers]
        assert len(not_modified) == 6
        hit = lib.search("frobnicate at level three", sdk_name="demo", sdk_version="1.0")[0]
        assert hit.source_url == f"{start}guide.html"
        assert lib.search("configure the token", sdk_name="demo")[0].source_url == f"{start}hidden.md"

        # A page gone upstream is deleted; a page failing for now keeps its stored chunks.
        del site.pages["/docs/deep/three.html"]
        site.pages["/docs/guide.html"] = Response(500, b"down for maintenance")
        third = ingest_crawl(lib, start)

        assert (third.deleted, third.unchanged, third.status) == (1, 4, "partial")
        assert {p["path"] for p in third.problems} == {"guide.html", f"{start}deep/three.html"}
        hit = lib.search("frobnicate at level three", sdk_name="demo", sdk_version="1.0")[0]
        assert hit.source_url == f"{start}guide.html"
        urls = {h.source_url for h in lib.search("Deep three text", sdk_name="demo", top_k=20)}
        assert f"{start}deep/three.html" not in urls and f"{start}deep/two.html" in urls
