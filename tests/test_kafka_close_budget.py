"""``KafkaPipeline`` while its node stops: ``KAFKA_FLUSH_TIMEOUT`` bounds the whole wait on
Kafka. The drain when the engine starts closing and the one when the pipeline closes (after a
replay of the spool) each waited the whole timeout, twice the stop budget the deployment
docs add up (downloads + one flush + returning the leases)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from scrapy import Spider
from scrapy.utils.test import get_crawler

from crawler.kafka.spool import Spool
from crawler.pipelines.kafka import KafkaPipeline
from tests.base_values import base_values


class Stopping(Spider):
    name = "stopping"


class SlowKafka:
    """A sender whose every wait on the broker lasts its whole timeout: records them."""

    def __init__(self, spool: Path) -> None:
        self.waits: list[float] = []
        self.spool = Spool(spool, "n1")  # empty: nothing left to say at close

    async def drain(self, timeout: float) -> int:
        self.waits.append(timeout)
        await asyncio.sleep(timeout)
        return 0

    async def close(self, timeout: float) -> int:
        return await self.drain(timeout)


def test_the_drain_at_closing_and_the_one_at_close_share_one_flush_timeout(
    tmp_path: Path,
) -> None:
    values = base_values()
    values |= {"KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1", "KAFKA_FLUSH_TIMEOUT": 0.6}
    crawler = get_crawler(Stopping, values)
    crawler.spider = Stopping()
    pipeline = KafkaPipeline(crawler)
    sender: Any = SlowKafka(tmp_path)
    pipeline._sender = sender

    async def stop() -> None:
        await pipeline._drain()  # the engine starts closing: Kafka takes the whole timeout
        await pipeline.close_spider()

    asyncio.run(stop())
    first, second = sender.waits
    assert first == 0.6
    assert second < 0.1, sender.waits  # what is left of the 0.6 s, not another 0.6 s


class Odd(Spider):
    name = "shop:books"  # a name Scrapy takes, and no Kafka topic can hold


def test_a_spider_whose_topic_kafka_cannot_name_is_refused_at_start() -> None:
    """It was refused (kafka_topic_refused) only at its first item, after pages were crawled."""
    values = base_values()
    values |= {"KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1"}
    crawler = get_crawler(Odd, values)
    crawler.spider = Odd()
    with pytest.raises(ValueError, match=r"KAFKA_TOPIC_TEMPLATE gives spider 'shop:books'"):
        KafkaPipeline(crawler)
    crawler = get_crawler(Odd, values | {"KAFKA_TOPIC_TEMPLATE": "shop-{item_type}"})
    crawler.spider = Odd()
    KafkaPipeline(crawler)  # a template without the name is fine


class Books(Spider):
    name = "books"


@pytest.mark.parametrize(
    ("setting", "template"),
    [("KAFKA_TOPIC_TEMPLATE", "my items {spider}"), ("KAFKA_DLQ_TOPIC_TEMPLATE", "{topic} dlq")],
)
def test_a_topic_template_no_spider_name_mends_says_to_change_it(
    setting: str, template: str
) -> None:
    """A template that gives no spider a topic name Kafka takes: renaming the spider is not
    the advice."""
    values = base_values()
    values |= {"KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1", setting: template}
    crawler = get_crawler(Books, values)
    crawler.spider = Books()
    with pytest.raises(ValueError, match=f"whatever the spider's name: change {setting}$"):
        KafkaPipeline(crawler)


@pytest.mark.parametrize(
    ("name", "refused"),
    [
        ("../ta", True),
        ("/tmp/ta", True),
        ("x/../ta", True),  # ta's own spool
        ("ta/dead-letters", True),  # ta's dead letters, which replay never reads
        ("./", True),
        ("ta/b", False),
    ],
)
def test_a_spider_name_that_would_put_its_spool_elsewhere_is_refused(
    name: str, refused: bool, tmp_path: Path
) -> None:
    """The spool is ``KAFKA_SPOOL_DIR/<spider>``: a name with ``..`` or a leading ``/``
    (Scrapy takes any) wrote it outside that folder (an audit); a ``/`` inside nests it."""
    values = base_values()
    values |= {
        "KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1",
        "KAFKA_TOPIC_TEMPLATE": "shop-items",
        "KAFKA_SPOOL_DIR": str(tmp_path / "spool"),
    }
    spider = type("Named", (Books,), {"name": name})
    crawler = get_crawler(spider, values)
    crawler.spider = spider()
    if refused:
        with pytest.raises(ValueError, match=r"not a folder of its own .*: rename the spider$"):
            KafkaPipeline(crawler)
    else:
        KafkaPipeline(crawler)
