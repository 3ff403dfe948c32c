"""URLs of a website crawl: normalisation, the crawl scope, and the links a page holds.

A page is identified by scheme, host, port and path only: the fragment names a place inside the page
and the query of a documentation page is almost always tracking, sorting or a search form, so both
are dropped and a page is fetched once however it is linked.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import PurePosixPath

import httpx

# lxml ships no type information; "unused-ignore" keeps mypy quiet if lxml-stubs get installed.
from lxml import etree  # type: ignore[import-untyped, unused-ignore]
from markdown_it import MarkdownIt
from markdown_it.token import Token

from librarian.errors import InvalidInputError

__all__ = [
    "CrawlScope",
    "HtmlLinks",
    "html_links",
    "is_asset",
    "markdown_links",
    "normalize_url",
    "robots_directives",
]

# Links to these are static assets or archives, never documentation pages: not even requested.
_ASSET_SUFFIXES = frozenset(
    {
        ".png", ".jpg", ".jpeg", ".gif", ".svg", ".webp", ".avif", ".ico", ".bmp", ".tif", ".tiff",
        ".css", ".js", ".mjs", ".map", ".wasm", ".woff", ".woff2", ".ttf", ".otf", ".eot",
        ".zip", ".gz", ".tgz", ".bz2", ".xz", ".zst", ".7z", ".rar", ".tar", ".whl", ".egg", ".jar",
        ".exe", ".dmg", ".msi", ".deb", ".rpm", ".apk", ".iso", ".bin",
        ".mp3", ".mp4", ".m4a", ".webm", ".ogg", ".wav", ".avi", ".mov", ".mkv",
        ".pdf", ".json", ".xml", ".rss", ".atom", ".yaml", ".yml", ".csv",
    }
)  # fmt: skip
_MARKDOWN = MarkdownIt("commonmark", {"maxNesting": 20})


def normalize_url(raw: str, base: str) -> str | None:
    """The absolute page URL ``raw`` (a link found on ``base``) names, or None if it names no page.

    Fragment and query are dropped, the host is lower-cased and a default port left out. Links that
    are not http(s), carry credentials or cannot be parsed name no page.

    Example:
        >>> normalize_url("../b.html?utm_source=x#part", "https://Docs.Example.com:443/a/c/")
        'https://docs.example.com/a/b.html'
        >>> normalize_url("mailto:help@example.com", "https://example.com/") is None
        True
    """
    raw = raw.strip()
    if not raw or raw.startswith("#"):
        return None  # a place inside the same page
    try:
        url = httpx.URL(base).join(raw)
    except (httpx.InvalidURL, ValueError):
        return None
    if url.scheme not in ("http", "https") or not url.host or url.userinfo:
        return None
    return str(url.copy_with(query=None, fragment=None, path=url.path or "/"))


def is_asset(url: str) -> bool:
    """Whether ``url`` names an image, stylesheet, script, archive or other non-page file by its suffix."""
    return PurePosixPath(httpx.URL(url).path).suffix.lower() in _ASSET_SUFFIXES


@dataclass(frozen=True)
class CrawlScope:
    """The pages a crawl may fetch: one origin (scheme, host, port) and a path prefix.

    ``prefix`` always ends with ``/``; a path is inside when it starts with the prefix, or equals the
    prefix without its slash (``/docs`` is the page ``/docs/`` redirects from).
    """

    origin: str
    prefix: str

    @classmethod
    def around(cls, url: str) -> CrawlScope:
        """The default scope of a start URL: its directory (``/docs/a/intro.html`` gives ``/docs/a/``)."""
        parsed = httpx.URL(url)
        return cls(_origin(parsed), parsed.raw_path.decode("ascii").rsplit("/", 1)[0] + "/")

    @classmethod
    def parse(cls, scope: str, start_url: str) -> CrawlScope:
        """An explicit scope: a path prefix (``/docs/``) or a URL on the start URL's origin.

        Raises:
            InvalidInputError: the scope is on another origin, or the start URL is outside it.
        """
        absolute = normalize_url(scope, start_url)
        if absolute is None:
            raise InvalidInputError(f"crawl scope {scope!r} is not a URL path or an http(s) URL")
        parsed = httpx.URL(absolute)
        path = parsed.raw_path.decode("ascii")
        result = cls(_origin(parsed), path if path.endswith("/") else path + "/")
        if not result.contains(start_url):
            raise InvalidInputError(
                f"the start URL {start_url} is outside the crawl scope {result.root}",
                hint="give a scope that is a prefix of the start URL's path",
            )
        return result

    @property
    def root(self) -> str:
        """The URL of the scope's top directory, e.g. ``https://example.com/docs/``."""
        return self.origin + self.prefix

    def contains(self, url: str) -> bool:
        """Whether the (normalised) page ``url`` is inside the scope."""
        parsed = httpx.URL(url)
        return _origin(parsed) == self.origin and (parsed.raw_path.decode("ascii") + "/").startswith(
            self.prefix
        )

    def relative_path(self, url: str) -> str:
        """The stable document path of a page inside the scope, relative to the scope's root.

        Directory pages end in ``index.html`` (as a mirror would save them), so ``/docs/``,
        ``/docs`` and ``/docs/index.html`` are one page.

        Example:
            >>> scope = CrawlScope("https://example.com", "/docs/")
            >>> scope.relative_path("https://example.com/docs/api/"), scope.relative_path("https://example.com/docs")
            ('api/index.html', 'index.html')
        """
        path = httpx.URL(url).raw_path.decode("ascii")
        relative = path[len(self.prefix) :] if path.startswith(self.prefix) else ""
        return relative + "index.html" if relative == "" or relative.endswith("/") else relative


