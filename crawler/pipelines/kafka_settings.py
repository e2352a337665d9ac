"""``KafkaPipelineSettings``: the Kafka pipeline's settings, read once from Scrapy's settings
through the typed getters and validated (``KafkaSettings.validate``)."""

from __future__ import annotations

from pathlib import Path

from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured

from crawler.kafka.config import KafkaSettings, TopicSpec
from crawler.kafka.producer import NO_AUTO_CREATION, checked_producer_config
from crawler.kafka.spool import DEAD_LETTER_DIR
from crawler.kafka.topics import TOPIC_NAME, TOPIC_NAME_RULE
from crawler.node import resolve_crawl_id, resolve_node_id
from crawler.settings_values import get_dict, get_float, get_typed_list, text


class KafkaPipelineSettings(KafkaSettings):
    """``KafkaSettings`` read once from Scrapy's settings through the typed getters."""

    __slots__ = ()

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> KafkaPipelineSettings:
        settings = crawler.settings
        bootstrap = (settings.get("KAFKA_BOOTSTRAP_SERVERS") or "").strip()
        if not bootstrap:
            raise NotConfigured("KAFKA_BOOTSTRAP_SERVERS is empty: items are not sent to Kafka")
        topics = TopicSpec.from_settings(settings)
        values = cls(
            bootstrap_servers=bootstrap,
            topic_template=settings.get("KAFKA_TOPIC_TEMPLATE"),
            dlq_topic_template=settings.get("KAFKA_DLQ_TOPIC_TEMPLATE"),
            producer_config=checked_producer_config(
                bootstrap,
                {
                    **(NO_AUTO_CREATION if topics is not None else {}),
                    **get_dict(settings, "KAFKA_PRODUCER_CONFIG"),
                },
            ),
            poll_interval=get_float(settings, "KAFKA_POLL_INTERVAL"),
            flush_timeout=get_float(settings, "KAFKA_FLUSH_TIMEOUT"),
            backpressure_wait=get_float(settings, "KAFKA_BACKPRESSURE_WAIT"),
            topics=topics,
            spool_dir=Path(settings.get("KAFKA_SPOOL_DIR")),
            replay_interval=get_float(settings, "KAFKA_SPOOL_REPLAY_INTERVAL"),
            max_outage=get_float(settings, "KAFKA_MAX_OUTAGE"),
            schema_dirs=tuple(get_typed_list(settings, "ITEM_SCHEMA_DIRS", text, "folders")),
            node_id=resolve_node_id(settings.get("CRAWLER_NODE_ID") or ""),
            crawl_id=resolve_crawl_id(settings.get("CRAWLER_CRAWL_ID")),
        )
        values.validate()
        return values


def spider_topics_named(settings: KafkaPipelineSettings, spider: str) -> None:
    """Refuse at start a spider whose topics Kafka cannot name (Scrapy takes any spider name:
    ``shop:books``), rather than at its first item, after pages were crawled; and one whose
    name would put its spool (``KAFKA_SPOOL_DIR/<spider>``) outside that folder."""
    parts = spider.split("/")
    if spider.startswith("/") or any(part in ("", ".", "..", DEAD_LETTER_DIR) for part in parts):
        raise ValueError(
            f"spider {spider!r} would keep its Kafka spool in "
            f"{str(settings.spool_dir / spider)!r}, not a folder of its own in KAFKA_SPOOL_DIR="
            f"{str(settings.spool_dir)!r} (no part of the name may be empty, '.', '..' or "
            f"{DEAD_LETTER_DIR!r}): rename the spider"
        )

    def topics(name: str) -> tuple[str, str]:
        topic = settings.topic_template.format(spider=name, item_type="item")
        return topic, settings.dlq_topic_template.format(topic=topic)

    made, plain = topics(spider), topics("s")  # plain: with a name Kafka takes
    for index, setting in enumerate(("KAFKA_TOPIC_TEMPLATE", "KAFKA_DLQ_TOPIC_TEMPLATE")):
        topic = made[index]
        if TOPIC_NAME.fullmatch(topic):
            continue
        if not TOPIC_NAME.fullmatch(plain[index]):
            raise ValueError(
                f"{setting} gives the topic {topic!r} (for an item_type 'item'), which Kafka "
                f"cannot name ({TOPIC_NAME_RULE}) whatever the spider's name: change {setting}"
            )
        raise ValueError(
            f"{setting} gives spider {spider!r} the topic {topic!r} (for an item_type 'item'), "
            f"which Kafka cannot name ({TOPIC_NAME_RULE}): rename the spider, or "
            "set KAFKA_TOPIC_TEMPLATE without {spider}"
        )
