"""``RedisSpider``: a spider that reads its seeds from Redis from the first moment.

scrapy-redis 0.9.1 only defines ``start_requests()``, which Scrapy 2.19 no
longer calls, so its seeds arrive after an idle tick. This base class reads
``<name>:start_urls`` in an async ``start()`` that keeps listening while the
node is idle, and closes the node after ``MAX_IDLE_TIME_BEFORE_CLOSE`` idle
seconds (0 = never). Without ``REDIS_URL`` it crawls the ``url`` argument
(``scrapy crawl pages -a url=...``) on Scrapy's own scheduler.

Subclasses override ``parse`` (or name other callbacks in JSON seeds) and may
override ``request_from_seed``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import scrapy
from redis.exceptions import RedisError
from scrapy import Request
from scrapy.crawler import Crawler

from crawler.frontier.seed_queue import SeedKeys, SeedQueue
from crawler.frontier.seed_settings import SeedSettings
from crawler.frontier.seeds import InvalidSeed, Seed, parse_seed
from crawler.node import resolve_node_id
from crawler.redis_connection import async_client
from crawler.wakeup import wake_engine

logger = logging.getLogger(__name__)

REDIS_RETRY_MAX = 30.0  # seconds: longest pause between retries while Redis is away


class RedisSpider(scrapy.Spider):
    """Base class for spiders fed from ``<name>:start_urls``."""

    seed_settings: SeedSettings
    node_id: str

    def __init__(self, *args: Any, url: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.argument_seeds: list[str] = [u for u in (url or "").split(",") if u.strip()]

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> RedisSpider:
        spider = super().from_crawler(crawler, *args, **kwargs)
        spider.seed_settings = SeedSettings.from_settings(crawler.settings, spider.name)
        spider.node_id = resolve_node_id(crawler.settings.get("CRAWLER_NODE_ID") or "")
        return spider

    def request_from_seed(self, seed: Seed) -> Request:
        """Build the request for one seed; the callback is named by the seed or ``parse``."""
        callback = getattr(self, seed.callback or "parse", None)
        if not callable(callback):
            raise InvalidSeed("callback", f"spider {self.name!r} has no callback {seed.callback!r}")
        return Request(
            seed.url,
            callback=callback,
            method=seed.method,
            headers=dict(seed.headers) or None,
            body=seed.body,
            meta=dict(seed.meta),
            priority=seed.priority,
            dont_filter=seed.dont_filter,
        )

    async def start(self) -> AsyncIterator[Any]:
        for url in self.argument_seeds:
            try:
                yield self._build(url.strip().encode())
            except InvalidSeed as exc:
                self._log_invalid(exc, "dropped")
        if not self.seed_settings.redis_url:
            return
        async for request in self._redis_seeds():
            yield request

    def _build(self, raw: bytes) -> Request:
        return self.request_from_seed(parse_seed(raw, max_bytes=self.seed_settings.max_bytes))

    def _log_invalid(self, exc: InvalidSeed, where: str) -> None:
        assert self.crawler.stats is not None
        self.crawler.stats.inc_value(f"seeds/invalid/{exc.reason}")
        logger.error("Invalid seed %s (%s): %s", where, exc.reason, exc)

    async def _redis_seeds(self) -> AsyncIterator[Request]:
        config = self.seed_settings
        queue = SeedQueue(
            async_client(config.redis_url),
            SeedKeys(config.seeds_key, config.invalid_key, config.frontier),
        )
        stats = self.crawler.stats
        assert stats is not None
        idle_since: float | None = None
        backoff = 0.0
        logger.info("Reading seeds from Redis list %s", config.seeds_key)
        try:
            while True:
                try:
                    raws = await queue.pop(config.batch_size, config.wait_timeout)
                    idle = not raws and await self._poll_shared_queue(queue)
                except RedisError as exc:
                    backoff = min(REDIS_RETRY_MAX, backoff * 2 or 0.5)
                    stats.inc_value("seeds/redis_error")
                    logger.warning(
                        "Redis unavailable for seeds (%s); retrying in %.1fs", exc, backoff
                    )
                    await asyncio.sleep(backoff)
                    continue
                if backoff:
                    logger.info("Redis is back; reading seeds again")
                    backoff = 0.0
                for raw in raws:
                    stats.inc_value("seeds/received")
                    request = await self._accept(queue, raw)
                    if request is not None:
                        yield request
                if not idle:
                    idle_since = None
                    continue
                now = time.monotonic()
                idle_since = idle_since or now
                if config.max_idle_time and now - idle_since >= config.max_idle_time:
                    logger.info(
                        "Idle for %.1fs (MAX_IDLE_TIME_BEFORE_CLOSE): closing", now - idle_since
                    )
                    return
        finally:
            await queue.close()

    async def _accept(self, queue: SeedQueue, raw: bytes) -> Request | None:
        try:
            return self._build(raw)
        except InvalidSeed as exc:
            self._log_invalid(exc, f"moved to {queue.keys.invalid}")
            await queue.reject(raw, exc.reason, str(exc), self.node_id)
            return None

    async def _poll_shared_queue(self, queue: SeedQueue) -> bool:
        """Wake the engine if the shared frontier holds work; True when the cluster is idle.

        Idle means: nothing queued or leased by any node, and nothing in flight here.
        """
        engine = self.crawler.engine
        assert engine is not None
        if await queue.pending_requests():
            wake_engine(self.crawler)
            return False
        scraper_slot = engine.scraper.slot
        busy = engine.downloader.active or (scraper_slot is not None and not scraper_slot.is_idle())
        return not busy
