"""``ItemErrors``: items a pipeline raised on, counted by exception.

Scrapy logs such an item (``Error processing {...}``) and goes on: the item is lost, and no
stat says so. Here ``pipeline/item_error/<exception class>`` counts it, the ledger adds those
up as ``items/errored``, and ``crawler status`` shows them, so a crawl that lost items to a
broken pipeline does not look complete. ``DropItem`` is not an error (``item_dropped_count``).
"""

from __future__ import annotations

from typing import Any

from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.statscollectors import StatsCollector
from twisted.python.failure import Failure


class ItemErrors:
    def __init__(self, stats: StatsCollector) -> None:
        self.stats = stats

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ItemErrors:
        assert crawler.stats is not None
        extension = cls(crawler.stats)
        crawler.signals.connect(extension.item_error, signal=signals.item_error)
        return extension

    def item_error(self, item: Any, failure: Failure) -> None:
        self.stats.inc_value(f"pipeline/item_error/{type(failure.value).__name__}")
