"""A spider whose callbacks do the things user callbacks do (``-a case=<name>``).

- ``errback``: page 0 also asks for a page that cannot be downloaded (connection refused);
  its errback yields an item and a request;
- ``nothing``: odd pages' callbacks yield nothing at all;
- ``raise``: every fifth page's callback raises after yielding its item and links;
- ``bad_meta``: page 0 yields a request whose meta JSON cannot hold;
- ``cyclic_meta``: page 0 yields a request whose meta holds a tree with parent links (a cycle);
- ``item_request``: page 0 yields a request of a subclass whose ``__init__`` needs an argument
  its ``attributes`` do not name (it cannot be rebuilt from what is stored);
- ``item_meta``: every page's item is a ``scrapy.Item`` handed in meta (nested in a list, with
  a dataclass in it) to a detail request that finishes it, as older Scrapy tutorials do;
- ``dont_filter``: every page is asked for once more with ``dont_filter``;
- ``local_file``: page 0 links to ``file:///etc/hostname`` (a page may link anywhere), with an
  errback;
- ``close``: page 3's callback raises ``CloseSpider("enough")`` after its item;
- ``engine_copy``: the same, but handed to ``crawler.engine.crawl()`` from the callback (a copy
  of the leased request: it carries the lease's meta), before the page's item and links;
- ``other_host``: page 0 also links to a redirect (301) to page 1 on another host name;
- ``idle_more``: once the crawl is idle, a ``spider_idle`` handler hands five more requests to
  ``crawler.engine.crawl()`` and raises ``DontCloseSpider`` (Scrapy's documented use of the
  signal for work in phases);
- ``idle_count``: a ``spider_idle`` handler that only counts its calls, logged when the spider
  closes (standalone Scrapy calls it once, when the crawl is over); ``idle_count_strong``: the
  same handler as a lambda connected with ``weak=False`` (how a closure is kept alive);
- anything else: the plain crawl (for the middleware cases and retries).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any, Self

import scrapy
from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.exceptions import CloseSpider, DontCloseSpider
from scrapy.http import Response
from twisted.python.failure import Failure

from tests.userproject.spiders import page_item


class PageItem(scrapy.Item):
    url = scrapy.Field()
    page = scrapy.Field()
    title = scrapy.Field()
    kinds = scrapy.Field()  # the types the detail callback got back: PageItem, Note, list


@dataclass(slots=True)
class Note:
    page: int


class ItemRequest(scrapy.Request):
    def __init__(self, url: str, item: dict[str, Any], **kwargs: Any) -> None:
        self.item = item
        super().__init__(url, **kwargs)


class CasesSpider(scrapy.Spider):
    name = "u_cases"

    def __init__(self, site: str = "", case: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.site, self.case = site, case
        self.phase = 1
        self.idle_calls = 0

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> Self:
        spider = super().from_crawler(crawler, *args, **kwargs)
        if spider.case == "idle_more":
            crawler.signals.connect(spider.idle, signal=signals.spider_idle)
        if spider.case == "idle_count":
            crawler.signals.connect(spider.count_idle, signal=signals.spider_idle)
        if spider.case == "idle_count_strong":
            counting = lambda: spider.count_idle()  # noqa: E731, PLW0108 - a closure that only weak=False keeps
            crawler.signals.connect(counting, signal=signals.spider_idle, weak=False)
        if spider.case.startswith("idle_count"):
            crawler.signals.connect(spider.report_idle, signal=signals.spider_closed)
        return spider

    def count_idle(self) -> None:
        self.idle_calls += 1

    def report_idle(self) -> None:
        self.logger.info("spider_idle handler calls: %d", self.idle_calls)

    def idle(self) -> None:
        if self.phase == 1 and self.crawler.engine is not None:
            self.phase = 2
            for page in range(5):
                request = scrapy.Request(f"{self.site}/p/{page}.html", self.again, dont_filter=True)
                self.crawler.engine.crawl(request)
            raise DontCloseSpider

    async def start(self) -> AsyncIterator[Any]:
        yield scrapy.Request(f"{self.site}/p/0.html", callback=self.parse)

    def parse(self, response: Response, **kwargs: Any) -> Iterator[Any]:
        item = page_item(response)
        page = item["page"]
        if self.case == "nothing" and page % 2:
            return
        if self.case == "engine_copy" and self.crawler.engine is not None:
            again = response.request.replace(dont_filter=True, callback=self.again)  # type: ignore[union-attr]
            self.crawler.engine.crawl(again)
        if self.case == "item_meta":
            held = PageItem(url=item["url"], page=page, title=item["title"])
            held["kinds"] = Note(page)
            meta = {"held": [held], "ids": (page,)}
            yield scrapy.Request(response.url, self.detail, meta=meta, dont_filter=True)
        else:
            yield item
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href, callback=self.parse)
        if self.case == "errback" and page == 0:
            yield scrapy.Request("http://127.0.0.1:1/missing", errback=self.missing)
        if self.case == "other_host" and page == 0:
            yield scrapy.Request(f"{self.site}/x/1", callback=self.again)
        if self.case == "bad_meta" and page == 0:
            yield scrapy.Request(f"{self.site}/p/0.html?x", meta={"handle": object()})
        if self.case == "cyclic_meta" and page == 0:
            tree: dict[str, Any] = {"name": "root", "children": []}
            tree["children"].append({"name": "leaf", "parent": tree})
            yield scrapy.Request(f"{self.site}/p/0.html?x", meta={"tree": tree})
        if self.case == "item_request" and page == 0:
            yield ItemRequest(f"{self.site}/p/0.html?x", item={"page": page})
        if self.case == "lambda_callback" and page == 0:
            yield scrapy.Request(f"{self.site}/p/0.html?x", callback=lambda _: None)  # type: ignore[misc]
        if self.case == "dont_filter":
            yield response.request.replace(dont_filter=True, callback=self.again)  # type: ignore[union-attr]
        if self.case == "local_file" and page == 0:
            yield scrapy.Request("file:///etc/hostname", self.again, errback=self.missing)
        if self.case == "close" and page == 3:
            raise CloseSpider("enough")
        if self.case == "raise" and page % 5 == 4:
            raise ValueError(f"the parser broke on page {page}")

    def detail(self, response: Response) -> PageItem:
        held: PageItem = response.meta["held"][0]
        got = (held, held["kinds"], response.meta["ids"])
        held["kinds"] = [type(value).__name__ for value in got]
        return held

    def again(self, response: Response) -> dict[str, Any]:
        return {**page_item(response), "again": True}

    def missing(self, failure: Failure) -> Iterator[Any]:
        url = failure.request.url  # type: ignore[attr-defined]  # Scrapy sets it
        yield {"url": url, "page": -1, "error": type(failure.value).__name__}
        yield scrapy.Request(f"{self.site}/p/1.html", callback=self.again, dont_filter=True)
