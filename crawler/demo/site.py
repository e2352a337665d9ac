"""A generated static site of linked pages, served on loopback.

Page ``i`` (``/p/<i>.html``) links to its children ``2i+1`` and ``2i+2`` (so
every page is reachable from ``/``), to one more page chosen by a seeded
formula and back to the index; ``extra_links`` adds that many more seeded
pseudo-random links per page (a link-dense site, like ``scrapy bench``'s).
Titles mix Chinese text and an emoji so byte-exact UTF-8 round trips can be
checked. The server counts hits per path and can delay every response
(``delay``) so that a crawl lasts long enough to interrupt.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler

from crawler.demo.server import BackgroundHTTPServer, QuietHandler


def page_path(index: int) -> str:
    return "/" if index == 0 else f"/p/{index}.html"


def page_title(index: int) -> str:
    return f"第{index}页 · 分布式爬虫测试 🕷️ page {index}"


def render_page(index: int, pages: int, extra_links: int = 0) -> bytes:
    targets = [2 * index + 1, 2 * index + 2, (index * 7919 + 13) % pages, 0]
    targets += [(index * 7919 + 104729 * (n + 2)) % pages for n in range(extra_links)]
    links = "".join(
        f'<li><a href="{page_path(t)}">{page_title(t)}</a></li>' for t in targets if t < pages
    )
    return (
        '<!doctype html><html><head><meta charset="utf-8">'
        f"<title>{page_title(index)}</title></head><body>"
        f"<h1>{page_title(index)}</h1><p>内容：这是第{index}页。Ünïcödé ✓</p>"
        f"<ul>{links}</ul></body></html>"
    ).encode()


class Site(BackgroundHTTPServer):
    """Serves ``pages`` generated pages on 127.0.0.1 in a background thread."""

    def __init__(
        self,
        pages: int,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        delay: float = 0.0,
        answer_once: dict[str, tuple[int, dict[str, str]]] | None = None,
        robots: str | None = None,
        extra_links: int = 0,
    ) -> None:
        if pages < 1:
            raise ValueError(f"pages={pages} must be >= 1")
        self.pages = pages
        self.delay = delay  # seconds each response waits, to make a crawl last
        # path -> (status, headers) answered the first time that path is asked for
        self.answer_once = dict(answer_once or {})
        self.robots = robots  # served at /robots.txt when given (else 404)
        self.extra_links = extra_links  # more seeded links per page (link-dense site)
        self.hits: Counter[str] = Counter()
        self.hit_times: list[float] = []  # time.monotonic() of every request
        self.special_answers: list[tuple[float, str, int]] = []
        self._lock = threading.Lock()
        super().__init__(self._handler_class(), host, port)

    def url(self, index: int) -> str:
        return self.base_url + page_path(index)

    def all_urls(self) -> set[str]:
        return {self.url(i) for i in range(self.pages)}

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        site = self
        paths = {page_path(i): i for i in range(self.pages)}

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                with site._lock:
                    site.hits[self.path] += 1
                    site.hit_times.append(time.monotonic())
                    special = site.answer_once.pop(self.path, None)
                    if special is not None:
                        site.special_answers.append((time.monotonic(), self.path, special[0]))
                if special is not None:
                    self.send_response(special[0])
                    for name, value in special[1].items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if self.path == "/robots.txt" and site.robots is not None:
                    self._send(200, "text/plain; charset=utf-8", site.robots.encode())
                    return
                index = paths.get(self.path)
                if index is None:
                    self.send_error(404)
                    return
                if site.delay:
                    time.sleep(site.delay)
                body = render_page(index, site.pages, site.extra_links)
                self._send(200, "text/html; charset=utf-8", body)

            def _send(self, status: int, content_type: str, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        return Handler
