"""``ClusterLogStats``: a periodic one-line summary per node, like Scrapy's ``LogStats``.

Every ``CLUSTER_LOGSTATS_INTERVAL`` seconds: this node's pages and items (totals and
per minute), Kafka delivered and failed, the leases it holds (estimated from its
stats), and, from Redis in one round trip per part of the frontier (a Lua script on
Redis server time, the parts at once), the shared queue depth (``{spider}:queue:count`` and
every other part's) and the live nodes (``{spider}:nodes`` alive after now), those late apart
(``{spider}:beats``: no heartbeat for two of their intervals, as ``crawler status`` says). The
round trip is asynchronous (redis.asyncio) and bounded by a timeout; when Redis does not answer
the line says so and the crawl goes on. Cluster mode only
(``REDIS_URL``); needs the asyncio reactor.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from redis.commands.core import AsyncScript
from scrapy import Spider, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured
from scrapy.settings import BaseSettings
from scrapy.statscollectors import StatsCollector
from scrapy.utils.reactor import is_asyncio_reactor_installed

from crawler.frontier.keys import frontier_parts
from crawler.node_context import NodeContext
from crawler.redis_outage import REDIS_FAILURES
from crawler.settings_values import get_bool, get_float, get_int

logger = logging.getLogger(__name__)

# KEYS: 1 queue count, 2 nodes, 3 backlog count, 4 beats. Returns {queue depth, nodes alive
# after now (server time, ms) and beating, requests in the Kafka backlog, nodes alive but late:
# their last beat (as heartbeat.lua records it) more than two of their intervals ago}.
CLUSTER_SCRIPT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local queued = tonumber(redis.call('GET', KEYS[1]) or '0')
local spilled = math.max(0, tonumber(redis.call('GET', KEYS[3]) or '0'))  -- below 0: 0
local alive = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. now, '+inf')
local late = 0
for _, node in ipairs(alive) do
  local at, interval = string.match(redis.call('HGET', KEYS[4], node) or '', '^(%d+) (%d+)')
  local every = tonumber(interval or '0')  -- 0: not recorded (as old versions): not judged
  if at and every > 0 and now - tonumber(at) > 2 * every then late = late + 1 end
end
return {queued, #alive - late, spilled, late}
"""
# Stats that end a lease this node took (docs/stats.md).
LEASE_ENDS = ("frontier/done", "frontier/released", "frontier/stragglers")
LEASE_END_PREFIXES = ("frontier/failed/", "frontier/requeued/", "frontier/lease_lost/")


@dataclass(frozen=True, slots=True)
class ClusterLogStatsSettings:
    interval: float
    partitions: int
    queue_max: int  # FRONTIER_QUEUE_MAX: 0, this node does not read the Kafka backlog

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> ClusterLogStatsSettings:
        if not get_bool(settings, "CLUSTER_LOGSTATS_ENABLED"):
            raise NotConfigured("CLUSTER_LOGSTATS_ENABLED is off")
        if not settings.get("REDIS_URL"):
            raise NotConfigured("REDIS_URL is empty: no cluster to report on")
        interval = get_float(settings, "CLUSTER_LOGSTATS_INTERVAL")
        if interval <= 0:
            raise ValueError(f"CLUSTER_LOGSTATS_INTERVAL={interval} must be > 0")
        return cls(
            interval=interval,
            partitions=get_int(settings, "FRONTIER_PARTITIONS") or 1,
            queue_max=get_int(settings, "FRONTIER_QUEUE_MAX"),
        )


@dataclass(frozen=True, slots=True)
class ClusterCounts:
    queued: int  # in Redis, every part
    live_nodes: int  # beating
    backlog: int  # spilled to the Kafka backlog, every part
    late_nodes: int = 0  # alive, but no heartbeat for two of their intervals (crawler status)


def leases_held(stats: Mapping[str, Any]) -> int:
    """Leases taken minus leases ended, from this node's stats (an estimate, never < 0)."""
    ended = sum(
        int(value)
        for name, value in stats.items()
        if name in LEASE_ENDS or name.startswith(LEASE_END_PREFIXES)
    )
    return max(0, int(stats.get("frontier/leased", 0)) - ended)


def kafka_failed(stats: Mapping[str, Any]) -> int:
    return sum(int(value) for name, value in stats.items() if name.startswith("kafka/failed/"))


