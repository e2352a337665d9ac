"""``SeedReader``: a ``RedisSpider``'s seeds, taken from Redis without losing one.

Each batch is taken into this node's hold (``crawler.frontier.seed_queue``), turned
into requests by the spider, handed to the engine, written to the frontier
(``frontier_flush``) and only then let go. A supervised loop refreshes the hold and
returns the seeds of nodes that died holding some. At a graceful stop the seeds whose
requests are in the frontier are let go and the rest are returned to the seed key.
Redis outages pause the reader (:mod:`crawler.redis_outage`).

A take that fails with anything but an outage or a seed key of the wrong type is logged
with its traceback (``node/loop_crashed/seed_reader``) and tried again: the reader never
ends while the node runs.

Stats: ``seeds/received``, ``seeds/reclaimed``, ``seeds/returned``, ``seeds/wrong_type``,
``seeds/redis_error``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable

from scrapy import Request
from scrapy.crawler import Crawler

from crawler.frontier.seed_holds import SeedKeys
from crawler.frontier.seed_queue import LetGo, SeedQueue, WrongSeedKeyType
from crawler.frontier.seed_settings import SeedSettings
from crawler.node_context import LOOP_RESTART_DELAY, NodeContext
from crawler.redis_outage import GaveUp
from crawler.signals import frontier_flush

logger = logging.getLogger(__name__)

WRONG_TYPE_RETRY_MAX = 30.0  # seconds: longest pause between looks at a seed key of another type

# The spider's part: one raw seed -> its requests (invalid seeds recorded, none returned).
Accept = Callable[[SeedQueue, bytes], Awaitable[list[Request]]]
# True when the cluster is idle (nothing queued, leased or in flight here).
IdleCheck = Callable[[SeedQueue], Awaitable[bool]]


class SeedReader:
    def __init__(self, crawler: Crawler, config: SeedSettings) -> None:
        self.crawler = crawler
        self.config = config
        self.context = NodeContext.required(crawler, "RedisSpider's seed reader")
        self.guard = self.context.guard("seeds")
        assert crawler.stats is not None
        self.stats = crawler.stats
        self.queue = SeedQueue(
            self.context.redis,
            SeedKeys(config.seeds_key, config.invalid_key, config.frontier),
            config.source,
            node_id=self.context.node_id,
            hold_ms=int(config.hold_timeout * 1000),
        )
        self._handed = 0  # seeds of the held batch whose requests all went to the engine
        self._keeper: asyncio.Task[None] | None = None

    async def requests(self, accept: Accept, cluster_idle: IdleCheck) -> AsyncIterator[Request]:
        config = self.config
        if not await self.context.frontier_open():
            return  # the scheduler refused this node (and says why): take no seed
        self._keeper = self.context.supervise("seed_hold", self._keep_hold)
        logger.info(
            "Reading seeds from Redis %s %s (batch %d, encoding %s)",
            config.source.value,
            config.seeds_key,
            config.batch_size,
            config.encoding,
        )
        idle_since: float | None = None
        while True:
            # The last batch is in the frontier: the take lets it go. Not counted as handed
            # meanwhile, so a stop during the take returns it (again) rather than trimming
            # the next batch.
            let_go, self._handed = LetGo(self._handed), 0
            raws = await self._take(let_go)
            for raw in raws:
                self.stats.inc_value("seeds/received")
                for request in await accept(self.queue, raw):
                    yield request
                self._handed += 1
            if raws:
                await self.crawler.signals.send_catch_log_async(signal=frontier_flush)
                idle_since = None
                continue
            if not await self.guard.run(lambda: cluster_idle(self.queue), reads_only=True):
                idle_since = None
                continue
            now = time.monotonic()
            idle_since = idle_since or now
            if config.max_idle_time and now - idle_since >= config.max_idle_time:
                logger.info("Idle for %.1fs (max_idle_time): closing", now - idle_since)
                return

    async def _take(self, let_go: LetGo) -> list[bytes]:
        backoff = 0.0
        config = self.config
        while True:
            try:
                return await self.guard.run(
                    lambda: self.queue.take(config.batch_size, config.wait_timeout, let_go)
                )
            except WrongSeedKeyType as exc:
                backoff = min(WRONG_TYPE_RETRY_MAX, backoff * 2 or 0.5)
                self.stats.inc_value("seeds/wrong_type")
                logger.error("%s; looking again in %.1fs", exc, backoff)
                await asyncio.sleep(backoff)
            except Exception:  # a bug: the reader must not end, or no seed is read again
                self.stats.inc_value("node/loop_crashed/seed_reader")
                logger.exception("Seed reader crashed; reading again in %.0fs", LOOP_RESTART_DELAY)
                await asyncio.sleep(LOOP_RESTART_DELAY)

    async def _keep_hold(self) -> None:
        while True:
            returned = await self.guard.run(self.queue.keep_alive)
            if returned:
                self.stats.inc_value("seeds/reclaimed", returned)
                logger.warning(
                    "Returned %d seeds held by stopped nodes to %s", returned, self.config.seeds_key
                )
            await asyncio.sleep(self.config.hold_timeout / 3)

    async def close(self) -> None:
        """Let go of the seeds whose requests are in the frontier (the scheduler has flushed
        by now); return the rest to the seed key."""
        if self._keeper is None:
            return
        self._keeper.cancel()
        deadline = self.context.close_deadline()
        handed, self._handed = self._handed, 0
        try:
            if handed:
                let_go = LetGo(handed)  # one id for the call and its retries
                await self.guard.run(functools.partial(self.queue.done, let_go), deadline=deadline)
            returned = await self.guard.run(self.queue.give_back, deadline=deadline)
        except GaveUp:
            logger.warning(
                "Redis unavailable at close: seeds this node may hold go back to %s when "
                "another node finds its hold expired (%.0fs)",
                self.config.seeds_key,
                self.config.hold_timeout,
            )
            return
        if returned:
            self.stats.inc_value("seeds/returned", returned)
            logger.info("Returned %d seeds not yet crawled to %s", returned, self.config.seeds_key)
