"""The walk of one website crawl: the frontier, redirects in scope, pages read, problems recorded.

:func:`~librarian.ingest.sources.crawler.crawl_listing` validates its arguments and builds a
:class:`Crawl`; this module holds the breadth-first walk itself.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from librarian.ingest.parsed import ParseError
from librarian.ingest.sources.base import SourceDocument, SourceListing, SourceProblem
from librarian.ingest.sources.crawler_http import (
    FetchError,
    GuardedFetcher,
    PageValidators,
    Reply,
    RobotsRules,
)
from librarian.ingest.sources.crawler_page import page_format, read_page
from librarian.ingest.sources.crawler_urls import (
    CrawlScope,
    is_asset,
    markdown_links,
    normalize_url,
    robots_directives,
)
from librarian.ingest.sources.remote import MAX_REDIRECTS

logger = logging.getLogger(__name__)

__all__ = ["WHOLE_SOURCE", "Crawl", "CrawlProgress"]

# Problems at this path protect every stored page from deletion (an incomplete crawl proves nothing).
WHOLE_SOURCE = "."

CrawlProgress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class _Item:
    url: str
    depth: int
    referrer: str | None


class Crawl:
    """The state of one crawl: the frontier, what was seen, and what the listing will hold."""

    def __init__(
        self,
        fetcher: GuardedFetcher,
        scope: CrawlScope | None,
        max_pages: int,
        max_depth: int,
        known: dict[str, PageValidators],
        progress: CrawlProgress | None,
    ) -> None:
        self.fetcher = fetcher
        self.robots = RobotsRules(fetcher)
        self.scope = scope
        self.max_pages = max_pages
        self.max_depth = max_depth
        self.known = known
        self.progress = progress
        self.queue: deque[_Item] = deque()
        self.seen: set[str] = set()  # relative paths queued or fetched: each page once
        self.pages = 0
        self.known_queued = False
        self.listing = SourceListing(root=Path("."), files=[], problems=[])

    def run(self, start: str) -> SourceListing:
        """Crawl from ``start`` until the frontier is empty or the page limit is reached."""
        self.robots.allowed(start)  # reads robots.txt first: an unreadable one stops the crawl here
        if self.scope is not None:
            self.seen.add(self.scope.relative_path(start))
        self._visit(_Item(start, 0, None), is_start=True)
        if self.scope is None:  # the start page failed before its redirects settled the scope
            self.scope = CrawlScope.around(start)
            self.seen.add(self.scope.relative_path(start))
        if self.listing.problems:  # the start page was not read: its links are unknown
            self._queue_known(1)
        for seed in reversed(self._llms_seeds()):
            # The site's own list of pages for language models goes first, before links of depth 1.
            self._enqueue(seed, 0, referrer="llms.txt", front=True)
        while self.queue:
            if self.pages >= self.max_pages:
                self._problem(
                    WHOLE_SOURCE,
                    f"stopped at the page limit of {self.max_pages}: {len(self.queue)} more pages under "
                    f"{self._scope.root} were not fetched, so no stored page is deleted "
                    "(raise --max-pages to crawl them)",
                )
                break
            self._visit(self.queue.popleft())
        return self.listing

    @property
    def _scope(self) -> CrawlScope:
        assert self.scope is not None, "the scope is known once the start URL was visited"
        return self.scope

    def _enqueue(self, url: str, depth: int, *, referrer: str | None, front: bool = False) -> None:
        if depth > self.max_depth or not self._scope.contains(url) or is_asset(url):
            return
        key = self._scope.relative_path(url)
        if key in self.seen:
            return
        self.seen.add(key)
        item = _Item(url, depth, referrer)
        self.queue.appendleft(item) if front else self.queue.append(item)

    def _visit(self, item: _Item, *, is_start: bool = False) -> None:
        if not self.robots.allowed(item.url):
            if is_start:
                self._problem(WHOLE_SOURCE, f"robots.txt disallows {item.url} for {self.fetcher.user_agent}")
            return
        self.pages += 1
        reply = self._fetch_following_redirects(item, is_start)
        if self.progress:
            self.progress("pages", self.pages, self.max_pages)
        if reply is None:
            return
        url = reply.url
        if reply.status == 304 and url in self.known:
            self.listing.unchanged_paths.append(self._scope.relative_path(url))
            self._queue_known(item.depth + 1)
        elif reply.status in (404, 410):
            where = WHOLE_SOURCE if is_start else url
            self._problem(where, f"{url} answered HTTP {reply.status}{_linked_from(item)}")
        elif reply.status != 200:
            self._failed(item, url, f"{url} answered HTTP {reply.status}{_linked_from(item)}", is_start)
        elif reply.body is None:
            where = WHOLE_SOURCE if is_start else url
            self._problem(where, f"{url} is {reply.content_type or 'untyped'} content, not a page; skipped")
        else:
            self._read(item, reply, is_start)

    def _fetch_following_redirects(self, item: _Item, is_start: bool) -> Reply | None:
        """The final answer for ``item``, following redirects that stay in scope; None when handled."""
        url = item.url
        for _ in range(MAX_REDIRECTS + 1):
            validators = self.known.get(url)
            headers = validators.headers() if validators is not None else {}
            try:
                reply = self.fetcher.get(url, headers=headers, want_body=_is_page)
            except FetchError as exc:
                self._failed(item, url, f"{exc}{_linked_from(item)}", is_start)
                return None
            if reply.location is None or not 300 <= reply.status < 400:
                if is_start and self.scope is None:
                    self.scope = CrawlScope.around(url)
                    self.seen.add(self.scope.relative_path(url))
                return reply
            target = normalize_url(reply.location, url)
            # The start URL may land anywhere (http to https, / to /en/latest/) when it defines the scope.
            free = is_start and self.scope is None
            if target is None or not (free or self._scope.contains(target)):
                shown = target or reply.location
                where = WHOLE_SOURCE if is_start else url
                self._problem(where, f"{url} redirects to {shown}, outside the crawl scope; not followed")
                return None
            if not self.robots.allowed(target):
                if is_start:
                    self._problem(WHOLE_SOURCE, f"robots.txt disallows {target}, where {url} redirects")
                return None
            if not free:
                key = self._scope.relative_path(target)
                if key != self._scope.relative_path(url) and key in self.seen:
                    return None  # the target is fetched on its own
                self.seen.add(key)
            url = target
        self._failed(item, url, f"{item.url} redirects more than {MAX_REDIRECTS} times", is_start)
        return None

    def _read(self, item: _Item, reply: Reply, is_start: bool) -> None:
        assert reply.body is not None
        try:
            page = read_page(
                reply.body,
                url=reply.url,
                content_type=reply.content_type,
                charset=reply.charset,
                user_agent=self.fetcher.user_agent,
            )
        except ParseError as exc:
            self._failed(item, reply.url, f"{reply.url}: {exc}", is_start)
            return
        # The page's <meta name="robots"> and the X-Robots-Tag header: a noindex page is not stored
        # (a stored copy is then removed like a deleted page); a nofollow page's links are not followed.
        directives = page.directives | robots_directives(reply.robots_tag)
        follow = "nofollow" not in directives and item.depth < self.max_depth
        if "noindex" in directives:
            logger.info("%s asks not to be indexed (noindex); not stored", reply.url)
            if follow:
                for link in page.links:
                    self._enqueue(link, item.depth + 1, referrer=reply.url)
            return
        url = reply.url
        canonical = page.canonical
        if canonical is not None and canonical != url and self._scope.contains(canonical):
            key = self._scope.relative_path(canonical)
            # Listed under its canonical URL when that page is not fetched on its own. Sites often
            # point every page's canonical at their home page: a canonical already taken is
            # ignored, so a wrong tag never collapses a crawl into one document.
            if key != self._scope.relative_path(url) and key not in self.seen:
                self.seen.add(key)
                url = canonical
        same = url == reply.url  # validators describe the URL that was fetched
        self.listing.documents.append(
            SourceDocument(
                path=self._scope.relative_path(url),
                url=url,
                text=page.text,
                parsed=page.parsed,
                metadata={"http_url": url},
                etag=reply.etag if same else None,
                last_modified=reply.last_modified if same else None,
            )
        )
        if follow:
            for link in page.links:
                self._enqueue(link, item.depth + 1, referrer=reply.url)

    def _failed(self, item: _Item, url: str, reason: str, is_start: bool) -> None:
        """A page that could not be read this time: its stored copy is kept, its links are unknown."""
        if is_start or self.scope is None or not self.scope.contains(url):
            self._problem(WHOLE_SOURCE if is_start else url, reason)
            return
        self._problem(self.scope.relative_path(url), reason)
        self._queue_known(item.depth + 1)

    def _queue_known(self, depth: int) -> None:
        """Queue every page of the previous crawl: the links of a page not read now are unknown."""
        if self.known_queued:
            return
        self.known_queued = True
        for url in sorted(self.known):
            self._enqueue(url, min(depth, self.max_depth), referrer="the previous crawl")

    def _llms_seeds(self) -> list[str]:
        """Links of ``llms.txt`` at the scope root and at the site root, when they exist."""
        scope = self._scope
        seeds: list[str] = []
        for url in dict.fromkeys([scope.root + "llms.txt", scope.origin + "/llms.txt"]):
            if not self.robots.allowed(url):
                continue
            try:
                reply = self.fetcher.get(
                    url, want_body=lambda content_type, _: content_type.startswith("text/")
                )
            except FetchError:
                continue  # llms.txt is optional: a failure to read it only means no extra seeds
            if reply.status == 200 and reply.body is not None:
                seeds.extend(markdown_links(reply.body.decode("utf-8", errors="replace"), url))
        return list(dict.fromkeys(seeds))

    def _problem(self, path: str, reason: str) -> None:
        self.listing.problems.append(SourceProblem(path=path, reason=reason))


def _is_page(content_type: str, url: str) -> bool:
    return page_format(content_type, url) is not None


def _linked_from(item: _Item) -> str:
    return f" (linked from {item.referrer})" if item.referrer else ""
