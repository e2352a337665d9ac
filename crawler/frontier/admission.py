"""``FrontierAdmission``: whether this node may use its spider's frontier, checked once at start.

The first step of a node on the frontier claims the partition count
(``crawler.frontier.partitions``) and checks the storage layout
(``crawler.frontier.layout``): a node whose ``FRONTIER_PARTITIONS`` is not the crawl's
is refused (``frontier/refused/partitions``, ERROR log, the spider closes with
``frontier_partitions_changed``), so is one of another dedup mode (``crawler.frontier.
dedup_claim``: ``frontier/refused/dedup``, ``frontier_dedup_changed``), and so is one that
finds requests stored by an older
version (``frontier/refused/layout``, ``frontier_layout_old``: ``crawler migrate`` moves
them), before it reads a seed or writes a start request (both wait for
:meth:`NodeContext.frontier_open`). A node without ``FRONTIER_QUEUE_MAX`` is refused while
requests of the crawl wait in the Kafka backlog (``frontier/refused/backlog``,
``frontier_backlog_unread``): it would not read them back. An admitted node then, with
``FRONTIER_QUEUE_MAX``, starts the backlog loop
(``crawler.frontier.backlog``); one given another ``FRONTIER_BACKLOG_TOPIC`` than the crawl
recorded is refused while requests wait in another topic (``frontier_backlog_topic``), and
else records its own, and a node spilling to the old one stops at its next look at the topic.
A node whose ``KAFKA_TOPIC_TEMPLATE`` is not the one the crawl's items go to (or that sends
none to Kafka while the crawl's go there, or the other way round) is refused while a live node
sends them there (``crawler.frontier.item_topics``); live nodes that run other crawls
(``CRAWLER_CRAWL_ID``) on the frontier are said (``crawler.frontier.crawl_ids``).
A scrapy-redis crawl of the spider left under way (its queue ``<spider>:requests``) refuses
the node (``frontier/refused/scrapy_redis_queue``, ``frontier_scrapy_redis_queue``); its
dupefilter alone is said in a WARNING (``frontier/scrapy_redis_dupefilter``). An admitted
node whose frontier has nothing queued or leased but remembers URLs seen (an earlier crawl's,
as a rule) says so in a WARNING (``frontier/seen_at_start``): the pages they name are not
crawled again when linked; at INFO while the node that wrote the crawl's start requests runs
(it ended as this node started).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import replace

from scrapy.crawler import Crawler
from scrapy.statscollectors import StatsCollector

from crawler.frontier.backlog import Backlog
from crawler.frontier.crawl_ids import CrawlIdsLook
from crawler.frontier.dedup_summary import seen_entries
from crawler.frontier.item_topics import NO_KAFKA, ItemTopics
from crawler.frontier.node_run import NodeRun
from crawler.frontier.partitioned import PartitionedFrontier
from crawler.frontier.pending import pending_requests, spilled_requests, waiting_by_topic
from crawler.frontier.refusal import (
    BacklogTopicChanged,
    BacklogUnread,
    FrontierRefused,
    ScrapyRedisQueueLeft,
)
from crawler.frontier.seed_settings import SeedSettings
from crawler.frontier.settings import FrontierSettings
from crawler.frontier.start_claim import running_writer
from crawler.kafka.topics import topic_from_template
from crawler.lua import text
from crawler.node import resolve_crawl_id
from crawler.node_context import NodeContext
from crawler.pipelines.kafka import KafkaPipeline
from crawler.redis_outage import GaveUp, OutageGuard
from crawler.wakeup import close_spider_soon

logger = logging.getLogger(__name__)


class FrontierAdmission:
    def __init__(
        self,
        crawler: Crawler,
        client: PartitionedFrontier,
        settings: FrontierSettings,
        guard: OutageGuard,
        *,
        node_run: NodeRun,
        on_refused: Callable[[], None],
        on_admitted: Callable[[], None],
    ) -> None:
        self.crawler = crawler
        self.context = NodeContext.required(crawler, "LeasingScheduler")
        assert crawler.stats is not None
        self.stats: StatsCollector = crawler.stats
        self.client = client
        self.settings = settings
        self.guard = guard
        self.backlog = self._backlog(client, settings)
        self.node_run = node_run
        self.refusal: FrontierRefused | None = None
        self.crawl_ids: CrawlIdsLook | None = None  # once the crawl is claimed
        # the checks passed: the node may lease (not before: a lease taken while its id's
        # earlier run is taken back would be taken back with it)
        self.admitted = False
        self._on_refused = on_refused
        self._on_admitted = on_admitted
        self._stopping: asyncio.Future[None] | None = None  # the close a refusal started
        self._backlog_loop: asyncio.Task[None] | None = None

    @staticmethod
    def _backlog(client: PartitionedFrontier, settings: FrontierSettings) -> Backlog | None:
        """The spill and refill of ``FRONTIER_QUEUE_MAX`` (None: unbounded)."""
        if not settings.backlog.queue_max:
            return None
        topic = topic_from_template("FRONTIER_BACKLOG_TOPIC", settings.backlog.topic, client.spider)
        lease_ms = int(settings.lease_timeout * 1000)
        return Backlog(client.parts, replace(settings.backlog, topic=topic), lease_ms)

    async def check(self) -> None:
        """Claim the partition count and dedup mode (or refuse the node), then start the
        backlog loop."""
        try:
            await self.guard.run(self.node_run.claim)
            await self.guard.run(self._check_scrapy_redis_keys)
            await self.guard.run(self._take_back)
            await self.guard.run(self.client.claim)
            if self.backlog is None:
                await self.guard.run(self._check_no_backlog)
            else:
                await self.guard.run(self._claim_backlog_topic)
            await self.guard.run(self._claim_crawl)
            await self.guard.run(self._say_seen_before)
        except FrontierRefused as exc:
            self.refuse(exc)
            return
        except Exception as exc:  # not an outage, which the guard waits out: it will not pass
            if isinstance(exc, GaveUp):  # the node stops meanwhile
                raise
            logger.exception("Checking the frontier of %s failed", self.client.spider)
            self.refuse(
                FrontierRefused(f"checking the frontier failed: {type(exc).__name__}: {exc}")
            )
            return
        self.admitted = True
        self.context.frontier_checked(usable=True)
        self._on_admitted()
        if self.backlog is not None:
            backlog = self.backlog
            self._backlog_loop = self.context.supervise(
                "backlog", lambda: self._run_backlog(backlog)
            )

    async def _run_backlog(self, backlog: Backlog) -> None:
        """Spill and refill until the node stops, or is refused: a node started since with
        another ``FRONTIER_BACKLOG_TOPIC`` recorded its own (``Backlog.step``'s look)."""
        try:
            await backlog.run(self.guard, self.stats)
        except FrontierRefused as exc:
            self.refuse(exc)

    async def _check_scrapy_redis_keys(self) -> None:
        """A scrapy-redis crawl of the spider left under way (its default queue key holds
        requests) refuses the node; its dupefilter alone is said not read."""
        spider, redis = self.client.spider, self.client.parts[0].redis
        queue, dupefilter = f"{spider}:requests", f"{spider}:dupefilter"
        async with redis.pipeline(transaction=False) as pipe:
            pipe.type(queue)
            pipe.type(dupefilter)
            kinds = [text(kind) for kind in await pipe.execute()]
        if kinds[0] in ("zset", "list"):  # PriorityQueue; FifoQueue and LifoQueue
            size = redis.zcard if kinds[0] == "zset" else redis.llen
            raise ScrapyRedisQueueLeft(spider, queue, int(await size(queue)), dupefilter)
        if kinds[1] == "set":
            seen = int(await redis.scard(dupefilter))
            self.stats.inc_value("frontier/scrapy_redis_dupefilter")
            logger.warning(
                "scrapy-redis's dupefilter %s (%d fingerprints) is not read here: pages a "
                "scrapy-redis crawl recorded as seen are crawled again (delete it: redis-cli del "
                "%s; redis-cli -c on a Redis Cluster)",
                dupefilter,
                seen,
                dupefilter,
            )

    async def _say_seen_before(self) -> None:
        """A frontier with nothing queued or leased that remembers URLs seen: the pages a seed
        pushed again leads to are skipped (scrapy-redis without ``SCHEDULER_PERSIST`` forgot
        them at close): say it, with what crawls them again."""
        spider, redis = self.client.spider, self.client.parts[0].redis
        keys = [part.keys for part in self.client.parts]
        if await pending_requests(redis, keys):
            return
        seen = await seen_entries(redis, keys)
        if not seen:
            return
        self.stats.set_value("frontier/seen_at_start", seen)
        if isinstance(getattr(self.crawler.spider, "seed_settings", None), SeedSettings):
            skipped = (
                "a seed pushed is fetched, but the pages it links to that were seen are not "
                "crawled again, nor are this crawl's start_urls fetched again"
            )
            again = (
                f"crawler seed {spider} --recrawl <url>, or crawler purge {spider} (start_urls: "
                "or another CRAWLER_CRAWL_ID)"
            )
        else:  # a spider that reads no seeds, which crawler seed refuses
            skipped = (
                "start() runs once a crawl (CRAWLER_CRAWL_ID), and the pages its requests lead "
                "to that were seen are not crawled again"
            )
            again = f"crawler purge {spider}"
        crawl_id = resolve_crawl_id(self.crawler.settings.get("CRAWLER_CRAWL_ID"))
        writer = await running_writer(redis, keys[0], crawl_id)
        if writer is not None and writer != self.node_run.node_id:  # it ended as this started
            logger.info(
                "The frontier of '%s' has nothing queued and remembers %d URLs seen; crawl %r "
                "has just ended (%s, which wrote its start requests, runs now): %s. To crawl "
                "them again: %s",
                spider,
                seen,
                crawl_id,
                writer,
                skipped,
                again,
            )
            return
        logger.warning(
            "The frontier of '%s' has nothing queued and remembers %d URLs seen (by this crawl "
            "or an earlier one): %s. To crawl them again: %s",
            spider,
            seen,
            skipped,
            again,
        )

    async def _take_back(self) -> None:
        """Leases of this node id a killed run left expire now (this run holds the id, and has
        leased nothing yet): the next heartbeat of any node returns them to the queue, and
        says so (``frontier/reclaimed``), so this line does not count them as returned."""
        expired = await self.node_run.take_back([part.keys for part in self.client.parts])
        if expired:
            self.stats.inc_value("frontier/taken_back", expired)
            logger.warning(
                "%d leases of an earlier run of node %s (killed) expire now: the next "
                "heartbeat of a node returns them to the queue, and counts them there",
                expired,
                self.node_run.node_id,
            )

    async def _check_no_backlog(self) -> None:
        """Without ``FRONTIER_QUEUE_MAX`` nothing reads the backlog: refuse a crawl that has one."""
        parts = self.client.parts
        spilled = await spilled_requests(parts[0].redis, [part.keys for part in parts])
        if spilled:
            raise BacklogUnread(self.client.spider, spilled)

    async def _claim_backlog_topic(self) -> None:
        """Record the topic this node spills to; refuse it when requests of the crawl wait in
        another one (a changed FRONTIER_BACKLOG_TOPIC: they would never be read back)."""
        assert self.backlog is not None
        parts = self.client.parts
        key, topic = parts[0].keys.backlog_topic, self.backlog.settings.topic
        redis = parts[0].redis
        if await redis.set(key, topic, nx=True):
            return
        recorded = text(await redis.get(key) or b"")
        if recorded == topic:
            return
        waiting = await waiting_by_topic(redis, [part.keys for part in parts])
        elsewhere = {other: count for other, count in waiting.items() if other != topic and count}
        if elsewhere:
            spilled, where = sum(elsewhere.values()), " and ".join(elsewhere)
            raise BacklogTopicChanged(self.client.spider, spilled, where, topic)
        await redis.set(key, topic)  # nothing waits in another: nodes spilling to it stop

    async def _claim_crawl(self) -> None:
        """Say live nodes running other crawls on the frontier; refuse this node if its items
        would go to other topics than its crawl's (``crawler.frontier.item_topics``)."""
        settings, part0, node = self.crawler.settings, self.client.parts[0], self.node_run.node_id
        crawl_id = resolve_crawl_id(settings.get("CRAWLER_CRAWL_ID"))
        self.crawl_ids = CrawlIdsLook(part0.redis, part0.keys, self.client.spider, node, crawl_id)
        if await self.crawl_ids.look(now=True):
            self.stats.inc_value("frontier/other_crawls")
        # the pipeline is on only with Kafka (the engine runs: its pipelines are built)
        sends = self.crawler.get_item_pipeline(KafkaPipeline) is not None
        template = str(settings.get("KAFKA_TOPIC_TEMPLATE")) if sends else NO_KAFKA
        await ItemTopics(part0.redis, part0.keys, self.client.spider, crawl_id).claim(
            node, template
        )

    async def look_again(self) -> None:
        """At a heartbeat, every ``LOOK_SECONDS``: say live nodes running other crawls. A look
        that fails is left to the next (the heartbeat's own work goes on)."""
        if self.crawl_ids is None:
            return
        try:
            if await self.crawl_ids.look():
                self.stats.inc_value("frontier/other_crawls")
        except Exception as exc:  # noqa: BLE001 - a look only says; the beat must go on
            logger.debug("The look at other crawls failed: %s", exc)

    @property
    def refused(self) -> bool:
        return self.refusal is not None

    def refuse(self, reason: FrontierRefused) -> None:
        """This node may not use the frontier (``reason``): take and write nothing, stop."""
        if self.refused:
            return
        self.refusal = reason
        self.context.frontier_checked(usable=False)
        self._on_refused()
        self.stats.inc_value(f"frontier/refused/{reason.stat}")
        logger.error("Node refused: %s", reason)
        # Not a frontier task: the close awaits those. The frontier is checked once the engine
        # runs, so there is one to close.
        self._stopping = close_spider_soon(self.crawler, reason.finish_reason)
        assert self._stopping is not None

    async def close(self) -> None:
        """Let a spill under way finish (its requests in Kafka or back in the queue) within
        the close deadline; cancelled then, it gives its leases back."""
        if self.backlog is not None:
            self.backlog.stop()
        if self._backlog_loop is not None:
            left = self.context.close_deadline() - time.monotonic()
            await asyncio.wait({self._backlog_loop}, timeout=max(0.0, left))
            await self.context.stop_loops(self._backlog_loop)  # its leases back before the close
        if self.backlog is not None:
            deadline = self.context.close_deadline()
            await self.backlog.close(
                lambda settle: self.guard.run(settle, deadline=deadline), self.stats
            )
