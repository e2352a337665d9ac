"""A user's own download handler (it marks the responses it fetched) and a spider that shows
which handler fetched each page; also a handler with Scrapy's deprecated Deferred API."""

from __future__ import annotations

from typing import Any

import scrapy
from scrapy import Request
from scrapy.core.downloader.handlers.http11 import HTTP11DownloadHandler
from scrapy.crawler import Crawler
from scrapy.http import Response
from scrapy.utils.defer import deferred_from_coro
from twisted.internet.defer import Deferred


class MarkingHandler(HTTP11DownloadHandler):
    async def download_request(self, request: Request) -> Response:
        response = await super().download_request(request)
        response.headers[b"X-Fetched-By"] = b"MarkingHandler"
        return response


class DeferredHandler:
    """Scrapy's deprecated Deferred API (still run by Scrapy 2.19, with a warning)."""

    lazy = False

    def __init__(self, crawler: Crawler) -> None:
        self.http = HTTP11DownloadHandler.from_crawler(crawler)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> DeferredHandler:
        return cls(crawler)

    def download_request(self, request: Request, spider: scrapy.Spider) -> Deferred[Response]:
        return deferred_from_coro(self.marked(request))

    async def marked(self, request: Request) -> Response:
        response = await self.http.download_request(request)
        response.headers[b"X-Fetched-By"] = b"DeferredHandler"
        return response

    def close(self) -> Deferred[None]:
        return deferred_from_coro(self.http.close())


class BrokenHandler:
    """A handler whose construction fails (a missing credential file, say)."""

    lazy = False

    def __init__(self, crawler: Crawler) -> None:
        raise RuntimeError("needs a credentials file")

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> BrokenHandler:
        return cls(crawler)


class HandlerMarkSpider(scrapy.Spider):
    name = "handler_mark"

    def __init__(self, site: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls = [f"{site}/", f"{site}/p/1.html", f"{site}/p/2.html"]

    def parse(self, response: Response) -> dict[str, Any]:
        fetched_by = response.headers.get(b"X-Fetched-By") or b"-"
        return {"url": response.url, "fetched_by": fetched_by.decode()}
