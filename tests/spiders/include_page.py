"""A plain spider that takes the rendered page itself, as scrapy-playwright's README shows
(``playwright_include_page``), uses it in its callback and closes it there or in its errback."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import scrapy
from scrapy.http import Response
from twisted.python.failure import Failure


class IncludePageSpider(scrapy.Spider):
    name = "include_page"

    def __init__(self, url: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.url = url

    async def start(self) -> AsyncIterator[scrapy.Request]:
        meta = {"playwright": True, "playwright_include_page": True}
        yield scrapy.Request(self.url, meta=meta, errback=self.closed_page)

    async def parse(self, response: Response, **kwargs: Any) -> AsyncIterator[dict[str, Any]]:
        page = response.meta["playwright_page"]
        title = await page.title()
        await page.close()
        yield {"url": response.url, "title": title}

    async def closed_page(self, failure: Failure) -> None:
        page = failure.request.meta.get("playwright_page")  # type: ignore[attr-defined]
        if page is not None:
            await page.close()
