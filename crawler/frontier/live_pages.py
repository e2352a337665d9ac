"""scrapy-playwright's live page in a request's meta, which the frontier cannot store.

A request rendered with ``playwright_include_page`` carries its page object in meta
``playwright_page``, and so does every copy Scrapy makes of it (a retry, a redirect);
standalone, scrapy-playwright renders the copy in that page. A stored request cannot hold it:
the scheduler takes it out of the request's meta (the request gets a new page on whichever node
fetches it, handed to its callback as usual) and closes it, so it holds no page slot of the node
(``frontier/playwright_page_closed``), with a warning the first time: a spider that hands its
page to a new request to go on in it (state a script set, a page scrolled) gets a fresh one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from scrapy import Request
from scrapy.statscollectors import StatsCollector

from crawler.said_once import SaidOnce

logger = logging.getLogger(__name__)

PAGE_META = "playwright_page"


class LivePages:
    def __init__(self, stats: StatsCollector) -> None:
        self._closing: set[asyncio.Task[None]] = set()
        self.said = SaidOnce(stats, logger)

    def take(self, request: Request) -> None:
        """Take the live page out of ``request``'s meta, if it has one, and close it."""
        page = request.meta.pop(PAGE_META, None)
        if page is None:
            return
        self.said.count(
            "frontier/playwright_page_closed",
            "Request %s holds a live browser page (meta playwright_page, a retry's or "
            "redirect's copy, or a page handed on): the frontier cannot store it, so the "
            "page is closed and the request gets a new one wherever it is fetched, without "
            "what the old page held (what its scripts set, where it was scrolled to); "
            "frontier/playwright_page_closed counts them, logged once",
            request.url,
        )
        task = asyncio.ensure_future(_close(page))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)


async def _close(page: Any) -> None:
    with contextlib.suppress(Exception):  # closed already, or its browser is gone
        await page.close()
