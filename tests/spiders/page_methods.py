"""A plain spider that drives the browser as scrapy-playwright's README shows: ``playwright``
meta with ``playwright_page_methods`` (``PageMethod`` objects), on its start request and on the
links it follows."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import scrapy
from scrapy.http import Response
from scrapy_playwright.page import PageMethod


def rendered(*methods: PageMethod) -> dict[str, Any]:
    return {"playwright": True, "playwright_page_methods": methods}


class PageMethodsSpider(scrapy.Spider):
    name = "page_methods"

    def __init__(self, url: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.url = url

    async def start(self) -> AsyncIterator[scrapy.Request]:
        yield scrapy.Request(self.url, meta=rendered(PageMethod("wait_for_selector", "#out")))

    def parse(self, response: Response, **kwargs: Any) -> Iterator[Any]:
        yield {"url": response.url, "title": response.css("title::text").get()}
        retitle = PageMethod("evaluate", "document.title = 'set by ' + document.title")
        yield response.follow("/static", self.parse_static, meta=rendered(retitle))

    def parse_static(self, response: Response) -> dict[str, Any]:
        methods = response.meta["playwright_page_methods"]
        return {
            "url": response.url,
            "title": response.css("title::text").get(),
            "ran": len(methods),
        }
