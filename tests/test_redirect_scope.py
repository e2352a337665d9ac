"""Redirects obey the scope rules of links, and a refused redirect is a failure with a reason.

Real nodes on Redis crawl a local site whose pages redirect to another site on
127.0.0.1: the ``pages`` spider keeps to its seed's host and port, a spider with
``allowed_domains`` to those domains (as Scrapy's ``OffsiteMiddleware`` filters links),
for a seed (``dont_filter``) as for a link.
"""

from __future__ import annotations

from collections import Counter
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from crawler.demo.server import BackgroundHTTPServer, QuietHandler
from tests.one_node import NodeRun, crawl, page, send


class RedirectSite(BackgroundHTTPServer):
    """``/`` links to ``/p/1``, ``/in`` (302 to ``/p/2`` here) and ``/out``; ``/out`` and
    ``/jump`` answer 302 to ``offsite``; ``/link`` links to ``offsite``; every other path
    is a page. Hits are counted."""

    def __init__(self) -> None:
        self.offsite = ""
        self.hits: Counter[str] = Counter()
        site = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                site.hits[self.path] += 1
                if self.path in ("/out", "/jump"):
                    send(self, 302, Location=site.offsite)
                elif self.path == "/in":
                    send(self, 302, Location="/p/2")
                elif self.path == "/":
                    send(self, 200, page("home", "/p/1", "/in", "/out"))
                elif self.path == "/link":
                    send(self, 200, page("link", site.offsite, "/p/3"))
                else:
                    send(self, 200, page(self.path))

        handler: type[BaseHTTPRequestHandler] = Handler
        super().__init__(handler)


def check_refused(run: NodeRun, site: RedirectSite, delivered: set[str]) -> None:
    assert run.urls() == delivered, run.log[-3000:]
    assert sorted((r["reason"], r["request"]["url"]) for r in run.failed) == [
        ("redirect/offsite", site.base_url + "/jump"),
        ("redirect/offsite", site.base_url + "/out"),
    ], run.log[-3000:]
    assert all(site.offsite in record["error"] for record in run.failed)
    assert run.stat("redirect/offsite") == 2
    assert run.stat("frontier/failed/redirect/offsite") == 2
    assert run.stat("frontier/stragglers") == 0
    assert run.leftover == 0


def test_pages_spider_refuses_a_redirect_to_another_site(tmp_path: Path, redis_url: str) -> None:
    with RedirectSite() as site, RedirectSite() as other:
        site.offsite = other.base_url + "/landing"
        run = crawl(
            "pages",
            [site.base_url + "/", site.base_url + "/jump"],
            workdir=tmp_path,
            redis_url=redis_url,
        )
        assert other.hits == Counter()
    check_refused(run, site, {site.base_url + p for p in ("/", "/p/1", "/p/2")})


def test_allowed_domains_bind_redirects_of_seeds_and_links(tmp_path: Path, redis_url: str) -> None:
    with RedirectSite() as site:
        port = site.base_url.rsplit(":", 1)[1]
        site.offsite = f"http://localhost:{port}/landing"  # the same server, another host name
        run = crawl(
            "scoped",
            [site.base_url + "/", site.base_url + "/jump"],
            workdir=tmp_path,
            redis_url=redis_url,
        )
        assert site.hits["/landing"] == 0
    check_refused(run, site, {site.base_url + p for p in ("/", "/p/1", "/p/2")})


def test_a_link_offsite_middleware_drops_does_not_hold_its_parent(
    tmp_path: Path, redis_url: str
) -> None:
    with RedirectSite() as site:
        port = site.base_url.rsplit(":", 1)[1]
        site.offsite = f"http://localhost:{port}/landing"
        run = crawl(
            "scoped", [site.base_url + "/link"], workdir=tmp_path, redis_url=redis_url, timeout=15
        )
    assert run.urls() == {site.base_url + "/link", site.base_url + "/p/3"}
    assert run.stat("frontier/done") == 2
    assert run.leftover == 0
