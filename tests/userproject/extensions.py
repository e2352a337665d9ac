"""A user's extension that drops requests as Scrapy lets a ``request_scheduled`` handler do."""

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
