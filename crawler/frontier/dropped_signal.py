"""Scrapy's ``request_dropped`` for the requests the shared dedup drops in Redis.

Scrapy's engine sends it for each request its scheduler refuses as seen. A node's own
seen-cache refuses some in ``enqueue_request`` (the engine then sends it); the shared dedup
refuses the others in Redis, after ``enqueue_request`` took them, as the write that carried
them returns. The user's handlers get each of those rebuilt from its record, as a node that
leased it would rebuild it; nothing is rebuilt while no handler of theirs is connected.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from scrapy import Request, signals
from scrapy.crawler import Crawler

from crawler.frontier import codec
from crawler.signals import user_receivers

logger = logging.getLogger(__name__)


class DroppedSignal:
    def __init__(self, crawler: Crawler, rebuild: Callable[[bytes], Request]) -> None:
        self.crawler = crawler
        self.rebuild = rebuild

    def __call__(self, bodies: Iterable[bytes]) -> None:
        if not user_receivers(self.crawler, signals.request_dropped):
            return
        for body in bodies:
            try:  # a Request subclass's or an item's own code may run: never the write's fault
                request = self.rebuild(body)
            except Exception as exc:  # noqa: BLE001 - any error of the user's classes
                logger.warning("request_dropped not sent for %s: %r", codec.stored_url(body), exc)
                continue
            self.crawler.signals.send_catch_log(
                signals.request_dropped, request=request, spider=self.crawler.spider
            )
