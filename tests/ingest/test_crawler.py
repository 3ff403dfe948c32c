"""The website crawler against a real HTTP server on 127.0.0.1: scope, limits, robots.txt, llms.txt,
problems, the address guard and conditional refresh."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from librarian.errors import BackendUnavailableError, InvalidInputError
from librarian.ingest.chunking import chunk_document
from librarian.ingest.sources.base import SourceListing
from librarian.ingest.sources.crawler import PageValidators, crawl_listing
from librarian.ingest.sources.crawler_http import RateLimiter, retry_after_seconds
from librarian.ingest.sources.crawler_urls import CrawlScope, normalize_url
from tests.ingest.test_crawler_site import Response, Site, chain_page, demo_site, serve

ALL_PAGES = {
    "index.html",
    "guide.html",
    "deep/one.html",
    "deep/two.html",
    "deep/three.html",
    "hidden.md",
}


@pytest.fixture
def site() -> Iterator[Site]:
    """The demo documentation site, served on 127.0.0.1."""
    yield from serve(demo_site())


def crawl(site: Site, path: str = "/docs/", **overrides: Any) -> SourceListing:
    """Crawl ``site`` from ``path`` with generous limits and 127.0.0.1 allow-listed."""
    options: dict[str, Any] = {
        "max_pages": 50,
        "max_depth": 5,
        "requests_per_second": 1000.0,
        "user_agent": "librarian-test/1.0",
        "allowed_private_hosts": ["127.0.0.1"],
        "max_page_bytes": 1_000_000,
        "timeout": 5.0,
    }
    options.update(overrides)
    return crawl_listing(site.base + path, **options)


def paths(listing: SourceListing) -> set[str]:
    return {document.path for document in listing.documents}


def reasons(listing: SourceListing) -> dict[str, str]:
    return {problem.path: problem.reason for problem in listing.problems}


def test_the_crawl_stays_in_scope_and_obeys_robots_txt(site: Site) -> None:
    listing = crawl(site)

    assert paths(listing) == ALL_PAGES
    requested = site.paths()
    # Outside the path prefix, disallowed by robots.txt, an asset by its suffix, another host.
    for never in ("/outside.html", "/docs/private/secret.html", "/docs/logo.png", "/elsewhere/page.html"):
        assert never not in requested
    # Fragment and query are dropped, and an in-scope redirect to a known page adds nothing.
    assert requested.count("/docs/guide.html") == 1
    assert requested.count("/docs/deep/one.html") == 1
    assert "/docs/deep/one.html?ref=nav" not in requested
    assert all(headers["User-Agent"] == "librarian-test/1.0" for _, headers, _ in site.requests)
    index = next(d for d in listing.documents if d.path == "index.html")
    assert index.url == f"{site.base}/docs/" and index.metadata == {"http_url": f"{site.base}/docs/"}
    assert index.parsed.title == "Demo SDK docs" and "Welcome to the demo SDK" in index.text


def test_broken_and_binary_pages_are_problems_and_the_rest_is_ingested(site: Site) -> None:
    listing = crawl(site)

    found = reasons(listing)
    missing, download = f"{site.base}/docs/missing.html", f"{site.base}/docs/download"
    assert found[missing] == f"{missing} answered HTTP 404 (linked from {site.base}/docs/)"
    assert "application/octet-stream content, not a page" in found[download]
    assert "/docs/download" in site.paths()
    assert paths(listing) == ALL_PAGES


def test_a_redirect_out_of_scope_is_reported_and_not_followed(site: Site) -> None:
    listing = crawl(site)

    moved = f"{site.base}/docs/moved"
    assert reasons(listing)[moved] == (
        f"{moved} redirects to {site.base}/elsewhere/page.html, outside the crawl scope; not followed"
    )
    assert "/elsewhere/page.html" not in site.paths()


def test_llms_txt_seeds_a_page_that_no_link_reaches(site: Site) -> None:
    listing = crawl(site)

    hidden = next(d for d in listing.documents if d.path == "hidden.md")
    assert hidden.url == f"{site.base}/docs/hidden.md"
    assert hidden.parsed.title == "Hidden page"
    assert "/llms.txt" in site.paths() and "/docs/llms.txt" in site.paths()
    # llms.txt pages come first: they are the site's own choice of pages for a language model.
    assert site.paths().index("/docs/hidden.md") < site.paths().index("/docs/guide.html")


def test_code_blocks_are_kept_whole_in_the_chunks(site: Site) -> None:
    listing = crawl(site)

    guide = next(d for d in listing.documents if d.path == "guide.html")
    chunks = chunk_document(guide.parsed, max_chars=1500)
    install = next(c for c in chunks if c.section_path == ("Guide", "Install"))
    assert "```bash\npip install demo-sdk==1.0\ndemo-sdk frobnicate --level 3\n```" in install.content
    assert "```bash" in guide.text
    hidden = next(d for d in listing.documents if d.path == "hidden.md")
    assert '```python\nimport demo_sdk\ndemo_sdk.configure(token="...")\n```' in hidden.text


def test_the_depth_limit_stops_following_links(site: Site) -> None:
    listing = crawl(site, max_depth=2)

    assert paths(listing) == ALL_PAGES - {"deep/three.html"}
    assert "/docs/deep/three.html" not in site.paths()


def test_depth_zero_fetches_only_the_start_page_and_llms_txt_seeds(site: Site) -> None:
    listing = crawl(site, max_depth=0)

    assert paths(listing) == {"index.html", "hidden.md"}
    assert listing.problems == []


def test_the_page_limit_stops_the_crawl_and_protects_stored_pages(site: Site) -> None:
    listing = crawl(site, max_pages=3)

    assert paths(listing) == {"index.html", "hidden.md", "guide.html"}
    page_requests = [p for p in site.paths() if not p.endswith(("robots.txt", "llms.txt"))]
    assert len(page_requests) == 3
    # A problem at "." tells the pipeline the listing is incomplete, so it deletes nothing.
    assert "stopped at the page limit of 3" in reasons(listing)["."]


def test_loopback_is_refused_unless_allow_listed(site: Site) -> None:
    start = f"{site.base}/docs/"
    with pytest.raises(InvalidInputError) as caught:
        crawl(site, allowed_private_hosts=[])

    message = str(caught.value)
    assert start in message and "127.0.0.1 is a loopback address" in message
    assert "allowed_private_hosts" in message
    assert site.requests == []

    with pytest.raises(InvalidInputError, match="is a loopback address"):
        crawl(site, allowed_private_hosts=["10.0.0.0/8", "docs.internal"])

    assert paths(crawl(site, allowed_private_hosts=["127.0.0.0/8"])) == ALL_PAGES


def test_robots_txt_disallowing_everything_leaves_the_site_alone(site: Site) -> None:
    site.pages["/robots.txt"] = Response(body=b"User-agent: librarian-test\nDisallow: /\n")

    listing = crawl(site)

    assert listing.documents == [] and site.paths() == ["/robots.txt"]
    assert reasons(listing) == {".": f"robots.txt disallows {site.base}/docs/ for librarian-test/1.0"}


def test_a_robots_txt_server_error_fails_the_whole_crawl(site: Site) -> None:
    site.pages["/robots.txt"] = Response(503, b"down")

    with pytest.raises(BackendUnavailableError, match=r"robots\.txt answered HTTP 503"):
        crawl(site)
    assert site.paths() == ["/robots.txt"]


def test_a_missing_robots_txt_allows_everything(site: Site) -> None:
    del site.pages["/robots.txt"]

    listing = crawl(site)

    assert paths(listing) == ALL_PAGES | {"private/secret.html"}


def test_a_failing_start_page_keeps_every_stored_page(site: Site) -> None:
    site.pages["/docs/"] = Response(500, b"oops")

    listing = crawl(site)

    assert reasons(listing)["."] == f"{site.base}/docs/ answered HTTP 500"
    assert paths(listing) == {"hidden.md"}  # llms.txt still seeds the crawl


def test_oversized_pages_are_problems_that_keep_the_stored_copy(site: Site) -> None:
    site.html("/docs/guide.html", "<html><body>" + "<p>big</p>" * 2000 + "</body></html>")

    listing = crawl(site, max_page_bytes=10_000)

    assert "guide.html" not in paths(listing)
    assert "over the 10,000-byte limit" in reasons(listing)["guide.html"]
    assert "deep/one.html" in paths(listing)


def test_the_start_redirect_sets_the_scope_and_canonical_links_merge_duplicates(site: Site) -> None:
    site.pages["/start"] = Response(302, headers={"Location": "/docs/"})
    site.html(
        "/docs/guide.html",
        '<html><head><link rel="canonical" href="/docs/guide/"></head><body><h1>Guide</h1></body></html>',
    )

    listing = crawl(site, path="/start")

    assert "index.html" in paths(listing) and "/outside.html" not in site.paths()
    guide = next(d for d in listing.documents if d.url.endswith("/docs/guide/"))
    assert guide.path == "guide/index.html"
    assert guide.etag is None  # validators belong to the URL fetched, not to the canonical one


def test_requests_to_a_host_are_spaced_by_the_rate_limit(site: Site) -> None:
    crawl(site, requests_per_second=25.0, max_depth=1)

    times = [arrived for _, _, arrived in site.requests]
    assert len(times) >= 7
    # 0.04 s apart when sent; the span (not each gap) is checked, with a fifth of slack: the first
    # request also opens the connection, and on a loaded machine it arrived 17 ms later than its
    # send time while the last did not (CI, 2026-11-29: 0.383 s for 0.40). Without the limiter the
    # whole crawl takes a few milliseconds.
    assert times[-1] - times[0] >= (len(times) - 1) * 0.04 * 0.8


def test_the_rate_limiter_waits_on_its_clock() -> None:
    now = [100.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    limiter = RateLimiter(2.0, clock=lambda: now[0], sleep=sleep)
    limiter.wait("a")
    limiter.wait("a")
    limiter.wait("b")  # another host has its own budget
    limiter.slow_down("a", 3.0)
    now[0] += 1.0
    limiter.wait("a")

    assert slept == [0.5, 2.0]


def test_conditional_refresh_keeps_unchanged_pages_without_downloading_them(site: Site) -> None:
    first = crawl(site)
    known = {d.url: PageValidators(d.etag, d.last_modified) for d in first.documents}
    assert all(v.etag and v.last_modified for v in known.values())
    site.requests.clear()

    second = crawl(site, known_pages=known)

    assert second.documents == [] and second.problems == []
    assert set(second.unchanged_paths) == ALL_PAGES
    conditional = [(path, headers) for path, headers, _ in site.requests if "If-None-Match" in headers]
    assert {path for path, _ in conditional} == {
        "/docs/",
        "/docs/guide.html",
        "/docs/deep/one.html",
        "/docs/deep/two.html",
        "/docs/deep/three.html",
        "/docs/hidden.md",
    }
    assert all(headers["If-Modified-Since"] for _, headers in conditional)
    # Only robots.txt, llms.txt and the conditional requests: no page was downloaded again.
    assert len(site.requests) == len(conditional) + 3


def test_a_changed_page_is_fetched_in_full_and_its_new_link_followed(site: Site) -> None:
    first = crawl(site)
    known = {d.url: PageValidators(d.etag, d.last_modified) for d in first.documents}
    site.html("/docs/deep/two.html", chain_page("Deep two, revised", "new.html"))
    site.html("/docs/deep/new.html", chain_page("Brand new", None))

    second = crawl(site, known_pages=known)

    assert paths(second) == {"deep/two.html", "deep/new.html"}
    assert set(second.unchanged_paths) == ALL_PAGES - {"deep/two.html"}
    revised = next(d for d in second.documents if d.path == "deep/two.html")
    assert "Deep two, revised" in revised.text and revised.etag != known[revised.url].etag


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("guide.html#install", "https://example.com/docs/guide.html"),
        ("../other/?b=2&a=1", "https://example.com/other/"),
        ("HTTPS://EXAMPLE.com:443", "https://example.com/"),
        ("mailto:team@example.com", None),
        ("javascript:void(0)", None),
        ("#top", None),
        ("https://user:pw@example.com/x", None),
    ],
)
def test_links_are_normalised_so_a_page_is_fetched_once(raw: str, expected: str | None) -> None:
    assert normalize_url(raw, "https://example.com/docs/index.html") == expected


def test_scope_paths_are_stable_and_prefixes_match_whole_segments() -> None:
    scope = CrawlScope.around("https://example.com/docs/intro.html")

    assert scope == CrawlScope("https://example.com", "/docs/")
    assert scope.contains("https://example.com/docs") and scope.contains("https://example.com/docs/a/b")
    assert not scope.contains("https://example.com/docs-old/a")
    assert not scope.contains("http://example.com/docs/a")
    assert scope.relative_path("https://example.com/docs/index.html") == "index.html"
    assert scope.relative_path("https://example.com/docs/") == "index.html"
    assert scope.relative_path("https://example.com/docs/api/v1") == "api/v1"
    with pytest.raises(InvalidInputError, match="outside the crawl scope"):
        CrawlScope.parse("/guide/", "https://example.com/docs/")


@pytest.mark.parametrize(
    ("start", "expected"),
    [
        ("ftp://example.com/docs/", r"only http\(s\) URLs"),
        ("https://user:secret@example.com/docs/", "credentials are refused"),
        ("docs.example.com/guide", r"only http\(s\) URLs"),
    ],
)
def test_start_urls_that_cannot_be_crawled_are_refused(start: str, expected: str) -> None:
    with pytest.raises(InvalidInputError, match=expected):
        crawl_listing(
            start,
            max_pages=5,
            max_depth=1,
            requests_per_second=1.0,
            user_agent="librarian-test/1.0",
            allowed_private_hosts=[],
            max_page_bytes=1000,
        )


def test_canonical_links_all_pointing_home_never_collapse_the_crawl(site: Site) -> None:
    home = '<link rel="canonical" href="/docs/">'
    site.html("/docs/guide.html", f"<html><head>{home}</head><body><h1>Guide</h1><p>g</p></body></html>")
    site.html("/docs/api.html", f"<html><head>{home}</head><body><h1>API</h1><p>a</p></body></html>")
    site.html(
        "/docs/",
        '<html><body><h1>Home</h1><a href="guide.html">g</a> <a href="api.html">a</a></body></html>',
    )

    listing = crawl(site, max_depth=1)

    assert {"index.html", "guide.html", "api.html"} <= paths(listing)


def test_a_charset_that_is_not_a_text_encoding_is_a_problem_not_a_crash(site: Site) -> None:
    site.pages["/docs/guide.html"] = Response(
        body=b"<html><body>hi</body></html>", headers={"Content-Type": "text/html; charset=hex"}
    )

    listing = crawl(site)

    assert "not a text encoding" in reasons(listing)["guide.html"]
    assert "index.html" in paths(listing)


def test_too_many_requests_is_retried_after_the_servers_delay(site: Site) -> None:
    site.first["/docs/guide.html"] = [Response(429, b"slow down", {"Retry-After": "1"})]

    listing = crawl(site, max_depth=1)

    assert "guide.html" in paths(listing) and "guide.html" not in reasons(listing)
    times = [at for path, _, at in site.requests if path == "/docs/guide.html"]
    assert len(times) == 2 and times[1] - times[0] >= 0.95


def test_a_retry_after_too_long_to_wait_is_a_problem_for_that_page_only(site: Site) -> None:
    site.first["/docs/guide.html"] = [Response(429, b"", {"Retry-After": "3600"})]

    listing = crawl(site, max_depth=1)

    assert "answered HTTP 429" in reasons(listing)["guide.html"]
    assert site.paths().count("/docs/guide.html") == 1, "an hour is not waited for"
    assert "index.html" in paths(listing)


@pytest.mark.parametrize(
    ("header", "expected"),
    [("120", 120.0), ("", None), ("soon", None), ("Wed, 01 Jan 2025 00:01:00 GMT", 60.0)],
)
def test_retry_after_is_read_as_seconds_or_a_date(header: str, expected: float | None) -> None:
    now = datetime(2025, 1, 1, tzinfo=UTC)
    assert retry_after_seconds(header, now) == expected


def test_meta_robots_noindex_and_nofollow_are_obeyed(site: Site) -> None:
    site.html(
        "/docs/",
        '<html><head><meta name="robots" content="noindex"></head><body><h1>Home</h1>'
        '<a href="guide.html">g</a> <a rel="nofollow" href="deep/one.html">d</a></body></html>',
    )
    site.html(
        "/docs/guide.html",
        '<html><head><meta name="librarian-test" content="NoFollow"></head><body><h1>Guide</h1>'
        '<p>guide text</p><a href="deep/two.html">two</a></body></html>',
    )

    listing = crawl(site, max_depth=3)

    assert "index.html" not in paths(listing), "noindex: not stored, but its links are followed"
    assert "guide.html" in paths(listing)
    fetched = site.paths()
    assert "/docs/deep/one.html" not in fetched, "a rel=nofollow link is not followed"
    assert "/docs/deep/two.html" not in fetched, "a nofollow page's links are not followed"


def test_the_x_robots_tag_header_counts_like_the_meta_tag(site: Site) -> None:
    page = site.pages["/docs/guide.html"]
    site.pages["/docs/guide.html"] = Response(
        body=page.body, headers={**page.headers, "X-Robots-Tag": "none"}
    )

    listing = crawl(site, max_depth=2)

    assert "guide.html" not in paths(listing)
    assert "index.html" in paths(listing)
