"""``scoped``: follows every link, within ``allowed_domains`` (127.0.0.1) as Scrapy filters them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

from scrapy import Request
from scrapy.http import Response, TextResponse

from crawler.spiders.base import RedisSpider


class ScopedSpider(RedisSpider):
    name = "scoped"
    allowed_domains: ClassVar[list[str]] = ["127.0.0.1"]

    def parse(self, response: Response, **kwargs: Any) -> Iterator[dict[str, Any] | Request]:
        yield {"url": response.url}
        if isinstance(response, TextResponse):
            yield from response.follow_all(css="a")
