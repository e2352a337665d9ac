"""``faulty``: yields good items around ones Kafka must dead-letter."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, cast

from scrapy.http import Response

from crawler.items import PageItem
from crawler.spiders.base import RedisSpider


def page(url: str, title: str | None, status: int = 200) -> PageItem:
    return PageItem(url=url, status=status, title=title, depth=0, crawled_at=datetime.now(UTC))


class Unwritable:
    """Neither JSON nor Scrapy's feed can write it."""


class FaultySpider(RedisSpider):
    name = "faulty"

    def parse(self, response: Response, **kwargs: Any) -> Iterator[PageItem]:
        yield page(response.url + "#good-1", "好 1")
        yield page(response.url + "#unencodable", cast(str, Unwritable()))
        yield page(response.url + "#good-3", "lone surrogate \ud800")  # sent with U+FFFD
        yield page(response.url + "#schema", "status out of range", status=999)
        yield page(response.url + "#too-large", "x" * 2_000_000)
        yield page(response.url + "#good-2", "好 2 😀")
