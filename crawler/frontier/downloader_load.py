"""Which of the leased requests a node hands its downloader first (Scrapy adapter).

Scrapy's default priority queue (``DownloaderAwarePriorityQueue``) gives the downloader a
request of the site with the fewest requests in it. The shared frontier leases in its own
order (priority, then first in first out), so a node's leased requests may crowd a few sites:
with a ``DOWNLOAD_DELAY``, every request of a site waits its turn in the downloader, holding
one of ``CONCURRENT_REQUESTS`` meanwhile (an audit: 48 leases over 28 of 100 sites, two nodes
a third as fast as one standalone node). So the node counts the requests of each download slot
in its downloader (``request_reached_downloader``, ``request_left_downloader``) and hands out,
of those it has leased (the first ``prefetch.PICK_SCAN``), one whose slot holds the fewest,
the first leased among equals; unless the project asks for ``ScrapyPriorityQueue`` (strict
priority order): then in the order leased.
"""

from __future__ import annotations

from collections import Counter

from scrapy import Request, signals
from scrapy.crawler import Crawler
from scrapy.settings import BaseSettings

from crawler.settings_values import component_path

DOWNLOADER_AWARE = "scrapy.pqueues.DownloaderAwarePriorityQueue"


def downloader_aware(settings: BaseSettings) -> bool:
    """Whether ``SCHEDULER_PRIORITY_QUEUE`` asks for the downloader-aware order (Scrapy's
    default), not strict priority order (``ScrapyPriorityQueue``)."""
    return component_path(settings.get("SCHEDULER_PRIORITY_QUEUE")) == DOWNLOADER_AWARE


class DownloaderLoad:
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self._in_slot: Counter[str] = Counter()
        self._slot_of: dict[int, str] = {}  # id(request) -> the slot it was counted in
        crawler.signals.connect(self._reached, signal=signals.request_reached_downloader)
        crawler.signals.connect(self._left, signal=signals.request_left_downloader)

    def _slot(self, request: Request) -> str:
        assert self.crawler.engine is not None
        return self.crawler.engine.downloader.get_slot_key(request)

    def _reached(self, request: Request) -> None:
        slot = self._slot_of[id(request)] = self._slot(request)
        self._in_slot[slot] += 1

    def _left(self, request: Request) -> None:
        slot = self._slot_of.pop(id(request), None)
        if slot is None:
            return
        self._in_slot[slot] -= 1
        if self._in_slot[slot] <= 0:
            del self._in_slot[slot]

    def of(self, request: Request) -> int:
        """Requests of ``request``'s download slot in the downloader now."""
        if not self._in_slot or self.crawler.engine is None:
            return 0
        return self._in_slot.get(self._slot(request), 0)
