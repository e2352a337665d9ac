"""``KafkaPipeline``: send every item to Kafka without blocking the crawl, losing none.

A thin adapter around ``crawler.kafka.sender.ItemSender``. Settings are read
once into ``KafkaPipelineSettings`` (``crawler.pipelines.kafka_settings``). For each
item: encode it, check its ``schema_version`` and validate it against its JSON Schema
(``crawler.kafka.item_encoder``), enqueue (waiting without blocking the reactor
while librdkafka's local queue is full). Items that fail one of these are
dead-lettered and dropped with a log line and a stat.

``process_item`` returns only once the item is settled: delivered, spooled
durably, or dead-lettered, so Scrapy's ``item_scraped`` signal means "safe"
and the leasing frontier completes the item's request only then, whatever
the pipelines before this one returned. Only when even the spool fails (for
the item, or its dead letter) is the item dropped with ``ItemRequeued``: its
request goes back to the queue.
When the engine starts closing, messages still unacknowledged after
``KAFKA_FLUSH_TIMEOUT`` are spooled so that closing never waits on the broker.

Each topic is checked (created if missing, every partition led) before its first
message, retried while Kafka does not answer. A broker that has not answered for longer
than ``KAFKA_MAX_OUTAGE``, or a spool that cannot be written while it is away, pauses the
crawl (the engine takes no new requests) until the broker answers again: a delivery, or a
metadata probe, however long the outage. While paused, items no longer wait for their
topic's check: they go on, to the spool as every item Kafka does not take.
"""

from __future__ import annotations

import asyncio
import logging
import time
from functools import partial
from typing import Any, NoReturn

from itemadapter import is_item
from scrapy.crawler import Crawler
from scrapy.exceptions import DropItem
from scrapy.statscollectors import StatsCollector
from twisted.internet.task import LoopingCall

from crawler.exceptions import ItemRequeued
from crawler.extensions.metrics import PrometheusMetrics
from crawler.kafka.health import outage_words
from crawler.kafka.item_encoder import ItemEncoder, MessageFields, Rejected
from crawler.kafka.messages import OutgoingMessage, item_fields, item_type_of
from crawler.kafka.producer import message_timeout
from crawler.kafka.schemas import SchemaRegistry
from crawler.kafka.sender import ItemSender, SenderConfig
from crawler.kafka.spool import dead_letter_file, report_left
from crawler.kafka.topics import TopicChecker, TopicRefused
from crawler.metrics.node import NodeMetrics
from crawler.node_context import NodeContext
from crawler.pipelines.kafka_settings import KafkaPipelineSettings, spider_topics_named
from crawler.pipelines.pause_notice import KAFKA_AWAY, PauseInfo, PauseNotice
from crawler.pipelines.paused_idle import PausedIdle
from crawler.pipelines.shared_keys import SharedKeys
from crawler.wakeup import close_spider_soon, engine_closing

logger = logging.getLogger(__name__)


