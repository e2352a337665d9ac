"""``user_items``: items as a user's spider yields them (argument ``case`` picks which)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, ClassVar, NamedTuple

from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.http import Response

from crawler.spiders.base import RedisSpider


@dataclass
class Page:
    """A user's class whose item_type (``page``) is also a built-in schema's."""

    url: str
    title: str


@dataclass
class OddType:
    """An item_type no Kafka topic name can hold (a space): refused for good when sent."""

    item_type: ClassVar[str] = "odd type"
    url: str


class Point(NamedTuple):
    x: int
    y: int


@dataclass
class Located:
    url: str
    at: Point


@dataclass
class Versioned:
    schema_version: ClassVar[str] = "v2"

    url: str


class SlowOpen:
    """A user's pipeline whose ``open_spider`` takes a while (a connection, a warm-up)."""

    async def open_spider(self) -> None:
        await asyncio.sleep(0.5)

    def process_item(self, item: Any) -> Any:
        return item


class ReturnsWhatItSays:
    """A user's pipeline that returns what an item's ``becomes`` says instead of it: a str, a
    list, None (a pipeline that forgot its ``return``)."""

    def process_item(self, item: Any) -> Any:
        return item.get("becomes", item)


class SlowStart:
    """A user's extension whose ``engine_started`` handler takes a while (scrapy-playwright's
    own handler launches its browser there)."""

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SlowStart:
        extension = cls()
        crawler.signals.connect(extension.engine_started, signal=signals.engine_started)
        return extension

    async def engine_started(self) -> None:
        await asyncio.sleep(0.5)


class UserItemsSpider(RedisSpider):
    name = "user_items"
    case = "scrapy_values"

    def parse(self, response: Response, **kwargs: Any) -> Iterator[object]:
        url = response.url
        if self.case == "scrapy_values":
            yield {"url": f"{url}#scrapy", "price": Decimal("1.10"), "tags": {1}, "big": 2**70}
            yield {"url": f"{url}#keys", "by_id": {1: "a"}}
            yield {"url": f"{url}#nan", "score": float("nan")}
            yield {"url": f"{url}#inf", "score": float("inf")}
            yield {"url": f"{url}#wide_keys", "by_id": {2**70: "a", float("nan"): "b"}}
            yield {"url": f"{url}#named", "at": Point(1, 2)}
            yield Located(url=f"{url}#located", at=Point(3, 4))
        elif self.case == "schema_version":
            yield Versioned(url=f"{url}#v2")
            yield {"url": f"{url}#good"}
        elif self.case == "page":
            yield Page(url=url, title="mine")
        elif self.case == "odd_type":
            yield OddType(url=url)
        elif self.case == "not_items":  # ReturnsWhatItSays turns two into no items
            yield {"url": f"{url}#str", "becomes": "a bare string"}
            yield {"url": f"{url}#none", "becomes": None}
            yield {"url": f"{url}#good"}
        elif self.case == "shared_keys":  # a list page's rows, each given the page's url
            for row in range(3):
                yield {"url": url, "row": row}
            yield Page(url=url, title="the list")


class PartitionedItemsSpider(UserItemsSpider):
    """A spider whose own settings say how its topics are created."""

    name = "partitioned_items"
    custom_settings = {"KAFKA_TOPIC_PARTITIONS": 2}  # noqa: RUF012  # Scrapy declares it
