"""Ordinary spiders: plain Spider, CrawlSpider, SitemapSpider, feed spiders, Redis spiders."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator
from typing import Any

import scrapy
from scrapy import signals
from scrapy.exceptions import CloseSpider
from scrapy.http import Response
from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import CrawlSpider, CSVFeedSpider, Rule, SitemapSpider, XMLFeedSpider

from crawler.spiders.base import RedisCrawlSpider, RedisSpider


def page_item(response: Response) -> dict[str, Any]:
    match = re.search(r"/p/(\d+)\.html$", response.url)
    return {
        "url": response.url,
        "page": int(match.group(1)) if match else -1,
        "title": response.css("title::text").get(),
    }


def follow_all(response: Response) -> Iterator[scrapy.Request]:
    for href in response.css("a::attr(href)").getall():
        yield response.follow(href)


class StartUrlsSpider(scrapy.Spider):
    name = "u_start_urls"

    def __init__(self, site: str = "", more: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls = [f"{site}/p/0.html"]
        if more:  # -a more=<n>: a version of the spider with one more start URL
            self.start_urls.append(f"{site}/p/{more}.html")

    def parse(self, response: Response, **kwargs: Any) -> Iterator[Any]:
        yield page_item(response)
        yield from follow_all(response)


class ErrbackSpider(scrapy.Spider):
    """Every link followed with an errback, as Scrapy's docs write them."""

    name = "u_errback"

    def __init__(self, site: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls = [f"{site}/p/0.html"]

    def parse(self, response: Response) -> Iterator[Any]:
        yield page_item(response)
        for request in follow_all(response):
            yield request.replace(errback=self.failed)

    def failed(self, failure: Any) -> Iterator[dict[str, str]]:
        yield {"errback": failure.request.url, "error": type(failure.value).__name__}


class LoginSpider(scrapy.Spider):
    """Logs in as plain Scrapy users do: the login page's cookie is in the jar, the pages
    behind it need it. ``-a how=cookies``: the cookie given once with ``cookies=``, then kept
    by the jar; ``-a how=js``: the login page's script sets it (``-a render=1`` too);
    ``-a jar=<name>``: every request in that ``meta['cookiejar']``; ``-a render=1``: every
    page rendered by scrapy-playwright (``meta['playwright']``)."""

    name = "u_login"

    def __init__(
        self, site: str = "", how: str = "login", jar: str = "", render: str = "", **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.site, self.how = site, how
        self.meta: dict[str, Any] = {"cookiejar": jar} if jar else {}
        if render:
            self.meta["playwright"] = True

    async def start(self) -> AsyncIterator[Any]:
        if self.how == "cookies":
            first = f"{self.site}/p/0.html"
            yield scrapy.Request(first, self.parse_page, cookies={"sid": "given"}, meta=self.meta)
        else:
            login = "/jslogin" if self.how == "js" else "/login"
            yield scrapy.Request(f"{self.site}{login}", self.logged_in, meta=self.meta)

    def logged_in(self, response: Response) -> Iterator[Any]:
        yield response.follow("/p/0.html", self.parse_page, meta=self.meta)

    def parse_page(self, response: Response) -> Iterator[Any]:
        yield page_item(response)
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href, self.parse_page, meta=self.meta)


class StartSpider(scrapy.Spider):
    name = "u_start"

    def __init__(
        self, site: str = "", fail: str = "", close: str = "", setup: str = "", **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.site = site
        self.fail = bool(fail)  # -a fail=1: start() raises after its request
        self.close_at_start = bool(close)  # -a close=1: start() closes before its request
        self.set_up_in_start = bool(setup)  # -a setup=1: start() logs in, connects a handler

    async def start(self) -> AsyncIterator[Any]:
        if self.close_at_start:
            raise CloseSpider("start_closed")
        if self.set_up_in_start:
            self.session = {"user": "u1"}  # as from an API login
            self.crawler.signals.connect(self.stamp, signal=signals.request_scheduled)
        yield scrapy.Request(f"{self.site}/p/0.html", callback=self.parse_page)
        if self.fail:
            raise RuntimeError("start failed")

    def parse_page(self, response: Response) -> Iterator[Any]:
        self.pages = getattr(self, "pages", 0) + 1  # a callback's own state, not start()'s
        yield page_item(response)
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href, callback=self.parse_page)

    def stamp(self, request: scrapy.Request, spider: scrapy.Spider) -> None:
        request.meta["stamped"] = True


class RulesSpider(CrawlSpider):
    name = "u_crawl"
    rules = (Rule(LinkExtractor(), callback="parse_page", follow=True),)

    def __init__(self, site: str = "", **kwargs: Any) -> None:
        self.start_urls = [f"{site}/p/0.html"]
        super().__init__(**kwargs)

    def parse_start_url(self, response: Response, **kwargs: Any) -> Any:
        return [{**page_item(response), "start": True}]

    def parse_page(self, response: Response) -> dict[str, Any]:
        return page_item(response)


class MapSpider(SitemapSpider):
    name = "u_sitemap"

    def __init__(self, site: str = "", **kwargs: Any) -> None:
        self.sitemap_urls = [f"{site}/sitemap.xml"]
        super().__init__(**kwargs)

    def parse(self, response: Response, **kwargs: Any) -> dict[str, Any]:
        return page_item(response)


class XmlFeed(XMLFeedSpider):
    name = "u_xmlfeed"
    iterator = "iternodes"
    itertag = "item"

    def __init__(self, site: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls = [f"{site}/feed.xml"]

    def parse_node(self, response: Response, selector: Any) -> dict[str, Any]:
        return {
            "page": int(selector.xpath("n/text()").get()),
            "url": selector.xpath("link/text()").get(),
        }


class CsvFeed(CSVFeedSpider):
    name = "u_csvfeed"

    def __init__(self, site: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls = [f"{site}/feed.csv"]
        self.headers = ["n", "link"]

    def parse_row(self, response: Response, row: dict[str, str]) -> dict[str, Any] | None:
        if row["n"] == "n":  # the header line
            return None
        return {"page": int(row["n"]), "url": row["link"]}


class SeededSpider(RedisSpider):
    """scrapy-redis's example spider, moved over: only the import changed."""

    name = "u_redis"

    def parse(self, response: Response, **kwargs: Any) -> Iterator[Any]:
        yield page_item(response)
        yield from follow_all(response)


class StartUrlsRedisSpider(RedisSpider):
    """A Redis-fed spider that has ``start_urls`` too (``-a site=``), which scrapy-redis's
    users give for the pages a crawl always starts from: page 1, which links back to itself
    (through a redirect) and page 2 to it."""

    name = "u_redis_start_urls"

    def __init__(self, *args: Any, site: str = "", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.start_urls = [f"{site}/p/1.html"]

    def parse(self, response: Response, **kwargs: Any) -> Iterator[Any]:
        yield page_item(response)
        yield from follow_all(response)


class SeededCrawlSpider(RedisCrawlSpider):
    name = "u_redis_crawl"
    rules = (Rule(LinkExtractor(), callback="parse_page", follow=True),)

    def parse_start_url(self, response: Response, **kwargs: Any) -> Any:
        return [{**page_item(response), "start": True}]

    def parse_page(self, response: Response) -> dict[str, Any]:
        return page_item(response)
