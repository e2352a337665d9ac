"""User extensions: one drops requests as Scrapy lets a ``request_scheduled`` handler do, one
counts the requests the scheduler dropped."""

from __future__ import annotations

from scrapy import Request, Spider, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import IgnoreRequest


class DropsRedirectLinks:
    """Raises ``IgnoreRequest`` for the site's redirect links (``/r/``, ``/c/``): the engine
    drops them before the scheduler, and says so to no one."""

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> DropsRedirectLinks:
        extension = cls()
        crawler.signals.connect(extension.request_scheduled, signal=signals.request_scheduled)
        return extension

    def request_scheduled(self, request: Request, spider: Spider) -> None:
        if "/r/" in request.url or "/c/" in request.url:
            raise IgnoreRequest(f"not following {request.url}")


class CountsDroppedRequests:
    """Counts the requests Scrapy says its scheduler dropped (``request_dropped``) in the
    spider's stats, by whether the request is one of the site's pages."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> CountsDroppedRequests:
        extension = cls(crawler)
        crawler.signals.connect(extension.request_dropped, signal=signals.request_dropped)
        return extension

    def request_dropped(self, request: Request, spider: Spider) -> None:
        assert self.crawler.stats is not None
        kind = "page" if isinstance(request, Request) and "/p/" in request.url else "other"
        self.crawler.stats.inc_value(f"user/request_dropped/{kind}")
