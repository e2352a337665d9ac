"""Bounded Redis memory: requests beyond ``FRONTIER_QUEUE_MAX`` per part spill to Kafka
(no Scrapy imports).

Each part of a spider's frontier keeps at most ``FRONTIER_QUEUE_MAX`` queued requests in
Redis; the rest wait in the backlog topic ``FRONTIER_BACKLOG_TOPIC`` (one Kafka partition
per part), with the same at-least-once rule as everything else:

- **spill** (any node, every ``FRONTIER_SPILL_INTERVAL``, for every part over its bound):
  ``spill_take.lua`` leases the lowest-priority requests beyond the bound to the node, like
  any lease (a node that dies meanwhile only returns them to the queue when it expires);
  the node produces them to the part's partition and waits for the broker; those Kafka
  acknowledged leave Redis (``spill_done.lua``, which also counts them in
  ``{<part>}:backlog`` from the offsets Kafka gave them), the others are released back to
  the queue, also when the spill is cut short (``crawler.frontier.backlog_spill``); a
  stopping node lets a step under way finish (``stop``);
- **refill** (nodes in the consumer group ``<topic>``, each reading the partitions Kafka
  assigns it): while a part holds fewer than half its bound, its partition is read back
  into Redis and only then are the offsets committed; a reader that dies in between leaves
  messages the next one skips (``crawler.frontier.backlog_refill``).

A part's backlog count is, summed over every topic it spilled to (``:backlog:written``; nodes
given different ``FRONTIER_BACKLOG_TOPIC``s), its next offset written less its next offset to
read back (both moved only forward, in the same calls: ``lua/backlog_count.lua``), so it mends
itself whatever order the nodes' calls land in, and wherever a node dies between Kafka and
Redis. Every 10 s a node looks at its topic: made again if deleted (the requests that waited in
it said lost), and a node whose topic is no longer the crawl's recorded one (a node started
since with another, while nothing waited) stops (``BacklogTopicTaken``); and live nodes keeping
another ``FRONTIER_QUEUE_MAX`` are said (``crawler.frontier.backlog_bounds``).

The idle check and ``crawler status`` count the backlog as queued, so nodes do not stop
while requests wait in Kafka. Kafka's blocking calls run in threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace

from confluent_kafka import Consumer, KafkaException, TopicPartition

from crawler.frontier.backlog_bounds import BoundsLook
from crawler.frontier.backlog_outcomes import Stats, Step
from crawler.frontier.backlog_refill import Refill, say_topic_lost
from crawler.frontier.backlog_settings import BacklogSettings
from crawler.frontier.backlog_spill import Spill
from crawler.frontier.client import FrontierClient
from crawler.frontier.pending import waiting_by_topic
from crawler.frontier.refusal import BacklogTopicTaken
from crawler.kafka.health import LIBRDKAFKA_LOG
from crawler.kafka.producer import NO_AUTO_CREATION, ItemProducer, producer_config
from crawler.lua import frontier_script, text
from crawler.redis_connection import AsyncRedis
from crawler.redis_outage import OutageGuard

logger = logging.getLogger(__name__)

TOPIC_CHECK_SECONDS = 10.0  # how often a node looks at the topic (missing, or made again)


# runs a Redis step through the node's guard (up to its close deadline)
Guarded = Callable[[Callable[[], Awaitable[None]]], Awaitable[None]]


class Backlog:
    def __init__(
        self, parts: Sequence[FrontierClient], settings: BacklogSettings, lease_ms: int
    ) -> None:
        self.clients = tuple(parts)
        self.parts = tuple(client.keys for client in parts)
        self.redis: AsyncRedis = parts[0].redis
        self.node_id = parts[0].node_id
        self.settings = settings
        self.lease_ms = lease_ms
        self.producer = ItemProducer(  # the topic is made here, never by the broker
            producer_config(
                settings.bootstrap,
                {
                    **settings.security,
                    **NO_AUTO_CREATION,
                    "linger.ms": 5,
                    "message.timeout.ms": round(settings.ack_timeout * 1000),
                },
            )
        )
        self._spill = Spill(self.clients, self.producer, settings, lease_ms)
        self.consumer = Consumer(
            {
                "bootstrap.servers": settings.bootstrap,
                "group.id": settings.topic,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "logger": LIBRDKAFKA_LOG,
                **settings.security,
            }
        )
        self._refill = Refill(self.redis, self.parts, settings, self.node_id)
        self._mend = self.redis.register_script(frontier_script("backlog_count", "backlog_mend"))
        self._bounds = BoundsLook(self.redis, self.parts[0], self.node_id, settings.queue_max)
        self._topic_checked = 0.0  # time.monotonic() of the last look (the first step looks)
        self._subscribed = False
        self._stopping = asyncio.Event()  # the node stops: no new step

    def stop(self) -> None:
        """Start no new step (the one under way finishes: ``run`` then returns)."""
        self._stopping.set()

    async def _rest(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), seconds)

    async def open(self) -> None:
        """Create the backlog topic (one partition per part; one with fewer, left by a crawl
        of fewer parts that never spilled, is grown) and join its consumer group."""
        await self._make_topic()
        self.consumer.subscribe([self.settings.topic])
        self._subscribed = True

    async def _make_topic(self, timeout: float = 30.0) -> None:
        """Make the topic when it is not there (nothing else does: the producer may not), with
        a partition per part (one made again by another client may have fewer)."""
        topic, count = self.settings.topic, len(self.parts)
        replication = self.settings.replication
        await self.producer.ensure_topics([topic], count, replication, timeout=timeout)
        had = await self.producer.grow_partitions(topic, count, timeout=timeout)
        if had < count:
            logger.warning(
                "Backlog topic %s had %d partitions for %d parts: grown to %d",
                topic,
                had,
                count,
                count,
            )
            await self.producer.ensure_topics([topic], count, replication, timeout=timeout)

    async def _mend_offsets(self) -> int:
        """Parts whose partition ends before what was written to it (Kafka acknowledged it:
        the topic was made again) start over in the topic as it is; the requests that waited
        in the one that was are lost, and said."""
        topic = self.settings.topic
        async with self.redis.pipeline(transaction=False) as pipe:
            for keys in self.parts:
                pipe.hget(keys.backlog_written, topic)
            written = [int(n or 0) for n in await pipe.execute()]  # before the watermarks
        lost = 0
        for part, (keys, wrote) in enumerate(zip(self.parts, written, strict=True)):
            if not wrote:
                continue
            watermarks = await asyncio.to_thread(
                self.consumer.get_watermark_offsets, TopicPartition(topic, part), 5.0
            )
            if watermarks is not None and watermarks[1] < wrote:
                high = watermarks[1]
                offsets = [keys.backlog, keys.backlog_read, keys.backlog_written]
                lost += int(await self._mend(keys=offsets, args=[topic, wrote, high]))
        if lost:
            say_topic_lost(topic, lost)
        return lost

    async def _check_record(self) -> None:
        """Raise ``BacklogTopicTaken`` when the crawl's recorded topic (the first node's, or
        one a node started with while nothing waited) is no longer this node's."""
        recorded = text(await self.redis.get(self.parts[0].backlog_topic) or b"")
        topic = self.settings.topic
        if recorded and recorded != topic:
            waiting = (await waiting_by_topic(self.redis, self.parts)).get(topic, 0)
            raise BacklogTopicTaken(recorded, topic, waiting)

    async def step(self) -> Step:
        """Spill every part over its bound, refill the assigned parts under half of it (and,
        every ``TOPIC_CHECK_SECONDS``, look at the topic: ``_check_record``, the other nodes'
        bounds, ``_make_topic``, ``_mend_offsets``). Spills Redis refused to settle are
        settled first."""
        await self._spill.settle_unsettled()
        lost = bounds_differ = 0
        if time.monotonic() - self._topic_checked >= TOPIC_CHECK_SECONDS:
            self._topic_checked = time.monotonic()
            await self._check_record()
            bounds_differ = int(await self._bounds.look())
            try:
                await self._make_topic(timeout=5.0)
                lost = await self._mend_offsets()
            except KafkaException as exc:  # the step goes on: its spills wait for Kafka
                logger.warning(
                    "Backlog topic %s not looked at: Kafka error %s", self.settings.topic, exc
                )
        async with self.redis.pipeline(transaction=False) as pipe:
            for keys in self.parts:
                pipe.get(keys.queue_count)
            depths = [int(n or 0) for n in await pipe.execute()]
        for keys, depth in zip(self.parts, depths, strict=True):
            if depth > self.settings.queue_max:
                await self._spill.part(keys)
        read = await self._refill.assigned(self.consumer, depths)
        spills = self._spill.take_counts()  # counted once the step has run through
        return replace(
            Step.of_spills(spills),
            refilled=read.requests,
            read_errors=read.read_errors,
            refill_undecodable=read.unreadable,
            refill_skipped=read.skipped,
            refill_lost=read.lost,
            topic_lost=lost + read.topic_lost,
            refill_requeued=read.requeued,
            bounds_differ=bounds_differ,
        )

    async def run(self, guard: OutageGuard, stats: Stats) -> None:
        """Open, then step every ``FRONTIER_SPILL_INTERVAL`` until ``stop`` (Redis outages
        through the node's guard; a Kafka error skips a step and is counted)."""
        while not self._stopping.is_set():
            try:
                await self.open()
                break
            except KafkaException as exc:
                stats.inc_value("frontier/backlog_error")
                logger.warning(
                    "Backlog topic %s not ready (%s): retrying", self.settings.topic, exc
                )
                await self._rest(max(1.0, self.settings.interval))
        logger.info(
            "Backlog: at most %d queued requests per part in Redis, the rest in Kafka topic %s",
            self.settings.queue_max,
            self.settings.topic,
        )
        while not self._stopping.is_set():
            try:
                step = await guard.run(self.step)
            except KafkaException as exc:
                stats.inc_value("frontier/backlog_error")
                logger.warning("Backlog step skipped: Kafka error %s", exc)
            else:
                step.count(stats)
            await self._rest(self.settings.interval)

    async def close(self, guarded: Guarded | None = None, stats: Stats | None = None) -> None:
        """Settle the spills Redis refused to settle (through ``guarded``: the node's guard up
        to its close deadline; said when Redis refuses still; counted in ``stats``), close the
        consumer, drain the producer."""
        try:
            settle = self._spill.settle_unsettled
            await (guarded(settle) if guarded is not None else settle())
        except Exception as exc:  # noqa: BLE001 - nothing may keep the stop from going on
            logger.warning(
                "%d requests spilled to %s could not be settled in Redis (%s): once their "
                "leases expire, another node crawls them from Redis and may read them back "
                "from Kafka too (crawled twice)",
                self._spill.unsettled,
                self.settings.topic,
                exc,
            )
        if stats is not None:  # those of a step that failed after it spilled, and the settled
            Step.of_spills(self._spill.take_counts()).count(stats)
        if self._subscribed:
            await asyncio.to_thread(self.consumer.close)
        await self.producer.drain(1.0)
