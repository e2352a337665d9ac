"""``KafkaPipeline``: send every item to Kafka without blocking the crawl.

A thin adapter around ``crawler.kafka.producer.ItemProducer``: settings are
read once into ``KafkaPipelineSettings``; ``process_item`` encodes and
enqueues (waiting without blocking the reactor while librdkafka's local queue
is full); a looping call serves delivery reports; ``close_spider`` drains for
up to ``KAFKA_FLUSH_TIMEOUT`` seconds.

With the leasing frontier, the item's request stays leased until the broker
acknowledges the item; a failed delivery returns the request to the queue
(``requeue`` with ``kafka/<error>``), so a page is crawled again rather than lost.

Stats: ``kafka/produced``, ``kafka/delivered``, ``kafka/failed/<reason>``,
``kafka/buffer_full``, ``kafka/unencodable``, ``kafka/undelivered_at_close``.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from functools import partial
from typing import Any

from confluent_kafka import KafkaError, Message
from itemadapter import ItemAdapter
from scrapy.crawler import Crawler
from scrapy.exceptions import DropItem, NotConfigured
from scrapy.statscollectors import StatsCollector
from twisted.internet.task import LoopingCall

from crawler.frontier.scheduler import tracker_for
from crawler.kafka.messages import OutgoingMessage, UnencodableItem, encode_item
from crawler.kafka.producer import ItemProducer, producer_config
from crawler.node import resolve_node_id

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class KafkaPipelineSettings:
    bootstrap_servers: str
    topic_template: str
    producer_config: dict[str, Any]
    poll_interval: float
    flush_timeout: float
    backpressure_wait: float
    create_topics: bool
    topic_partitions: int
    topic_replication: int
    node_id: str

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> KafkaPipelineSettings:
        settings = crawler.settings
        bootstrap = (settings.get("KAFKA_BOOTSTRAP_SERVERS") or "").strip()
        if not bootstrap:
            raise NotConfigured("KAFKA_BOOTSTRAP_SERVERS is empty: items are not sent to Kafka")
        template = settings.get("KAFKA_TOPIC_TEMPLATE")
        try:
            template.format(spider="s", item_type="t")
        except (KeyError, IndexError, ValueError, AttributeError) as exc:
            raise ValueError(
                f"KAFKA_TOPIC_TEMPLATE={template!r} is invalid: only {{spider}} and "
                f"{{item_type}} may be used ({exc!r})"
            ) from exc
        values = cls(
            bootstrap_servers=bootstrap,
            topic_template=template,
            producer_config=producer_config(bootstrap, settings.getdict("KAFKA_PRODUCER_CONFIG")),
            poll_interval=settings.getfloat("KAFKA_POLL_INTERVAL"),
            flush_timeout=settings.getfloat("KAFKA_FLUSH_TIMEOUT"),
            backpressure_wait=settings.getfloat("KAFKA_BACKPRESSURE_WAIT"),
            create_topics=settings.getbool("KAFKA_CREATE_TOPICS"),
            topic_partitions=settings.getint("KAFKA_TOPIC_PARTITIONS"),
            topic_replication=settings.getint("KAFKA_TOPIC_REPLICATION"),
            node_id=resolve_node_id(settings.get("CRAWLER_NODE_ID") or ""),
        )
        for name, value, minimum in (
            ("KAFKA_POLL_INTERVAL", values.poll_interval, 0.001),
            ("KAFKA_BACKPRESSURE_WAIT", values.backpressure_wait, 0.001),
            ("KAFKA_FLUSH_TIMEOUT", values.flush_timeout, 0.0),
            ("KAFKA_TOPIC_PARTITIONS", values.topic_partitions, 1),
            ("KAFKA_TOPIC_REPLICATION", values.topic_replication, 1),
        ):
            if value < minimum:
                raise ValueError(f"{name}={value} must be >= {minimum}")
        return values


class KafkaPipeline:
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.settings = KafkaPipelineSettings.from_crawler(crawler)
        assert crawler.stats is not None
        self.stats: StatsCollector = crawler.stats
        self._producer: ItemProducer | None = None
        self._poller: LoopingCall | None = None
        self._topics: set[str] = set()

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> KafkaPipeline:
        return cls(crawler)

    @property
    def producer(self) -> ItemProducer:
        if self._producer is None:
            raise RuntimeError("KafkaPipeline used before open_spider()")
        return self._producer

    def open_spider(self) -> None:
        self._producer = ItemProducer(self.settings.producer_config)
        self._poller = LoopingCall(self.producer.poll)
        self._poller.start(self.settings.poll_interval, now=False)
        logger.info(
            "Kafka pipeline sending to %s (topic template %r)",
            self.settings.bootstrap_servers,
            self.settings.topic_template,
        )

    async def process_item(self, item: Any) -> Any:
        spider = self.crawler.spider
        assert spider is not None
        item_type = str(getattr(item, "item_type", type(item).__name__.lower()))
        topic = self.settings.topic_template.format(spider=spider.name, item_type=item_type)
        try:
            message = encode_item(
                ItemAdapter(item).asdict(),
                topic=topic,
                item_type=item_type,
                schema_version=int(getattr(item, "schema_version", 1)),
                spider=spider.name,
                node_id=self.settings.node_id,
            )
        except UnencodableItem as exc:
            self.stats.inc_value("kafka/unencodable")
            logger.error("Item of type %s cannot be encoded as JSON: %s", item_type, exc)
            raise DropItem(f"cannot encode item as JSON: {exc}") from exc
        await self._ensure_topic(topic)
        tracker = tracker_for(self.crawler)
        lease_id = tracker.lease_of(item) if tracker is not None else None
        if tracker is not None and lease_id is not None:
            tracker.hold(lease_id)
        await self._send(message, lease_id)
        return item

    async def _ensure_topic(self, topic: str) -> None:
        if topic in self._topics:
            return
        self._topics.add(topic)
        if not self.settings.create_topics:
            return
        created = await self.producer.ensure_topics(
            [topic], self.settings.topic_partitions, self.settings.topic_replication
        )
        if created:
            logger.info("Created Kafka topic %s", topic)

    async def _send(self, message: OutgoingMessage, lease_id: str | None) -> None:
        callback = partial(self._on_delivery, message.topic, lease_id)
        while not self.producer.send(message, callback):
            self.stats.inc_value("kafka/buffer_full")
            self.producer.poll()
            await asyncio.sleep(self.settings.backpressure_wait)
        self.stats.inc_value("kafka/produced")
        self.producer.poll()

    def _on_delivery(
        self, topic: str, lease_id: str | None, error: KafkaError | None, message: Message
    ) -> None:
        tracker = tracker_for(self.crawler) if lease_id is not None else None
        if error is None:
            self.stats.inc_value("kafka/delivered")
        else:
            reason = str(error.name()).lower()
            self.stats.inc_value(f"kafka/failed/{reason}")
            logger.error("Kafka delivery to %s failed (%s): %s", topic, reason, error.str())
            if tracker is not None and lease_id is not None:
                tracker.requeue(lease_id, f"kafka/{reason}")
        if tracker is not None and lease_id is not None:
            tracker.release(lease_id)

    async def close_spider(self) -> None:
        if self._poller is not None and self._poller.running:
            self._poller.stop()
        if self._producer is None:
            return
        left = await self._producer.drain(self.settings.flush_timeout)
        if left:
            self.stats.set_value("kafka/undelivered_at_close", left)
            logger.error(
                "%d Kafka messages were not acknowledged within KAFKA_FLUSH_TIMEOUT=%ss",
                left,
                self.settings.flush_timeout,
            )
