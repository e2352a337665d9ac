"""A plain spider whose ``start()`` yields items as well as a request (``-a site=``; with
``-a pause=<s>`` it waits that long after its first item), and a pipeline that holds the start
items (``START_ITEMS_DELAY`` seconds), as a slow broker does."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import scrapy
from scrapy.crawler import Crawler
from scrapy.http import Response

from crawler.settings_values import get_float


class StartItemsSpider(scrapy.Spider):
    name = "start_items"

    def __init__(self, site: str = "", pause: str = "0", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.site = site
        self.pause = float(pause)

    async def start(self) -> AsyncIterator[Any]:
        for index in range(3):
            yield {"url": f"start:{index}"}
            await asyncio.sleep(self.pause if index == 0 else 0)
        yield scrapy.Request(f"{self.site}/p/0.html")

    def parse(self, response: Response) -> dict[str, Any]:
        return {"url": response.url}


class SlowStartItemsPipeline:
    def __init__(self, delay: float) -> None:
        self.delay = delay

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SlowStartItemsPipeline:
        return cls(get_float(crawler.settings, "START_ITEMS_DELAY"))

    async def process_item(self, item: dict[str, Any]) -> dict[str, Any]:
        if str(item["url"]).startswith("start:"):
            await asyncio.sleep(self.delay)
        return item
