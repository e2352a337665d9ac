"""``LazyBrowserDownloadHandler``: scrapy-playwright, started by the first request that needs it.

scrapy-playwright's own handler starts a Playwright driver (a ``node`` process of about
150 MB) when the engine starts, one per scheme it serves, whether or not the spider ever
renders a page. ``ClusterAddon`` installs this handler for ``http`` and ``https`` instead
(``BROWSER_ENABLED``): one instance per crawler serves both schemes, plain requests go to
Scrapy's HTTP/1.1 handler, and scrapy-playwright's handler is built and started when the
first request with meta ``playwright`` arrives (``BrowserRenderingMiddleware`` sets it).
From then on scrapy-playwright does all the browser work: Chromium is launched with the
first page, contexts, page limits, page-init callbacks and its ``playwright/*`` stats
are its own. An idle node, or one whose spider never renders, is one process.

Stats: ``browser/started`` (scrapy-playwright started, once per node),
``browser/start_failed`` (its start raised; the next browser request tries again).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any
from weakref import WeakKeyDictionary

from scrapy import Request
from scrapy.core.downloader.handlers.base import BaseDownloadHandler
from scrapy.core.downloader.handlers.http11 import HTTP11DownloadHandler
from scrapy.crawler import Crawler
from scrapy.http import Response
from scrapy.statscollectors import StatsCollector
from scrapy.utils.misc import build_from_crawler
from scrapy_playwright.handler import ScrapyPlaywrightDownloadHandler

logger = logging.getLogger(__name__)

# One handler per crawler, shared by the schemes it is installed for (Scrapy builds one per
# scheme), so http and https pages share one Playwright driver and one Chromium.
_PER_CRAWLER: WeakKeyDictionary[Crawler, LazyBrowserDownloadHandler] = WeakKeyDictionary()


class LazyBrowserDownloadHandler(BaseDownloadHandler):
    lazy = False  # the plain HTTP handler is ready before the first request, as Scrapy's is

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        assert crawler.stats is not None
        self.stats: StatsCollector = crawler.stats
        self.http = HTTP11DownloadHandler.from_crawler(crawler)
        self.browser: Any = None  # ScrapyPlaywrightDownloadHandler once started
        self.start_lock = asyncio.Lock()
        self.closed = False

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> LazyBrowserDownloadHandler:
        handler = _PER_CRAWLER.get(crawler)
        if handler is None:
            handler = _PER_CRAWLER[crawler] = cls(crawler)
        return handler

    async def download_request(self, request: Request) -> Response:
        if not request.meta.get("playwright"):
            return await self.http.download_request(request)
        browser = await self.started_browser()
        response: Response = await browser.download_request(request)
        return response

    async def started_browser(self) -> Any:
        """scrapy-playwright's handler, built and started on the first call."""
        async with self.start_lock:
            if self.browser is None:
                self.browser = await self.start_browser()
        return self.browser

    async def start_browser(self) -> Any:
        began = time.monotonic()
        handler = build_from_crawler(ScrapyPlaywrightDownloadHandler, self.crawler)
        try:
            # What scrapy-playwright runs at engine_started; the engine has started already.
            await handler._maybe_launch_in_thread()
        except Exception:
            self.stats.inc_value("browser/start_failed")
            await handler.close()
            raise
        self.stats.inc_value("browser/started")
        logger.info(
            "Started Playwright for the first browser request in %.2fs",
            time.monotonic() - began,
        )
        return handler

    async def close(self) -> None:
        if self.closed:  # installed for several schemes: Scrapy closes it once per scheme
            return
        self.closed = True
        await self.http.close()
        async with self.start_lock:
            if self.browser is not None:
                await self.browser.close()
