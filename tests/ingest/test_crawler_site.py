"""A small documentation website served by a real ``http.server`` on 127.0.0.1 (no tests: the site).

Pages answer with an ETag and a Last-Modified and honour ``If-None-Match`` with 304; every request is
recorded (path, headers, arrival time) so tests can tell what the crawler asked for.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

LAST_MODIFIED = "Wed, 01 Jan 2025 00:00:00 GMT"

INDEX = """<!doctype html>
<html><head><title>Demo SDK docs</title></head><body>
<nav><a href="guide.html">Guide</a> <a href="private/secret.html">Secret</a></nav>
<main>
<h1>Demo SDK</h1>
<p>Welcome to the demo SDK documentation.</p>
<ul>
<li><a href="guide.html#install">Install</a></li>
<li><a href="/outside.html">Outside the scope</a></li>
<li><a href="missing.html">A broken link</a></li>
<li><a href="download">The installer</a></li>
<li><a href="moved">A moved page</a></li>
<li><a href="old-guide">The old guide</a></li>
<li><a href="deep/one.html?ref=nav">Going deeper</a></li>
<li><a href="logo.png"><img src="logo.png" alt="logo"></a></li>
<li><a href="http://example.invalid/docs/x.html">Another site</a></li>
</ul>
</main></body></html>
"""

GUIDE = """<!doctype html>
<html><head><title>Guide</title></head><body><main>
<h1>Guide</h1>
<h2>Install</h2>
<p>Install the frobnicator with pip, then frobnicate at level three.</p>
<pre><code class="language-bash">pip install demo-sdk==1.0
demo-sdk frobnicate --level 3</code></pre>
<p><a href="index.html">Home</a> <a href="deep/one.html">Deeper</a></p>
</main></body></html>
"""


def chain_page(title: str, link: str | None) -> str:
    """A page of the deep chain, linking to the next one."""
    anchor = f'<a href="{link}">next</a>' if link else ""
    body = f"<h1>{title}</h1><p>{title} text. {anchor}</p>"
    return f"<html><head><title>{title}</title></head><body>{body}</body></html>"


HIDDEN = """# Hidden page

Only llms.txt links to this page.

```python
import demo_sdk
demo_sdk.configure(token="...")
```
"""

LLMS = """# Demo SDK

> Documentation of the demo SDK for language models.

- [Hidden page](/docs/hidden.md): reached from no other page
- [Elsewhere](https://example.invalid/llms-elsewhere.html): another site
"""


@dataclass
class Response:
    """What the server answers for one path."""

    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Site:
    """The served pages, editable while the server runs, and the requests it received."""

    base: str = ""
    pages: dict[str, Response] = field(default_factory=dict)
    # Answers given once each, in order, before ``pages`` answers for that path (a 429 then the page).
    first: dict[str, list[Response]] = field(default_factory=dict)
    requests: list[tuple[str, dict[str, str], float]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def html(self, path: str, text: str) -> None:
        """Serve ``text`` as an HTML page at ``path``."""
        self.pages[path] = Response(body=text.encode(), headers={"Content-Type": "text/html; charset=utf-8"})

    def paths(self) -> list[str]:
        """Every path requested, in order."""
        with self.lock:
            return [path for path, _, _ in self.requests]


def demo_site() -> Site:
    """The documentation site the crawler tests use."""
    site = Site()
    site.pages["/robots.txt"] = Response(
        body=b"User-agent: *\nDisallow: /docs/private/\n", headers={"Content-Type": "text/plain"}
    )
    site.html("/docs/", INDEX)
    site.html("/docs/guide.html", GUIDE)
    site.html("/docs/deep/one.html", chain_page("Deep one", "two.html"))
    site.html("/docs/deep/two.html", chain_page("Deep two", "three.html"))
    site.html("/docs/deep/three.html", chain_page("Deep three", None))
    site.html("/docs/private/secret.html", chain_page("Secret", None))
    site.html("/outside.html", chain_page("Outside", None))
    site.html("/elsewhere/page.html", chain_page("Elsewhere", None))
    site.pages["/docs/moved"] = Response(301, headers={"Location": "/elsewhere/page.html"})
    site.pages["/docs/old-guide"] = Response(301, headers={"Location": "/docs/guide.html"})
    site.pages["/docs/download"] = Response(
        body=b"MZ\x90\x00\x03\x00\x00\x00" * 64, headers={"Content-Type": "application/octet-stream"}
    )
    site.pages["/docs/logo.png"] = Response(body=b"\x89PNG\r\n\x1a\n", headers={"Content-Type": "image/png"})
    site.pages["/docs/llms.txt"] = Response(body=LLMS.encode(), headers={"Content-Type": "text/plain"})
    site.pages["/docs/hidden.md"] = Response(body=HIDDEN.encode(), headers={"Content-Type": "text/markdown"})
    return site


def _handler(site: Site) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            with site.lock:
                site.requests.append((self.path, dict(self.headers.items()), time.monotonic()))
                path = self.path.split("?", 1)[0]
                queued = site.first.get(path)
                response = queued.pop(0) if queued else site.pages.get(path)
            if response is None:
                self._send(404, b"not found", {"Content-Type": "text/plain"})
                return
            headers = dict(response.headers)
            if response.status == 200:
                etag = '"' + hashlib.sha256(response.body).hexdigest()[:16] + '"'
                headers |= {"ETag": etag, "Last-Modified": LAST_MODIFIED}
                if self.headers.get("If-None-Match") == etag:
                    self._send(304, b"", {"ETag": etag})
                    return
            self._send(response.status, response.body, headers)

        def _send(self, status: int, body: bytes, headers: dict[str, str]) -> None:
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


def serve(site: Site) -> Iterator[Site]:
    """Serve ``site`` on 127.0.0.1 until the generator is closed; ``site.base`` is its root URL."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(site))
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    site.base = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        yield site
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)