def _origin(url: httpx.URL) -> str:
    port = f":{url.port}" if url.port is not None else ""
    host = url.raw_host.decode("ascii")
    return f"{url.scheme}://{'[' + host + ']' if ':' in host else host}{port}"


@dataclass(frozen=True)
class HtmlLinks:
    """What an HTML page says about links: where they go, its canonical URL, its robots directives."""

    links: list[str]
    canonical: str | None = None
    # <meta name="robots" content="noindex, nofollow"> (or one naming the crawler's user agent).
    directives: frozenset[str] = frozenset()


def robots_directives(value: str) -> frozenset[str]:
    """``"NoIndex, nofollow"`` as ``{"noindex", "nofollow"}``; ``none`` means both.

    Example:
        >>> sorted(robots_directives("none"))
        ['nofollow', 'noindex']
    """
    directives = {part.strip().lower() for part in value.split(",") if part.strip()}
    if "none" in directives:
        directives |= {"noindex", "nofollow"}
    return frozenset(directives)


def html_links(root: etree._Element | None, page_url: str, user_agent: str = "") -> HtmlLinks:
    """The page URLs an HTML page links to (``<a>``, ``<area>``), in order, its canonical URL, and its
    robots directives (``<meta name="robots">`` and one named after ``user_agent``'s product).

    ``root`` is the page's tree from :func:`librarian.ingest.parsers.html.html_root`.

    Relative links resolve against ``<base href>`` when the page has one, else ``page_url``. Links
    marked ``rel="nofollow"`` are left out.
    """
    if root is None:
        return HtmlLinks([])
    base = page_url
    for element in root.iter("base"):
        # The base keeps its file name: relative links resolve against its directory.
        base = normalize_url(element.get("href") or "", page_url) or page_url
        break
    canonical = None
    for element in root.iter("link"):
        if "canonical" in (element.get("rel") or "").lower().split() and element.get("href"):
            canonical = normalize_url(element.get("href"), base)
            break
    names = {"robots", user_agent.split("/", 1)[0].strip().lower()} - {""}
    directives: frozenset[str] = frozenset()
    for element in root.iter("meta"):
        if (element.get("name") or "").strip().lower() in names:
            directives |= robots_directives(element.get("content") or "")
    hrefs = (
        element.get("href")
        for element in root.iter("a", "area")
        if "nofollow" not in (element.get("rel") or "").lower().split()
    )
    links = _unique(normalize_url(href, base) for href in hrefs if href)
    return HtmlLinks(links, canonical, directives)


def markdown_links(text: str, page_url: str) -> list[str]:
    """The page URLs a Markdown document (a ``.md`` page or ``llms.txt``) links to, in order."""
    hrefs: list[str] = []
    stack: list[Token] = list(reversed(_MARKDOWN.parse(text)))
    while stack:
        token = stack.pop()
        if token.type == "link_open":
            href = token.attrGet("href")
            if isinstance(href, str):
                hrefs.append(href)
        stack.extend(reversed(token.children or []))
    return _unique(normalize_url(href, page_url) for href in hrefs)


def _unique(urls: Iterable[str | None]) -> list[str]:
    """The URLs that are not None, each once, in first-seen order."""
    return list(dict.fromkeys(url for url in urls if url is not None))
