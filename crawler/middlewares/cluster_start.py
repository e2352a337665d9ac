"""``ClusterStartMiddleware``: any Scrapy spider in cluster mode, not only ``RedisSpider``.

A plain ``scrapy.Spider`` (``start_urls`` or its own ``start()``),
``CrawlSpider``, ``SitemapSpider`` or feed spider yields the same start
requests on every node. With ``LeasingScheduler``:

- **once per crawl**: the first node to start claims
  ``{<spider>}:start:<CRAWLER_CRAWL_ID>`` (``crawler.frontier.start_claim``),
  passes the spider's start output on (its requests go into the shared
  frontier) and marks them written once they are stored in Redis and its items
  are settled by the pipelines; nodes that start later, or while it is writing,
  produce none and only lease. A node that stops while writing gives the claim
  up (another node runs ``start()`` again at once); one that dies leaves it to
  expire (``FRONTIER_LEASE_TIMEOUT``);
- **open while the cluster has work**: on ``spider_idle`` the node stays open
  while any node has requests queued or leased, or the start requests are not
  yet written, and closes when the cluster is idle (after
  ``MAX_IDLE_TIME_BEFORE_CLOSE`` seconds of it, when that is set);
- **the spider's own idle handlers when the cluster is idle**: Scrapy sends ``spider_idle``
  once the crawl is over; a node runs dry each time it waits for others' links, so the
  spider's own ``spider_idle`` receivers are moved to ``crawler.signals.cluster_idle`` when
  the spider opens, sent when the cluster is idle, on every node (a ``DontCloseSpider``
  keeps the node open, and the cluster is looked at again before the next call).

Spiders fed from Redis (``crawler.spiders.base.RedisSpider``) keep their own
``start()``, which reads seeds for as long as the node runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

from scrapy import Request, Spider, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import CloseSpider, DontCloseSpider, NotConfigured

from crawler.frontier.keys import FrontierKeys, frontier_parts
from crawler.frontier.pending import pending_requests
from crawler.frontier.seed_queue import seed_count
from crawler.frontier.seed_settings import seed_key_names
from crawler.frontier.start_claim import ClaimOutcome, StartClaim, running_writer, start_key
from crawler.middlewares.idle_requests import IdleRequests
from crawler.middlewares.lease_output import require_leasing_scheduler
from crawler.middlewares.start_items import StartItems
from crawler.middlewares.start_state import SET_UP_ELSEWHERE, SET_UP_NOT_RECORDED, StartSetUp
from crawler.middlewares.start_writer import ANOTHER_CRAWL_ID, StartWriter, say_nothing_left
from crawler.node import resolve_crawl_id
from crawler.node_context import NodeContext
from crawler.redis_connection import AsyncRedis
from crawler.redis_outage import REDIS_FAILURES, GaveUp, outage_reason
from crawler.settings_values import get_float, get_int
from crawler.signals import cluster_idle, frontier_flush, move_user_idle_handlers, send_idle
from crawler.spiders.base import RedisSpider
from crawler.wakeup import wake_engine

logger = logging.getLogger(__name__)

CLAIM_POLL = 1.0  # seconds between looks at another node's claim


class ClusterStartMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        require_leasing_scheduler(crawler)
        if issubclass(crawler.spidercls, RedisSpider):
            raise NotConfigured  # it reads its seeds itself: nothing to say (Scrapy says none)
        self.crawler = crawler
        settings = crawler.settings
        self.max_idle = get_float(settings, "MAX_IDLE_TIME_BEFORE_CLOSE")
        if self.max_idle < 0:
            given = settings.get("MAX_IDLE_TIME_BEFORE_CLOSE")
            raise ValueError(f"MAX_IDLE_TIME_BEFORE_CLOSE={given} must be >= 0 (0 = never)")
        context = NodeContext.required(crawler, "ClusterStartMiddleware")
        self.node_id = context.node_id
        self.crawl_id = resolve_crawl_id(settings.get("CRAWLER_CRAWL_ID"))
        self.lease_ms = int(get_float(settings, "FRONTIER_LEASE_TIMEOUT") * 1000)
        self.idle_poll = get_float(settings, "FRONTIER_IDLE_POLL")
        self.context = context
        self._redis: AsyncRedis = context.redis
        self.guard = context.guard("start")
        self._written = False  # the crawl's start requests are in the frontier
        self._idle_since: float | None = None  # the cluster idle since (checked while idle)
        self._checked_at = 0.0
        self._checked_after = -1  # frontier/added when the last look began
        self._checking: asyncio.Task[None] | None = None
        self._start_claim: StartClaim | None = None
        self._frontier: tuple[FrontierKeys, ...] = ()  # every part's keys, once the spider is known
        self._start_items = StartItems()
        self._idle_requests = IdleRequests(crawler)  # says when every node fetches them
        for signal in (signals.item_scraped, signals.item_dropped, signals.item_error):
            crawler.signals.connect(self._start_items.settle, signal=signal)
        crawler.signals.connect(self._spider_idle, signal=signals.spider_idle)
        crawler.signals.connect(self._spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(self._spider_closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ClusterStartMiddleware:
        return cls(crawler)

    def _parts(self, spider: Spider) -> tuple[FrontierKeys, ...]:
        if not self._frontier:
            partitions = get_int(self.crawler.settings, "FRONTIER_PARTITIONS")
            self._frontier = tuple(frontier_parts(spider.name, partitions))
        return self._frontier

    def _claim(self, spider: Spider) -> StartClaim:
        if self._start_claim is None:
            key = start_key(FrontierKeys.for_spider(spider.name), self.crawl_id)
            self._start_claim = StartClaim(self._redis, key, self.node_id, self.lease_ms)
        return self._start_claim

    async def _say_start_written(self, spider: Spider) -> None:
        """start() is not run again: leasing; or, when the crawl has nothing left, that this
        node crawls nothing (a warning with what to do, unless the node that wrote the start
        requests runs now: the crawl ended as this node started)."""
        parts = self._parts(spider)
        pending = await self.guard.run(
            lambda: pending_requests(self._redis, parts), reads_only=True
        )
        if pending:
            logger.info(
                "Start requests of crawl %r are in the frontier (written by another node or an "
                "earlier run; start() is not run again): leasing. To crawl the site again run "
                "`crawler purge %s`; %s",
                self.crawl_id,
                spider.name,
                ANOTHER_CRAWL_ID,
            )
            return
        writer = await self.guard.run(
            lambda: running_writer(self._redis, parts[0], self.crawl_id), reads_only=True
        )
        say_nothing_left(self.crawl_id, spider.name, None if writer == self.node_id else writer)

    async def process_start(self, start: AsyncIterator[Any]) -> AsyncIterator[Any]:
        spider = self.crawler.spider
        assert spider is not None
        if not await self.context.frontier_open():
            return  # the scheduler refused this node (and says why): write no start request
        await self._say_unread_seeds(spider)
        claim = self._claim(spider)
        written_by = StartWriter(self.crawler.settings, spider)
        take = functools.partial(claim.claim, written_by.arguments, written_by.start_urls)
        while (outcome := await self.guard.run(take)) is ClaimOutcome.HELD:
            await asyncio.sleep(CLAIM_POLL)
        if outcome is ClaimOutcome.DONE:
            await written_by.compare(claim, self.guard, self.crawl_id)
            set_up = await self.guard.run(claim.set_up, reads_only=True)
            if set_up:
                assert self.crawler.stats is not None
                self.crawler.stats.inc_value("start/set_up_elsewhere")
                logger.warning(SET_UP_ELSEWHERE, set_up)
            elif set_up is None:
                logger.info(SET_UP_NOT_RECORDED)
            failed_after = await self.guard.run(claim.failed_after, reads_only=True)
            if failed_after is None:
                await self._say_start_written(spider)
            else:
                logger.warning(
                    "start() of crawl %r raised after %d start requests in an earlier run (its "
                    "error is in that node's log): only those are in the frontier, and start() "
                    "is not run again. To run it again: `crawler purge %s` (the crawl starts "
                    "over), or another CRAWLER_CRAWL_ID (what the dedup has seen is kept)",
                    self.crawl_id,
                    failed_after,
                    spider.name,
                )
            self._written = True
            return
        logger.info("Writing the start requests of crawl %r into the frontier", self.crawl_id)
        refresher = self.context.supervise("start_claim", lambda: self._refresh(claim))
        count = 0
        failed: Exception | None = None
        ended = False
        steps = StartSetUp(self.crawler, spider)
        try:
            try:
                async for output in steps.steps(start):
                    count += 1
                    if output is not None and not isinstance(output, Request):
                        self._start_items.opened()
                    yield output
            except CloseSpider as exc:  # a wish to stop, not an error: as a stop while writing
                logger.info(
                    "start() of crawl %r closed the spider (%s) after %d start requests: the "
                    "claim is given back, so another node or a later run runs start() again",
                    self.crawl_id,
                    exc.reason,
                    count,
                )
                raise
            except Exception as exc:  # noqa: BLE001 (Scrapy's own handling gets it below)
                # Scrapy crawls on with what start() gave; another node would only fail alike
                failed = exc
                logger.error(
                    "start() of crawl %r raised after %d start requests: the crawl goes on "
                    "with them",
                    self.crawl_id,
                    count,
                )
            await self.crawler.signals.send_catch_log_async(signal=frontier_flush)
            await self._start_items.settled()  # no lease holds them: the claim does
            ended = True
        finally:
            refresher.cancel()
            if not ended:  # the node stops while writing: another one takes over at once
                with contextlib.suppress(GaveUp):  # or, Redis away, once the claim expires
                    await self.guard.run(claim.release)
        if self._start_items.requeued:
            logger.warning(
                "%d items start() yielded could not be delivered: the start-request claim is "
                "left to expire, and another node writes the start requests again",
                self._start_items.requeued,
            )
        elif await self.guard.run(
            lambda: claim.finish(None if failed is None else count, steps.names)
        ):
            self._written = True
            logger.info("Wrote %d start requests and items of crawl %r", count, self.crawl_id)
        else:
            logger.warning("The start-request claim expired while writing: another node redoes it")
        if failed is not None:
            raise failed

    async def _say_unread_seeds(self, spider: Spider) -> None:
        """Seeds pushed to the spider's seed key, which a spider not fed from Redis never reads
        (``redis-cli lpush <spider>:start_urls`` works with a ``RedisSpider`` only): said."""
        key, _ = seed_key_names(self.crawler.settings, spider)
        waiting = await self.guard.run(lambda: seed_count(self._redis, key), reads_only=True)
        if waiting:
            assert self.crawler.stats is not None
            self.crawler.stats.set_value("seeds/unread", waiting)
            logger.warning(
                "%d seeds wait in %s, but %s is not fed from Redis (its start requests are its "
                "start_urls or start()): no node reads them. To crawl them, make it a "
                "RedisSpider (crawler.spiders.base.RedisSpider); else "
                "delete the key (`crawler purge %s` ends the crawl and deletes it)",
                waiting,
                key,
                spider.name,
                spider.name,
            )

    async def _refresh(self, claim: StartClaim) -> None:
        while True:
            await asyncio.sleep(self.lease_ms / 3000)
            try:
                await claim.refresh()
            except REDIS_FAILURES as exc:
                if outage_reason(exc) is None:
                    raise
                # Redis away: the next refresh tries again (the guard logs outages)
                logger.debug("Could not refresh the start-request claim: %s", exc)

    # -- closing only when the cluster is idle ------------------------------------------------

    def _added(self) -> int:
        """Requests this node's writes added to the shared queue (duplicates the dedup
        dropped are not: a spider_idle handler that asks for pages crawled before lets the
        node close, as in Scrapy)."""
        assert self.crawler.stats is not None
        return int(self.crawler.stats.get_value("frontier/added", 0))

    def _spider_idle(self, spider: Spider) -> None:
        now = time.monotonic()
        # a look is stale once this node added requests after it began (the node is not
        # idle while a write is on its way, so they are counted by then)
        fresh = (
            now - self._checked_at <= 2 * self.idle_poll + 1
            and self._checked_after == self._added()
        )
        if fresh and self._idle_since is not None and now - self._idle_since >= self.max_idle:
            # the cluster was idle at the last look, just now: the spider's own handlers say
            with self._idle_requests.handlers_running():
                reason = send_idle(self.crawler, cluster_idle, spider)
            if reason is None:
                self._idle_since = None  # they gave work, or wait: look again before closing
                raise DontCloseSpider
            if reason != "finished":
                raise CloseSpider(reason)
            return  # let the spider close
        if self._checking is None or self._checking.done():
            self._checked_after = self._added()
            self._checking = asyncio.ensure_future(self._check_cluster(spider))
        raise DontCloseSpider

    async def _check_cluster(self, spider: Spider) -> None:
        # what this node sent before the look (a spider_idle handler's engine.crawl(), in
        # the same signal) is in Redis first, or the look would miss it
        await self.crawler.signals.send_catch_log_async(signal=frontier_flush)
        parts = self._parts(spider)
        try:
            pending = await self.guard.run(
                lambda: pending_requests(self._redis, parts), reads_only=True
            )
            if not self._written:
                self._written = await self.guard.run(self._claim(spider).written, reads_only=True)
        except GaveUp:  # the node stops while Redis is away: no more looks
            return
        if pending or not self._written:
            self._idle_since = None
        elif self._idle_since is None:
            self._idle_since = time.monotonic()
        self._checked_at = time.monotonic()
        await asyncio.sleep(self.idle_poll)
        wake_engine(self.crawler)  # lease the work now, or look at idleness again

    def _spider_opened(self) -> None:
        move_user_idle_handlers(self.crawler)

    async def _spider_closed(self) -> None:
        if self._checking is not None:
            self._checking.cancel()
