"""A small local site for ordinary user spiders: pages, a sitemap, XML and CSV feeds, redirects.

Page ``i`` (``/p/<i>.html``) links to ``2i+1`` and ``2i+2`` (so every page is
reachable from ``/p/0.html``), to another page, and to itself through a
redirect (``/r/<i>`` answers 302 to ``/p/<i>.html``; on even pages through a
chain of two, ``/c/<i>`` -> ``/r/<i>``) so that redirects to pages already
seen are part of every crawl. Nothing links to page 0: the
start page (``dont_filter``, as Scrapy requests it) is fetched once.
``/x/<i>`` answers 301 to the same page on the host name ``localhost``.
With ``login``, a page is served only to a request carrying a cookie ``sid`` that
``/login`` set (or ``sid=given``); any other gets a page titled "Please log in", with
no links. ``/sitemap.xml`` lists every page, ``/feed.xml`` and ``/feed.csv`` hold one
row per page. Requests are
counted per path, so tests can check that every page was fetched once; those of the
standalone reference crawl (User-Agent ``REFERENCE_AGENT``) apart, so that it can crawl the
site at the same time as a cluster.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from http.cookies import SimpleCookie
from http.server import BaseHTTPRequestHandler

from crawler.demo.server import BackgroundHTTPServer, QuietHandler

REFERENCE_AGENT = "standalone-reference"


def page_path(index: int) -> str:
    return f"/p/{index}.html"


class UserSite(BackgroundHTTPServer):
    def __init__(
        self, pages: int, delay: float = 0.0, fail_once: bool = False, login: bool = False
    ) -> None:
        self.pages = pages
        self.login = login  # pages need the cookie /login sets
        self._sessions = {"given"}  # the sid values /login set
        # every page answers 500 the first time each crawl (reference or not) asks (Scrapy retries)
        self.fail_once = fail_once
        self.delay = delay  # seconds each page waits, so that every node gets work
        self.hits: Counter[str] = Counter()
        self.reference_hits: Counter[str] = Counter()  # the reference crawl's
        self._lock = threading.Lock()
        super().__init__(self._handler())

    def url(self, index: int) -> str:
        return self.base_url + page_path(index)

    def page_hits(self, reference: bool = False) -> Counter[str]:
        """Fetches of each page, by the reference crawl or by everyone else."""
        with self._lock:
            hits = self.reference_hits if reference else self.hits
            return Counter({p: n for p, n in hits.items() if p.startswith("/p/")})

    def _page(self, index: int) -> bytes:
        other = (index * 7 + 3) % self.pages or 1
        targets = [t for t in (2 * index + 1, 2 * index + 2, other) if t < self.pages]
        links = "".join(f'<a href="{page_path(t)}">page {t}</a> ' for t in targets)
        if index:  # odd pages: one redirect; even pages: a chain of two (/c/ -> /r/ -> /p/)
            links += f'<a href="/{"rc"[index % 2 == 0]}/{index}">again</a>'
        return (
            f"<html><head><title>Page {index}</title></head><body><h1>Page {index}</h1>"
            f"{links}</body></html>"
        ).encode()

    def _sitemap(self) -> bytes:
        urls = "".join(f"<url><loc>{self.url(i)}</loc></url>" for i in range(self.pages))
        return (
            '<?xml version="1.0" encoding="UTF-8"?>'
            f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urls}</urlset>'
        ).encode()

    def _feed_xml(self) -> bytes:
        rows = "".join(
            f"<item><n>{i}</n><link>{self.url(i)}</link></item>" for i in range(self.pages)
        )
        return (
            f'<?xml version="1.0" encoding="UTF-8"?><rss><channel>{rows}</channel></rss>'.encode()
        )

    def _feed_csv(self) -> bytes:
        return ("n,link\n" + "".join(f"{i},{self.url(i)}\n" for i in range(self.pages))).encode()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        site = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                path = self.path
                by_reference = self.headers.get("User-Agent") == REFERENCE_AGENT
                with site._lock:
                    hits = site.reference_hits if by_reference else site.hits
                    hits[path] += 1
                    first = hits[path] == 1
                if path.startswith("/x/") and path[3:].isdigit():  # to another host name
                    self.send_response(301)
                    port = site.base_url.rsplit(":", 1)[1]
                    self.send_header("Location", f"http://localhost:{port}/p/{path[3:]}.html")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if path[:3] in ("/r/", "/c/") and path[3:].isdigit():
                    target = page_path(int(path[3:])) if path[1] == "r" else "/r/" + path[3:]
                    self.send_response(302)
                    self.send_header("Location", target)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                fixed = {
                    "/sitemap.xml": ("application/xml", site._sitemap),
                    "/feed.xml": ("application/xml", site._feed_xml),
                    "/feed.csv": ("text/csv", site._feed_csv),
                }
                if path in fixed:
                    content_type, render = fixed[path]
                    self._send(content_type, render())
                    return
                name = path.removeprefix("/p/").removesuffix(".html")
                if path == "/login":
                    self._log_in()
                    return
                if path == "/jslogin":  # the page's script sets the cookie (a browser runs it)
                    script = b'<script>document.cookie = "sid=given; path=/";</script>'
                    start = b'<a href="/p/0.html">start</a>'
                    self._send("text/html", b"<html><title>Welcome</title>" + script + start)
                    return
                if path.startswith("/p/") and name.isdigit() and int(name) < site.pages:
                    if site.delay:
                        time.sleep(site.delay)
                    if site.login and not self._logged_in():
                        self._send("text/html", b"<html><title>Please log in</title></html>")
                    elif site.fail_once and first:
                        self.send_error(500)
                    else:
                        self._send("text/html; charset=utf-8", site._page(int(name)))
                    return
                self.send_error(404)

            def _log_in(self) -> None:
                with site._lock:
                    sid = f"s{len(site._sessions)}"
                    site._sessions.add(sid)
                body = b'<html><title>Welcome</title><a href="/p/0.html">start</a></html>'
                self.send_response(200)
                self.send_header("Set-Cookie", f"sid={sid}; Path=/; HttpOnly")
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _logged_in(self) -> bool:
                cookies = SimpleCookie(self.headers.get("Cookie", ""))
                with site._lock:
                    return "sid" in cookies and cookies["sid"].value in site._sessions

            def _send(self, content_type: str, body: bytes) -> None:
                self.send_response(200)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        return Handler
