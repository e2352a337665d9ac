"""``LedgerExtension``: every node adds what it did to a per-crawl ledger in Redis.

Every ``LEDGER_INTERVAL`` seconds and at spider close the node pushes the deltas
of its stats since its last push (``crawler.extensions.ledger_layout``) with
``HINCRBY`` in one MULTI/EXEC pipeline: to the crawl's totals and to the bucket of
the current minute. ``crawler status`` and ``crawler top`` read them. A push that
fails (Redis away) is logged and its deltas go with the next one.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from redis.exceptions import RedisError
from scrapy import Spider, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured
from scrapy.settings import BaseSettings
from scrapy.statscollectors import StatsCollector

from crawler.extensions.ledger_layout import BUCKET_TTL, STARTED_FIELD, LedgerKeys, ledger_fields
from crawler.redis_connection import AsyncRedis, async_client

logger = logging.getLogger(__name__)

CLOSE_TIMEOUT = 10.0  # seconds the last push at close may take


@dataclass(frozen=True, slots=True)
class LedgerSettings:
    redis_url: str
    crawl_id: str
    interval: float

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> LedgerSettings:
        if not settings.getbool("LEDGER_ENABLED"):
            raise NotConfigured("LEDGER_ENABLED=False")
        redis_url = settings.get("REDIS_URL") or ""
        if not redis_url:
            raise NotConfigured("REDIS_URL='' (standalone mode): no ledger")
        values = cls(
            redis_url=redis_url,
            crawl_id=str(settings.get("CRAWLER_CRAWL_ID") or ""),
            interval=settings.getfloat("LEDGER_INTERVAL"),
        )
        values.validate()
        return values

    def validate(self) -> None:
        if not self.interval > 0:
            raise ValueError(f"LEDGER_INTERVAL={self.interval} must be > 0 (seconds)")
        if not self.crawl_id or any(c in self.crawl_id for c in ":{}"):
            raise ValueError(
                f"CRAWLER_CRAWL_ID={self.crawl_id!r} must be non-empty, without ':', '{{' or '}}'"
            )


class LedgerExtension:
    def __init__(self, crawler: Crawler) -> None:
        self.settings = LedgerSettings.from_settings(crawler.settings)
        assert crawler.stats is not None
        self.stats: StatsCollector = crawler.stats
        self._pushed: dict[str, int] = {}
        self._client: AsyncRedis | None = None
        self._keys: LedgerKeys | None = None
        self._stop = asyncio.Event()
        self._loop: asyncio.Task[None] | None = None
        crawler.signals.connect(self.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> LedgerExtension:
        return cls(crawler)

    def spider_opened(self, spider: Spider) -> None:
        self._keys = LedgerKeys.for_crawl(spider.name, self.settings.crawl_id)
        self._client = async_client(self.settings.redis_url)
        self._loop = asyncio.ensure_future(self._push_loop())
        logger.info("Ledger %s, pushed every %ss", self._keys.total, self.settings.interval)

    async def spider_closed(self, spider: Spider, reason: str) -> None:
        self._stop.set()
        if self._loop is not None:
            await self._loop  # never cancelled mid-push: a cancelled push may have landed
        if self._client is None:
            return
        try:
            await asyncio.wait_for(self.push(), CLOSE_TIMEOUT)
        except (RedisError, OSError, TimeoutError) as exc:
            logger.error("Last ledger push failed, %s's totals are short: %r", spider.name, exc)
        await self._client.aclose()

    async def _push_loop(self) -> None:
        while not self._stop.is_set():
            try:
                await asyncio.wait_for(self._stop.wait(), self.settings.interval)
            except TimeoutError:
                try:
                    await self.push()
                except (RedisError, OSError) as exc:
                    logger.warning("Ledger push failed, retried with the next one: %r", exc)

    async def push(self) -> dict[str, int]:
        """Add the deltas since the last push to the ledger; return them."""
        assert self._client is not None
        assert self._keys is not None
        current = ledger_fields(self.stats.get_stats())
        deltas = {
            field: value - self._pushed.get(field, 0)
            for field, value in current.items()
            if value != self._pushed.get(field, 0)
        }
        if not deltas:
            return deltas
        now_ms = int(time.time() * 1000)
        minute_key = self._keys.minute(now_ms // 60_000)
        async with self._client.pipeline(transaction=True) as pipe:
            pipe.hsetnx(self._keys.total, STARTED_FIELD, now_ms)
            for field, delta in deltas.items():
                pipe.hincrby(self._keys.total, field, delta)
                pipe.hincrby(minute_key, field, delta)
            pipe.expire(minute_key, BUCKET_TTL)
            await pipe.execute()
        self._pushed = current
        return deltas