def summary(
    node_id: str,
    stats: Mapping[str, Any],
    previous: tuple[int, int],
    interval: float,
    cluster: ClusterCounts | None,
) -> str:
    """The log line; ``previous`` = (pages, items) at the last line, ``cluster`` from Redis."""
    pages = int(stats.get("response_received_count", 0))
    items = int(stats.get("item_scraped_count", 0))
    per_minute = 60.0 / interval
    if cluster is None:
        shared = "shared queue and nodes unknown (Redis did not answer)"
    else:
        spilled = f" (+{cluster.backlog} in the Kafka backlog)" if cluster.backlog else ""
        late = (
            f", {cluster.late_nodes} late (no heartbeat for two intervals)"
            if cluster.late_nodes
            else ""
        )
        shared = f"shared queue {cluster.queued}{spilled}, {cluster.live_nodes} live nodes{late}"
    return (
        f"Node {node_id}: {pages} pages (at {(pages - previous[0]) * per_minute:.0f}/min), "
        f"{items} items (at {(items - previous[1]) * per_minute:.0f}/min), "
        f"Kafka {int(stats.get('kafka/delivered', 0))} delivered, {kafka_failed(stats)} failed, "
        f"{leases_held(stats)} leases held; {shared}"
    )


def unread_backlog(spider: str, cluster: ClusterCounts, queue_max: int) -> str | None:
    """What a node that does not read the Kafka backlog (no ``FRONTIER_QUEUE_MAX``) says when
    requests wait there: nodes that read it spilled them, and once they stop nothing does."""
    if queue_max or not cluster.backlog:
        return None
    return (
        f"{cluster.backlog} requests of {spider!r} wait in the Kafka backlog, which this node "
        "does not read (FRONTIER_QUEUE_MAX is not set here, but was on the nodes that spilled "
        "them): give every node the same FRONTIER_QUEUE_MAX, or the crawl does not finish once "
        "those nodes stop"
    )


async def read_cluster(
    script: AsyncScript, spider: str, partitions: int, timeout: float
) -> ClusterCounts | None:
    """The queue depth and backlog over every part, and the live nodes, of ``spider``; None
    when Redis does not answer. Every node beats in every part: part 0 counts the nodes."""
    parts = frontier_parts(spider, partitions)
    calls = (
        script(keys=[keys.queue_count, keys.nodes, keys.backlog, keys.beats]) for keys in parts
    )
    try:  # one short command per part and interval: skipped, not queued, behind a dead Redis
        replies = await asyncio.wait_for(asyncio.gather(*calls), timeout)
    except (*REDIS_FAILURES, OSError, TimeoutError) as exc:
        logger.debug("Cluster stats: Redis did not answer: %s", exc)
        return None
    return ClusterCounts(
        queued=sum(int(reply[0]) for reply in replies),
        live_nodes=int(replies[0][1]),
        backlog=sum(int(reply[2]) for reply in replies),
        late_nodes=int(replies[0][3]),
    )


class ClusterLogStats:
    def __init__(self, crawler: Crawler) -> None:
        self.settings = ClusterLogStatsSettings.from_settings(crawler.settings)
        if not is_asyncio_reactor_installed():
            raise NotConfigured("ClusterLogStats needs TWISTED_REACTOR to be the asyncio reactor")
        assert crawler.stats is not None
        self.stats: StatsCollector = crawler.stats
        self.crawler = crawler
        self._task: asyncio.Task[None] | None = None
        crawler.signals.connect(self.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ClusterLogStats:
        return cls(crawler)

    def spider_opened(self, spider: Spider) -> None:
        context = NodeContext.required(self.crawler, "ClusterLogStats")
        script = context.redis.register_script(CLUSTER_SCRIPT)
        self._task = context.supervise(
            "cluster_logstats", lambda: self._loop(spider.name, script, context.node_id)
        )

    async def spider_closed(self, spider: Spider, reason: str) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _loop(self, spider: str, script: AsyncScript, node_id: str) -> None:
        previous = (0, 0)
        backlog_said = False
        while True:
            await asyncio.sleep(self.settings.interval)
            cluster = await read_cluster(
                script, spider, self.settings.partitions, min(5.0, self.settings.interval)
            )
            stats = dict(self.stats.get_stats())
            line = summary(node_id, stats, previous, self.settings.interval, cluster)
            logger.info("%s", line)
            unread = unread_backlog(spider, cluster, self.settings.queue_max) if cluster else None
            if unread is not None and not backlog_said:
                backlog_said = True
                logger.warning("%s", unread)
            previous = (
                int(stats.get("response_received_count", 0)),
                int(stats.get("item_scraped_count", 0)),
            )
