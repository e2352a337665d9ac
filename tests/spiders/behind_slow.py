"""A plain spider whose requests to one site queue behind a slow response."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import scrapy
from scrapy.http import Response


class BehindSlowSpider(scrapy.Spider):
    name = "behind_slow"
    custom_settings = {"CONCURRENT_REQUESTS_PER_DOMAIN": 1}  # noqa: RUF012  # Scrapy declares it

    def __init__(self, site: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.site = site

    async def start(self) -> AsyncIterator[scrapy.Request]:
        # the slow page first: the fast ones wait in Scrapy's per-site queue behind it (given
        # once it is on its way: leased together, either could reach the downloader first)
        yield scrapy.Request(f"{self.site}/slow", priority=10)
        await asyncio.sleep(0.5)
        for index in range(6):
            yield scrapy.Request(f"{self.site}/fast/{index}")

    def parse(self, response: Response) -> dict[str, Any]:
        return {"url": response.url}
