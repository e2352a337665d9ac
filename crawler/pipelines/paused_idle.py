"""Closing a node whose crawl is over while Kafka keeps it paused.

``KafkaPipeline`` pauses the engine while Kafka is away for longer than ``KAFKA_MAX_OUTAGE``.
Scrapy's engine asks whether the spider may close (``spider_idle``) only while it runs, so a
paused node whose crawl was over (nothing queued or leased anywhere, every item in the spool)
stayed open until Kafka answered: a Kubernetes Job or a systemd unit never ended during an
outage. While the crawl is paused and the node idle, this asks in the engine's place, every
``IDLE_LOOK`` seconds, as Scrapy asks: the ``spider_idle`` handlers (the cluster's idle check, a
``RedisSpider``'s seeds, the spider's own) keep the node open as they would, and when none does
the spider closes (finish reason ``finished``, or a ``CloseSpider``'s), its items in the spool
for the next start. The engine stays paused meanwhile: nothing more is fetched.
"""

from __future__ import annotations

import asyncio
import logging
import time

from scrapy import signals
from scrapy.crawler import Crawler

from crawler.signals import send_idle
from crawler.wakeup import close_spider_soon, engine_closing

logger = logging.getLogger(__name__)

IDLE_LOOK = 2.0  # seconds between two looks while paused


class PausedIdle:
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self._looked_at = 0.0
        self._closing: asyncio.Future[None] | None = None

    def look(self, spooled: int) -> None:
        """Called while the crawl is paused (``spooled``: messages in the spool, for the log)."""
        now = time.monotonic()
        engine, spider = self.crawler.engine, self.crawler.spider
        if now - self._looked_at < IDLE_LOOK or engine is None or spider is None:
            return
        self._looked_at = now
        if self._closing is not None or engine_closing(self.crawler) or not engine.spider_is_idle():
            return
        reason = send_idle(self.crawler, signals.spider_idle, spider)
        if reason is None:
            return
        logger.warning(
            "The crawl is over while Kafka is away: the node closes (%s); %d messages wait in "
            "the spool for the next start",
            reason,
            spooled,
        )
        self._closing = close_spider_soon(self.crawler, reason)
