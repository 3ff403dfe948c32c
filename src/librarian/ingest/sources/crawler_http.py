"""HTTP for the website crawler: one guarded request at a time, a per-host rate limit, robots.txt.

Every request goes through :class:`GuardedFetcher`, which checks the host's addresses before
connecting and the connected peer afterwards (the guard of :mod:`~librarian.ingest.sources.remote`),
waits its turn under the per-host rate limit and never follows a redirect itself: the crawler decides
which redirects stay in scope, and each hop is checked again.
"""

from __future__ import annotations

import email.utils
import time
import urllib.robotparser
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

import httpx

from librarian.errors import BackendUnavailableError, LibrarianError
from librarian.ingest.sources.remote import (
    MAX_REDIRECTS,
    AllowList,
    check_host,
    check_peer,
    parse_http_url,
    read_body,
)

__all__ = ["FetchError", "GuardedFetcher", "PageValidators", "RateLimiter", "Reply", "RobotsRules"]

# RFC 9309 lets crawlers stop reading robots.txt after 500 KiB.
ROBOTS_MAX_BYTES = 500 * 1024
# A Crawl-delay is honoured up to this many seconds, so a typo cannot stall a crawl for hours.
MAX_CRAWL_DELAY = 60.0
# A 429 "Too Many Requests" (or a 503 that says when to come back) is retried this many times, after
# the server's Retry-After when it is at most MAX_RETRY_AFTER seconds (else the page is a problem).
RETRIES_WHEN_THROTTLED = 2
MAX_RETRY_AFTER = 60.0
# Without a Retry-After, a 429 is retried after 1 s, then 2 s; and the host is asked at most once a
# second for the rest of the crawl.
_THROTTLED_INTERVAL = 1.0
_ACCEPT = "text/html, application/xhtml+xml, text/markdown;q=0.9, text/plain;q=0.8, */*;q=0.1"


