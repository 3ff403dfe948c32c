"""Website crawler: a documentation site, breadth-first from a start URL, as a listing to ingest.

The crawl stays on the start URL's origin and under its directory (or an explicit scope), honours
robots.txt and a per-host rate limit, stops at a depth and a page limit, and takes the links of the
site's ``llms.txt`` files as extra seeds. Each page becomes one :class:`SourceDocument` whose path is
the page's URL path relative to the scope, so it is stable across crawls.

Refresh is conditional: pages crawled before are requested with ``If-None-Match`` /
``If-Modified-Since``, and a ``304 Not Modified`` page is listed in ``unchanged_paths``, so the pipeline
keeps it as stored. Such a page's links are not read again; instead every page of the previous crawl
is queued, one hop past it. A page that changed must be fetched in full, so a link added to a site is
always found, and a page no crawl reaches any more is deleted by the pipeline.

Failures of single pages (timeouts, HTTP errors, refused addresses, oversize or binary answers)
become :class:`SourceProblem` entries naming the URL and the crawl goes on. Only a start URL that is
refused by the address guard, or a site whose robots.txt cannot be read, fails the crawl as a whole.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import httpx
from sqlalchemy import select
from sqlalchemy.orm import Session

from librarian.errors import InvalidInputError
from librarian.ingest.sources.base import SourceListing
from librarian.ingest.sources.crawler_http import GuardedFetcher, PageValidators, RateLimiter
from librarian.ingest.sources.crawler_urls import CrawlScope, normalize_url
from librarian.ingest.sources.crawler_walk import WHOLE_SOURCE, Crawl, CrawlProgress
from librarian.ingest.sources.remote import AllowList, check_host, parse_http_url
from librarian.storage.models import Document, Source

__all__ = ["WHOLE_SOURCE", "PageValidators", "crawl_listing", "known_page_validators", "normalize_start_url"]


def known_page_validators(session: Session, source: int | str) -> dict[str, PageValidators]:
    """Every live page of a crawled source, by URL, with the validators stored for it.

    Args:
        session: an open session.
        source: the source's id, or its ``source_key`` (:attr:`SourceSpec.key`).

    Returns:
        ``{page URL: PageValidators}``; empty for a source never ingested. Pages without validators are
        included too: a refresh revisits every page it knows.
    """
    query = select(Document.source_url, Document.etag, Document.last_modified).where(
        Document.deleted_at.is_(None)
    )
    if isinstance(source, int):
        query = query.where(Document.source_id == source)
    else:
        query = query.join(Source, Source.id == Document.source_id).where(Source.source_key == source)
    return {url: PageValidators(etag, modified) for url, etag, modified in session.execute(query)}


def normalize_start_url(url: str) -> str:
    """``url`` as the crawl's identity: an http(s) URL without fragment or query, host lower-cased.

    Raises:
        InvalidInputError: not an http(s) URL with a host, or a URL with credentials.

    Example:
        >>> normalize_start_url("https://Docs.Example.com/guide/#intro")
        'https://docs.example.com/guide/'
    """
    parsed = parse_http_url(url, url)  # its message names what is wrong: scheme, host, credentials
    return normalize_url(str(parsed), url) or str(parsed)


def crawl_listing(
    start_url: str,
    *,
    max_pages: int,
    max_depth: int,
    requests_per_second: float,
    user_agent: str,
    allowed_private_hosts: Sequence[str],
    max_page_bytes: int,
    scope: str | None = None,
    known_pages: Mapping[str, PageValidators] | None = None,
    client: httpx.Client | None = None,
    timeout: float = 30.0,
    progress: CrawlProgress | None = None,
) -> SourceListing:
    """Crawl a website breadth-first from ``start_url`` and list its pages as documents.

    Args:
        start_url: the first page (http or https).
        max_pages: pages requested at most (robots.txt and llms.txt not counted). A crawl that stops
            here reports a problem, and the pipeline then deletes no stored page.
        max_depth: links followed from a seed at most (0: only the start URL and llms.txt seeds).
        requests_per_second: requests one host gets at most (slower if robots.txt has a Crawl-delay).
        user_agent: sent with every request and matched against robots.txt.
        allowed_private_hosts: hosts, addresses or CIDR networks that may be reached although
            loopback, private or link-local (setting ``allowed_private_hosts``).
        max_page_bytes: pages larger than this are skipped with a problem.
        scope: a path prefix (``/docs/``) or URL the crawl stays under; default: the directory of the
            start URL after its redirects.
        known_pages: pages of the previous crawl (:func:`known_page_validators`), fetched conditionally.
        client: an httpx client to send requests with (default: a new one without environment
            proxies, so the address guard sees the real peer).
        timeout: seconds allowed for each network operation of a request.
        progress: called as ``progress("pages", fetched, max_pages)`` after each page.

    Returns:
        A listing with one document per page, the ``unchanged_paths`` of pages that answered 304, and a
        problem for each page that failed (its path is the page's relative path when its stored copy
        should be kept, its URL when the page is gone or is no page).

    Raises:
        InvalidInputError: a bad argument, a start URL that is not http(s) or is outside ``scope``, or
            a start URL whose host is refused by the address guard (the message names the URL).
        BackendUnavailableError: the start URL's host cannot be resolved, or its robots.txt cannot be
            read (5xx or unreachable), in which case RFC 9309 forbids crawling.

    Example:
        >>> listing = crawl_listing("https://docs.example.com/guide/", max_pages=50, max_depth=3,
        ...     requests_per_second=2, user_agent="librarian-crawler/0.1", allowed_private_hosts=[],
        ...     max_page_bytes=10_000_000)  # doctest: +SKIP
    """
    if max_pages < 1 or max_depth < 0 or requests_per_second <= 0 or max_page_bytes < 1:
        raise InvalidInputError(
            "crawl limits must be positive: max_pages >= 1, max_depth >= 0, requests_per_second > 0, "
            f"max_page_bytes >= 1 (got {max_pages}, {max_depth}, {requests_per_second}, {max_page_bytes})"
        )
    start = normalize_start_url(start_url)
    allowed = AllowList.parse(allowed_private_hosts)
    check_host(parse_http_url(start, start_url), start_url, allowed)
    explicit_scope = CrawlScope.parse(scope, start) if scope else None
    owned = client is None
    http = client or httpx.Client(transport=httpx.HTTPTransport(), timeout=timeout)
    try:
        fetcher = GuardedFetcher(http, allowed, RateLimiter(requests_per_second), user_agent, max_page_bytes)
        crawl = Crawl(fetcher, explicit_scope, max_pages, max_depth, dict(known_pages or {}), progress)
        return crawl.run(start)
    finally:
        if owned:
            http.close()
