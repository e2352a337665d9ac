"""``bad_meta``: yields a request whose meta cannot be stored as JSON, and a good one."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from scrapy import Request
from scrapy.http import Response

from crawler.spiders.base import RedisSpider


class BadMetaSpider(RedisSpider):
    name = "bad_meta"

    def parse(self, response: Response, **kwargs: Any) -> Iterator[Request]:
        if response.meta.get("second"):
            return
        yield Request(response.url + "?bad", meta={"socket": object()}, callback=self.parse)
        yield Request(response.url + "?good", meta={"second": True}, callback=self.parse)
