"""The scrapy-redis baseline's items to Kafka: a plain confluent-kafka producer, as a
scrapy-redis user would write one (baseline only; the project's ``KafkaPipeline`` is part of
the cluster the baseline runs without)."""

from __future__ import annotations

from typing import Any

import orjson
from confluent_kafka import Producer
from itemadapter import ItemAdapter
from scrapy import Spider
from scrapy.crawler import Crawler


class RawKafkaPipeline:
    def __init__(self, bootstrap: str, topic_template: str) -> None:
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        self.topic_template = topic_template
        self.topic = ""

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RawKafkaPipeline:
        settings = crawler.settings
        return cls(str(settings["KAFKA_BOOTSTRAP_SERVERS"]), str(settings["KAFKA_TOPIC_TEMPLATE"]))

    def open_spider(self, spider: Spider) -> None:
        self.topic = self.topic_template.format(spider=spider.name, item_type="items")

    def process_item(self, item: Any) -> Any:
        self.producer.produce(self.topic, orjson.dumps(ItemAdapter(item).asdict()))
        self.producer.poll(0)
        return item

    def close_spider(self, spider: Spider) -> None:
        self.producer.flush(60)
