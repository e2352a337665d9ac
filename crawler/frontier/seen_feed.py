"""The seen feed: the fingerprints every node records, in every node's seen-cache (no Scrapy
imports).

A node's seen-cache (``crawler.frontier.seen_cache``) holds what that node sent to the shared
dupefilter; a link another node recorded still travels to Redis to be found seen there. With
``FRONTIER_SEEN_FEED``, the fingerprints each write recorded or found recorded also go to the
Kafka topic ``FRONTIER_SEEN_TOPIC`` (a message a write, or one per ``MESSAGE_MOST``,
``\\n``-joined hex, with the frontier's epoch when the write began, the node's id and the time
in its headers), and every node reads that topic from its end into its own cache: a link any
node recorded is dropped on every node without a call. Redis does no more work for it, however
many nodes read.

The cache only ever skips work the dupefilter would refuse anyway, so the feed must never
teach it a fingerprint the dupefilter no longer holds:

- a message names the epoch its node knew (``crawler.frontier.epoch``) when the write began,
  and is not sent if the node learned of another before it ended; a node takes only messages
  of the epoch it knows now (``frontier/seen_feed/stale`` counts the others, and all before
  it knows one), and clears its cache when the epoch changes (a purge, a recrawl, a lost
  Redis), as before;
- with ``FRONTIER_DEDUP_TTL``, only the fingerprints a write recorded go (``found_too``
  False: one found, or a seed forced in, may have been recorded long before), and an entry
  goes to a cache generation at least as old as the message (``SeenCache.add``'s ``age``: the
  time in its ``at`` header plus ``CLOCK_MARGIN``), so it leaves the cache before the
  dupefilter forgets it.

Kafka away costs nothing but the feed: publishing only enqueues in librdkafka's local queue
(``frontier/seen_feed/dropped`` when full, ``frontier/seen_feed/lost`` when never
delivered), and the reading loop counts its errors (``frontier/seen_feed/error``) and logs
them, at most once a minute.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from crawler.kafka.health import LIBRDKAFKA_LOG
from crawler.kafka.messages import OutgoingMessage
from crawler.kafka.producer import ItemProducer, producer_config
from crawler.kafka.reader import received
from crawler.kafka.topics import topic_from_template

logger = logging.getLogger(__name__)

CLOCK_MARGIN = 5.0  # seconds added to a message's age: the clocks of nodes differ
MESSAGE_MOST = 10_000  # fingerprints a message (about 410 KB; Kafka takes 1 MB by default)
RETENTION_MS = 3_600_000  # of a topic the feed creates: it is only read live
READ_BATCH, READ_WAIT = 1000, 0.5  # messages and seconds of one read
OPEN_TIMEOUT, OPEN_RETRY = 10.0, 5.0  # seconds to create or find the topic; between tries
ERROR_LOG_EVERY = 60.0  # seconds between two log lines of Kafka errors (or unreadable messages)
FINGERPRINT_LINES = re.compile(rb"[0-9a-f]+(?:\n[0-9a-f]+)*")  # what ``publish`` sends


class Stats(Protocol):
    def inc_value(self, key: str, count: int = 1, start: int = 0) -> None: ...


@dataclass(frozen=True, slots=True)
class SeenFeedSettings:
    enabled: bool  # FRONTIER_SEEN_FEED
    topic: str  # FRONTIER_SEEN_TOPIC (its {spider} filled in by the scheduler)
    bootstrap: str  # KAFKA_BOOTSTRAP_SERVERS
    replication: int  # KAFKA_TOPIC_REPLICATION
    security: Mapping[str, Any] = field(default_factory=dict)  # of KAFKA_PRODUCER_CONFIG

    def validate(self, seen_cache: int) -> None:
        if not self.enabled:
            return
        if not self.bootstrap:
            raise ValueError(
                "FRONTIER_SEEN_FEED=True needs KAFKA_BOOTSTRAP_SERVERS (the feed is a Kafka "
                "topic): set it, or FRONTIER_SEEN_FEED=False"
            )
        if not seen_cache:
            raise ValueError(
                "FRONTIER_SEEN_FEED=True fills the seen-cache, but FRONTIER_SEEN_CACHE=0 turns it "
                "off: give the cache a size, or FRONTIER_SEEN_FEED=False"
            )
        if not self.topic:
            raise ValueError("FRONTIER_SEEN_TOPIC is empty: name the feed's topic")
        topic_from_template("FRONTIER_SEEN_TOPIC", self.topic, "spider")


class SeenFeed:
    def __init__(
        self, settings: SeenFeedSettings, node_id: str, stats: Stats, *, found_too: bool
    ) -> None:
        self.settings = settings
        self.node_id = node_id
        self.stats = stats
        # share the fingerprints a write found recorded, not only those it recorded: not with a
        # dedup TTL, where one found may have little of its time left (SeenCache.add's age)
        self.found_too = found_too
        # a lost message only costs some links a trip to Redis: no idempotence, one ack; sent
        # soon, since a link the others learn of late reaches Redis from them meanwhile
        fast = {
            "acks": 1,
            "enable.idempotence": False,
            "linger.ms": 5,
            "message.timeout.ms": 10_000,
        }
        self.producer = ItemProducer(
            producer_config(settings.bootstrap, {**settings.security, **fast})
        )
        self.consumer = Consumer(
            {
                "bootstrap.servers": settings.bootstrap,
                "group.id": f"{settings.topic}.{node_id}",  # offsets are never committed
                "enable.auto.commit": False,
                "enable.partition.eof": False,
                "logger": LIBRDKAFKA_LOG,
                **settings.security,
            }
        )
        self.reading = asyncio.Event()  # set: the topic is assigned, messages from now on arrive
        # the consumer's blocking calls, one at a time: its close waits for the read in flight
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="seen-feed")
        self._logged_at = 0.0

    def publish(self, epoch: str, recorded: Sequence[str], found: Sequence[str]) -> None:
        """Send the fingerprints a write ``recorded`` in the frontier of ``epoch`` (and those it
        ``found`` there, with ``found_too``) to every node (never waits; nothing without an
        epoch yet)."""
        if not epoch:
            return
        fingerprints = [*recorded, *found] if self.found_too else list(recorded)
        at = str(int(time.time() * 1000))
        headers: list[tuple[str, str | bytes | None]] = [
            ("epoch", epoch),
            ("node", self.node_id),
            ("at", at),
        ]
        for start in range(0, len(fingerprints), MESSAGE_MOST):
            chunk = fingerprints[start : start + MESSAGE_MOST]
            value = "\n".join(chunk).encode()
            message = OutgoingMessage(self.settings.topic, None, value, headers, 0)
            count = len(chunk)
            try:
                sent = self.producer.send(message, self._delivery_report(count))
            except KafkaException as exc:  # e.g. the topic is not there yet: the feed only
                self._error("publish", exc)
                sent = False
            self.stats.inc_value(f"frontier/seen_feed/{'sent' if sent else 'dropped'}", count)
            if not sent:
                self._not_shared(count, "the producer's local queue is full", "dropped")

    def _delivery_report(self, count: int) -> Callable[[KafkaError | None, Message], None]:
        def delivered(error: KafkaError | None, _message: Message) -> None:
            if error is not None:
                self.stats.inc_value("frontier/seen_feed/lost", count)
                self._not_shared(count, f"Kafka did not take them: {error.str()}", "lost")

        return delivered

    def _not_shared(self, count: int, why: str, stat: str) -> None:
        self._log_rarely(
            "Seen feed: %d fingerprints not shared through topic %s (%s): the other nodes send "
            "those links to Redis, which drops them (frontier/seen_feed/%s)",
            count,
            self.settings.topic,
            why,
            stat,
        )

    async def run(self, epoch: Callable[[], str], learn: Callable[[str, float], bool]) -> None:
        """Find the topic (creating it), then read it from its end for as long as the node
        runs: each fingerprint of the node's current ``epoch()`` from another node goes to
        ``learn(fingerprint, age in seconds)``, which says whether it kept it."""
        await self._open()
        while True:
            self.producer.poll()  # the delivery reports of what this node published
            try:
                messages = await self._next_messages()
            except KafkaException as exc:
                self._error("read", exc)
                await asyncio.sleep(READ_WAIT)
                continue
            for message in messages:
                self._take(message, epoch(), learn)

    async def _open(self) -> None:
        while True:
            try:
                await self.producer.ensure_topics(
                    [self.settings.topic],
                    1,
                    self.settings.replication,
                    {"retention.ms": str(RETENTION_MS)},
                    timeout=OPEN_TIMEOUT,
                )
                await asyncio.wrap_future(self._thread.submit(self._assign_at_end))
                break
            except KafkaException as exc:
                self._error("open", exc)
                await asyncio.sleep(OPEN_RETRY)
        self.reading.set()
        logger.info(
            "Seen feed: fingerprints recorded by any node reach this one through Kafka topic %s",
            self.settings.topic,
        )

    def _assign_at_end(self) -> None:
        """Read from the topic's end as it is now (an offset asked for, not ``OFFSET_END``,
        which is looked up later: what is published meanwhile would be missed)."""
        partition = TopicPartition(self.settings.topic, 0)
        _, end = self.consumer.get_watermark_offsets(partition, timeout=OPEN_TIMEOUT)
        self.consumer.assign([TopicPartition(self.settings.topic, 0, end)])

    async def _next_messages(self) -> list[Message]:
        return await asyncio.wrap_future(self._thread.submit(self._read))

    def _read(self) -> list[Message]:
        """The next message (``READ_WAIT`` at most), then those already fetched with it: a
        batch read (``consume``) would wait its whole timeout unless the batch filled, and the
        node would learn late what the others recorded."""
        first = self.consumer.poll(READ_WAIT)
        if first is None:
            return []
        return [first, *self.consumer.consume(READ_BATCH - 1, 0)]

    def _take(self, message: Message, epoch: str, learn: Callable[[str, float], bool]) -> None:
        error = message.error()
        if error is not None:
            self._error("read", KafkaException(error))
            return
        found = received(message)
        if found.headers.get("node") == self.node_id.encode():
            return  # its own: the node's cache has them since it sent them
        at = found.headers.get("at", b"")
        if not epoch or found.headers.get("epoch") != epoch.encode() or not at.isdigit():
            self.stats.inc_value("frontier/seen_feed/stale")
            return
        if not FINGERPRINT_LINES.fullmatch(found.value):
            self.stats.inc_value("frontier/seen_feed/unreadable")
            self._log_rarely(
                "Seen feed message at offset %d of topic %s is not fingerprints (hex, one a "
                "line): skipped",
                found.offset,
                self.settings.topic,
            )
            return
        age = max(0.0, time.time() - int(at) / 1000) + CLOCK_MARGIN
        kept = sum(learn(fingerprint, age) for fingerprint in found.value.decode().split("\n"))
        if kept:
            self.stats.inc_value("frontier/seen_feed/received", kept)

    def _error(self, step: str, exc: KafkaException) -> None:
        """Count a Kafka error of ``step`` (open, read, publish); log one a minute at most."""
        self.stats.inc_value("frontier/seen_feed/error")
        error = exc.args[0] if exc.args else None
        reason = error.str() if isinstance(error, KafkaError) else str(exc)
        self._log_rarely(
            "Seen feed %s error on topic %s: %s (the node goes on; links other nodes "
            "recorded reach Redis until the feed is back; retried)",
            step,
            self.settings.topic,
            reason,
        )

    def _log_rarely(self, message: str, *args: object) -> None:
        """A warning, one a minute at most (``ERROR_LOG_EVERY``): the stats count them all."""
        now = time.monotonic()
        if now - self._logged_at >= ERROR_LOG_EVERY:
            self._logged_at = now
            logger.warning(message, *args)

    async def close(self) -> None:
        """Stop reading (after the read in flight) and hand the last fingerprints to Kafka."""
        await asyncio.wrap_future(self._thread.submit(self.consumer.close))
        self._thread.shutdown(wait=False)
        await self.producer.drain(1.0)
