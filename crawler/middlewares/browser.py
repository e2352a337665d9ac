"""``BrowserRenderingMiddleware``: render chosen requests in Chromium (scrapy-playwright).

A request is rendered when its meta has ``browser: True`` (also from a JSON
seed's ``meta``) or its spider sets ``render_with_browser = True``. Rendering
goes through scrapy-playwright, started by the first such request
(in ``crawler.download_handler``, which ``ClusterAddon`` installs; with
``BROWSER_ENABLED`` on), with Debian's Chromium (``BROWSER_EXECUTABLE``;
Playwright's own browser download is not needed).
They share one browser context, whose pages are bounded (``BROWSER_MAX_PAGES``; a
page costs about 300 MB), and are closed after each response, also on errors.
Other requests use Scrapy's HTTP downloader as usual.

Stats: ``browser/requests``.
"""

from __future__ import annotations

from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured
from scrapy.statscollectors import StatsCollector

from crawler.settings_values import get_bool

BROWSER_META = "browser"


class BrowserRenderingMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        if not get_bool(crawler.settings, "BROWSER_ENABLED"):
            raise NotConfigured
        self.crawler = crawler
        assert crawler.stats is not None
        self.stats: StatsCollector = crawler.stats

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> BrowserRenderingMiddleware:
        return cls(crawler)

    def process_request(self, request: Request) -> None:
        spider = self.crawler.spider
        wanted = request.meta.get(BROWSER_META) or getattr(spider, "render_with_browser", False)
        if wanted and not request.meta.get("playwright"):
            request.meta["playwright"] = True
            self.stats.inc_value("browser/requests")