class RateLimiter:
    """At most ``per_second`` requests to one host, spaced evenly on a monotonic clock."""

    def __init__(
        self,
        per_second: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._interval = 1.0 / per_second
        self._slower: dict[str, float] = {}
        self._last: dict[str, float] = {}
        self._clock = clock
        self._sleep = sleep

    def pause(self, seconds: float) -> None:
        """Sleep on this limiter's clock (a server's Retry-After)."""
        self._sleep(seconds)

    def slow_down(self, host: str, interval: float) -> None:
        """Space requests to ``host`` at least ``interval`` seconds apart (a robots.txt Crawl-delay)."""
        self._slower[host] = max(self._slower.get(host, 0.0), interval)

    def wait(self, host: str) -> None:
        """Block until a request to ``host`` is allowed, and count it as sent."""
        interval = max(self._interval, self._slower.get(host, 0.0))
        last = self._last.get(host)
        if last is not None:
            remaining = last + interval - self._clock()
            if remaining > 0:
                self._sleep(remaining)
        self._last[host] = self._clock()


@dataclass(frozen=True)
class PageValidators:
    """What a previous crawl stored about a page, for a conditional request (either may be None)."""

    etag: str | None = None
    last_modified: str | None = None

    def headers(self) -> dict[str, str]:
        """The conditional-request headers these validators make."""
        headers = {}
        if self.etag:
            headers["If-None-Match"] = self.etag
        if self.last_modified:
            headers["If-Modified-Since"] = self.last_modified
        return headers


@dataclass(frozen=True)
class Reply:
    """One HTTP answer. ``body`` is read only for a 200 whose content type was wanted."""

    url: str
    status: int
    content_type: str = ""
    charset: str | None = None
    location: str | None = None
    body: bytes | None = None
    etag: str | None = None
    last_modified: str | None = None
    # The X-Robots-Tag header ("noindex, nofollow"), lower-cased.
    robots_tag: str = ""


class FetchError(Exception):
    """A request that failed (refused address, timeout, connection, over the size limit).

    The message names the URL and the reason.
    """


@dataclass
class GuardedFetcher:
    """Sends single GET requests through the address guard and the rate limit."""

    client: httpx.Client
    allowed: AllowList
    limiter: RateLimiter
    user_agent: str
    max_bytes: int
    requests: int = field(default=0, init=False)

    def get(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        want_body: Callable[[str, str], bool] = lambda content_type, url: True,
        max_bytes: int | None = None,
    ) -> Reply:
        """GET ``url`` once, without following redirects.

        Args:
            url: a normalised http(s) URL.
            headers: extra request headers (conditional-request validators).
            want_body: called with the media type and URL of a 200 answer; the body is read only when
                it returns true, so a linked binary is never downloaded.
            max_bytes: the body size limit (default: the fetcher's).

        A 429 answer, or a 503 with a ``Retry-After``, is retried (:data:`RETRIES_WHEN_THROTTLED`
        times) after the delay the server asks for, when that is at most :data:`MAX_RETRY_AFTER`
        seconds; after a 429 the host is asked at most once a second.

        Raises:
            FetchError: the host is refused or unresolvable, the request failed or timed out, or the
                body is over the limit.
        """
        attempt = 0
        while True:
            reply, retry_after = self._get_once(url, headers, want_body, max_bytes)
            if reply.status == 429:
                self.limiter.slow_down(httpx.URL(url).host, _THROTTLED_INTERVAL)
                if retry_after is None:
                    retry_after = _THROTTLED_INTERVAL * 2**attempt
            elif reply.status != 503:
                retry_after = None  # only "too many requests" and "unavailable" ask to come back
            if retry_after is None or retry_after > MAX_RETRY_AFTER or attempt == RETRIES_WHEN_THROTTLED:
                return reply
            self.limiter.pause(retry_after)
            attempt += 1

    def _get_once(
        self,
        url: str,
        headers: Mapping[str, str] | None,
        want_body: Callable[[str, str], bool],
        max_bytes: int | None,
    ) -> tuple[Reply, float | None]:
        """One GET and the answer's Retry-After in seconds (None when absent or unreadable)."""
        try:
            target = parse_http_url(url, url)
            check_host(target, url, self.allowed)
            self.limiter.wait(target.host)
            self.requests += 1
            request_headers = {
                "User-Agent": self.user_agent,
                "Accept": _ACCEPT,
                **(headers or {}),
            }
            with self.client.stream("GET", target, headers=request_headers, follow_redirects=False) as answer:
                check_peer(answer, target, url, self.allowed)
                content_type, charset = _media_type(answer.headers.get("content-type", ""))
                location = answer.headers.get("location") if answer.is_redirect else None
                body = None
                if answer.status_code == 200 and want_body(content_type, url):
                    body = read_body(answer, self.max_bytes if max_bytes is None else max_bytes, url)
                reply = Reply(
                    url=url,
                    status=answer.status_code,
                    content_type=content_type,
                    charset=charset,
                    location=location,
                    body=body,
                    etag=answer.headers.get("etag"),
                    last_modified=answer.headers.get("last-modified"),
                    robots_tag=", ".join(answer.headers.get_list("x-robots-tag")).lower(),
                )
                return reply, retry_after_seconds(answer.headers.get("retry-after"))
        except httpx.TimeoutException as exc:
            raise FetchError(f"timed out fetching {url}") from exc
        except (httpx.RequestError, httpx.InvalidURL) as exc:
            raise FetchError(f"cannot fetch {url}: {exc}") from exc
        except LibrarianError as exc:  # refused address, unresolvable host, over the size limit
            raise FetchError(exc.message) from exc


def retry_after_seconds(header: str | None, now: datetime | None = None) -> float | None:
    """A ``Retry-After`` value (delay in seconds or an HTTP date) as seconds from ``now``.

    Example:
        >>> retry_after_seconds("120"), retry_after_seconds("soon")
        (120.0, None)
    """
    if header is None or not header.strip():
        return None
    value = header.strip()
    if value.isdecimal():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:  # an HTTP date is always GMT
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def _media_type(header: str) -> tuple[str, str | None]:
    """``text/html; charset=UTF-8`` as ``("text/html", "utf-8")``."""
    media, _, parameters = header.partition(";")
    charset = None
    for parameter in parameters.split(";"):
        name, _, value = parameter.partition("=")
        if name.strip().lower() == "charset" and value.strip():
            charset = value.strip().strip("\"'").lower()
    return media.strip().lower(), charset


class RobotsRules:
    """robots.txt of every origin the crawl touches, fetched once each through the guarded fetcher.

    As RFC 9309 says: a 4xx answer (no robots.txt) allows everything; a 5xx answer or an unreachable
    server means the crawler must not crawl that site, so the whole crawl fails. A ``Crawl-delay`` slows
    the rate limit for that host (up to :data:`MAX_CRAWL_DELAY` seconds).
    """

    def __init__(self, fetcher: GuardedFetcher) -> None:
        self._fetcher = fetcher
        self._parsers: dict[str, urllib.robotparser.RobotFileParser] = {}

    def allowed(self, url: str) -> bool:
        """Whether robots.txt lets the crawler's user agent fetch ``url``.

        Raises:
            BackendUnavailableError: the robots.txt of ``url``'s site cannot be read (5xx, timeout,
                refused or unreachable host).
        """
        parsed = httpx.URL(url)
        origin = str(parsed.copy_with(path="/", query=None, fragment=None))
        parser = self._parsers.get(origin)
        if parser is None:
            parser = self._parsers[origin] = self._load(origin + "robots.txt", parsed.host)
        return parser.can_fetch(self._fetcher.user_agent, url)

    def _load(self, robots_url: str, host: str) -> urllib.robotparser.RobotFileParser:
        parser = urllib.robotparser.RobotFileParser(robots_url)
        url = robots_url
        for _ in range(MAX_REDIRECTS + 1):
            try:
                reply = self._fetcher.get(url, max_bytes=ROBOTS_MAX_BYTES)
            except FetchError as exc:
                raise BackendUnavailableError(
                    f"cannot read {robots_url}, so the site may not be crawled: {exc}",
                    hint="check the URL and that the site is up; robots.txt must answer 2xx or 4xx",
                ) from exc
            if reply.location is not None and 300 <= reply.status < 400:
                url = str(httpx.URL(url).join(reply.location))
                continue
            break
        else:
            reply = Reply(url=url, status=404)  # RFC 9309: too many redirects counts as unavailable
        if reply.status >= 500:
            raise BackendUnavailableError(
                f"{robots_url} answered HTTP {reply.status}, so the site may not be crawled now",
                hint="try again later",
            )
        # A 4xx answer parses as an empty file, which allows everything. parse() also marks the parser
        # as read: can_fetch answers False for a parser it believes was never read.
        body = reply.body if 200 <= reply.status < 300 and reply.body else b""
        parser.parse(body.decode("utf-8", errors="replace").splitlines())
        delay = parser.crawl_delay(self._fetcher.user_agent)
        if delay is not None:
            self._fetcher.limiter.slow_down(host, min(float(delay), MAX_CRAWL_DELAY))
        return parser
