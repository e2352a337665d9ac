"""A user's own download handler (it marks the responses it fetched) and a spider that shows
which handler fetched each page; also a handler with Scrapy's deprecated Deferred API."""

from __future__ import annotations

from typing import Any

import scrapy
from scrapy import Request
from scrapy.core.downloader.handlers.http11 import HTTP11DownloadHandler
from scrapy.http import Response
from twisted.internet.defer import Deferred


class MarkingHandler(HTTP11DownloadHandler):
    async def download_request(self, request: Request) -> Response:
        response = await super().download_request(request)
        response.headers[b"X-Fetched-By"] = b"MarkingHandler"
        return response


class DeferredHandler:
    lazy = False

    def __init__(self, crawler: Any) -> None:
        self.crawler = crawler

    def download_request(self, request: Request, spider: scrapy.Spider) -> Deferred[Response]:
        raise NotImplementedError

    def close(self) -> None:
        pass


class HandlerMarkSpider(scrapy.Spider):
    name = "handler_mark"

    def __init__(self, site: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls = [f"{site}/", f"{site}/p/1.html", f"{site}/p/2.html"]

    def parse(self, response: Response) -> dict[str, Any]:
        fetched_by = response.headers.get(b"X-Fetched-By") or b"-"
        return {"url": response.url, "fetched_by": fetched_by.decode()}