class KafkaPipeline:
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.settings = KafkaPipelineSettings.from_crawler(crawler)
        if crawler.spider is not None:
            spider_topics_named(self.settings, crawler.spider.name)
        assert crawler.stats is not None
        self.stats: StatsCollector = crawler.stats
        self.schemas = SchemaRegistry(self.settings.schema_dirs)
        self.encoder = ItemEncoder(
            self.schemas, self._count, self.settings.node_id, self.settings.crawl_id
        )
        self._sender: ItemSender | None = None
        self._poller: LoopingCall | None = None
        self._topics: TopicChecker | None = None  # None: KAFKA_CREATE_TOPICS is off
        self._stopping: asyncio.Future[None] | None = None  # a topic was refused for good
        self._paused: str | None = None  # why the crawl is paused (a PAUSE_REASONS one)
        self._paused_idle = PausedIdle(crawler)  # closes a paused node whose crawl is over
        self._pause_notice = PauseNotice(crawler, self._pause_info)  # tells crawler status
        self._shared_keys = SharedKeys(crawler)  # says when items of a page share a key
        self._metrics = NodeMetrics()
        self._draining: asyncio.Future[None] | None = None
        self._drained_for = 0.0  # seconds the drains at the engine's closing waited on Kafka

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> KafkaPipeline:
        return cls(crawler)

    @property
    def sender(self) -> ItemSender:
        if self._sender is None:
            raise RuntimeError("KafkaPipeline used before open_spider()")
        return self._sender

    def _count(self, stat: str, count: int) -> None:
        self.stats.inc_value(stat, count)

    def open_spider(self) -> None:
        spider = self.crawler.spider
        assert spider is not None
        spool_dir = self.settings.spool_dir / spider.name
        metrics = self._metrics = PrometheusMetrics.node_metrics(self.crawler)
        self._sender = metrics.kafka_sender = ItemSender(
            SenderConfig(
                producer_config=self.settings.producer_config,
                dlq_topic_template=self.settings.dlq_topic_template,
                spool_dir=spool_dir,
                dead_letter_file=dead_letter_file(spool_dir, self.settings.node_id),
                node_id=self.settings.node_id,
                crawl_id=self.settings.crawl_id,
                backpressure_wait=self.settings.backpressure_wait,
                replay_interval=self.settings.replay_interval,
            ),
            count=self._count,
            observe_delivery=metrics.kafka_delivery.observe,
            unknown_topic=self._unknown_topic,
            topic_check=self._check_topic if self.settings.topics is not None else None,
        )
        if self.settings.topics is not None:
            self._topics = TopicChecker(
                lambda: self.sender.producer,
                self.settings.topics,
                self.sender.health,
                self._count,
                give_up_after=message_timeout(self.settings.producer_config),
            )
        self._poller = LoopingCall(self._poll)
        self._poller.start(self.settings.poll_interval, now=False)
        self._pause_notice.start(spider.name)
        if (unmade := self.sender.spool.make_folder()) is not None:
            self.stats.inc_value("kafka/spool_unmade")
            logger.warning(
                "KAFKA_SPOOL_DIR: cannot make the spool folder %s (%s): items Kafka does not take "
                "cannot be spooled, and the crawl pauses while Kafka is away",
                spool_dir,
                unmade,
            )
        if segments := self.sender.spool.segments():
            logger.info("Replaying %d spool segments left from earlier runs", len(segments))
            self.sender.replay()
        logger.info(
            "Kafka pipeline sending to %s (topic template %r, spool %s)",
            self.settings.bootstrap_servers,
            self.settings.topic_template,
            spool_dir,
        )

    async def process_item(self, item: Any) -> Any:
        spider = self.crawler.spider
        assert spider is not None
        item_type = item_type_of(item)
        topic = self.settings.topic_template.format(spider=spider.name, item_type=item_type)
        if self._topics is not None:
            try:
                await self._topics.ready(topic)
            except TopicRefused as exc:
                await self._refused(exc)
        to = MessageFields(spider.name, topic, item_type)
        # a str, a list or None a callback or pipeline passed on failed in ItemAdapter
        message = (
            self.encoder.encode(item, item_fields(item), to)
            if is_item(item)
            else self.encoder.not_an_item(item, to)
        )
        if isinstance(message, Rejected):
            await self._reject(message.message, message.reason, message.error, item_type)
        settled = self._settlement()
        await self.sender.send(message, partial(_resolve, settled))
        self._requeue_if_unspooled(await settled, "item", item_type)
        return item

    async def _check_topic(self, topic: str) -> None:
        """A replayed message's topic: checked (created as configured) before it is sent."""
        if self._topics is not None:
            await self._topics.ready(topic)

    def _unknown_topic(self, topic: str) -> None:
        if self._topics is not None:
            self._topics.unknown(topic)

    async def _refused(self, exc: TopicRefused) -> NoReturn:
        """A topic the broker refuses for good: the node stops (every node would meet the
        same), and the item's request goes back to the queue, to be crawled once it can be
        sent."""
        self.stats.inc_value(f"kafka/topic_refused/{exc.code}")
        if self._stopping is None and not engine_closing(self.crawler):
            self._stopping = close_spider_soon(self.crawler, exc.finish_reason)
            if self._stopping is not None:
                logger.error("%s; the node stops (%s)", exc, exc.finish_reason)
        raise self._requeued(str(exc), f"kafka/topic_refused/{exc.code}")

    def _requeue_if_unspooled(self, outcome: str, what: str, item_type: str) -> None:
        """A message that could be neither sent nor spooled (disk error): its request goes back
        to the queue."""
        if outcome == "requeue":
            raise self._requeued(
                f"{what} of type {item_type} could be neither sent nor spooled",
                "kafka/spool_error",
            )

    def _requeued(self, message: str, reason: str) -> DropItem:
        """The item is dropped and its request crawled again (``ItemRequeued``); without the
        shared frontier (no ``REDIS_URL``) there is no queue to crawl it again: the item is
        lost, and said so (``kafka/lost/topic_refused/<code>``, ``kafka/lost/spool_error``)."""
        if NodeContext.of(self.crawler) is not None:
            return ItemRequeued(f"{message}: its request goes back to the queue", reason)
        stat = f"kafka/lost/{reason.removeprefix('kafka/')}"
        self.stats.inc_value(stat)
        return DropItem(
            f"{message}; no shared queue to crawl its request again (standalone, no "
            f"REDIS_URL): the item is lost ({stat})"
        )

    @staticmethod
    def _settlement() -> asyncio.Future[str]:
        """Resolved with the message's outcome (delivery reports run on the reactor thread)."""
        return asyncio.get_running_loop().create_future()

    async def _reject(
        self, message: OutgoingMessage, reason: str, error: str, item_type: str
    ) -> NoReturn:
        self.stats.inc_value(f"kafka/rejected/{reason}")
        dead_letters = self.settings.dlq_topic_template.format(topic=message.topic)
        logger.error(
            "Item of type %s dead-lettered (%s) to %s: %s (`crawler dead-letters list %s`)",
            item_type,
            reason,
            dead_letters,
            error,
            dead_letters,
        )
        settled = self._settlement()
        self.sender.dead_letter(message, reason, error, partial(_resolve, settled))
        self._requeue_if_unspooled(await settled, "dead letter", item_type)
        raise DropItem(f"dead-lettered ({reason}): {error}")

    def _poll(self) -> None:
        """Every KAFKA_POLL_INTERVAL. A crash is logged and counted, and the next tick runs
        again (an exception would stop the LoopingCall, and every delivery with it)."""
        try:
            self._poll_once()
        except Exception:
            self.stats.inc_value("node/loop_crashed/kafka_poll")
            logger.exception(
                "Kafka poll crashed; polling again in %ss", self.settings.poll_interval
            )

    def _poll_once(self) -> None:
        self.sender.poll()
        engine = self.crawler.engine
        if engine is None:
            return
        draining = self._draining is not None and not self._draining.done()
        if engine_closing(self.crawler):
            if self._topics is not None:
                self._topics.release()
            if not draining and self.sender.producer.pending():
                self._draining = asyncio.ensure_future(self._drain())
        pause = self._pause_reason()
        if pause is not None and self._paused is None:
            self._paused = self._metrics.paused = pause
            engine.pause()
            self.stats.inc_value(f"kafka/crawl_paused/{pause}")
            words = outage_words(self.sender.health.missing_topic)
            if pause == "max_outage":
                logger.error(
                    "%s for %.0fs (KAFKA_MAX_OUTAGE=%s): crawl paused until %s",
                    words.away,
                    self.sender.outage_seconds(),
                    self.settings.max_outage,
                    words.waits_for,
                )
            else:
                logger.error(
                    "%s and the spool cannot be written: crawl paused until %s",
                    words.away,
                    words.waits_for,
                )
        elif pause is None and self._paused is not None:
            self._paused = self._metrics.paused = None
            engine.unpause()
            logger.warning(
                "Kafka %s: crawl resumed", outage_words(self.sender.health.missing_topic).back
            )
        if self._topics is not None:
            self._topics.follow(paused=self._paused is not None)
        if self._paused is not None:
            self._paused_idle.look(int(self.stats.get_value("kafka/spooled", 0)))

    def _pause_reason(self) -> str | None:
        outage = self.sender.outage_seconds()
        if outage > self.settings.max_outage:
            return "max_outage"
        if outage and self.sender.health.spool_failing:
            return "spool_error"
        return None

    def _pause_info(self) -> PauseInfo | None:
        away = self.sender.outage_seconds()
        if self._paused is None and not away:
            return None
        return PauseInfo(
            reason=self._paused or KAFKA_AWAY,
            since=time.time() - away,
            missing_topic=self.sender.health.missing_topic,
        )

    async def _drain(self) -> None:
        """The engine is closing: settle every item still waiting on the broker (what is
        not acknowledged within KAFKA_FLUSH_TIMEOUT is spooled for the next start)."""
        began = time.monotonic()
        try:
            self._spooled_at_close(await self.sender.drain(self._flush_left()))
        finally:
            self._drained_for += time.monotonic() - began

    def _flush_left(self) -> float:
        """KAFKA_FLUSH_TIMEOUT bounds a node's whole wait on Kafka while it stops: the drain
        at the engine's closing, then the one (after a replay) when the pipeline closes."""
        return max(0.0, self.settings.flush_timeout - self._drained_for)

    def _spooled_at_close(self, spooled: int) -> None:
        if not spooled:
            return
        self.stats.inc_value("kafka/spooled_at_close", spooled)
        logger.error(
            "%d Kafka messages were not acknowledged within KAFKA_FLUSH_TIMEOUT=%ss: spooled "
            "to %s for the next start",
            spooled,
            self.settings.flush_timeout,
            self.sender.spool.directory,
        )

    async def close_spider(self) -> None:
        if self._poller is not None and self._poller.running:
            self._poller.stop()
        if self._sender is None:
            return
        if self._topics is not None:
            self._topics.release()  # nothing waits for a check any more
        self._spooled_at_close(await self._sender.close(self._flush_left()))
        spider = self.crawler.spider
        assert spider is not None
        report_left(self._sender.spool, spider.name, self.settings.spool_dir)


def _resolve(settled: asyncio.Future[str], outcome: str) -> None:
    if not settled.done():
        settled.set_result(outcome)
