"""Ordinary item pipelines: what users write before an exporter."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from itemadapter import ItemAdapter
from scrapy.exceptions import DropItem
from twisted.internet import reactor
from twisted.internet.defer import Deferred


def page_number(item: Any) -> int:
    return int(ItemAdapter(item).get("page", -1))


class IdentityPipeline:
    def process_item(self, item: Any) -> Any:
        return item


class NewDictPipeline:
    def process_item(self, item: Any) -> dict[str, Any]:
        return {**ItemAdapter(item).asdict(), "pipeline": "new_dict"}


class AsDictPipeline:
    def process_item(self, item: Any) -> dict[str, Any]:
        return ItemAdapter(item).asdict()


class AsyncPipeline:
    async def process_item(self, item: Any) -> dict[str, Any]:
        await asyncio.sleep(0.01)
        return {**ItemAdapter(item).asdict(), "pipeline": "async"}


class DeferredPipeline:
    def process_item(self, item: Any) -> Deferred[Any]:
        done: Deferred[Any] = Deferred()
        reactor.callLater(0.01, done.callback, dict(ItemAdapter(item).asdict()))  # type: ignore[arg-type]
        return done


@dataclass
class Record:
    page: int
    url: str


class OtherClassPipeline:
    def process_item(self, item: Any) -> Record:
        return Record(page=page_number(item), url=str(ItemAdapter(item).get("url")))


class DropSomePipeline:
    """Drops every third page."""

    def process_item(self, item: Any) -> Any:
        if page_number(item) % 3 == 0:
            raise DropItem(f"page {page_number(item)} not wanted")
        return item


class RaiseSomePipeline:
    """Fails on every fourth page (a bug in the user's pipeline)."""

    def process_item(self, item: Any) -> Any:
        if page_number(item) % 4 == 0:
            raise ValueError(f"cannot handle page {page_number(item)}")
        return item


class FailingOpenPipeline:
    """Cannot open (its database is away, say): Scrapy closes the spider it never opened."""

    def open_spider(self) -> None:
        raise ValueError("the pipeline's database does not answer")

    def process_item(self, item: Any) -> Any:
        return item
